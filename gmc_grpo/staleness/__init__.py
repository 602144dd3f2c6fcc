"""Staleness schedules shared by the toy learner and the LLM learner (`docs/schedules.md`).

A schedule decides which item the learner consumes at each step and which policy version
generated it. It is generic over what an item holds: the learner passes a `generate(version)`
callable that produces an item with the policy of that version (the current one), and gets back
`ScheduledBatch` records carrying the item, its behavior version and its realised lag.

Three schedules: two of Appendix B.1, and the per-group system of §2.2 that the theorems are
stated for (each module's docstring gives its rules):

| schedule         | class                   | module    | item  | lag                            |
|------------------|-------------------------|-----------|-------|--------------------------------|
| `fixed_delay`    | `FixedDelaySchedule`    | `batches` | batch | `n` during the fill, then `D`  |
| `length_coupled` | `LengthCoupledSchedule` | `batches` | batch | about `lam * L` (simulated)    |
| `workers`        | `WorkerSchedule`        | `workers` | group | mean `W / B`, mixed per batch  |

Every schedule derives from `Schedule` (`base`), which says what a schedule answers (its item
kind, the items pending, the launches ahead, each item's lag, the length unit), so no learner
tests a schedule's name or reads its internals. Every consumed item records its realised lag
(`realised_lags`); nothing is lost or duplicated. `lags_per_batch` groups them by learner update
and `lag_statistics` summarises them the same way for every schedule (mean, `tau2`, `tau4` as in
§4.1, max, within-batch spread).

The spec (`spec`): `ScheduleSettings` holds the schedule fields both track configs inherit (one
doc and one check each, `check_schedule_fields`); `ScheduleSpec` and its registry
(`register_schedule`, `get_schedule`, `schedule_names`; user modules in `GMC_GRPO_SCHEDULES`) say
what each schedule is; `make_schedule(settings, ScheduleContext(...))` builds one for both
learners.
"""

from gmc_grpo.staleness.base import (
    ITEM_KINDS,
    Schedule,
    ScheduledBatch,
    entry_from_state,
    entry_state,
    lag_statistics,
)
from gmc_grpo.staleness.batches import FixedDelaySchedule, LengthCoupledSchedule
from gmc_grpo.staleness.spec import (
    CONFIG_GENERATION_TIMES,
    GENERATION_TIME_NAMES,
    PAPER_SCHEDULES,
    PLUGINS_ENV,
    SCHEDULE_FIELDS,
    ScheduleContext,
    ScheduleSettings,
    ScheduleSpec,
    check_schedule_fields,
    generation_time_model,
    get_schedule,
    make_schedule,
    register_schedule,
    schedule_names,
    unregister_schedule,
)
from gmc_grpo.staleness.workers import (
    ConstantTime,
    ExponentialTime,
    GenerationTime,
    LengthProportionalTime,
    SampledTime,
    WorkerSchedule,
)

__all__ = [
    "CONFIG_GENERATION_TIMES",
    "GENERATION_TIME_NAMES",
    "ITEM_KINDS",
    "PAPER_SCHEDULES",
    "PLUGINS_ENV",
    "SCHEDULE_FIELDS",
    "ConstantTime",
    "ExponentialTime",
    "FixedDelaySchedule",
    "GenerationTime",
    "LengthCoupledSchedule",
    "LengthProportionalTime",
    "SampledTime",
    "Schedule",
    "ScheduleContext",
    "ScheduleSettings",
    "ScheduleSpec",
    "ScheduledBatch",
    "WorkerSchedule",
    "check_schedule_fields",
    "entry_from_state",
    "entry_state",
    "generation_time_model",
    "get_schedule",
    "lag_statistics",
    "make_schedule",
    "register_schedule",
    "schedule_names",
    "unregister_schedule",
]
