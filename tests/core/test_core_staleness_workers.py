"""The worker schedule (§2.2, Figure 1): hand traces, no loss or duplication, resume, mixed lags,
the steady-state mean lag, the length coupling; lag statistics and the schedule factory."""

import json
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gmc_grpo.staleness import (
    GENERATION_TIME_NAMES,
    ConstantTime,
    ExponentialTime,
    FixedDelaySchedule,
    LengthCoupledSchedule,
    LengthProportionalTime,
    SampledTime,
    ScheduleContext,
    ScheduleSettings,
    WorkerSchedule,
    lag_statistics,
    make_schedule,
    schedule_names,
)


class Groups:
    """`generate(version)` for the tests: group `n` is `{"id": n, "version": v, "length": L_n}`.

    `L_n` is a pure function of `(seed, n)`, so a resumed run (started at `first_id`) sees the
    same groups as an uninterrupted one.
    """

    def __init__(self, seed=0, first_id=0, lengths=None):
        self.seed, self.next_id, self.lengths = seed, first_id, lengths
        self.made = []

    def length(self, n):
        if self.lengths is not None:
            return self.lengths[n]
        return random.Random(self.seed * 1_000_003 + n).uniform(1.0, 10.0)

    def __call__(self, version):
        group = {"id": self.next_id, "version": version, "length": self.length(self.next_id)}
        self.next_id += 1
        self.made.append(group)
        return group


def _length(group):
    return group["length"]


def _trace(schedule, versions, generate):
    return [
        (e.launch_index, e.behavior_version, e.lag, e.launch_time, e.ready_time)
        for v in versions
        for e in schedule.next(v, generate)
    ]


def test_constant_times_hand_trace_w3_b2():
    # W = 3 workers, B = 2 groups per update, every group takes 1 clock unit, instant learner.
    # t=0: #0 #1 #2 launch from v0 (ready at 1).
    # step 0: #0 done (t=1), its worker relaunches #3 from v0 (ready 2); #1 done, #4 from v0.
    #         consume #0 #1: lags 0 0.
    # step 1: #2 done (t=1; tied with #0 #1, later in launch order), relaunch #5 from v1 (ready 2);
    #         #3 done (t=2), #6 from v1 (ready 3). consume #2 (v0) #3 (v0): lags 1 1.
    # step 2: #4 (t=2, v0) -> #7 from v2; #5 (t=2, v1) -> #8 from v2. lags 2 1: a mixed batch.
    # step 3: #6 (t=3, v1) -> #9 from v3; #7 (t=3, v2) -> #10 from v3. lags 2 1.
    schedule = WorkerSchedule(num_workers=3, groups_per_update=2)
    trace = _trace(schedule, range(4), Groups())
    assert trace == [
        (0, 0, 0, 0.0, 1.0),
        (1, 0, 0, 0.0, 1.0),
        (2, 0, 1, 0.0, 1.0),
        (3, 0, 1, 1.0, 2.0),
        (4, 0, 2, 1.0, 2.0),
        (5, 1, 1, 1.0, 2.0),
        (6, 1, 2, 2.0, 3.0),
        (7, 2, 1, 2.0, 3.0),
    ]
    assert schedule.lags_per_batch == [[0, 0], [1, 1], [2, 1], [2, 1]]
    assert schedule.launches == 11 and len(schedule.running) == 3 and not schedule.buffer


def test_length_proportional_hand_trace_w3_b2():
    # W = 3, B = 2, duration = 1 * L, lengths by launch index: 4 1 2 | 1 3 1 2 1 ...
    # t=0: #0 (L4, ready 4), #1 (L1, ready 1), #2 (L2, ready 2) from v0.
    # step 0: #1 done t=1 -> #3 from v0 (L1, ready 2); #2 done t=2 (tie with #3, launched
    #         earlier) -> #4 from v0 (L3, ready 5). consume #1 #2: lags 0 0.
    # step 1: #3 done t=2 -> #5 from v1 (L1, ready 3); #5 done t=3 -> #6 from v1 (L2, ready 5).
    #         consume #3 (v0) #5 (v1): lags 1 0.
    # step 2: #0 done t=4 -> #7 from v2 (L1, ready 5); #4 done t=5 (tie with #6 #7, earliest
    #         launch) -> #8 from v2. consume #0 (v0) #4 (v0): lags 2 2: the long groups.
    # step 3: #6 (v1, ready 5) and #7 (v2, ready 5): lags 2 1.
    lengths = [4, 1, 2, 1, 3, 1, 2, 1, 1, 1, 1]
    schedule = WorkerSchedule(
        num_workers=3,
        groups_per_update=2,
        generation_time=LengthProportionalTime(_length, rate=1.0),
    )
    trace = _trace(schedule, range(4), Groups(lengths=lengths))
    assert trace == [
        (1, 0, 0, 0.0, 1.0),
        (2, 0, 0, 0.0, 2.0),
        (3, 0, 1, 1.0, 2.0),
        (5, 1, 0, 2.0, 3.0),
        (0, 0, 2, 0.0, 4.0),
        (4, 0, 2, 2.0, 5.0),
        (6, 1, 2, 3.0, 5.0),
        (7, 2, 1, 4.0, 5.0),
    ]


def test_update_time_hand_trace_w2_b1():
    # W = 2, B = 1, constant time 1, each update takes 0.5 (publishes at consumption + 0.5).
    # t=0: #0 #1 from v0 (ready 1).
    # step 0: #0 done t=1 -> #2 from v0 (ready 2); consume #0 (lag 0). During the update
    #         [1, 1.5): #1 done t=1 -> buffer, #3 from v0 (ready 2). v1 published at 1.5.
    # step 1: #1 is in the buffer: consume it (lag 1). Update [1.5, 2): nothing done (ready 2 is
    #         the publication instant, so those workers will see v2).
    # step 2: #2 done t=2 -> #4 from v2; consume #2 (v0, lag 2). Update [2, 2.5): #3 done ->
    #         buffer, #5 from v2.
    # step 3: consume #3 (v0, lag 3). Then #4 #5 (v2) at steps 4 5: lags 2 3, and so on.
    schedule = WorkerSchedule(num_workers=2, groups_per_update=1, update_time=0.5)
    trace = _trace(schedule, range(6), Groups())
    assert [(i, v, lag) for i, v, lag, _, _ in trace] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 0, 2),
        (3, 0, 3),
        (4, 2, 2),
        (5, 2, 3),
    ]
    assert schedule.clock == 4.0 and len(schedule.buffer) == 0


@pytest.mark.parametrize(
    ("num_workers", "groups_per_update"), [(1, 1), (3, 2), (2, 3), (4, 4), (8, 3), (5, 1)]
)
def test_constant_times_lags_follow_the_closed_form(num_workers, groups_per_update):
    # Completion order = launch order; B groups are launched during each step n (from v_n), so
    # group k >= W comes from v = floor((k - W) / B) and is consumed at step floor(k / B):
    # lag = floor(k / B) - floor((k - W) / B), i.e. floor(W / B) or ceil(W / B). The W groups
    # launched at the start come from v0: lag floor(k / B). Over a whole number of steady-state
    # periods (B groups) the mean lag is exactly W / B.
    W, B = num_workers, groups_per_update
    schedule = WorkerSchedule(num_workers=W, groups_per_update=B, generation_time=ConstantTime(2.5))
    entries = [e for v in range(60) for e in schedule.next(v, Groups())]
    assert [e.launch_index for e in entries] == list(range(60 * B))
    expected = [k // B if k < W else k // B - (k - W) // B for k in range(60 * B)]
    assert schedule.realised_lags == expected
    steady = schedule.realised_lags[W : W + 40 * B]  # any B consecutive groups k >= W
    assert Fraction(sum(steady), len(steady)) == Fraction(W, B)
    assert set(steady) == {W // B, math.ceil(W / B)}


def test_one_batch_mixes_groups_of_different_lags_each_with_its_own_snapshot():
    # W = 3, B = 2 (trace above): the batch of step 2 holds a group from v0 and one from v1.
    # The "policy" here is a snapshot label that changes at every version; each group records
    # the snapshot it was generated with, which must be its own behavior version's.
    snapshots = {}

    def generate(version):
        snapshots.setdefault(version, f"theta_{version}")
        return {"snapshot": snapshots[version]}

    schedule = WorkerSchedule(num_workers=3, groups_per_update=2)
    batches = [schedule.next(v, generate) for v in range(3)]
    mixed = batches[2]
    assert sorted(e.lag for e in mixed) == [1, 2]
    assert {e.batch["snapshot"] for e in mixed} == {"theta_0", "theta_1"}
    for entry in mixed:
        assert entry.batch["snapshot"] == f"theta_{entry.behavior_version}"
        assert entry.consumed_version == 2


def _model(kind, scale):
    if kind == "constant":
        return ConstantTime(scale)
    if kind == "length":
        return LengthProportionalTime(_length, rate=scale / 5.0)
    if kind == "exponential":
        return ExponentialTime(scale)
    if kind == "sampled_group":  # long groups late, with noise drawn from the schedule's rng
        return SampledTime(lambda rng, g: g["length"] * rng.uniform(0.5, 1.5), takes_group=True)
    return SampledTime(lambda rng: rng.lognormal(0.0, 1.0), name="lognormal(0, 1)")


MODELS = ["constant", "length", "exponential", "sampled_group", "sampled_lognormal"]


@settings(max_examples=150, deadline=None)
@given(
    num_workers=st.integers(1, 9),
    groups_per_update=st.integers(1, 6),
    kind=st.sampled_from(MODELS),
    scale=st.sampled_from([0.3, 1.0, 4.0]),
    update_time=st.sampled_from([0.0, 0.0, 0.2, 1.0]),
    seed=st.integers(0, 10_000),
    steps=st.integers(1, 40),
)
def test_nothing_lost_or_duplicated_and_the_earliest_groups_are_admitted(
    num_workers, groups_per_update, kind, scale, update_time, seed, steps
):
    W, B = num_workers, groups_per_update
    schedule = WorkerSchedule(
        num_workers=W,
        groups_per_update=B,
        generation_time=_model(kind, scale),
        update_time=update_time,
        seed=seed,
    )
    groups = Groups(seed)
    consumed, unconsumed_after_step = [], []
    for version in range(steps):
        clock_before = schedule.clock
        entries = schedule.next(version, groups)
        assert len(entries) == B and len(schedule.running) == W
        assert schedule.clock >= clock_before
        for e in entries:
            assert e.batch["version"] == e.behavior_version <= e.consumed_version == version
            assert e.launch_time <= e.ready_time <= schedule.clock
        consumed += entries
        unconsumed_after_step.append(schedule.pending)
    ids = [e.batch["id"] for e in consumed]
    pending = [e for _, _, e in schedule.running] + list(schedule.buffer)
    pending_ids = {e.batch["id"] for e in pending}
    assert len(ids) == len(set(ids))  # no duplicates
    assert set(ids) | pending_ids == set(range(len(groups.made)))  # nothing lost
    assert not set(ids) & pending_ids and len(pending_ids) == len(pending)
    assert len(groups.made) == schedule.launches
    # admission: consumption in (completion time, launch order); every pending group after
    keys = [(e.ready_time, e.launch_index) for e in consumed]
    assert keys == sorted(keys)
    assert all(keys[-1] < (e.ready_time, e.launch_index) for e in pending)
    # the buffer holds completed groups only
    assert all(e.ready_time <= schedule.clock for e in schedule.buffer)
    # discrete Little's law (class docstring): sum of lags = sum over steps m of the groups
    # launched and unconsumed at the end of m, less what the still pending ones will add
    lag_sum = sum(unconsumed_after_step) - sum(steps - e.behavior_version for e in pending)
    assert sum(schedule.realised_lags) == lag_sum
    if update_time == 0:
        assert set(unconsumed_after_step) == {W}


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("update_time", [0.0, 0.7])
def test_resume_gives_the_same_future_as_an_uninterrupted_run(kind, update_time):
    def make():
        return WorkerSchedule(
            num_workers=5,
            groups_per_update=3,
            generation_time=_model(kind, 2.0),
            update_time=update_time,
            seed=11,
        )

    uninterrupted, groups = make(), Groups(seed=3)
    full = [_trace(uninterrupted, [v], groups) for v in range(40)]

    first = make()
    first_groups = Groups(seed=3)
    for v in range(17):
        first.next(v, first_groups)
    state = json.loads(json.dumps(first.state_dict()))  # what a checkpoint stores
    resumed = make()
    resumed.load_state_dict(state)
    resumed_groups = Groups(seed=3, first_id=state["launches"])
    rest = [_trace(resumed, [v], resumed_groups) for v in range(17, 40)]
    assert rest == full[17:]
    final_a, final_b = uninterrupted.state_dict(), resumed.state_dict()
    assert final_a == final_b  # rng state, clock, buffer, in-flight groups, lags
    assert uninterrupted.rng.random() == resumed.rng.random()


def test_load_state_dict_rejects_another_configuration():
    schedule = WorkerSchedule(num_workers=4, groups_per_update=2, seed=1)
    schedule.next(0, Groups())
    state = schedule.state_dict()
    for other in (
        WorkerSchedule(num_workers=5, groups_per_update=2, seed=1),
        WorkerSchedule(num_workers=4, groups_per_update=2, seed=2),
        WorkerSchedule(num_workers=4, groups_per_update=2, seed=1, update_time=1.0),
        WorkerSchedule(
            num_workers=4, groups_per_update=2, seed=1, generation_time=ExponentialTime(1.0)
        ),
    ):
        with pytest.raises(ValueError, match="does not match"):
            other.load_state_dict(state)
    with pytest.raises(ValueError, match="does not match"):
        schedule.load_state_dict(FixedDelaySchedule(2).state_dict())


@pytest.mark.parametrize("kind", ["exponential", "length", "sampled_lognormal"])
def test_steady_state_mean_lag_is_w_over_b_for_every_time_model(kind):
    # Class docstring: with an instant learner every step ends with exactly W groups launched and
    # unconsumed, so the mean lag is W / B whatever the generation times: 12 / 5 = 2.4 here.
    # The time model changes the spread: random times give lags outside {2, 3}.
    schedule = WorkerSchedule(
        num_workers=12, groups_per_update=5, generation_time=_model(kind, 1.0), seed=4
    )
    groups = Groups(seed=8)
    for v in range(1500):
        schedule.next(v, groups)
    steady = lag_statistics(schedule.lags_per_batch[100:])
    assert steady["mean"] == pytest.approx(2.4, abs=0.02)
    assert steady["max"] >= 4 and steady["spread_std"] > 0.4


def test_update_time_mean_lag_is_mean_unconsumed_over_b():
    # W = 4, B = 2, constant time 1: the workers deposit 4 groups per clock unit. With update
    # time 0.4 the learner can take 2 / 0.4 = 5 per unit: the buffer stays bounded and the mean
    # lag is mean(unconsumed after a step) / B (class docstring). With 0.75 it takes at most
    # 2 / 0.75 = 2.67 per unit: the buffer, and the lags, grow without bound.
    schedule = WorkerSchedule(num_workers=4, groups_per_update=2, update_time=0.4)
    unconsumed = []
    for v in range(400):
        schedule.next(v, Groups())
        unconsumed.append(schedule.pending)
    lags = schedule.realised_lags[200:]
    assert np.mean(lags) == pytest.approx(np.mean(unconsumed[100:]) / 2, abs=0.01)
    assert max(unconsumed[300:]) == max(unconsumed[100:200])  # bounded
    growing = WorkerSchedule(num_workers=4, groups_per_update=2, update_time=0.75)
    for v in range(400):
        growing.next(v, Groups())
    assert growing.realised_lags[-1] > 2 * growing.realised_lags[200] > 0


def test_longer_groups_have_larger_lags_with_length_proportional_times():
    # Lengths i.i.d. U(1, 10); W = 18, B = 4. With duration = rate * L, a group's lag is about
    # (its duration) x (updates per clock unit): corr(L, lag) is strongly positive. With constant
    # or exponential times the lag does not depend on L (correlation ~ 0: +-0.02 at 8000 groups).
    def length_lag_correlation(model):
        schedule = WorkerSchedule(
            num_workers=18, groups_per_update=4, generation_time=model, seed=5
        )
        groups = Groups(seed=21)
        entries = [e for v in range(2100) for e in schedule.next(v, groups)][400:]
        lengths = np.array([e.batch["length"] for e in entries])
        lags = np.array([e.lag for e in entries], dtype=float)
        short, long = lengths < np.quantile(lengths, 0.25), lengths > np.quantile(lengths, 0.75)
        return np.corrcoef(lengths, lags)[0, 1], lags[long].mean() - lags[short].mean()

    corr, gap = length_lag_correlation(LengthProportionalTime(_length, rate=1.0))
    assert corr > 0.8 and gap > 3.0
    for model in (ConstantTime(5.5), ExponentialTime(5.5)):
        corr, gap = length_lag_correlation(model)
        assert abs(corr) < 0.06 and abs(gap) < 0.3


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_workers": 0}, r"num_workers must be an integer >= 1, got 0"),
        ({"num_workers": 2.5}, r"num_workers must be an integer >= 1, got 2.5"),
        ({"groups_per_update": 0}, r"groups_per_update must be an integer >= 1, got 0"),
        ({"update_time": -1.0}, r"update_time must be a finite number >= 0, got -1.0"),
        ({"update_time": float("nan")}, r"update_time must be a finite number >= 0, got nan"),
        ({"seed": -3}, r"seed must be an integer >= 0, got -3"),
        ({"generation_time": 1.0}, r"generation_time must be a GenerationTime model"),
    ],
)
def test_bad_arguments_name_the_parameter_value_and_fix(kwargs, match):
    args = {"num_workers": 2, "groups_per_update": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        WorkerSchedule(**args)


def test_bad_models_and_durations():
    with pytest.raises(ValueError, match=r"ConstantTime.duration must be .* got -1"):
        ConstantTime(-1)
    with pytest.raises(ValueError, match=r"LengthProportionalTime.rate .* got inf"):
        LengthProportionalTime(_length, rate=float("inf"))
    with pytest.raises(ValueError, match=r"ExponentialTime.mean must be .* > 0, got 0"):
        ExponentialTime(0.0)
    with pytest.raises(ValueError, match=r"SampledTime.draw must be callable"):
        SampledTime(3.0)
    nan_length = WorkerSchedule(
        num_workers=2, groups_per_update=1, generation_time=LengthProportionalTime(_length)
    )
    with pytest.raises(ValueError, match=r"length_of\(group\) must be finite and >= 0, got nan"):
        nan_length.next(0, lambda v: {"length": float("nan")})
    negative = WorkerSchedule(
        num_workers=2, groups_per_update=1, generation_time=SampledTime(lambda rng: -1.0)
    )
    with pytest.raises(ValueError, match=r"gave -1.0 for a group"):
        negative.next(0, lambda v: v)
    zero_with_update = WorkerSchedule(
        num_workers=2, groups_per_update=1, generation_time=ConstantTime(0.0), update_time=1.0
    )
    with pytest.raises(ValueError, match=r"gave 0 with update_time=1.0"):
        zero_with_update.next(0, lambda v: v)
    # zero durations are fine with an instant learner: the mean lag is still W / B = 2
    instant = WorkerSchedule(num_workers=2, groups_per_update=1, generation_time=ConstantTime(0))
    assert [instant.next(v, lambda v: v)[0].lag for v in range(6)] == [0, 1, 2, 2, 2, 2]
    with pytest.raises(ValueError, match=r"version 3 is below the previous call's 5"):
        instant.next(5, lambda v: v)
        instant.next(3, lambda v: v)


# -- lag statistics -------------------------------------------------------------------------


def test_lag_statistics_hand_values():
    # groups 0 2 | 1 1 | 3: mean 7/5, tau2 (0+4+1+1+9)/5 = 3, tau4 (0+16+1+1+81)/5 = 19.8;
    # batch stds 1, 0, 0 -> 1/3; ranges 2, 0, 0 -> 2/3; one mixed batch of three.
    stats = lag_statistics([[0, 2], [1, 1], [3]])
    assert stats == pytest.approx(
        {
            "mean": 1.4,
            "tau2": 3.0,
            "tau4": 19.8,
            "max": 3.0,
            "min": 0.0,
            "spread_std": 1 / 3,
            "spread_range": 2 / 3,
            "mixed_fraction": 1 / 3,
            "num_batches": 3.0,
            "num_groups": 5.0,
        }
    )
    with pytest.raises(ValueError, match="at least one batch"):
        lag_statistics([])
    with pytest.raises(ValueError, match="no empty batch"):
        lag_statistics([[1], []])


def test_all_three_schedules_report_the_same_statistics():
    # fixed delay D = 3 over 10 steps: lags 0 1 2 3 3 3 3 3 3 3 -> mean 2.4, tau4 (1+16+7*81)/10
    fixed = FixedDelaySchedule(3)
    for v in range(10):
        fixed.next(v, lambda v: v)
    assert fixed.lags_per_batch == [[0], [1], [2]] + [[3]] * 7
    stats = lag_statistics(fixed.lags_per_batch)
    assert (stats["mean"], stats["tau4"], stats["spread_std"]) == (2.4, 58.4, 0.0)
    # length-coupled, two batches per update, lam = 1, L = 3 1 1 5 1 (clock = launches):
    # step 0: #0 (t0, ready 3), #1 (t1, ready 2) -> #1 (lag 0); #2 (t2, ready 3) -> #0 (lag 0).
    # step 1: #2 visible at 3 (v0, lag 1); #3 (t3, L5, ready 8), #4 (t4, ready 5) -> #4 (lag 0).
    lengths = iter([3, 1, 1, 5, 1])
    coupled = LengthCoupledSchedule(lambda b: b, lam=1.0, batches_per_update=2)
    for v in range(2):
        coupled.next(v, lambda v: next(lengths))
    assert coupled.lags_per_batch == [[0, 0], [1, 0]]
    assert lag_statistics(coupled.lags_per_batch)["spread_range"] == 0.5
    workers = WorkerSchedule(num_workers=3, groups_per_update=2)
    for v in range(4):
        workers.next(v, Groups())
    # [[0, 0], [1, 1], [2, 1], [2, 1]]: mean 1, tau4 (1+1+16+1+16+1)/8 = 4.5
    stats = lag_statistics(workers.lags_per_batch)
    assert (stats["mean"], stats["tau4"], stats["spread_range"], stats["mixed_fraction"]) == (
        1.0,
        4.5,
        0.5,
        0.5,
    )


# -- names and factory -----------------------------------------------------------------------


def test_schedule_names_and_factory():
    assert schedule_names()[:3] == ("fixed_delay", "length_coupled", "workers")
    assert GENERATION_TIME_NAMES == ("constant", "length_proportional", "exponential", "sampled")
    fixed = make_schedule(ScheduleSettings(schedule="fixed_delay", delay=2))
    assert isinstance(fixed, FixedDelaySchedule) and fixed.delay == 2
    # `delay` counts updates; with 2 updates per rollout batch the FIFO holds half as many
    halved = make_schedule(
        ScheduleSettings(schedule="fixed_delay", delay=4), ScheduleContext(updates_per_batch=2)
    )
    assert halved.delay == 2
    coupled = make_schedule(
        ScheduleSettings(schedule="length_coupled", lam=3.0, max_launches=7),
        ScheduleContext(length_of=float, length_unit="tokens"),
    )
    assert isinstance(coupled, LengthCoupledSchedule)
    assert (coupled.lam, coupled.max_launches, coupled.batches_per_update) == (3.0, 7, 1)
    assert coupled.length_unit == "tokens" and coupled.state_dict()["length_unit"] == "tokens"
    workers = make_schedule(
        ScheduleSettings(
            schedule="workers",
            num_workers=3,
            generation_time="length_proportional",
            time_scale=1.0,
        ),
        ScheduleContext(groups_per_batch=2, length_of=_length, length_unit="tokens"),
    )
    assert isinstance(workers, WorkerSchedule)
    assert workers.generation_time.describe() == {
        "model": "length_proportional",
        "rate": 1.0,
        "length_unit": "tokens",
    }
    groups = Groups(lengths=[4, 1, 2, 1, 3, 1, 2, 1, 1, 1, 1])  # the hand trace above
    assert [e.lag for v in range(3) for e in workers.next(v, groups)] == [
        0,
        0,
        1,
        0,
        2,
        2,
    ]
    exponential = make_schedule(
        ScheduleSettings(schedule="workers", generation_time="exponential", time_scale=2.0),
        ScheduleContext(seed=9),
    )
    assert exponential.generation_time.describe() == {"model": "exponential", "mean": 2.0}
    assert (exponential.num_workers, exponential.groups_per_update, exponential.seed) == (16, 8, 9)
    sampled = make_schedule(
        ScheduleSettings(schedule="workers", generation_time="sampled"),
        ScheduleContext(draw_time=lambda rng, g: 1.0 + rng.random()),
    )
    assert sampled.generation_time.describe()["model"] == "sampled"
    sampled.next(0, lambda v: v)
    assert all(1.0 <= e.ready_time - e.launch_time < 2.0 for _, _, e in sampled.running)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"schedule": "fifo"}, r"ScheduleSettings.schedule='fifo': must be one of \('fixed_delay'"),
        ({"delay": -1}, r"ScheduleSettings.delay=-1: must be an integer >= 0 \(e.g. delay=32\)"),
        ({"lam": float("nan")}, r"ScheduleSettings.lam=nan: must be a finite number >= 0"),
        ({"num_workers": 0}, r"ScheduleSettings.num_workers=0: must be a whole number in \[1, "),
        (
            {"num_workers": 100_001},  # gmc_grpo.fieldchecks.MAX_NUM_WORKERS
            r"ScheduleSettings.num_workers=100001: must be a whole number in \[1, 100,000\]",
        ),
        ({"generation_time": "gamma"}, r"ScheduleSettings.generation_time='gamma': must be one"),
        (
            {"generation_time": "exponential", "time_scale": 0.0},
            r"ScheduleSettings.time_scale=0.0: must be > 0 for exponential",
        ),
        ({"update_time": -0.5}, r"ScheduleSettings.update_time=-0.5: must be a finite number"),
        (
            {"update_time": 1.0, "time_scale": 0.0},
            r"ScheduleSettings.time_scale=0.0: must be > 0 when update_time > 0",
        ),
        (
            {"schedule": "workers", "delay": 4},
            r"ScheduleSettings.delay=4: must be 0 with schedule 'workers'",
        ),
    ],
)
def test_schedule_settings_errors_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScheduleSettings(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"groups_per_batch": 0}, r"ScheduleContext.groups_per_batch=0: must be an integer"),
        ({"updates_per_batch": 0}, r"ScheduleContext.updates_per_batch=0: must be an integer"),
        ({"seed": 1.5}, r"ScheduleContext.seed=1.5: must be an integer >= 0"),
    ],
)
def test_schedule_context_errors_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScheduleContext(**kwargs)


def test_make_schedule_asks_for_the_callables_it_needs():
    with pytest.raises(ValueError, match=r"schedule 'length_coupled' needs length_of"):
        make_schedule(ScheduleSettings(schedule="length_coupled"))
    with pytest.raises(ValueError, match=r"generation_time 'length_proportional' needs length_of"):
        make_schedule(ScheduleSettings(schedule="workers", generation_time="length_proportional"))
    with pytest.raises(ValueError, match=r"generation_time 'sampled' needs draw_time"):
        make_schedule(ScheduleSettings(schedule="workers", generation_time="sampled"))


# -- what every schedule answers (`Schedule`): no caller reads the internals ------------------


def _counting(generate):
    calls = []

    def counted(version):
        calls.append(version)
        return generate(version)

    return counted, calls


@pytest.mark.parametrize("update_time", [0.0, 0.7])
def test_worker_launches_ahead_is_what_the_next_call_launches(update_time):
    """`launches_ahead()` is `W` (first call) plus the relaunches a full batch needs: exact with
    an instantaneous learner, a lower bound when groups also complete during an update."""
    schedule = WorkerSchedule(
        num_workers=5,
        groups_per_update=3,
        generation_time=ExponentialTime(1.0),
        update_time=update_time,
        seed=2,
    )
    generate, calls = _counting(Groups(seed=3))
    for version in range(30):
        ahead, before = schedule.launches_ahead(), len(calls)
        schedule.next(version, generate)
        made = len(calls) - before
        assert made == ahead if update_time == 0 else made >= ahead
    assert schedule.item == "group" and schedule.groups_per_item(8) == 1
    assert schedule.pending == len(schedule.pending_entries()) == 5 + len(schedule.buffer)
    assert [e.launch_index for e in schedule.pending_entries()] == [
        e["launch_index"] for e in schedule.state_dict()["in_flight"]
    ]
    assert schedule.group_lags(8) == schedule.lags_per_batch  # groups: one lag each
    assert schedule.length_unit is None  # exponential times read no length


def test_batch_schedules_answer_the_same_questions():
    fixed = FixedDelaySchedule(3)
    generate, calls = _counting(lambda v: {"version": v})
    assert (fixed.item, fixed.groups_per_item(8), fixed.launches_ahead()) == ("batch", 8, 4)
    fixed.next(0, generate)
    assert len(calls) == 4 and fixed.launches_ahead() == 1
    assert [e.behavior_version for e in fixed.pending_entries()] == [0, 0, 0]
    for version in range(1, 5):
        fixed.next(version, generate)
    assert fixed.group_lags(2) == [[0, 0], [1, 1], [2, 2], [3, 3], [3, 3]]
    assert fixed.length_unit is None
    coupled = LengthCoupledSchedule(lambda b: 2.0, lam=1.5, length_unit="tokens")
    assert coupled.launches_ahead() == 1 and coupled.length_unit == "tokens"
    coupled.next(0, generate)
    # the warm-up launched until the first batch was ready: the others are still in flight
    assert [e.launch_index for e in coupled.pending_entries()] == list(range(1, coupled.launches))
    assert coupled.launches_ahead() == (0 if coupled._visible() else 1)
