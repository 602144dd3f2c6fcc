"""Staleness schedules shared by the toy learner and the LLM learner.

A schedule decides which batch the learner consumes at each step and which policy version
generated it. It is generic over what a batch holds: the learner passes a `generate(version)`
callable that produces a batch with the policy of that version (the current one), and gets back
`ScheduledBatch` records carrying the batch, its behavior version and its realised lag.

Three schedules: two of Appendix B.1, and the per-group system of §2.2 that the theorems are
stated for:

- `FixedDelaySchedule(delay=D)`: a FIFO of `D` batches, filled from the initial policy. At every
  learner step a new batch from the current policy is appended and the oldest is consumed, so the
  lag is `n` during the fill (`n < D`) and exactly `D` afterwards (the steady state).
- `LengthCoupledSchedule(lam=28)`: the simulated asynchronous pipeline,
  `tau_ready = tau_launch + lam * L`. **Our interpretation** (the paper does not give units):
  the clock counts launches (`clock_per_launch` per launch, default 1) and does not move during
  a learner update; `L` is what `length_of(batch)` returns, in the unit the caller chooses
  (`length_unit` documents it in the run record). At the start, batches are launched from the
  current (initial) policy until the first one is visible (warm-up). Whenever the visible queue
  is empty, the minimum number of new batches is launched, from the current policy, to expose
  the next one (refill). Warm-up and refill launch at most `max_launches` batches (400 in B.1);
  if that is not enough, the clock waits until the earliest in-flight batch is ready. Visible
  batches are consumed earliest-ready first (ties: launch order). Because in steady state about
  one batch is launched per update, a batch's lag in learner updates is close to `lam * L`; a
  finite run's mean lag is lower, because its first ~`lam * L` updates consume the warm-up
  batches of the initial policy (`llm_runs.calibration` solves for the unit of `L` that gives a
  target mean lag over a run).
- `WorkerSchedule(num_workers=W, groups_per_update=B, generation_time=...)`: the system of §2.2
  and Figure 1. `W` rollout workers each generate one group at a time with the policy snapshot
  current at its launch; a group's generation time follows a model (`ConstantTime`,
  `LengthProportionalTime`: long answers arrive late, `ExponentialTime`, or `SampledTime`: a
  user's distribution); the learner takes the `B` earliest completed groups, so one batch can mix
  several lags. Items are single groups here, each with its own behavior version and lag. See the
  class docstring for the event rules and how they read Figure 1.

Every consumed batch records its realised lag (`realised_lags`); nothing is lost or duplicated.
`lags_per_batch` groups them by learner update and `lag_statistics` summarises them the same way
for all three schedules (mean, `tau2`, `tau4` as in §4.1, max, within-batch spread).
`SCHEDULE_NAMES`, `ScheduleConfig` and `make_schedule` name and build the three schedules.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from numbers import Integral
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

T = TypeVar("T")


@dataclass
class ScheduledBatch(Generic[T]):
    """A batch in a schedule.

    batch: what `generate` returned.
    behavior_version: learner version whose policy generated it (`mu = pi_{theta_v}`).
    launch_index: 0, 1, 2, ... in launch order.
    launch_time, ready_time: schedule clock values (fixed delay: the learner step).
    consumed_version: learner version that consumed it (set on consumption).
    """

    batch: T
    behavior_version: int
    launch_index: int
    launch_time: float
    ready_time: float
    consumed_version: int | None = None

    @property
    def lag(self) -> int:
        """Realised lag `consumed_version - behavior_version` (learner updates)."""
        if self.consumed_version is None:
            raise ValueError("lag is defined once the batch has been consumed")
        return self.consumed_version - self.behavior_version


def _entry_state(entry: ScheduledBatch[Any]) -> dict[str, Any]:
    # shallow on purpose: `dataclasses.asdict` would deep-copy the stored batches (at D = 512 and
    # paper shapes, gigabytes of tensors) and turn dataclass batches into dicts
    return {f.name: getattr(entry, f.name) for f in fields(entry)}


def _entry_from_state(state: dict[str, Any]) -> ScheduledBatch[Any]:
    return ScheduledBatch(**state)


def _chunks(lags: list[int], size: int) -> list[list[int]]:
    """`lags` cut into consecutive lists of `size` (one per learner update)."""
    return [lags[start : start + size] for start in range(0, len(lags), size)]


class FixedDelaySchedule(Generic[T]):
    """FIFO queue of `delay` batches (Appendix B.1, "Controlled fixed delays").

    Args:
        delay: `D >= 0` batches between generation and consumption in steady state.
    """

    def __init__(self, delay: int) -> None:
        if delay < 0:
            raise ValueError(f"delay D must be >= 0, got {delay}")
        self.delay = delay
        self.queue: deque[ScheduledBatch[T]] = deque()
        self.launches = 0
        self.filled = False
        self.realised_lags: list[int] = []

    def _launch(self, version: int, generate: Callable[[int], T], time: float) -> None:
        entry = ScheduledBatch(generate(version), version, self.launches, time, time)
        self.queue.append(entry)
        self.launches += 1

    def next(self, version: int, generate: Callable[[int], T]) -> list[ScheduledBatch[T]]:
        """The batch the learner at `version` consumes (a one-element list).

        On the first call the queue is filled with `D` batches from the policy at `version`
        (the initial policy). Then a batch from the current policy is appended and the oldest
        is consumed.
        """
        if not self.filled:
            for _ in range(self.delay):
                self._launch(version, generate, float(version))
            self.filled = True
        self._launch(version, generate, float(version))
        entry = self.queue.popleft()
        entry.consumed_version = version
        self.realised_lags.append(entry.lag)
        return [entry]

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: the queued batches (as stored), counters and lags."""
        return {
            "kind": "fixed_delay",
            "delay": self.delay,
            "queue": [_entry_state(e) for e in self.queue],
            "launches": self.launches,
            "filled": self.filled,
            "realised_lags": list(self.realised_lags),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != "fixed_delay" or state["delay"] != self.delay:
            raise ValueError(
                f"checkpointed schedule {state.get('kind')} (delay={state.get('delay')}) does not "
                f"match this FixedDelaySchedule(delay={self.delay})"
            )
        self.queue = deque(_entry_from_state(e) for e in state["queue"])
        self.launches = state["launches"]
        self.filled = state["filled"]
        self.realised_lags = list(state["realised_lags"])

    @property
    def lags_per_batch(self) -> list[list[int]]:
        """The lag of each learner update's batch, one single-element list per update.

        Every group of a batch shares its lag, so statistics over these lists equal those over
        groups (`lag_statistics`; batches of equal size).
        """
        return _chunks(self.realised_lags, 1)


class LengthCoupledSchedule(Generic[T]):
    """Simulated asynchronous pipeline, `tau_ready = tau_launch + lam * L` (Appendix B.1).

    Args:
        length_of: `L` of a batch (e.g. its mean response length in units of `length_unit`
            tokens); must be finite and >= 0.
        lam: `lambda` (28 in Appendix B.1).
        batches_per_update: batches consumed per learner update.
        max_launches: safety cap on launches per warm-up or refill (400 in Appendix B.1).
        clock_per_launch: clock advance per launch (our unit: one launch = one clock tick).
        length_unit: documentation of the unit of `L` (stored in `state_dict`), e.g. "100 tokens".
    """

    def __init__(
        self,
        length_of: Callable[[T], float],
        *,
        lam: float = 28.0,
        batches_per_update: int = 1,
        max_launches: int = 400,
        clock_per_launch: float = 1.0,
        length_unit: str = "caller-defined",
    ) -> None:
        if not lam >= 0:
            raise ValueError(f"lam must be >= 0, got {lam}")
        if batches_per_update < 1:
            raise ValueError(f"batches_per_update must be >= 1, got {batches_per_update}")
        if max_launches < 1:
            raise ValueError(f"max_launches must be >= 1, got {max_launches}")
        if not clock_per_launch > 0:
            raise ValueError(f"clock_per_launch must be > 0, got {clock_per_launch}")
        self.length_of = length_of
        self.lam = lam
        self.batches_per_update = batches_per_update
        self.max_launches = max_launches
        self.clock_per_launch = clock_per_launch
        self.length_unit = length_unit
        self.clock = 0.0
        self.launches = 0
        # in flight (launched, not consumed), ordered by (ready_time, launch_index)
        self.in_flight: list[tuple[float, int, ScheduledBatch[T]]] = []
        self.realised_lags: list[int] = []
        self.waits = 0  # times the cap was hit and the clock waited instead of launching
        self.launches_per_refill: list[int] = []

    def _launch(self, version: int, generate: Callable[[int], T]) -> None:
        batch = generate(version)
        length = float(self.length_of(batch))
        if not length >= 0 or length == float("inf"):
            raise ValueError(f"length_of(batch) must be finite and >= 0, got {length}")
        entry = ScheduledBatch(
            batch, version, self.launches, self.clock, self.clock + self.lam * length
        )
        heapq.heappush(self.in_flight, (entry.ready_time, entry.launch_index, entry))
        self.launches += 1
        self.clock += self.clock_per_launch

    def _visible(self) -> bool:
        return bool(self.in_flight) and self.in_flight[0][0] <= self.clock

    def _expose_next(self, version: int, generate: Callable[[int], T]) -> None:
        """Launch the minimum number of batches (at most the cap) to make one visible."""
        launched = 0
        while not self._visible() and launched < self.max_launches:
            self._launch(version, generate)
            launched += 1
        self.launches_per_refill.append(launched)
        if not self._visible():  # cap reached: wait for the earliest in-flight batch
            self.clock = self.in_flight[0][0]
            self.waits += 1

    def next(self, version: int, generate: Callable[[int], T]) -> list[ScheduledBatch[T]]:
        """The `batches_per_update` batches the learner at `version` consumes."""
        consumed: list[ScheduledBatch[T]] = []
        while len(consumed) < self.batches_per_update:
            if not self._visible():
                self._expose_next(version, generate)
            _, _, entry = heapq.heappop(self.in_flight)
            entry.consumed_version = version
            self.realised_lags.append(entry.lag)
            consumed.append(entry)
        return consumed

    @property
    def pending(self) -> int:
        """Batches launched and not yet consumed."""
        return len(self.in_flight)

    @property
    def lags_per_batch(self) -> list[list[int]]:
        """Lags grouped by learner update: `batches_per_update` consumed batches per list.

        Every group of a consumed batch shares its lag, so statistics over these lists equal those
        over groups (`lag_statistics`; batches of equal size).
        """
        return _chunks(self.realised_lags, self.batches_per_update)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "length_coupled",
            "lam": self.lam,
            "length_unit": self.length_unit,
            "clock": self.clock,
            "launches": self.launches,
            "in_flight": [
                _entry_state(e) for _, _, e in sorted(self.in_flight, key=lambda x: x[:2])
            ],
            "realised_lags": list(self.realised_lags),
            "waits": self.waits,
            "launches_per_refill": list(self.launches_per_refill),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != "length_coupled" or state["lam"] != self.lam:
            raise ValueError(
                f"checkpointed schedule {state.get('kind')} (lam={state.get('lam')}) does not "
                f"match this LengthCoupledSchedule(lam={self.lam})"
            )
        self.clock = state["clock"]
        self.launches = state["launches"]
        entries = [_entry_from_state(e) for e in state["in_flight"]]
        self.in_flight = [(e.ready_time, e.launch_index, e) for e in entries]
        heapq.heapify(self.in_flight)
        self.realised_lags = list(state["realised_lags"])
        self.waits = state["waits"]
        self.launches_per_refill = list(state["launches_per_refill"])


# -- worker schedule: the system of §2.2 and Figure 1 ----------------------------------------


def _is_finite_at_least(value: Any, minimum: float) -> bool:
    """`value` is a real number, finite and `>= minimum` (False for NaN, inf, strings, None)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and number >= minimum


def _is_int_at_least(value: Any, minimum: int) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= minimum


class GenerationTime(Protocol):
    """A generation-time model: clock time from a group's launch to its deposit.

    `model(group, rng)` gets the group `generate` returned and the schedule's own seeded
    `numpy.random.Generator` (draw from nothing else, so that runs repeat and resume) and returns
    a finite duration `>= 0`, in the clock unit the caller chooses (the unit of `update_time`).
    The duration covers generating and scoring the group's `G` responses. `describe()` gives the
    model's parameters; they are stored in `state_dict` and compared on resume.
    """

    def __call__(self, group: Any, rng: np.random.Generator) -> float: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ConstantTime:
    """Every group takes `duration`: the lags depend on `W` and `B` only (no randomness).

    With zero update time the lags are `floor(W / B)` and `ceil(W / B)` in steady state, mean
    exactly `W / B` (derivation in `WorkerSchedule`).
    """

    duration: float = 1.0
    """Clock units from launch to deposit; `> 0` when the learner's `update_time` is `> 0`."""

    def __post_init__(self) -> None:
        if not _is_finite_at_least(self.duration, 0.0):
            raise ValueError(
                f"ConstantTime.duration must be a finite number >= 0, got {self.duration!r}; "
                "pass the clock time one group takes, e.g. ConstantTime(duration=1.0)"
            )

    def __call__(self, group: Any, rng: np.random.Generator) -> float:
        return float(self.duration)

    def describe(self) -> dict[str, Any]:
        return {"model": "constant", "duration": float(self.duration)}


@dataclass(frozen=True)
class LengthProportionalTime(Generic[T]):
    """`duration = rate * length_of(group)`: long answers arrive late, so the lag depends on the
    sample (the per-group analogue of Appendix B.1's `tau_ready = tau_launch + lam * L`).

    This relaxes the conditional independence of delay and sample that Assumption 3 asks for,
    as B.1's simulated suite does (long responses are both more stale and more off-policy).
    """

    length_of: Callable[[T], float]
    """`L` of a group, e.g. its mean response length in tokens; must be finite and `>= 0`."""
    rate: float = 1.0
    """Clock units per unit of `L`."""
    length_unit: str = "caller-defined"
    """What one unit of `L` is (documentation, stored in `state_dict`), e.g. "tokens"."""

    def __post_init__(self) -> None:
        if not _is_finite_at_least(self.rate, 0.0):
            raise ValueError(
                f"LengthProportionalTime.rate must be a finite number >= 0, got {self.rate!r}; "
                "pass clock units per unit of length_of(group), e.g. rate=0.01"
            )

    def __call__(self, group: T, rng: np.random.Generator) -> float:
        length = self.length_of(group)
        if not _is_finite_at_least(length, 0.0):
            raise ValueError(f"length_of(group) must be finite and >= 0, got {length!r}")
        return self.rate * float(length)

    def describe(self) -> dict[str, Any]:
        return {
            "model": "length_proportional",
            "rate": float(self.rate),
            "length_unit": self.length_unit,
        }


@dataclass(frozen=True)
class ExponentialTime:
    """Durations drawn i.i.d. from an exponential distribution of mean `mean` (independent of the
    group: the delay-regularity condition of §2.2 holds by construction)."""

    mean: float = 1.0
    """Mean clock time of a group; `> 0`."""

    def __post_init__(self) -> None:
        if not (_is_finite_at_least(self.mean, 0.0) and self.mean > 0):
            raise ValueError(
                f"ExponentialTime.mean must be a finite number > 0, got {self.mean!r}; "
                "pass the mean clock time of a group, e.g. ExponentialTime(mean=1.0)"
            )

    def __call__(self, group: Any, rng: np.random.Generator) -> float:
        return float(rng.exponential(self.mean))

    def describe(self) -> dict[str, Any]:
        return {"model": "exponential", "mean": float(self.mean)}


@dataclass(frozen=True)
class SampledTime:
    """A distribution given by the user: `draw(rng)`, or `draw(rng, group)` with `takes_group`.

    `rng` is the schedule's own seeded `numpy.random.Generator`; `draw` must take all its
    randomness from it (e.g. `lambda rng: rng.lognormal(0.0, 0.5)`), so that runs repeat and a
    resumed run continues the same draws.
    """

    draw: Callable[..., float]
    """`draw(rng) -> duration`, or `draw(rng, group) -> duration` when `takes_group`."""
    takes_group: bool = False
    """Pass the group to `draw` (a duration that depends on the sample)."""
    name: str | None = None
    """How `describe()` names the distribution (default: `draw.__qualname__`)."""

    def __post_init__(self) -> None:
        if not callable(self.draw):
            raise ValueError(
                f"SampledTime.draw must be callable, got {self.draw!r}; "
                "pass e.g. SampledTime(lambda rng: rng.exponential(1.0))"
            )

    def __call__(self, group: Any, rng: np.random.Generator) -> float:
        return self.draw(rng, group) if self.takes_group else self.draw(rng)

    def describe(self) -> dict[str, Any]:
        name = self.name or getattr(self.draw, "__qualname__", repr(self.draw))
        return {"model": "sampled", "draw": name, "takes_group": self.takes_group}


class WorkerSchedule(Generic[T]):
    """Rollout workers whose groups carry their own delays (§2.2, Figure 1).

    Each item is ONE group: `generate(version)` returns a group of `G` responses sampled from the
    policy of `version` (the learner's current one), and each consumed `ScheduledBatch` carries
    that group's `behavior_version`, `launch_time`, `ready_time` and `consumed_version`, so one
    learner update can mix several lags.

    Event rules (a discrete-event simulation; the clock is in the unit of the generation-time
    model and of `update_time`):

    1. At the first call all `W` workers launch, in worker order (launch indices `0..W-1`), from
       the policy of the version passed (the initial policy).
    2. A group launched at time `s` completes at `s + d`, `d = generation_time(group, rng)`. It
       is deposited in the buffer with its behavior version, and its worker at once launches a
       new group from the snapshot current at that moment: the learner's latest version.
    3. Admission: the learner at version `n` takes the `B` earliest completed groups (earliest
       completion time first, ties by launch order: a FIFO buffer). If fewer than `B` have
       completed it waits, processing completions in that order (each worker relaunching from
       version `n`) until `B` are deposited; it consumes at the instant of the `B`-th deposit.
       Events at one instant are processed in launch order, and the learner's consumption comes
       right after the `B`-th deposit: a group that completes at that same instant but later in
       launch order is deposited after it (and, with zero update time, its worker relaunches from
       version `n + 1`).
    4. The learner's own time: its update takes `update_time` (0 by default: instantaneous)
       after the consumption; it publishes `n + 1` at the end. Groups that complete during the
       update are deposited and their workers relaunch from version `n` (still the latest
       published); completions at the publication instant or later see `n + 1`.

    How this reads §2.2 / Figure 1: workers generate continuously while a single learner updates;
    each group is generated under the snapshot held at launch and deposited with its version once
    scored (the duration includes scoring); the learner takes `B` completed groups, updates at
    `theta_n` and publishes `theta_(n+1)` while generation continues. Nothing is filtered by
    completion time (no timeouts or max-delay gating, which §2.2 excludes): every launched group
    is consumed, in completion order. **Our interpretations** (not fixed by the paper): the
    admission rule (the paper allows any that depends on launch and completion times), the tie
    order, weight synchronisation without delay (a relaunch uses the latest published version),
    a learner that waits for a full batch, and the generation-time models.

    Lags (derivation for the tests and the README): lag `= consumed_version -
    behavior_version` counts the learner steps `m` with `behavior_version <= m <
    consumed_version`, i.e. the steps at whose end the group was launched and not yet consumed.
    Summing over groups, each step `m` contributes the number `U_m` of groups launched and not
    consumed at its end: with zero update time `U_m = W` (every worker holds one group, the buffer
    is empty), so over `N` steps `sum(lags) = N W - sum over the groups still pending of
    (N - behavior_version)`, and the steady-state mean lag is exactly `W / B` **for every
    generation-time model** (a discrete Little's law): the model shapes the distribution (spread,
    `tau4`, the coupling with length), not the mean. With constant times completion order is
    launch order, so group `k >= W` (launched during step `floor((k - W) / B)`, consumed at step
    `floor(k / B)`) has lag `floor(k / B) - floor((k - W) / B)`: `floor(W / B)` or
    `ceil(W / B)`. With `update_time > 0`, `U_m = W + ` the groups left in the buffer after step
    `m`, and the mean lag is `mean(U_m) / B`; if the workers produce faster than the learner
    consumes (`W / mean duration > B / update_time`) the buffer and the lags grow without bound,
    as in a real pipeline without back-pressure.

    Args:
        num_workers: `W` rollout workers, each with exactly one group in flight.
        groups_per_update: `B` groups per learner update (8 prompts per mini-batch in B.1).
        generation_time: a `GenerationTime` model (`ConstantTime`, `LengthProportionalTime`,
            `ExponentialTime`, `SampledTime`); default `ConstantTime(1.0)`.
        update_time: clock time of one learner update (0: instantaneous).
        seed: seed of the schedule's own `numpy.random.Generator` (what the model draws from);
            its state is part of `state_dict`.
    """

    def __init__(
        self,
        *,
        num_workers: int,
        groups_per_update: int,
        generation_time: GenerationTime | None = None,
        update_time: float = 0.0,
        seed: int = 0,
    ) -> None:
        if not _is_int_at_least(num_workers, 1):
            raise ValueError(
                f"num_workers must be an integer >= 1, got {num_workers!r}; "
                "pass the number of rollout workers W, e.g. num_workers=16"
            )
        if not _is_int_at_least(groups_per_update, 1):
            raise ValueError(
                f"groups_per_update must be an integer >= 1, got {groups_per_update!r}; "
                "pass the groups B of one learner update, e.g. groups_per_update=8"
            )
        if not _is_finite_at_least(update_time, 0.0):
            raise ValueError(
                f"update_time must be a finite number >= 0, got {update_time!r}; "
                "pass 0 for an instantaneous learner or its duration in clock units"
            )
        if not _is_int_at_least(seed, 0):
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}; pass e.g. seed=0")
        generation_time = ConstantTime() if generation_time is None else generation_time
        if not (callable(generation_time) and hasattr(generation_time, "describe")):
            raise ValueError(
                f"generation_time must be a GenerationTime model, got {generation_time!r}; pass "
                "ConstantTime(...), LengthProportionalTime(...), ExponentialTime(...) or "
                "SampledTime(...)"
            )
        self.num_workers = int(num_workers)
        self.groups_per_update = int(groups_per_update)
        self.generation_time = generation_time
        self.update_time = float(update_time)
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.clock = 0.0
        self.launches = 0
        self.started = False
        self.last_version: int | None = None
        # generating, ordered by (ready_time, launch_index); exactly W once started
        self.running: list[tuple[float, int, ScheduledBatch[T]]] = []
        # completed and not consumed, in deposit order (= (ready_time, launch_index) order)
        self.buffer: deque[ScheduledBatch[T]] = deque()
        self.realised_lags: list[int] = []

    def _duration(self, group: T) -> float:
        value = self.generation_time(group, self.rng)
        if not _is_finite_at_least(value, 0.0):
            raise ValueError(
                f"generation time {self.generation_time.describe()} gave {value!r} for a group; "
                "durations must be finite and >= 0: fix length_of or the draw"
            )
        if float(value) == 0.0 and self.update_time > 0:
            raise ValueError(
                f"generation time {self.generation_time.describe()} gave 0 with update_time="
                f"{self.update_time}: a zero-time group would be relaunched without end during "
                "the learner's update; make durations > 0 or set update_time=0"
            )
        return float(value)

    def _launch(self, version: int, generate: Callable[[int], T]) -> None:
        group = generate(version)
        ready_time = self.clock + self._duration(group)
        entry = ScheduledBatch(group, version, self.launches, self.clock, ready_time)
        heapq.heappush(self.running, (entry.ready_time, entry.launch_index, entry))
        self.launches += 1

    def _complete_earliest(self, version: int, generate: Callable[[int], T]) -> None:
        """Deposit the earliest-completing group; its worker relaunches from `version`."""
        ready_time, _, entry = heapq.heappop(self.running)
        self.clock = max(self.clock, ready_time)
        self.buffer.append(entry)
        self._launch(version, generate)

    def next(self, version: int, generate: Callable[[int], T]) -> list[ScheduledBatch[T]]:
        """The `B` groups the learner at `version` consumes, in completion order.

        `generate(version)` must return ONE group from the current policy; it is called once per
        launch (`W` times at the first call, then once per deposit).
        """
        if self.last_version is not None and version < self.last_version:
            raise ValueError(
                f"version {version} is below the previous call's {self.last_version}; the "
                "learner's version must not decrease (resume with load_state_dict instead)"
            )
        self.last_version = version
        if not self.started:
            for _ in range(self.num_workers):
                self._launch(version, generate)
            self.started = True
        while len(self.buffer) < self.groups_per_update:
            self._complete_earliest(version, generate)
        consumed = [self.buffer.popleft() for _ in range(self.groups_per_update)]
        for entry in consumed:
            entry.consumed_version = version
            self.realised_lags.append(entry.lag)
        if self.update_time > 0:
            published = self.clock + self.update_time
            while self.running[0][0] < published:
                self._complete_earliest(version, generate)
            self.clock = published
        return consumed

    @property
    def pending(self) -> int:
        """Groups launched and not yet consumed (`W` generating plus those in the buffer)."""
        return len(self.running) + len(self.buffer)

    @property
    def lags_per_batch(self) -> list[list[int]]:
        """The lags of each learner update's `B` groups, one list per update."""
        return _chunks(self.realised_lags, self.groups_per_update)

    def _config(self) -> dict[str, Any]:
        return {
            "num_workers": self.num_workers,
            "groups_per_update": self.groups_per_update,
            "update_time": self.update_time,
            "generation_time": self.generation_time.describe(),
            "seed": self.seed,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume, generator state included.

        `in_flight` lists every group launched and not consumed, as stored: first the `buffered`
        ones (completed, in deposit order), then the generating ones by `(ready_time,
        launch_index)`. All values but the stored groups are JSON-serialisable.
        """
        running = [entry for _, _, entry in sorted(self.running, key=lambda x: x[:2])]
        return {
            "kind": "workers",
            **self._config(),
            "rng": self.rng.bit_generator.state,
            "clock": self.clock,
            "launches": self.launches,
            "started": self.started,
            "last_version": self.last_version,
            "in_flight": [_entry_state(e) for e in [*self.buffer, *running]],
            "buffered": len(self.buffer),
            "realised_lags": list(self.realised_lags),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        config = {k: state.get(k) for k in self._config()}
        if state.get("kind") != "workers" or config != self._config():
            raise ValueError(
                f"checkpointed schedule {state.get('kind')} ({config}) does not match this "
                f"WorkerSchedule({self._config()}); build the schedule with the checkpoint's "
                "settings"
            )
        self.rng.bit_generator.state = state["rng"]
        self.clock = state["clock"]
        self.launches = state["launches"]
        self.started = state["started"]
        self.last_version = state["last_version"]
        entries = [_entry_from_state(e) for e in state["in_flight"]]
        buffered = state["buffered"]
        self.buffer = deque(entries[:buffered])
        self.running = [(e.ready_time, e.launch_index, e) for e in entries[buffered:]]
        heapq.heapify(self.running)
        self.realised_lags = list(state["realised_lags"])


# -- lag statistics --------------------------------------------------------------------------


def lag_statistics(lags_per_batch: Sequence[Sequence[int]]) -> dict[str, float]:
    """Summary of realised lags, given per learner update (`[N][B_n]`, e.g. `lags_per_batch`).

    Over all `sum_n B_n` groups (the paper's averages over groups, §4.1):

    - `mean`: mean lag; `tau2`: mean squared lag; `tau4`: mean fourth power, the empirical
      `tau4_bar = (1/(N B)) sum_n sum_b (tau_n^(b))^4` of Theorem 1 (one run, not an
      expectation); `max`, `min`: extreme lags.

    Within-batch spread (0 for the fixed-delay and length-coupled schedules, whose batches share
    one lag):

    - `spread_std`: mean over batches of the population std of the batch's lags;
    - `spread_range`: mean over batches of `max - min`;
    - `mixed_fraction`: fraction of batches holding more than one lag.

    Plus `num_batches` and `num_groups`. Slice the input to leave out the warm-up (its first
    groups come from the initial policy).
    """
    if len(lags_per_batch) == 0 or any(len(batch) == 0 for batch in lags_per_batch):
        raise ValueError(
            "lag_statistics needs at least one batch and no empty batch, got "
            f"{len(lags_per_batch)} batches with sizes {[len(b) for b in lags_per_batch][:8]}; "
            "pass schedule.lags_per_batch after at least one step"
        )
    batches = [np.asarray(batch, dtype=np.float64) for batch in lags_per_batch]
    lags = np.concatenate(batches)
    return {
        "mean": float(lags.mean()),
        "tau2": float((lags**2).mean()),
        "tau4": float((lags**4).mean()),
        "max": float(lags.max()),
        "min": float(lags.min()),
        "spread_std": float(np.mean([batch.std() for batch in batches])),
        "spread_range": float(np.mean([batch.max() - batch.min() for batch in batches])),
        "mixed_fraction": float(np.mean([batch.max() > batch.min() for batch in batches])),
        "num_batches": float(len(batches)),
        "num_groups": float(lags.size),
    }


# -- names and construction ------------------------------------------------------------------

SCHEDULE_NAMES: tuple[str, ...] = ("fixed_delay", "length_coupled", "workers")
"""The three schedules, in the vocabulary shared by both learners' configs."""

GENERATION_TIME_NAMES: tuple[str, ...] = (
    "constant",
    "length_proportional",
    "exponential",
    "sampled",
)
"""Generation-time models of the `"workers"` schedule (`ScheduleConfig.generation_time`)."""

Schedule = FixedDelaySchedule | LengthCoupledSchedule | WorkerSchedule


@dataclass(frozen=True)
class ScheduleConfig:
    """Which staleness schedule, and its parameters (`make_schedule` builds it).

    Fields of the schedules not named are ignored (their defaults stay valid).
    """

    name: str = "fixed_delay"
    """One of `SCHEDULE_NAMES`."""
    delay: int = 0
    """fixed_delay: `D`, batches between generation and consumption ({0, 32, ..., 512}, B.1)."""
    lam: float = 28.0
    """length_coupled: `lambda` of `tau_ready = tau_launch + lam * L` (28, B.1)."""
    max_launches: int = 400
    """length_coupled: cap on launches per warm-up or refill (400, B.1)."""
    batches_per_update: int = 1
    """length_coupled: batches consumed per learner update."""
    length_unit: str = "caller-defined"
    """length_coupled, and workers with length_proportional: what one unit of `L` is."""
    num_workers: int = 16
    """workers: `W` rollout workers (ours; the paper does not give its number of workers)."""
    groups_per_update: int = 8
    """workers: `B` groups per learner update (8 prompts per mini-batch, B.1)."""
    generation_time: str = "constant"
    """workers: one of `GENERATION_TIME_NAMES`: "constant" (every group takes `time_scale`),
    "length_proportional" (`time_scale * length_of(group)`), "exponential" (mean
    `time_scale`) or "sampled" (`make_schedule`'s `draw_time(rng, group)`)."""
    time_scale: float = 1.0
    """workers: the constant duration, the rate per unit of `L`, or the exponential mean."""
    update_time: float = 0.0
    """workers: clock time of one learner update (0: instantaneous)."""
    seed: int = 0
    """workers: seed of the schedule's own generator (exponential and sampled times draw from
    it)."""

    def __post_init__(self) -> None:
        def bad(field_name: str, requirement: str, fix: str) -> ValueError:
            value = getattr(self, field_name)
            return ValueError(f"ScheduleConfig.{field_name}={value!r} {requirement}; {fix}")

        if self.name not in SCHEDULE_NAMES:
            raise bad("name", f"must be one of {SCHEDULE_NAMES}", "pick one of them")
        if not _is_int_at_least(self.delay, 0):
            raise bad("delay", "must be an integer >= 0", "e.g. delay=32")
        if not _is_finite_at_least(self.lam, 0.0):
            raise bad("lam", "must be a finite number >= 0", "B.1 uses lam=28")
        for name, example in (
            ("max_launches", "400 (B.1)"),
            ("batches_per_update", "1"),
            ("num_workers", "16"),
            ("groups_per_update", "8 (B.1)"),
        ):
            if not _is_int_at_least(getattr(self, name), 1):
                raise bad(name, "must be an integer >= 1", f"e.g. {name}={example}")
        if self.generation_time not in GENERATION_TIME_NAMES:
            raise bad(
                "generation_time", f"must be one of {GENERATION_TIME_NAMES}", "pick one of them"
            )
        if not _is_finite_at_least(self.time_scale, 0.0):
            raise bad("time_scale", "must be a finite number >= 0", "e.g. time_scale=1.0")
        if self.generation_time == "exponential" and self.time_scale == 0:
            raise bad("time_scale", "must be > 0 for exponential times", "e.g. time_scale=1.0")
        if not _is_finite_at_least(self.update_time, 0.0):
            raise bad("update_time", "must be a finite number >= 0", "0 for an instant learner")
        if not _is_int_at_least(self.seed, 0):
            raise bad("seed", "must be an integer >= 0", "e.g. seed=0")


def make_schedule(
    config: ScheduleConfig,
    *,
    length_of: Callable[[Any], float] | None = None,
    draw_time: Callable[[np.random.Generator, Any], float] | None = None,
) -> Schedule:
    """The schedule `config.name` names, built from `config`.

    Args:
        config: the schedule and its parameters.
        length_of: `L` of an item; needed by "length_coupled" (of a batch) and by "workers" with
            "length_proportional" times (of a group).
        draw_time: `draw_time(rng, group) -> duration`; needed by "workers" with "sampled" times.
    """
    if config.name == "fixed_delay":
        return FixedDelaySchedule(config.delay)
    if config.name == "length_coupled":
        needs_length = "schedule 'length_coupled'"
    elif config.generation_time == "length_proportional":
        needs_length = "generation_time 'length_proportional'"
    else:
        needs_length = ""
    if needs_length and length_of is None:
        raise ValueError(
            f"make_schedule: {needs_length} needs length_of (a callable giving L of an item), "
            "got None; pass length_of=..."
        )
    if config.name == "length_coupled":
        assert length_of is not None
        return LengthCoupledSchedule(
            length_of,
            lam=config.lam,
            batches_per_update=config.batches_per_update,
            max_launches=config.max_launches,
            length_unit=config.length_unit,
        )
    model: GenerationTime
    if config.generation_time == "constant":
        model = ConstantTime(config.time_scale)
    elif config.generation_time == "length_proportional":
        assert length_of is not None
        model = LengthProportionalTime(length_of, config.time_scale, config.length_unit)
    elif config.generation_time == "exponential":
        model = ExponentialTime(config.time_scale)
    else:
        if draw_time is None:
            raise ValueError(
                "make_schedule: generation_time 'sampled' needs draw_time (a callable "
                "draw_time(rng, group) -> duration), got None; pass draw_time=..."
            )
        model = SampledTime(draw_time, takes_group=True)
    return WorkerSchedule(
        num_workers=config.num_workers,
        groups_per_update=config.groups_per_update,
        generation_time=model,
        update_time=config.update_time,
        seed=config.seed,
    )
