"""Staleness schedules: exact lags on hand-worked sequences, no loss, no duplicates, the cap."""

import random

import pytest

from gmc_grpo.staleness import FixedDelaySchedule, LengthCoupledSchedule


def _generator(log):
    def generate(version):
        batch = {"id": len(log), "version": version}
        log.append(batch)
        return batch

    return generate


@pytest.mark.parametrize("delay", [0, 1, 3, 8])
def test_fixed_delay_lags_and_steady_state(delay):
    log = []
    schedule = FixedDelaySchedule(delay)
    lags = []
    for version in range(3 * delay + 5):
        (entry,) = schedule.next(version, _generator(log))
        assert entry.batch["version"] == entry.behavior_version
        lags.append(entry.lag)
    assert lags[:delay] == list(range(delay))  # the fill came from the initial policy
    assert set(lags[delay:]) == {delay}
    assert len(schedule.queue) == delay


@pytest.mark.parametrize("delay, horizon", [(0, 5), (1, 5), (3, 8), (16, 40), (4, 3)])
def test_fixed_delay_with_a_horizon_launches_only_what_is_consumed(delay, horizon):
    """A run of `N` consumptions launches exactly `N` batches (not `N + D`): the same batches,
    versions and lags as without the horizon, and `launches_ahead` says each call's launches."""
    log, free_log = [], []
    bounded, free = FixedDelaySchedule(delay, horizon=horizon), FixedDelaySchedule(delay)
    ahead = []
    for version in range(horizon):
        ahead.append(bounded.launches_ahead())
        before = len(log)
        (entry,) = bounded.next(version, _generator(log))
        assert len(log) - before == ahead[-1]
        (same,) = free.next(version, _generator(free_log))
        assert (entry.batch, entry.lag) == (same.batch, same.lag)
    assert len(log) == horizon and len(free_log) == horizon + delay
    first = min(delay + 1, horizon)  # the fill and one batch, in one call
    assert ahead == [first] + [1] * max(0, horizon - delay - 1) + [0] * min(delay, horizon - 1)
    assert bounded.pending == 0
    with pytest.raises(ValueError, match="horizon"):
        bounded.next(horizon, _generator(log))


def test_fixed_delay_resumed_with_a_longer_horizon_refills():
    """`--extend-to`: the batches past the old horizon were never launched, so the FIFO is
    refilled from the policy it resumes with (lags 0, 1, ..., D again)."""
    log = []
    done = FixedDelaySchedule(2, horizon=4)
    for version in range(4):
        done.next(version, _generator(log))
    longer = FixedDelaySchedule(2, horizon=9)
    longer.load_state_dict(done.state_dict())
    assert longer.launches_ahead() == 3
    lags = [longer.next(v, _generator(log))[0].lag for v in range(4, 9)]
    assert lags == [0, 1, 2, 2, 2]


def test_fixed_delay_state_dict_round_trip():
    log = []
    a = FixedDelaySchedule(4)
    for v in range(6):
        a.next(v, _generator(log))
    b = FixedDelaySchedule(4)
    b.load_state_dict(a.state_dict())
    log_a, log_b = list(log), list(log)
    for v in range(6, 12):
        ea = a.next(v, _generator(log_a))[0]
        eb = b.next(v, _generator(log_b))[0]
        assert (ea.batch, ea.lag) == (eb.batch, eb.lag)
    with pytest.raises(ValueError, match="does not match"):
        FixedDelaySchedule(3).load_state_dict(a.state_dict())


def test_length_coupled_hand_worked_sequence():
    # lam = 1, lengths 3, 1, 1, 5, ... ; clock counts launches.
    lengths = iter([3, 1, 1, 5, 1, 1, 1, 1, 1, 1])
    schedule = LengthCoupledSchedule(lambda b: b["length"], lam=1.0)

    def generate(version):
        return {"length": next(lengths), "version": version}

    # step 0: launch #0 at t=0 (ready 3), #1 at t=1 (ready 2), clock=2 -> #1 visible.
    (e,) = schedule.next(0, generate)
    assert (e.launch_index, e.lag, schedule.clock) == (1, 0, 2.0)
    # step 1: none visible (#0 ready at 3 > 2): launch #2 at t=2 (ready 3), clock 3 -> #0 and #2
    # visible, #0 first (same ready time, earlier launch).
    (e,) = schedule.next(1, generate)
    assert (e.launch_index, e.behavior_version, e.lag) == (0, 0, 1)
    (e,) = schedule.next(2, generate)
    assert (e.launch_index, e.behavior_version, e.lag) == (2, 1, 1)
    assert schedule.launches == 3 and schedule.pending == 0


def test_length_coupled_never_loses_or_duplicates_and_respects_the_cap():
    rng = random.Random(0)
    launched = []
    schedule = LengthCoupledSchedule(
        lambda b: b[1], lam=28.0, max_launches=50, batches_per_update=2
    )

    def generate(version):
        batch = (len(launched), rng.uniform(0.5, 4.0))
        launched.append(batch)
        return batch

    consumed = []
    for version in range(300):
        entries = schedule.next(version, generate)
        assert len(entries) == 2
        consumed += [e.batch[0] for e in entries]
    assert len(consumed) == len(set(consumed))  # no duplicates
    pending = {e.batch[0] for _, _, e in schedule.in_flight}
    assert set(consumed) | pending == set(range(len(launched)))  # nothing lost
    assert not set(consumed) & pending
    assert max(schedule.launches_per_refill) <= 50


def test_length_coupled_waits_when_the_cap_is_hit():
    schedule = LengthCoupledSchedule(lambda b: 100.0, lam=1.0, max_launches=5)
    (e,) = schedule.next(0, lambda v: v)
    assert schedule.waits == 1 and schedule.launches == 5
    assert e.launch_index == 0 and schedule.clock == 100.0


def test_length_coupled_mean_lag_is_lam_times_mean_length():
    rng = random.Random(1)
    schedule = LengthCoupledSchedule(lambda b: b, lam=28.0)
    lags = [schedule.next(v, lambda _: rng.uniform(2.0, 10.0))[0].lag for v in range(3000)]
    steady = lags[1000:]
    assert sum(steady) / len(steady) == pytest.approx(28.0 * 6.0, rel=0.05)


def test_length_coupled_state_round_trip_and_bad_lengths():
    def make_generator(seed):
        rng = random.Random(seed)
        return lambda version: (version, rng.uniform(0, 3))

    a = LengthCoupledSchedule(lambda b: b[1], lam=3.0)
    gen_a = make_generator(2)
    for v in range(20):
        a.next(v, gen_a)
    b = LengthCoupledSchedule(lambda b: b[1], lam=3.0)
    b.load_state_dict(a.state_dict())
    # from here both see the same fresh batches: they must consume the same sequence
    gen_a, gen_b = make_generator(5), make_generator(5)
    seq_a = [(e.launch_index, e.lag) for v in range(20, 60) for e in a.next(v, gen_a)]
    seq_b = [(e.launch_index, e.lag) for v in range(20, 60) for e in b.next(v, gen_b)]
    assert seq_a == seq_b and a.clock == b.clock and a.realised_lags == b.realised_lags
    with pytest.raises(ValueError, match="does not match"):
        LengthCoupledSchedule(lambda b: b[1], lam=4.0).load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="length_of"):
        LengthCoupledSchedule(lambda b: float("nan")).next(0, lambda v: v)
