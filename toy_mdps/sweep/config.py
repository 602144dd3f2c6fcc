"""`SweepConfig`: the one config of `gmc-grpo toy sweep` (files in `toy_mdps/configs/`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmc_grpo.config_reading import check_choice, config_error, dataclass_from_dict
from gmc_grpo.defaults import (
    A3PO_MASK_THRESHOLD,
    PAPER_EPS,
    TOKEN_CLIP,
    VCPO_TRUNCATION,
)
from gmc_grpo.fieldchecks import (
    MAX_TOTAL_STEPS,
    check_count,
    check_number,
    check_seed,
    check_seeds,
)
from gmc_grpo.methods import (
    ADVANTAGE_CHOICES,
    PAPER_METHODS,
    check_method_fields,
    get_method,
    method_names,
)
from toy_mdps.problem import (
    CONFIG_COMMANDS,
    CONFIG_DIR,
    ProblemFields,
    check_problem_fields,
    check_sample_memory,
    config_kind,
    read_toy_config,
)

BEHAVIOR_MODES = ("trajectory", "direct")
DIRECTIONS = ("random", "suppress")


def sweep_methods() -> tuple[str, ...]:
    """The registered methods the sweep can measure: those that are an estimator alone (a
    gradient edit such as GAC's needs the previous step's gradient, which a sweep has not)."""
    return tuple(m for m in method_names() if get_method(m).gradient_edit is None)


@dataclass
class SweepConfig(ProblemFields):
    """A grid of `method x staleness x eps x G x seed` estimator measurements on one token MDP.

    The MDP fields (`num_prompts`, `vocab_size`, `max_length`, `reward`, `reward_scale`,
    `pattern_length`, `mdp_seed`, `policy`, `init_scale`) come from
    `toy_mdps.problem.ProblemFields`, documented there.
    """

    name: str = "sweep"
    """run name (default output folder `runs/toy_sweep_<name>`)"""
    # -- behavior policy (`toy_mdps.behavior`) -----------------------------------------------------
    behavior: str = "trajectory"
    """`"trajectory"` (`theta = theta_N`, `theta_behavior = theta_{N - delay}` of a reference
    learner) or `"direct"` (`theta_0` perturbed to each target KL)"""
    trajectory_steps: int = 64
    """`N`, steps of the reference learner (exact gradient ascent)"""
    lr: float = 5.0
    """the reference learner's step size"""
    trajectory_noise: float = 0.0
    """standard deviation of Gaussian noise added to each exact gradient"""
    delays: list[int] = field(default_factory=lambda: [0, 8, 16, 32, 64])
    """the delays `tau` of the grid (trajectory mode), each `<= trajectory_steps`"""
    target_kls: list[float] = field(default_factory=lambda: [0.01, 0.1, 0.5])
    """the mean-over-prompts `KL(pi_theta || pi_behavior)` values (direct mode)"""
    direction: str = "random"
    """direct mode's perturbation: `"random"` or `"suppress"` (lower the behavior probability of
    the current policy's favourite first token: large token ratios)"""
    direct_version_lag: int = 8
    """A-3PO's version lag `d` in direct mode (trajectory mode uses `tau`)"""
    # -- estimators (`gmc_grpo.methods`) -----------------------------------------------------------
    methods: list[str] = field(
        default_factory=lambda: [s.name for s in PAPER_METHODS if s.gradient_edit is None]
    )
    """registered methods without a gradient edit (default: the paper's, `is, grpo, tic, gmc,
    vcpo, a3po`; a user's registered method is measured when listed here)"""
    eps_values: list[float] = field(default_factory=lambda: [PAPER_EPS])
    """caps `1 + eps` of the methods that use one (TIC, GMC; 0.28, Appendix B.1); the others
    are measured once per grid cell (their `eps` is null)"""
    group_sizes: list[int] = field(default_factory=lambda: [2, 8, 32, 128])
    """`G` values (`>= 2`)"""
    num_groups: int = 4
    """`B`, groups per minibatch (paper: 8, Appendix B.1)"""
    advantage: str = "loo"
    """`"loo"` for every method (default; then IS is exactly unbiased, see
    `toy_mdps.statistics`), `"centered"`, `"std"`, or `"paper"` (each method's own)"""
    clip_low: float = TOKEN_CLIP
    """GRPO's and A-3PO's lower token clip (0.2, Appendix B.1)"""
    clip_high: float = TOKEN_CLIP
    """their upper token clip (0.2, Appendix B.1)"""
    truncation: float = VCPO_TRUNCATION
    """VCPO's `c` (8, VCPO's code)"""
    a3po_mask_threshold: float = A3PO_MASK_THRESHOLD
    """A-3PO's mask on `pi_prox / mu` (5, AReaL)"""
    # -- Monte Carlo -------------------------------------------------------------------------------
    seeds: list[int] = field(default_factory=lambda: [0])
    """replicates; replicate `s` has its own `theta_0`, perturbation direction and samples"""
    init_seed: int = 0
    """seed of the learning problems: replicate `s` draws `theta_0`, the direct mode's
    perturbation direction and the reference trajectory's noise from three streams of this seed
    (`sweep_theta0`, `sweep_direction`, `sweep_trajectory` of `gmc_grpo.seeding`, path `(s,)`)"""
    run_seed: int = 0
    """sampling seed: the root of every cell's minibatch stream (`sweep_cell`, path
    `(s, staleness index, G)`)"""
    num_minibatches: int = 400
    """`M` independent minibatches per grid point"""
    confidence: float = 0.95
    """level of the reported intervals"""
    figures: bool = True
    """draw the figures after the run (`gmc-grpo toy sweep` does, through `pipeline.toy`)"""

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return config_error(self, name, why)

        check_problem_fields(self)
        if self.behavior not in BEHAVIOR_MODES:
            raise bad("behavior", f"must be one of {BEHAVIOR_MODES}")
        check_count(self, "trajectory_steps", 0, MAX_TOTAL_STEPS)
        check_number(self, "lr", above=0.0)
        check_number(self, "trajectory_noise", at_least=0.0)
        if self.behavior == "trajectory":
            if not self.delays:
                raise bad("delays", "must be non-empty in trajectory mode")
            for d in self.delays:
                if not 0 <= d <= self.trajectory_steps:
                    raise bad(
                        "delays",
                        f"every delay must be in [0, trajectory_steps={self.trajectory_steps}]",
                    )
        else:
            if not self.target_kls:
                raise bad("target_kls", "must be non-empty in direct mode")
            if any(not (k >= 0 and math.isfinite(k)) for k in self.target_kls):
                raise bad("target_kls", "every target KL must be finite and >= 0")
        check_choice(self, "direction", DIRECTIONS)
        if self.direct_version_lag < 0:
            raise bad("direct_version_lag", "must be >= 0")
        allowed = sweep_methods()
        if not self.methods or any(m not in allowed for m in self.methods):
            raise bad("methods", f"must be a non-empty subset of {allowed}")
        if len(set(self.methods)) != len(self.methods):
            raise bad("methods", "has duplicates")
        if not self.eps_values or any(not (e > 0 and math.isfinite(e)) for e in self.eps_values):
            raise bad("eps_values", "must be non-empty, each finite and > 0")
        if not self.group_sizes or any(g < 2 for g in self.group_sizes):
            raise bad("group_sizes", "must be non-empty, each >= 2 (advantages need G >= 2)")
        check_choice(self, "advantage", ADVANTAGE_CHOICES)
        check_method_fields(self)
        check_seeds(self)
        for name in ("run_seed", "init_seed"):
            check_seed(self, name)
        if self.num_minibatches < 3:
            raise bad("num_minibatches", "must be >= 3 (jackknife intervals)")
        # a cell samples M x B x G responses at once: their memory, before anything is written
        check_sample_memory(
            self,
            [
                ("num_minibatches", self.num_minibatches),
                ("num_groups", self.num_groups),
                ("group_sizes (largest)", max(self.group_sizes)),
            ],
        )
        if not 0 < self.confidence < 1:
            raise bad("confidence", "must be in (0, 1)")

    def quick_sizes(self) -> SweepConfig:
        """This config at the sizes of `configs/quick.json` (`--quick --config FILE`): at most as
        many seeds (the first ones), minibatches `M` and groups `B` as the quick sweep; the grid
        (methods, delays or KLs, eps, G) and the MDP are kept."""
        quick = SweepConfig.from_file(shipped_config("quick"))
        data = self.to_dict()
        data["seeds"] = list(self.seeds)[: len(quick.seeds)]
        data["num_minibatches"] = min(self.num_minibatches, quick.num_minibatches)
        data["num_groups"] = min(self.num_groups, quick.num_groups)
        return SweepConfig.from_dict(data)

    @property
    def staleness_values(self) -> list[float]:
        """The delays (trajectory mode) or target KLs (direct mode) of the grid."""
        return list(self.delays) if self.behavior == "trajectory" else list(self.target_kls)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepConfig:
        """Build from a dict, rejecting unknown keys (keys starting with `_` are comments; a
        `kind` key, used by the other configs of `toy_mdps/configs/`, must be `"sweep"`)."""
        if config_kind(data) != "sweep":
            raise ValueError(
                f"these are the fields of a toy training config (kind {data.get('kind')!r}), not "
                f"of a sweep: run them with {CONFIG_COMMANDS['experiment']}"
            )
        return dataclass_from_dict(cls, data, ignore=("kind",))

    @classmethod
    def from_file(cls, path: str | Path) -> SweepConfig:
        """Read a JSON config (e.g. `toy_mdps/configs/quick.json`)."""
        return cls.from_dict(read_toy_config(path, "sweep"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def shipped_config(name: str) -> Path:
    """Path of a config shipped in `toy_mdps/configs/` (`"quick"`, `"full"`, ...)."""
    return CONFIG_DIR / f"{name}.json"
