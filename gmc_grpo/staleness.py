"""Staleness schedules shared by the toy learner and the LLM learner.

A schedule decides which batch the learner consumes at each step and which policy version
generated it. It is generic over what a batch holds: the learner passes a `generate(version)`
callable that produces a batch with the policy of that version (the current one), and gets back
`ScheduledBatch` records carrying the batch, its behavior version and its realised lag.

Two schedules (Appendix B.1):

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

Every consumed batch records its realised lag (`realised_lags`); nothing is lost or duplicated.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# The schedule names every config accepts (`schedule = ...`), one place for both learners.
SCHEDULE_NAMES: tuple[str, ...] = ("fixed_delay", "length_coupled")


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
