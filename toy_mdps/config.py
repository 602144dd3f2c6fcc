"""`SweepConfig`: the one config of `gmc-grpo toy sweep` (files in `toy_mdps/configs/`)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmc_grpo.estimators import METHODS, PAPER_CAP_EPS, VCPO_TRUNCATION

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
BEHAVIOR_MODES = ("trajectory", "direct")
ADVANTAGE_CHOICES = ("loo", "centered", "std", "paper")
POLICY_NAMES = ("tabular", "loglinear")


def config_error(config: Any, name: str, why: str) -> ValueError:
    """`ValueError("<Class>.<field>=<value>: <why>")` for a config field that fails a check."""
    return ValueError(f"{type(config).__name__}.{name}={getattr(config, name)!r}: {why}")


def check_mdp_fields(config: Any) -> None:
    """Checks shared by every toy config that builds a `TokenMDP`, a policy and groups of `G`.

    Fields: num_prompts, vocab_size, max_length, pattern_length, num_groups, reward,
    reward_scale, policy, init_scale.
    """
    for name in ("num_prompts", "max_length", "pattern_length", "num_groups"):
        if int(getattr(config, name)) < 1:
            raise config_error(config, name, "must be >= 1")
    if config.vocab_size < 2:
        raise config_error(config, "vocab_size", "must be >= 2 (one token is EOS)")
    if config.pattern_length > config.max_length:
        raise config_error(config, "pattern_length", f"must be <= max_length={config.max_length}")
    if config.reward not in ("pattern", "length"):
        raise config_error(config, "reward", "must be 'pattern' or 'length'")
    if not config.reward_scale > 0:
        raise config_error(config, "reward_scale", "must be > 0")
    if config.policy not in POLICY_NAMES:
        raise config_error(config, "policy", f"must be one of {POLICY_NAMES}")
    if not config.init_scale >= 0:
        raise config_error(config, "init_scale", "must be >= 0")


def check_loss_constants(config: Any) -> None:
    """Checks of the token-clip, VCPO and A-3PO constants a toy config passes to the core loss."""
    if not 0 <= config.clip_low < 1:
        raise config_error(config, "clip_low", "must be in [0, 1)")
    if not config.clip_high >= 0:
        raise config_error(config, "clip_high", "must be >= 0")
    if not config.truncation > 0:
        raise config_error(config, "truncation", "must be > 0")
    if not config.a3po_mask_threshold > 0:
        raise config_error(config, "a3po_mask_threshold", "must be > 0")


def dataclass_from_dict(cls: Any, data: dict[str, Any], ignore: tuple[str, ...] = ()) -> Any:
    """Build dataclass `cls` from `data`, rejecting unknown keys (`_`-prefixed keys are comments)."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(
        k for k in data if k not in names and not k.startswith("_") and k not in ignore
    )
    if unknown:
        raise ValueError(f"unknown {cls.__name__} fields {unknown}; valid fields: {sorted(names)}")
    return cls(**{k: v for k, v in data.items() if k in names})


def read_json_config(path: str | Path, what: str, pattern: str = "*.json") -> dict[str, Any]:
    """Read a JSON config file; a missing file names the shipped configs matching `pattern`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{what} config {path} does not exist; shipped configs: "
            f"{sorted(p.name for p in CONFIG_DIR.glob(pattern))}"
        )
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err}") from None


@dataclass
class SweepConfig:
    """A grid of `method x staleness x eps x G x seed` estimator measurements on one token MDP.

    MDP (`toy_mdps.mdp.TokenMDP`):
        num_prompts: `K`, uniform prompts.
        vocab_size: `V` including EOS.
        max_length: `T`, maximum response length and the `T` of the `1/(T B G)` normalisation.
        reward: `"pattern"` (sparse target-substring reward) or `"length"` (`R L / T`).
        reward_scale: `R`, the largest reward.
        pattern_length: length of each prompt's target pattern.
        mdp_seed: seed of the target patterns.
        policy: `"tabular"` softmax or `"loglinear"` with shared features.
        init_scale: standard deviation of the random initial parameters `theta_0`.

    Behavior policy (`toy_mdps.behavior`):
        behavior: `"trajectory"` (`theta = theta_N`, `theta_behavior = theta_{N - delay}` of a
            reference learner) or `"direct"` (`theta_0` perturbed to each target KL).
        trajectory_steps: `N`, steps of the reference learner (exact gradient ascent).
        learning_rate: its step size.
        trajectory_noise: standard deviation of Gaussian noise added to each exact gradient.
        delays: the delays `tau` of the grid (trajectory mode), each `<= trajectory_steps`.
        target_kls: the mean-over-prompts `KL(pi_theta || pi_behavior)` values (direct mode).
        direction: direct mode's perturbation: `"random"` or `"suppress"` (lower the behavior
            probability of the current policy's favourite first token: large token ratios).
        direct_version_lag: A-3PO's version lag `d` in direct mode (trajectory mode uses `tau`).

    Estimators (`gmc_grpo.estimators`, `gmc_grpo.losses.PolicyLossConfig`):
        methods: subset of `is, tic, gmc, vcpo, grpo, a3po`.
        eps_values: caps `1 + eps` of TIC and GMC (paper: 0.28, Appendix B.1); the other methods
            do not depend on `eps` and are measured once per grid cell (their `eps` is null).
        group_sizes: `G` values (`>= 2`).
        num_groups: `B`, groups per minibatch (paper: 8, Appendix B.1).
        advantage: `"loo"` for every method (default; then IS is exactly unbiased, see
            `toy_mdps.statistics`), `"centered"`, `"std"`, or `"paper"` (`PAPER_ADVANTAGE`).
        clip_low, clip_high: GRPO's and A-3PO's token clip (paper: 0.2, Appendix B.1).
        truncation: VCPO's `c` (8, VCPO's code).
        a3po_mask_threshold: A-3PO's mask on `pi_prox / mu` (5, AReaL).

    Monte Carlo:
        seeds: replicates; seed `s` draws `theta_0` (seed `s`), the perturbation direction and the
            samples of every cell.
        num_minibatches: `M` independent minibatches per grid point.
        confidence: level of the reported intervals.
        figures: write the figures into the run directory at the end.
        name: run name (default output folder `runs/toy_sweep_<name>`).
    """

    name: str = "sweep"
    num_prompts: int = 8
    vocab_size: int = 4
    max_length: int = 6
    reward: str = "pattern"
    reward_scale: float = 1.0
    pattern_length: int = 2
    mdp_seed: int = 0
    policy: str = "tabular"
    init_scale: float = 1.0
    behavior: str = "trajectory"
    trajectory_steps: int = 64
    learning_rate: float = 5.0
    trajectory_noise: float = 0.0
    delays: list[int] = field(default_factory=lambda: [0, 8, 16, 32, 64])
    target_kls: list[float] = field(default_factory=lambda: [0.01, 0.1, 0.5])
    direction: str = "random"
    direct_version_lag: int = 8
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    eps_values: list[float] = field(default_factory=lambda: [PAPER_CAP_EPS])
    group_sizes: list[int] = field(default_factory=lambda: [2, 8, 32, 128])
    num_groups: int = 4
    advantage: str = "loo"
    clip_low: float = 0.2
    clip_high: float = 0.2
    truncation: float = VCPO_TRUNCATION
    a3po_mask_threshold: float = 5.0
    seeds: list[int] = field(default_factory=lambda: [0])
    num_minibatches: int = 400
    confidence: float = 0.95
    figures: bool = True

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ValueError:
            return ValueError(f"SweepConfig.{name}={getattr(self, name)!r}: {why}")

        check_mdp_fields(self)
        if self.behavior not in BEHAVIOR_MODES:
            raise bad("behavior", f"must be one of {BEHAVIOR_MODES}")
        if self.trajectory_steps < 0:
            raise bad("trajectory_steps", "must be >= 0")
        if not self.learning_rate > 0:
            raise bad("learning_rate", "must be > 0")
        if not self.trajectory_noise >= 0:
            raise bad("trajectory_noise", "must be >= 0")
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
        if self.direction not in ("random", "suppress"):
            raise bad("direction", "must be 'random' or 'suppress'")
        if self.direct_version_lag < 0:
            raise bad("direct_version_lag", "must be >= 0")
        if not self.methods or any(m not in METHODS for m in self.methods):
            raise bad("methods", f"must be a non-empty subset of {METHODS}")
        if len(set(self.methods)) != len(self.methods):
            raise bad("methods", "has duplicates")
        if not self.eps_values or any(not (e > 0 and math.isfinite(e)) for e in self.eps_values):
            raise bad("eps_values", "must be non-empty, each finite and > 0")
        if not self.group_sizes or any(g < 2 for g in self.group_sizes):
            raise bad("group_sizes", "must be non-empty, each >= 2 (advantages need G >= 2)")
        if self.advantage not in ADVANTAGE_CHOICES:
            raise bad("advantage", f"must be one of {ADVANTAGE_CHOICES}")
        check_loss_constants(self)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise bad("seeds", "must be non-empty without duplicates")
        if self.num_minibatches < 3:
            raise bad("num_minibatches", "must be >= 3 (jackknife intervals)")
        if not 0 < self.confidence < 1:
            raise bad("confidence", "must be in (0, 1)")

    @property
    def staleness_values(self) -> list[float]:
        """The delays (trajectory mode) or target KLs (direct mode) of the grid."""
        return list(self.delays) if self.behavior == "trajectory" else list(self.target_kls)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepConfig:
        """Build from a dict, rejecting unknown keys (keys starting with `_` are comments; a
        `kind` key, used by the other configs of `toy_mdps/configs/`, must be `"sweep"`)."""
        kind = data.get("kind")
        if kind is not None and kind != "sweep":
            raise ValueError(
                f"this is a {kind!r} config, not a sweep config (run it with `gmc-grpo toy {kind}`)"
            )
        return dataclass_from_dict(cls, data, ignore=("kind",))

    @classmethod
    def from_file(cls, path: str | Path) -> SweepConfig:
        """Read a JSON config (e.g. `toy_mdps/configs/quick.json`)."""
        return cls.from_dict(read_json_config(path, "sweep"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def shipped_config(name: str) -> Path:
    """Path of a config shipped in `toy_mdps/configs/` (`"quick"`, `"full"`, ...)."""
    return CONFIG_DIR / f"{name}.json"
