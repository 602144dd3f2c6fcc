"""The schedule spec: one set of schedule fields, one check, one registry, one factory.

- `ScheduleSettings`: the schedule fields every training config shares, each documented and
  checked once (`check_schedule_fields`). `ToyTrainConfig` and `LLMTrainConfig` inherit them, as they
  inherit the method constants of `gmc_grpo.methods.MethodSettings`, so one name means one thing
  in both tracks.
- `ScheduleContext`: what a learner supplies besides the config (the batch size `B`, the updates
  per rollout batch, how to measure an item's length and in what unit, the schedule's seed).
- `ScheduleSpec`: everything the learners need to know about one schedule: what its items are,
  which fields it reads, its cross-field rules and how to build it. The registry
  (`register_schedule`, `get_schedule`, `schedule_names`) holds the three built-in specs and any a
  user registers; for the command line, name the module that registers one in the environment
  variable `GMC_GRPO_SCHEDULES` (comma-separated modules, imported on the first look-up), as
  `GMC_GRPO_METHODS` does for methods.
- `make_schedule(settings, context)`: the one factory both trainers build through.

| name             | item    | fields it reads                                      | source        |
|------------------|---------|------------------------------------------------------|---------------|
| `fixed_delay`    | batch   | `delay`                                              | B.1           |
| `length_coupled` | batch   | `lam`, `max_launches` (+ a length)                   | B.1; Table 1  |
| `workers`        | group   | `num_workers`, `generation_time`, `time_scale`,      | §2.2, Fig. 1  |
|                  |         | `update_time` (+ a length for length-proportional)   | (ours: W)     |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from gmc_grpo.config_reading import check_choice, config_error
from gmc_grpo.defaults import (
    DEFAULT_NUM_WORKERS,
    PAPER_GROUPS_PER_BATCH,
    PAPER_LAMBDA,
    PAPER_MAX_LAUNCHES,
)
from gmc_grpo.fieldchecks import check_limited, is_finite_at_least, is_int_at_least
from gmc_grpo.registry import Registry
from gmc_grpo.staleness.base import ITEM_KINDS, Schedule
from gmc_grpo.staleness.batches import FixedDelaySchedule, LengthCoupledSchedule
from gmc_grpo.staleness.workers import (
    ConstantTime,
    ExponentialTime,
    GenerationTime,
    LengthProportionalTime,
    SampledTime,
    WorkerSchedule,
)

PLUGINS_ENV = "GMC_GRPO_SCHEDULES"

GENERATION_TIME_NAMES: tuple[str, ...] = (
    "constant",
    "length_proportional",
    "exponential",
    "sampled",
)
"""Generation-time models of the `"workers"` schedule (`ScheduleSettings.generation_time`)."""
CONFIG_GENERATION_TIMES: tuple[str, ...] = GENERATION_TIME_NAMES[:-1]
"""The ones a config file or a flag can name: "sampled" takes a Python callable
(`ScheduleContext.draw_time`), the core API only."""


# ----------------------------------------------------------------------------------------------
# The fields
# ----------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class ScheduleSettings:
    """The staleness schedule and its parameters, under the names every config uses.

    The training configs inherit these fields (`toy_mdps.train.config.ToyTrainConfig`,
    `llm_runs.config.LLMTrainConfig`), so each is declared, documented and checked once
    (`check_schedule_fields`); a schedule reads the fields its spec names (`ScheduleSpec.fields`)
    and ignores the others (their defaults stay valid).
    """

    schedule: str = "fixed_delay"
    """a registered schedule (`schedule_names()`): "fixed_delay" (FIFO of `delay` batches from
    the initial policy, B.1), "length_coupled" (`tau_ready = tau_launch + lam * L`, B.1) or
    "workers" (`num_workers` rollout workers, each generating one group at a time with the
    snapshot current at its launch; each update takes the `B` earliest completed groups, so a
    batch mixes lags: §2.2, Figure 1), or your own (`docs/schedules.md`)"""
    delay: int = 0
    """fixed_delay: `D`, in learner updates between a batch's policy and its first use
    ({0, 32, 64, 128, 256, 512}, B.1); smaller than `total_steps`. With `inner_steps > 1` (LLM)
    a rollout batch's later minibatches are used at `D + 1 ... D + inner_steps - 1`, the FIFO
    holds `D / inner_steps` batches and `D` must be a multiple of `inner_steps`. Must be 0 for a
    schedule that does not read it (its lags are simulated)"""
    lam: float = PAPER_LAMBDA
    """length_coupled: `lambda` of `tau_ready = tau_launch + lam * L`, in launches per unit of
    `L` (28, B.1). `L` is the batch's mean response length in the track's unit: tokens in the
    toy learner (whose default is 4: a mean lag of about 15 steps on the `K = 4, T = 5` MDP),
    `length_unit_tokens` tokens in the LLM learner"""
    max_launches: int = PAPER_MAX_LAUNCHES
    """length_coupled: cap on launches per warm-up or refill (400, B.1)"""
    num_workers: int = DEFAULT_NUM_WORKERS
    """workers: `W` rollout workers (ours; the paper does not give its number); with an
    instantaneous learner the steady-state mean lag is `W / B` whatever the generation time"""
    generation_time: str = "constant"
    """workers: how long a group takes, one of `GENERATION_TIME_NAMES`: "constant" (every group
    takes `time_scale`), "length_proportional" (`time_scale * L`, `L` the group's mean response
    length in the track's unit: long answers arrive late), "exponential" (mean `time_scale`,
    independent of the group) or "sampled" (a Python callable, `ScheduleContext.draw_time`: the
    core API only)"""
    time_scale: float = 1.0
    """workers: the constant duration, the clock time per unit of `L`, or the exponential mean
    (clock units; > 0 for exponential times and whenever `update_time > 0`)"""
    update_time: float = 0.0
    """workers: clock time of one learner update (0: instantaneous)"""

    def __post_init__(self) -> None:
        check_schedule_fields(self)

    @classmethod
    def of(cls, config: Any) -> ScheduleSettings:
        """A standalone copy of the schedule fields a config holds (fields of the same name)."""
        return cls(
            **{f.name: getattr(config, f.name) for f in fields(cls) if hasattr(config, f.name)}
        )


SCHEDULE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ScheduleSettings))
"""The names of the shared schedule fields (`ScheduleSettings`)."""


@dataclass(frozen=True)
class ScheduleContext:
    """What a learner supplies to build its schedule besides the config's schedule fields.

    groups_per_batch: `B`, the groups of one rollout batch (the toy and LLM `num_groups`); the
        worker schedule takes this many completed groups per update.
    updates_per_batch: optimizer updates per rollout batch (the LLM's `inner_steps`; 1 in the
        toy learner); `delay` counts updates, the FIFO holds batches.
    length_of: `L` of an item (a batch, or one group), finite and `>= 0`; needed by a schedule
        that reads lengths (length-coupled; workers with length-proportional times).
    length_unit: what one unit of `L` is (stored in the schedule's state and compared on
        resume), e.g. "100 tokens of mean response length".
    seed: seed of the schedule's own `numpy.random.Generator` (random generation times).
    draw_time: `draw_time(rng, group) -> duration` of the "sampled" generation time.
    total_updates: the learner updates the run makes (its horizon), or None (unbounded). A
        schedule that knows which launch each update consumes launches nothing that no update of
        the run consumes: the fixed delay skips its last `D` batches, so a run of `N` updates
        generates exactly `N` batches. The length-coupled and worker schedules cannot know it
        (a launch's ready time depends on what it generates) and ignore it.
    """

    groups_per_batch: int = PAPER_GROUPS_PER_BATCH
    updates_per_batch: int = 1
    length_of: Callable[[Any], float] | None = None
    length_unit: str = "caller-defined"
    seed: int = 0
    draw_time: Callable[[np.random.Generator, Any], float] | None = None
    total_updates: int | None = None

    def __post_init__(self) -> None:
        for name in ("groups_per_batch", "updates_per_batch"):
            if not is_int_at_least(getattr(self, name), 1):
                raise config_error(self, name, "must be an integer >= 1")
        if self.total_updates is not None and not is_int_at_least(self.total_updates, 1):
            raise config_error(self, "total_updates", "must be an integer >= 1 or None")
        if not is_int_at_least(self.seed, 0):
            raise config_error(self, "seed", "must be an integer >= 0 (e.g. seed=0)")

    def require_length_of(self, needed_by: str) -> Callable[[Any], float]:
        """`length_of`, or a ValueError saying what needs it."""
        if self.length_of is None:
            raise ValueError(
                f"make_schedule: {needed_by} needs length_of (a callable giving L of an item), "
                "got None; pass ScheduleContext(length_of=...)"
            )
        return self.length_of


def check_schedule_fields(
    config: Any, *, updates_per_batch: int = 1, accepts_callables: bool = True
) -> None:
    """Check the schedule fields of `config` (a `ScheduleSettings` or a config inheriting it),
    then the chosen schedule's own rules (`ScheduleSpec.check`).

    updates_per_batch: the config's optimizer updates per rollout batch (LLM: `inner_steps`).
    accepts_callables: False for a config read from a file or flags, which cannot name the
        "sampled" generation time (it needs a Python callable).
    Raises `ValueError("<Class>.<field>=<value>: <why>")` for the first bad field.
    """

    def bad(name: str, why: str) -> ValueError:
        return config_error(config, name, why)

    check_choice(config, "schedule", schedule_names())
    if not is_int_at_least(config.delay, 0):
        raise bad("delay", "must be an integer >= 0 (e.g. delay=32)")
    if not is_finite_at_least(config.lam, 0.0):
        raise bad("lam", "must be a finite number >= 0 (B.1 uses lam=28)")
    if not is_int_at_least(config.max_launches, 1):
        raise bad("max_launches", "must be an integer >= 1 (e.g. max_launches=400, B.1)")
    check_limited(config, "num_workers")
    times = GENERATION_TIME_NAMES if accepts_callables else CONFIG_GENERATION_TIMES
    check_choice(config, "generation_time", times)
    if not is_finite_at_least(config.time_scale, 0.0):
        raise bad("time_scale", "must be a finite number >= 0 (e.g. time_scale=1.0)")
    if config.generation_time == "exponential" and config.time_scale == 0:
        raise bad("time_scale", "must be > 0 for exponential generation times (the mean)")
    if not is_finite_at_least(config.update_time, 0.0):
        raise bad("update_time", "must be a finite number >= 0 (0: an instantaneous learner)")
    if config.update_time > 0 and config.time_scale == 0:
        raise bad(
            "time_scale",
            "must be > 0 when update_time > 0 (zero-time groups would be relaunched without end "
            "during an update)",
        )
    spec = get_schedule(config.schedule)
    if config.delay and "delay" not in spec.fields:
        raise bad("delay", f"must be 0 with schedule {spec.name!r} (it does not read a delay)")
    if spec.check is not None:
        problem = spec.check(config, updates_per_batch)
        if problem is not None:
            raise bad(*problem)


# ----------------------------------------------------------------------------------------------
# The spec and the registry
# ----------------------------------------------------------------------------------------------

# `(config, updates_per_batch) -> (field, why)` of the first broken rule, or None
ScheduleCheck = Callable[[Any, int], "tuple[str, str] | None"]


def _delay_label(settings: Any) -> str:
    return f"D{settings.delay}"


def _no_known_lag(settings: Any) -> int | None:
    return None


@dataclass(frozen=True)
class ScheduleSpec:
    """Everything the learners and the configs need to know about one schedule."""

    name: str
    """the config value (`schedule="fixed_delay"`)"""
    label: str
    """display name in figures and reports"""
    source: str
    """where its definition comes from (equation or paper), for docs and reports"""
    item: str
    """what one launch produces (`ITEM_KINDS`): "batch" or "group" (each group with its own
    lag: one update then mixes lags); the built schedule's `item` must agree"""
    fields: tuple[str, ...]
    """the `ScheduleSettings` fields it reads (the others keep their defaults; a nonzero `delay`
    is refused when it does not read it)"""
    build: Callable[[Any, ScheduleContext], Schedule[Any]]
    """`(settings, context) -> schedule`"""
    check: ScheduleCheck | None = None
    """its cross-field rules (`check_schedule_fields` calls it after the field checks)"""
    run_label: Callable[[Any], str] = _delay_label
    """`settings -> str` naming a run's default folder, e.g. "D32" or "W16_exponential\""""
    largest_lag: Callable[[Any], int | None] = _no_known_lag
    """`settings -> int | None`: the largest lag in learner updates (the first minibatch of a
    batch) that the settings fix before the run, or None when only the run decides it (a
    length-coupled or worker schedule); what a consumer sizes its memory by (`llm_runs.bound_tracking`)"""

    @property
    def mixes_lags(self) -> bool:
        """One update can hold groups of different lags (items are groups)."""
        return self.item == "group"

    def setting(self, config: Any, name: str) -> Any:
        """`config.<name>` when this schedule reads that field, else None (for result tables)."""
        return getattr(config, name) if name in self.fields else None


def _check_fixed_delay(config: Any, updates_per_batch: int) -> tuple[str, str] | None:
    if config.delay % updates_per_batch:
        return (
            "delay",
            f"must be a multiple of inner_steps={updates_per_batch} (it counts learner updates and "
            "the FIFO holds whole rollout batches of inner_steps updates each)",
        )
    total = getattr(config, "total_steps", None)
    if total is not None and config.delay and config.delay >= total:
        return (
            "delay",
            f"must be smaller than total_steps={total}: with D >= total_steps every update "
            "consumes a batch of the initial policy (lower the delay or raise total_steps)",
        )
    return None


def _check_workers(config: Any, updates_per_batch: int) -> tuple[str, str] | None:
    if updates_per_batch != 1:
        return (
            "inner_steps",
            "must be 1 with schedule 'workers' (each update takes the num_groups earliest "
            "completed groups)",
        )
    return None


def _build_fixed_delay(settings: Any, context: ScheduleContext) -> FixedDelaySchedule[Any]:
    # `delay` counts learner updates; the FIFO holds rollout batches of `updates_per_batch`
    # updates each (the check makes `delay` a multiple of it), and so does the horizon
    per = context.updates_per_batch
    horizon = None if context.total_updates is None else -(-context.total_updates // per)
    return FixedDelaySchedule(settings.delay // per, horizon=horizon)


def _build_length_coupled(settings: Any, context: ScheduleContext) -> LengthCoupledSchedule[Any]:
    return LengthCoupledSchedule(
        context.require_length_of("schedule 'length_coupled'"),
        lam=settings.lam,
        max_launches=settings.max_launches,
        length_unit=context.length_unit,
    )


def generation_time_model(settings: Any, context: ScheduleContext) -> GenerationTime:
    """The generation-time model `settings.generation_time` names, with `time_scale`."""
    name = settings.generation_time
    if name == "constant":
        return ConstantTime(settings.time_scale)
    if name == "length_proportional":
        length_of = context.require_length_of("generation_time 'length_proportional'")
        return LengthProportionalTime(length_of, settings.time_scale, context.length_unit)
    if name == "exponential":
        return ExponentialTime(settings.time_scale)
    if context.draw_time is None:
        raise ValueError(
            "make_schedule: generation_time 'sampled' needs draw_time (a callable "
            "draw_time(rng, group) -> duration), got None; pass ScheduleContext(draw_time=...)"
        )
    return SampledTime(context.draw_time, takes_group=True)


def _build_workers(settings: Any, context: ScheduleContext) -> WorkerSchedule[Any]:
    return WorkerSchedule(
        num_workers=settings.num_workers,
        groups_per_update=context.groups_per_batch,
        generation_time=generation_time_model(settings, context),
        update_time=settings.update_time,
        seed=context.seed,
    )


def _workers_label(settings: Any) -> str:
    return f"W{settings.num_workers}_{settings.generation_time}"


PAPER_SCHEDULES: tuple[ScheduleSpec, ...] = (
    ScheduleSpec(
        name="fixed_delay",
        label="fixed delay",
        source="Appendix B.1 (controlled fixed delays)",
        item="batch",
        fields=("delay",),
        build=_build_fixed_delay,
        check=_check_fixed_delay,
        largest_lag=lambda settings: int(settings.delay),
    ),
    ScheduleSpec(
        name="length_coupled",
        label="length-coupled",
        source="Appendix B.1 (simulated asynchrony, Table 1); the clock unit is ours",
        item="batch",
        fields=("lam", "max_launches"),
        build=_build_length_coupled,
    ),
    ScheduleSpec(
        name="workers",
        label="rollout workers",
        source="§2.2 and Figure 1 (the number of workers and the time models are ours)",
        item="group",
        fields=("num_workers", "generation_time", "time_scale", "update_time"),
        build=_build_workers,
        check=_check_workers,
        run_label=_workers_label,
    ),
)


def check_spec(spec: ScheduleSpec) -> None:
    """Raise `ValueError` naming the field when a spec cannot run (the registry checks the
    name)."""
    if spec.item not in ITEM_KINDS:
        raise ValueError(f"ScheduleSpec.item={spec.item!r} of {spec.name!r}: one of {ITEM_KINDS}")
    unknown = [name for name in spec.fields if name not in SCHEDULE_FIELDS]
    if unknown:
        raise ValueError(
            f"ScheduleSpec.fields of {spec.name!r} names {unknown}, not schedule fields; "
            f"choose from {SCHEDULE_FIELDS}"
        )
    if not callable(spec.build):
        raise ValueError(f"ScheduleSpec.build of {spec.name!r} must be callable")


_SCHEDULES: Registry[ScheduleSpec] = Registry(
    "schedule",
    PAPER_SCHEDULES,
    PLUGINS_ENV,
    check_spec,
    register_hint="register your own with gmc_grpo.staleness.register_schedule",
)


def register_schedule(spec: ScheduleSpec, *, replace: bool = False) -> ScheduleSpec:
    """Add `spec` to the registry (every config and learner then knows it).

    `replace=True` overwrites a spec of the same name; otherwise a taken name is an error.
    """
    return _SCHEDULES.register(spec, replace=replace)


def unregister_schedule(name: str) -> None:
    """Remove a user's schedule (the paper's schedules cannot be removed)."""
    _SCHEDULES.unregister(name)


def schedule_names() -> tuple[str, ...]:
    """Every registered schedule, the paper's first."""
    return _SCHEDULES.names()


def get_schedule(name: str) -> ScheduleSpec:
    """The spec of `name`; an unknown name raises `ValueError` listing the registered ones."""
    return _SCHEDULES.get(name)


def make_schedule(
    settings: ScheduleSettings, context: ScheduleContext | None = None
) -> Schedule[Any]:
    """The schedule `settings.schedule` names, built from `settings` (the schedule fields alone:
    a trainer hands `ScheduleSettings.of(config)`, never its whole config) and the learner's
    `context`."""
    if type(settings) is not ScheduleSettings:
        raise TypeError(
            f"make_schedule takes a ScheduleSettings (`ScheduleSettings.of(config)`: the schedule "
            f"fields alone), got a {type(settings).__name__}"
        )
    spec = get_schedule(settings.schedule)
    schedule = spec.build(settings, context or ScheduleContext())
    if schedule.item != spec.item:
        raise ValueError(
            f"schedule {spec.name!r} built a {type(schedule).__name__} whose item is "
            f"{schedule.item!r}, but its spec says {spec.item!r}: make them agree"
        )
    return schedule
