"""A user's own staleness schedule as one registry spec: "periodic sync".

Many asynchronous trainers refresh the rollout engine's weights only every few updates: at a
sync the engine generates the next `D + 1` batches from the snapshot it just received, and the
learner consumes them one per update while it moves on. The lags then cycle `0, 1, ..., D`
(mean `D / 2`, `tau4 = (1/(D + 1)) sum_k k^4`) instead of staying at `D` as in the FIFO of
`fixed_delay`. The schedule reads the shared field `delay` as `D` (so `--delay` sets it in both
tracks) and hands out whole batches.

Importing this module registers the schedule; then `schedule="periodic_sync"` works in the toy
learner and the LLM learner (`LLMTrainConfig.schedule`) without any other change. On the command
line, name the module in `GMC_GRPO_SCHEDULES`:

    GMC_GRPO_SCHEDULES=examples.periodic_sync gmc-grpo toy train --schedule periodic_sync --delay 3
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from gmc_grpo.staleness import (
    Schedule,
    ScheduleContext,
    ScheduledBatch,
    ScheduleSpec,
    entry_from_state,
    entry_state,
    register_schedule,
)

T = TypeVar("T")


class PeriodicSyncSchedule(Schedule[T]):
    """`period` batches from one snapshot, consumed one per update (lags `0 .. period - 1`)."""

    item = "batch"

    def __init__(self, period: int) -> None:
        super().__init__()
        if period < 1:
            raise ValueError(f"period must be >= 1, got {period}")
        self.period = period
        self.queue: deque[ScheduledBatch[T]] = deque()
        self.launches = 0

    def next(self, version: int, generate: Callable[[int], T]) -> list[ScheduledBatch[T]]:
        if not self.queue:  # a sync: the next `period` batches from the current policy
            for _ in range(self.period):
                batch = generate(version)
                self.queue.append(ScheduledBatch(batch, version, self.launches, version, version))
                self.launches += 1
        return [self.consume(self.queue.popleft(), version)]

    def pending_entries(self) -> list[ScheduledBatch[T]]:
        return list(self.queue)

    def launches_ahead(self) -> int:
        return 0 if self.queue else self.period

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "periodic_sync",
            "period": self.period,
            "queue": [entry_state(e) for e in self.queue],
            "launches": self.launches,
            "realised_lags": list(self.realised_lags),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != "periodic_sync" or state.get("period") != self.period:
            raise ValueError(f"checkpointed schedule {state.get('kind')} does not match this one")
        self.queue = deque(entry_from_state(e) for e in state["queue"])
        self.launches = state["launches"]
        self.realised_lags = list(state["realised_lags"])


def _build(settings: Any, context: ScheduleContext) -> PeriodicSyncSchedule[Any]:
    # `delay` counts learner updates; one batch covers `updates_per_batch` of them (LLM
    # `inner_steps`), so a sync generates `delay / updates_per_batch + 1` batches
    return PeriodicSyncSchedule(settings.delay // context.updates_per_batch + 1)


def _check(config: Any, updates_per_batch: int) -> tuple[str, str] | None:
    if config.delay % updates_per_batch:
        return ("delay", f"must be a multiple of inner_steps={updates_per_batch}")
    return None


PERIODIC_SYNC = register_schedule(
    ScheduleSpec(
        name="periodic_sync",
        label="periodic sync",
        source="docs/schedules.md example (weights synchronised every D + 1 updates)",
        item="batch",
        fields=("delay",),
        build=_build,
        check=_check,
    ),
    replace=True,  # importing twice is harmless
)
