"""The worker schedule of §2.2 and Figure 1, whose items are single groups with their own lags.

`WorkerSchedule(num_workers=W, groups_per_update=B, generation_time=...)`: `W` rollout workers
each generate one group at a time with the policy snapshot current at its launch; a group's
generation time follows a model (`ConstantTime`, `LengthProportionalTime`: long answers arrive
late, `ExponentialTime`, or `SampledTime`: a user's distribution); the learner takes the `B`
earliest completed groups, so one batch can mix several lags. Items are single groups here, each
with its own behavior version and lag. See the class docstring for the event rules and how they
read Figure 1.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from gmc_grpo.fieldchecks import is_finite_at_least, is_int_at_least
from gmc_grpo.staleness.base import Schedule, ScheduledBatch, entry_from_state, entry_state

T = TypeVar("T")


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
        if not is_finite_at_least(self.duration, 0.0):
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
        if not is_finite_at_least(self.rate, 0.0):
            raise ValueError(
                f"LengthProportionalTime.rate must be a finite number >= 0, got {self.rate!r}; "
                "pass clock units per unit of length_of(group), e.g. rate=0.01"
            )

    def __call__(self, group: T, rng: np.random.Generator) -> float:
        length = self.length_of(group)
        if not is_finite_at_least(length, 0.0):
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
        if not (is_finite_at_least(self.mean, 0.0) and self.mean > 0):
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


class WorkerSchedule(Schedule[T]):
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

    item = "group"

    def __init__(
        self,
        *,
        num_workers: int,
        groups_per_update: int,
        generation_time: GenerationTime | None = None,
        update_time: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not is_int_at_least(num_workers, 1):
            raise ValueError(
                f"num_workers must be an integer >= 1, got {num_workers!r}; "
                "pass the number of rollout workers W, e.g. num_workers=16"
            )
        if not is_int_at_least(groups_per_update, 1):
            raise ValueError(
                f"groups_per_update must be an integer >= 1, got {groups_per_update!r}; "
                "pass the groups B of one learner update, e.g. groups_per_update=8"
            )
        if not is_finite_at_least(update_time, 0.0):
            raise ValueError(
                f"update_time must be a finite number >= 0, got {update_time!r}; "
                "pass 0 for an instantaneous learner or its duration in clock units"
            )
        if not is_int_at_least(seed, 0):
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
        self.items_per_update = self.groups_per_update
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

    def _duration(self, group: T) -> float:
        value = self.generation_time(group, self.rng)
        if not is_finite_at_least(value, 0.0):
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
        consumed = [
            self.consume(self.buffer.popleft(), version) for _ in range(self.groups_per_update)
        ]
        if self.update_time > 0:
            published = self.clock + self.update_time
            while self.running[0][0] < published:
                self._complete_earliest(version, generate)
            self.clock = published
        return consumed

    def pending_entries(self) -> list[ScheduledBatch[T]]:
        """Groups launched and not yet consumed: the buffered ones (completed, in deposit order),
        then the `W` generating ones by `(ready_time, launch_index)`."""
        running = [entry for _, _, entry in sorted(self.running, key=lambda x: x[:2])]
        return [*self.buffer, *running]

    def launches_ahead(self) -> int:
        """`W` at the first call (every worker launches), plus one relaunch per group still
        missing from a full batch; completions during an update of `update_time > 0` come on
        top and cannot be known in advance."""
        return (0 if self.started else self.num_workers) + max(
            0, self.groups_per_update - len(self.buffer)
        )

    @property
    def length_unit(self) -> str | None:
        """The unit of `L` of a length-proportional generation time (None for the others)."""
        return self.generation_time.describe().get("length_unit")

    @property
    def lags_per_batch(self) -> list[list[int]]:
        """The lags of each learner update's `B` groups, one list per update."""
        return super().lags_per_batch

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
        return {
            "kind": "workers",
            **self._config(),
            "rng": self.rng.bit_generator.state,
            "clock": self.clock,
            "launches": self.launches,
            "started": self.started,
            "last_version": self.last_version,
            "in_flight": [entry_state(e) for e in self.pending_entries()],
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
        entries = [entry_from_state(e) for e in state["in_flight"]]
        buffered = state["buffered"]
        self.buffer = deque(entries[:buffered])
        self.running = [(e.ready_time, e.launch_index, e) for e in entries[buffered:]]
        heapq.heapify(self.running)
        self.realised_lags = list(state["realised_lags"])
