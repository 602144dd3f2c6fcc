"""The two schedules of Appendix B.1, whose items are whole batches (one lag per batch).

- `FixedDelaySchedule(delay=D)`: a FIFO of `D` batches, filled from the initial policy. At every
  learner step a new batch from the current policy is appended and the oldest is consumed, so the
  lag is `n` during the fill (`n < D`) and exactly `D` afterwards (the steady state). Given the
  run's horizon (`horizon` batches), it launches only batches that some step consumes: the last
  `D` steps launch nothing, so a run of `N` steps generates `N` batches, not `N + D`.
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
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from gmc_grpo.defaults import PAPER_LAMBDA, PAPER_MAX_LAUNCHES
from gmc_grpo.staleness.base import Schedule, ScheduledBatch, entry_from_state, entry_state

T = TypeVar("T")


class FixedDelaySchedule(Schedule[T]):
    """FIFO queue of `delay` batches (Appendix B.1, "Controlled fixed delays").

    Args:
        delay: `D >= 0` batches between generation and consumption in steady state.
        horizon: batches the run consumes in all (None: unbounded). Consumption `c` takes launch
            `c`, and launch `c + D` is made at consumption `c`; with a horizon `H` it is made only
            when `c + D < H`, since no step would consume it. A resume with a longer horizon
            (`--extend-to`) finds the queue short of those batches and refills it from the
            current policy, as at the start: its next steps have lags `0, 1, ..., D` again.
    """

    item = "batch"

    def __init__(self, delay: int, *, horizon: int | None = None) -> None:
        super().__init__()
        if delay < 0:
            raise ValueError(f"delay D must be >= 0, got {delay}")
        if horizon is not None and horizon < 1:
            raise ValueError(f"horizon must be >= 1 batches or None, got {horizon}")
        self.delay = delay
        self.horizon = horizon
        self.queue: deque[ScheduledBatch[T]] = deque()
        self.launches = 0
        self.filled = False

    def _wanted(self) -> int:
        """Batches the queue holds when the next call consumes one: `D + 1`, fewer near the
        horizon (nothing is launched that no step consumes)."""
        wanted = self.delay + 1
        if self.horizon is not None:
            wanted = min(wanted, self.horizon - len(self.realised_lags))
        return wanted

    def _launch(self, version: int, generate: Callable[[int], T], time: float) -> None:
        entry = ScheduledBatch(generate(version), version, self.launches, time, time)
        self.queue.append(entry)
        self.launches += 1

    def next(self, version: int, generate: Callable[[int], T]) -> list[ScheduledBatch[T]]:
        """The batch the learner at `version` consumes (a one-element list).

        On the first call the queue is filled with `D` batches from the policy at `version`
        (the initial policy). Then a batch from the current policy is appended (unless no step
        before the horizon would consume it) and the oldest is consumed.
        """
        if self.horizon is not None and len(self.realised_lags) >= self.horizon:
            raise ValueError(
                f"FixedDelaySchedule: all {self.horizon} batches of the horizon are consumed"
            )
        for _ in range(self.launches_ahead()):
            self._launch(version, generate, float(version))
        self.filled = True
        return [self.consume(self.queue.popleft(), version)]

    def pending_entries(self) -> list[ScheduledBatch[T]]:
        return list(self.queue)

    def launches_ahead(self) -> int:
        """Exactly the launches of the next call: `D + 1` at the first (the fill and one batch),
        then 1, and 0 in the last `D` calls before the horizon."""
        return max(0, self._wanted() - len(self.queue))

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: the queued batches (as stored), counters and lags."""
        return {
            "kind": "fixed_delay",
            "delay": self.delay,
            "queue": [entry_state(e) for e in self.queue],
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
        self.queue = deque(entry_from_state(e) for e in state["queue"])
        self.launches = state["launches"]
        self.filled = state["filled"]
        self.realised_lags = list(state["realised_lags"])

    @property
    def lags_per_batch(self) -> list[list[int]]:
        """The lag of each learner update's batch, one single-element list per update.

        Every group of a batch shares its lag, so statistics over these lists equal those over
        groups (`lag_statistics`; batches of equal size).
        """
        return super().lags_per_batch


class LengthCoupledSchedule(Schedule[T]):
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

    item = "batch"

    def __init__(
        self,
        length_of: Callable[[T], float],
        *,
        lam: float = PAPER_LAMBDA,
        batches_per_update: int = 1,
        max_launches: int = PAPER_MAX_LAUNCHES,
        clock_per_launch: float = 1.0,
        length_unit: str = "caller-defined",
    ) -> None:
        super().__init__()
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
        self.items_per_update = batches_per_update
        self.max_launches = max_launches
        self.clock_per_launch = clock_per_launch
        self._length_unit = length_unit
        self.clock = 0.0
        self.launches = 0
        # in flight (launched, not consumed), ordered by (ready_time, launch_index)
        self.in_flight: list[tuple[float, int, ScheduledBatch[T]]] = []
        self.waits = 0  # times the cap was hit and the clock waited instead of launching
        self.launches_per_refill: list[int] = []

    @property
    def length_unit(self) -> str:
        """What one unit of `L` is (documentation; stored in `state_dict`)."""
        return self._length_unit

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
            consumed.append(self.consume(entry, version))
        return consumed

    def pending_entries(self) -> list[ScheduledBatch[T]]:
        """Batches launched and not yet consumed, by `(ready_time, launch_index)`."""
        return [entry for _, _, entry in sorted(self.in_flight, key=lambda x: x[:2])]

    def launches_ahead(self) -> int:
        """1 when no batch is visible (a refill launches at least one), else 0: how many more
        depends on the lengths of the batches still to come."""
        return 0 if self._visible() else 1

    @property
    def lags_per_batch(self) -> list[list[int]]:
        """Lags grouped by learner update: `batches_per_update` consumed batches per list.

        Every group of a consumed batch shares its lag, so statistics over these lists equal those
        over groups (`lag_statistics`; batches of equal size).
        """
        return super().lags_per_batch

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "length_coupled",
            "lam": self.lam,
            "length_unit": self.length_unit,
            "clock": self.clock,
            "launches": self.launches,
            "in_flight": [entry_state(e) for e in self.pending_entries()],
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
        entries = [entry_from_state(e) for e in state["in_flight"]]
        self.in_flight = [(e.ready_time, e.launch_index, e) for e in entries]
        heapq.heapify(self.in_flight)
        self.realised_lags = list(state["realised_lags"])
        self.waits = state["waits"]
        self.launches_per_refill = list(state["launches_per_refill"])
