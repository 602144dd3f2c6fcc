"""The configs of `gmc-grpo toy train`: one run (`ToyTrainConfig`) and a grid of runs
(`ExperimentConfig`, the files `toy_mdps/configs/train_*.json`)."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gmc_grpo.config_reading import (
    check_choice,
    check_field_names,
    config_error,
    dataclass_from_dict,
)
from gmc_grpo.defaults import PAPER_GROUPS_PER_BATCH
from gmc_grpo.fieldchecks import check_limited, check_number, check_seed, check_seeds
from gmc_grpo.methods import (
    ADVANTAGE_CHOICES,
    MethodSettings,
    check_method_fields,
    get_method,
    method_names,
)
from gmc_grpo.staleness import ScheduleSettings, check_schedule_fields
from toy_mdps.problem import (
    CONFIG_DIR,
    ProblemFields,
    check_problem_fields,
    check_sample_memory,
    make_mdp,
    read_toy_config,
)

if TYPE_CHECKING:
    from toy_mdps.mdp import TokenMDP

OPTIMIZERS = ("adam", "sgd")
# the toy learner's `lam` in launches per token: 4 gives a mean lag of about 15 steps on the
# `K = 4, T = 5` MDP, 8 about 24 (the paper's 28 is in its own units of `L`)
TOY_LAMBDA = 4.0
LR_SCHEDULES = ("cosine", "constant")
EXPERIMENT_KINDS = (
    "runs",
    "delay_sweep",
    "group_size",
    "length_coupled",
    "eps_star",
    "gmc_tic_gap",
    "mixed_delay",
    "delay_regularity",
)
# the four small experiments of `gmc-grpo toy train --quick` and `make reproduce`
QUICK_EXPERIMENTS = ("delay_quick", "group_quick", "length_quick", "eps_quick")
# the worker-schedule experiments (issue 17): `make reproduce` runs the quick ones in a stage of
# their own (`pipeline.workers_stage`)
WORKER_EXPERIMENTS = ("mixed_quick", "regularity_quick")
FULL_WORKER_EXPERIMENTS = ("mixed_full", "regularity_full")
# the sizes of the quick experiments, applied by `ExperimentConfig.quick_sizes`
QUICK_SIZES = {"seeds": 5, "num_prompts": 4, "max_length": 5, "total_steps": 150}
# `ToyTrainConfig` fields a resumed run may change: they alter neither an update nor a record
# (checkpoints are written between steps and hold everything the next step reads). Any other
# change is refused unless asked for (`--extend-to`, `--allow-config-change`; gmc_grpo.resume).
RESUME_FREE_FIELDS = ("checkpoint_every",)


@dataclass
class ToyTrainConfig(ProblemFields, ScheduleSettings, MethodSettings):
    """One asynchronous toy learner, run for every seed in `seeds` at once (`gmc-grpo toy train`).

    The MDP fields (`num_prompts`, `vocab_size`, `max_length`, `reward`, `reward_scale`,
    `pattern_length`, `mdp_seed`, `policy`, `init_scale`) come from
    `toy_mdps.problem.ProblemFields`, the schedule fields (`schedule`, `delay`, `lam`,
    `max_launches`, `num_workers`, `generation_time`, `time_scale`, `update_time`) from
    `gmc_grpo.staleness.ScheduleSettings` (the length `L` is in tokens: a batch's or a group's
    mean response length), the method constants (`eps`, `clip_low`, `clip_high`, `truncation`,
    `a3po_mask_threshold`, `vcpo_rho_ref`, `gac_low`, `gac_high`) from
    `gmc_grpo.methods.MethodSettings`, each documented there. The optimizer follows the LLM
    recipe of Appendix B.1, scaled to the toy problem.
    """

    name: str = "train"
    """run name"""
    init_seed: int = 0
    """seed of `theta_0`, shared by every learner seed (`toy_mdps.train.learner`)"""
    method: str = "gmc"
    """a registered method: `is`, `grpo`, `tic`, `gmc`, `vcpo`, `gac`, `a3po` or your own"""
    advantage: str = "paper"
    """`"paper"` (the method's own, Appendix B.1; VCPO: its minimum-variance baseline) or one
    kind for every method (`loo`, `centered`, `std`; VCPO then keeps only its ESS step size and
    truncation)"""
    # -- batches and staleness (`gmc_grpo.staleness`) ----------------------------------------
    num_groups: int = PAPER_GROUPS_PER_BATCH
    """`B` groups per step (8, Appendix B.1); the worker schedule takes this many completed
    groups per update"""
    group_size: int = 8
    """`G` responses per group (8, Appendix B.1)"""
    lam: float = field(default=TOY_LAMBDA, kw_only=True)
    """the toy default of `ScheduleSettings.lam` (`TOY_LAMBDA`, launches per token)"""
    drift_max_lag: int = 0
    """record both sides of §2.2's delay-regularity condition for lags `1..drift_max_lag`
    (`||theta_n - theta_(n-t)||^2` given a group of lag `t`, and unconditionally); 0: off"""
    # -- optimizer (Appendix B.1, scaled) ------------------------------------------------------
    optimizer: str = "adam"
    """`"adam"` (B.1: AdamW 8-bit, no weight decay) or `"sgd"`"""
    lr: float = 0.05
    """peak step size"""
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """Adam's `(beta1, beta2)` (0.9, 0.999, B.1)"""
    adam_eps: float = 1e-8
    """Adam's denominator constant"""
    lr_schedule: str = "cosine"
    """`"cosine"` (warm-up then cosine decay, B.1; `gmc_grpo.lr_schedule`) or `"constant"`"""
    warmup_ratio: float = 0.03
    """linear warm-up fraction of `total_steps` (3%, B.1)"""
    min_lr_ratio: float = 0.0
    """the cosine's final step size relative to the peak"""
    grad_clip: float | None = 1.0
    """per-seed clip of `||g||` (1.0, B.1); None disables it"""
    total_steps: int = 200
    """learner updates `N`"""
    # -- run ---------------------------------------------------------------------------------
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    """independent learners, run at once (a leading seed dimension)"""
    run_seed: int = 0
    """the root of every learner seed's streams (sampling, worker times, bound statistics:
    `gmc_grpo.seeding`, path `(seed, ...)`)"""
    checkpoint_every: int = 50
    """steps between checkpoints (resumption)"""
    # -- bounds beside the measurements (`toy_mdps.train.bound_measurement`, `evidence.measured`) --
    bound_every: int = 0
    """0: off. `k >= 1`: record what the §3-§4 bounds are compared with: every step the coverage
    `log C`, the drift `||theta_n - theta_{n-tau}||^2` and the update size; every `k` steps and
    at the last step the estimator's bias, second moment and removed mass at the learner's state
    (from `bound_minibatches` fresh minibatches; `bounds/*` metrics)"""
    bound_minibatches: int = 200
    """`M` minibatches per recorded step (>= 3: the squared bias's jackknife interval)"""

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return config_error(self, name, why)

        self.betas = list(self.betas)
        check_problem_fields(self)
        check_limited(self, "total_steps")
        try:
            get_method(self.method)
        except ValueError as err:
            raise bad("method", f"must be a registered method {method_names()}") from err
        check_method_fields(self)
        check_choice(self, "advantage", ADVANTAGE_CHOICES)
        if self.group_size < 2:
            raise bad("group_size", "must be >= 2 (group advantages)")
        check_schedule_fields(self, accepts_callables=False)
        if self.drift_max_lag < 0:
            raise bad("drift_max_lag", "must be >= 0 (0 switches the drift record off)")
        check_choice(self, "optimizer", OPTIMIZERS)
        check_number(self, "lr", above=0.0)
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise bad("betas", "must be two numbers in [0, 1)")
        check_number(self, "adam_eps", above=0.0)
        check_choice(self, "lr_schedule", LR_SCHEDULES)
        if not 0 <= self.warmup_ratio < 1:
            raise bad("warmup_ratio", "must be in [0, 1)")
        if not 0 <= self.min_lr_ratio <= 1:
            raise bad("min_lr_ratio", "must be in [0, 1]")
        if self.grad_clip is not None:
            check_number(
                self,
                "grad_clip",
                above=0.0,
                hint="or none to disable clipping (--grad-clip none; null in a JSON config)",
            )
        check_seeds(self)
        for name in ("run_seed", "init_seed"):
            check_seed(self, name)
        if self.checkpoint_every < 1:
            raise bad("checkpoint_every", "must be >= 1")
        if self.bound_every < 0:
            raise bad("bound_every", "must be >= 0 (0 turns the bound tracking off)")
        if self.bound_minibatches < 3:
            raise bad("bound_minibatches", "must be >= 3 (jackknife interval of the bias)")
        # the memory the sizes imply, before anything is sampled or written (issue 36)
        sizes = [("num_groups", self.num_groups), ("group_size", self.group_size)]
        check_sample_memory(self, [("seeds", len(self.seeds)), *sizes])
        if self.bound_every > 0:  # the tracker samples bound_minibatches batches per record
            check_sample_memory(self, [("bound_minibatches", self.bound_minibatches), *sizes])
        if self.bound_every > 0:
            spec = get_method(self.method)
            if spec.gradient_edit is not None or spec.uses_baseline(self.advantage):
                raise bad(
                    "bound_every",
                    f"the estimator statistics cannot reproduce {self.method}'s "
                    + ("gradient edit" if spec.gradient_edit else "baseline hook")
                    + "; set bound_every = 0"
                    + ("" if spec.gradient_edit else " or advantage = 'loo'"),
                )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToyTrainConfig:
        """Build from a dict, rejecting unknown keys (keys starting with `_` are comments)."""
        return dataclass_from_dict(cls, data)

    @classmethod
    def from_file(cls, path: str | Path) -> ToyTrainConfig:
        """Read a JSON file of `ToyTrainConfig` fields (one run)."""
        return cls.from_dict(read_toy_config(path, "run"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def make_mdp(self) -> TokenMDP:
        return make_mdp(self)

    def method_settings(self) -> MethodSettings:
        """The method constants of this config (`gmc_grpo.methods.MethodSettings`)."""
        return MethodSettings.of(self)


@dataclass
class ExperimentConfig:
    """A grid of toy training runs (`toy_mdps/configs/train_*.json`)."""

    name: str = "experiment"
    """experiment name (default output folder `runs/toy_train/<name>`)"""
    kind: str = "runs"
    """what the analysis reports: `runs` (table only), `delay_sweep` (Table 3 analogue),
    `group_size` (Table 4), `length_coupled` (Table 1 setting), `eps_star` (Corollary 1),
    `gmc_tic_gap` (GMC over TIC beside the theory's factor, §4.3),
    `mixed_delay` (worker batches of mixed lags vs uniform delays of the same `tau4`),
    `delay_regularity` (both sides of §2.2's condition, and GMC vs TIC, under workers)"""
    base: dict[str, Any] = field(default_factory=dict)
    """`ToyTrainConfig` fields shared by every point"""
    grid: dict[str, list[Any]] = field(default_factory=dict)
    """`ToyTrainConfig` field -> list of values, crossed (cartesian product)"""
    zip: dict[str, list[Any]] = field(default_factory=dict)
    """`ToyTrainConfig` field -> list of values, all of one length, taken together (e.g.
    `total_steps` with `lr`), then crossed with `grid`"""
    variants: dict[str, dict[str, Any]] = field(default_factory=dict)
    """name -> `ToyTrainConfig` fields: settings that go together under one name (e.g. a schedule
    and its parameters), crossed with `zip` and `grid`; the point's name starts with
    `variant=<name>`"""
    confidence: float = 0.95
    """level of the intervals over seeds"""
    figures: bool = True
    """draw the figures after the run (`gmc-grpo toy train` does, through `pipeline.toy`)"""
    description: str = ""
    """one line for the report (Markdown; formulas as `$...$` LaTeX, see `pipeline.report`)"""

    def __post_init__(self) -> None:
        if self.kind not in EXPERIMENT_KINDS:
            raise ValueError(
                f"ExperimentConfig.kind={self.kind!r}: must be one of {EXPERIMENT_KINDS}"
            )
        for part in ("base", "grid", "zip"):
            try:
                check_field_names(ToyTrainConfig, list(getattr(self, part)))
            except ValueError as err:
                raise ValueError(f"ExperimentConfig.{part}: {err}") from None
        for name, fields_of in self.variants.items():
            if not isinstance(fields_of, dict) or not fields_of:
                raise ValueError(
                    f"ExperimentConfig.variants[{name!r}]={fields_of!r}: needs a dict of "
                    "ToyTrainConfig fields"
                )
            try:
                check_field_names(ToyTrainConfig, list(fields_of))
            except ValueError as err:
                raise ValueError(f"ExperimentConfig.variants[{name!r}]: {err}") from None
        for part in ("grid", "zip"):
            for key, values in getattr(self, part).items():
                if not isinstance(values, list) or not values:
                    raise ValueError(f"ExperimentConfig.{part}[{key!r}]={values!r}: needs a list")
        lengths = {len(v) for v in self.zip.values()}
        if len(lengths) > 1:
            raise ValueError(f"ExperimentConfig.zip={self.zip!r}: lists of different lengths")
        overlap = set(self.grid) & set(self.zip)
        if overlap:
            raise ValueError(f"ExperimentConfig: fields {sorted(overlap)} in both grid and zip")
        if not 0 < self.confidence < 1:
            raise ValueError(f"ExperimentConfig.confidence={self.confidence}: must be in (0, 1)")
        self.points()  # every point must be a valid ToyTrainConfig

    def points(self) -> list[tuple[str, ToyTrainConfig, dict[str, Any]]]:
        """`(point name, ToyTrainConfig, the varied values)` for every grid point, in run order
        (variants outermost, then `zip`, then `grid`)."""
        zipped = (
            [
                dict(zip(self.zip, values, strict=True))
                for values in zip(*self.zip.values(), strict=True)
            ]
            if self.zip
            else [{}]
        )
        crossed = [
            dict(zip(self.grid, values, strict=True))
            for values in itertools.product(*self.grid.values())
        ]
        variants: list[tuple[str | None, dict[str, Any]]] = list(self.variants.items()) or [
            (None, {})
        ]
        out = []
        for variant, fields_of in variants:
            for z in zipped:
                for g in crossed:
                    varied = {**z, **g}
                    parts = [f"{k}={_label(v)}" for k, v in varied.items()]
                    if variant is not None:
                        parts.insert(0, f"variant={variant}")
                    label = "_".join(parts) or "run"
                    cfg = ToyTrainConfig.from_dict(
                        {**self.base, **fields_of, **varied, "name": f"{self.name}/{label}"}
                    )
                    shown = varied if variant is None else {"variant": variant, **varied}
                    out.append((label, cfg, shown))
        return out

    def quick_sizes(self) -> ExperimentConfig:
        """This grid at the sizes of the quick experiments (`--quick` with `--experiment` or
        `--config`): at most `QUICK_SIZES["seeds"]` seeds (the first ones), at most
        `QUICK_SIZES["num_prompts"]` prompts and `QUICK_SIZES["max_length"]` tokens, and every
        `total_steps` value divided by one common factor so the largest is at most
        `QUICK_SIZES["total_steps"]`, fixed delays divided by the same factor (ratios between points
        and `D / N` kept, so no delay reaches its run's length; step sizes unchanged). The name
        gets a `_quick` suffix; `checkpoint_every` moves past the last step."""
        points = self.points()
        steps = max(cfg.total_steps for _, cfg, _ in points)
        factor = max(1.0, steps / QUICK_SIZES["total_steps"])

        def scale(n: int) -> int:
            return max(1, round(n / factor))

        def scale_delay(d: int) -> int:
            return round(d / factor)

        def shrink(part: dict[str, Any]) -> dict[str, Any]:
            out = dict(part)
            for key, rule in (("total_steps", scale), ("delay", scale_delay)):
                if key in out:
                    value = out[key]
                    out[key] = [rule(v) for v in value] if isinstance(value, list) else rule(value)
            return out

        base = shrink(self.base)
        first = points[0][1]
        base["seeds"] = list(self.base.get("seeds", first.seeds))[: QUICK_SIZES["seeds"]]
        for key in ("num_prompts", "max_length"):
            base[key] = min(int(self.base.get(key, getattr(first, key))), QUICK_SIZES[key])
        base["pattern_length"] = min(
            int(self.base.get("pattern_length", first.pattern_length)), base["max_length"]
        )
        base["checkpoint_every"] = QUICK_SIZES["total_steps"] + 1
        if (
            "total_steps" not in base
            and "total_steps" not in self.grid
            and "total_steps" not in self.zip
        ):
            base["total_steps"] = scale(first.total_steps)
        data = {
            **self.to_dict(),
            "name": f"{self.name}_quick" if not self.name.endswith("_quick") else self.name,
            "base": base,
            "grid": shrink(self.grid),
            "zip": shrink(self.zip),
        }
        return ExperimentConfig.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
        return dataclass_from_dict(cls, data)

    @classmethod
    def from_file(cls, path: str | Path) -> ExperimentConfig:
        return cls.from_dict(read_toy_config(path, "experiment"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _label(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def shipped_experiment(name: str) -> Path:
    """Path of a shipped experiment, e.g. `"delay_quick"` -> `configs/train_delay_quick.json`."""
    return CONFIG_DIR / f"train_{name}.json"
