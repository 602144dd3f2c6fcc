"""The method registry: one frozen `MethodSpec` per method, the one place that says what a method is.

Every track reads it: the toy sweep and the toy learner, the LLM learner and its config, the TRL
and verl adapters, and the figures' method list. A spec holds

- `loss`: the core surrogate (`gmc_grpo.losses.policy_loss` method; GAC's is `grpo`), or a
  user's own trajectory weighting (`coefficient_rule`, the weighted class of eq. 4-5);
- `advantage`: the paper's default advantage kind (Appendix B.1);
- `needs_version_lag`: the loss reads how many learner versions the batch is behind (A-3PO);
- what its cap reads and caps: `uses_eps` (the cap `1 + eps`: TIC, GMC), `uses_truncation`
  (the truncation `c`: VCPO) and `caps_group_mass` (one scale per group: GMC), which the toy
  sweep, the capped-fraction metric, the lag-0 mismatch and the verl adapter ask instead of
  naming methods;
- optional hooks, each with its state made explicit: `baseline` (an advantage computed from more
  than the rewards: VCPO's minimum-variance baseline needs per-trajectory score norms),
  `gradient_edit` (GAC's projection, whose state is the previous gradient) and `step_scale`
  (VCPO's ESS step size).

| name   | loss   | advantage (B.1) | hooks                                   | source               |
|--------|--------|-----------------|-----------------------------------------|----------------------|
| `is`   | `is`   | `loo`           |                                         | eq. 2 (reference)    |
| `grpo` | `grpo` | `centered`      |                                         | Shao et al.; B.1     |
| `tic`  | `tic`  | `loo`           | (cap: `1 + eps`, per trajectory)        | §3, §4.3; B.1        |
| `gmc`  | `gmc`  | `loo`           | (cap: `1 + eps`, per group mass)        | eq. 9, Prop. 2; B.1  |
| `vcpo` | `vcpo` | `std`           | baseline (score norms), ESS step scale  | Huang et al. 2026    |
|        |        |                 | (cap: truncation `c`, per trajectory)   |                      |
| `gac`  | `grpo` | `centered`      | gradient projection (state: last grad)  | Xu et al. 2026 (ours)|
| `a3po` | `a3po` | `std`           | version lag                             | Li et al. 2025       |

Adding a method is one `register_method(MethodSpec(...))` (the README shows a worked example);
configs accept any registered name. For the command line, name the module that registers it in
the environment variable `GMC_GRPO_METHODS` (comma-separated modules, imported on the first
look-up, from `sys.path` or the current folder; one that fails to import stops the command with
one line naming it and the exception: `gmc_grpo.plugins`). `docs/METHODS.md` gives every method's exact definition.

This module imports no torch: the specs are plain data, and the hooks import the core's tensor
code when they are called, so the figures and the command-line help stay light.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

from gmc_grpo.defaults import (
    A3PO_MASK_THRESHOLD,
    GAC_HIGH,
    GAC_LOW,
    PAPER_EPS,
    TOKEN_CLIP,
    VCPO_RHO_REF,
    VCPO_TRUNCATION,
)
from gmc_grpo.registry import Registry

if TYPE_CHECKING:
    from torch import Tensor

    from gmc_grpo.losses import PolicyLossConfig

PLUGINS_ENV = "GMC_GRPO_METHODS"
ADVANTAGE_CHOICES: tuple[str, ...] = ("paper", "centered", "loo", "std")
# The losses of `gmc_grpo.losses.policy_loss` (its `METHODS`, spelled here to stay torch-free;
# a test checks both lists agree) and those among them that weight whole trajectories.
CORE_LOSSES: tuple[str, ...] = ("is", "tic", "gmc", "vcpo", "grpo", "a3po")
TRAJECTORY_LOSSES: tuple[str, ...] = ("is", "tic", "gmc", "vcpo")


# ----------------------------------------------------------------------------------------------
# The constants every method reads
# ----------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class MethodSettings:
    """The methods' constants, under the names every config uses (toy and LLM alike).

    The training configs inherit these fields (`toy_mdps.train.config.ToyTrainConfig`,
    `llm_runs.config.LLMTrainConfig`), so each is declared and documented once; the hooks receive
    a `MethodSettings` (`MethodSettings.of(config)`).
    """

    eps: float = PAPER_EPS
    """cap `1 + eps` of TIC and GMC (0.28, Appendix B.1)"""
    clip_low: float = TOKEN_CLIP
    """lower token clip `1 - clip_low` of GRPO, GAC's base loss and A-3PO (0.2, B.1)"""
    clip_high: float = TOKEN_CLIP
    """upper token clip `1 + clip_high` (0.2, B.1)"""
    truncation: float = VCPO_TRUNCATION
    """VCPO's sequence-level truncation `c` in `min(rho_i, c)` (8, VCPO's code)"""
    a3po_mask_threshold: float = A3PO_MASK_THRESHOLD
    """A-3PO masks tokens with `pi_prox / mu` above it (5, AReaL)"""
    vcpo_rho_ref: float = VCPO_RHO_REF
    """VCPO's reference ESS of its step-size rule (1, VCPO's code)"""
    gac_low: float = GAC_LOW
    """GAC: gradients with cosine to the previous one below this are left alone (0.05, B.1)"""
    gac_high: float = GAC_HIGH
    """GAC: above this the parallel component is removed entirely (0.30, B.1)"""

    def __post_init__(self) -> None:
        check_method_fields(self, allow_infinite_eps=True)

    @classmethod
    def of(cls, config: Any, **overrides: float) -> MethodSettings:
        """A standalone copy of the settings a config holds (fields of the same name; the others
        keep their defaults), with `overrides` applied."""
        values = {f.name: getattr(config, f.name) for f in fields(cls) if hasattr(config, f.name)}
        return cls(**{**values, **overrides})


def check_method_fields(config: Any, *, allow_infinite_eps: bool = False) -> None:
    """Check the method constants a config has (any of `MethodSettings`' fields).

    allow_infinite_eps: accept `eps = inf` (no cap: TIC and GMC become plain IS), as the core API
        does (`MethodSettings`, `gmc_grpo.estimators`); the training configs read from files and
        flags refuse it, in both learners alike (`gmc_grpo.fieldchecks`).
    Raises `ValueError("<Class>.<field>=<value>: <why>")` for the first bad one.
    """

    def bad(name: str, why: str) -> ValueError:
        return ValueError(f"{type(config).__name__}.{name}={getattr(config, name)!r}: {why}")

    if hasattr(config, "eps"):
        if not config.eps > 0:  # also rejects NaN
            raise bad("eps", "must be a finite number > 0 (the cap is 1 + eps, e.g. eps=0.28)")
        if not allow_infinite_eps and not math.isfinite(config.eps):
            raise bad(
                "eps",
                "must be a finite number > 0 (the cap is 1 + eps, e.g. eps=0.28; for no cap at "
                "all use method 'is')",
            )
    if hasattr(config, "clip_low") and not 0 <= config.clip_low < 1:
        raise bad("clip_low", "must be in [0, 1)")
    if hasattr(config, "clip_high") and not config.clip_high >= 0:
        raise bad("clip_high", "must be >= 0")
    for name in ("truncation", "a3po_mask_threshold", "vcpo_rho_ref"):
        if hasattr(config, name) and not getattr(config, name) > 0:
            raise bad(name, "must be > 0")
    if hasattr(config, "gac_low") and not 0 <= config.gac_low < config.gac_high <= 1:
        raise bad("gac_low", f"needs 0 <= gac_low < gac_high={config.gac_high} <= 1")


# ----------------------------------------------------------------------------------------------
# Hooks
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """An advantage computed from more than the rewards; replaces the method's advantage kind.

    compute: `(rewards [B, G], log_ratio [B, G], score_norm_sq [B, G] | None, settings) ->
        advantages [B, G]` (detached).
    needs_score_norms: the learner must pass `||grad_theta log pi(y_i | x)||^2` per trajectory
        (exact in the toy learner; in the LLM learner read off each micro-batch's own backward
        when `group_baseline` is given, else one extra backward per trajectory).
    group_baseline: optional `(rewards [B, G], log_ratio [B, G], score_norm_sq [B, G], settings)
        -> b [B]` when the advantage is `(R_i - b_g) / sigma_g` with `sigma_g` the group's
        reward std (0 where it is below 1e-6): the gradient is then linear in `b_g`, so the LLM
        learner assembles it inside one backward (`llm_runs.sample_norms`).
    """

    compute: Callable[..., Tensor]
    needs_score_norms: bool = False
    group_baseline: Callable[..., Tensor] | None = None


@dataclass(frozen=True)
class GradientEdit:
    """An edit of the flattened gradient that carries state from one learner step to the next.

    init_state: `() -> state`, an object with `state_dict()` / `load_state_dict(d)` whose values
        are tensors or None (checkpoints store them).
    apply: `(gradient [d], state, settings) -> (gradient [d], metrics)`; updates `state`.
    apply_in_place: optional `(parameters, state, settings) -> metrics`, the same edit made on
        each parameter's `.grad` in place (no flattened copy of the gradient: the LLM learner
        uses it when present).
    """

    init_state: Callable[[], Any]
    apply: Callable[[Tensor, Any, MethodSettings], tuple[Tensor, dict[str, float]]]
    apply_in_place: Callable[[list[Any], Any, MethodSettings], dict[str, float]] | None = None


@dataclass(frozen=True)
class StepScale:
    """A factor in `(0, 1]` on one update's step size: `(log_ratio [B, G], settings) -> float`.

    The learner multiplies the scheduled step size by it for that update and logs it as
    `metric`.
    """

    compute: Callable[[Tensor, MethodSettings], float]
    metric: str


# ----------------------------------------------------------------------------------------------
# The spec
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodSpec:
    """Everything the learners, the sweep and the adapters need to know about one method."""

    name: str
    """the config value (`method="gmc"`)"""
    label: str
    """display name in figures and reports"""
    loss: str
    """the core surrogate: a `gmc_grpo.losses.policy_loss` method (GAC: `grpo`); with a
    `coefficient_rule`, any name (the trajectory surrogate with those coefficients)"""
    advantage: str
    """the paper's advantage kind for it (`centered`, `loo`, `std`; Appendix B.1)"""
    source: str
    """where its definition comes from (equation or paper), for docs and reports"""
    needs_version_lag: bool = False
    """the loss reads the learner versions between the current and the behavior policy"""
    uses_eps: bool = False
    """the cap `1 + eps` changes it: the toy sweep measures it once per `eps` value, the lag-0
    mismatch (`llm_runs.mismatch`) reports the groups it would cap, and verl's
    `rollout_is_threshold` is its `1 + eps` (`gmc_grpo.integrations.verl`)"""
    uses_truncation: bool = False
    """the truncation `c` of `min(rho_i, c)` changes it (VCPO): verl's `rollout_is_threshold` is
    its `c` (`gmc_grpo.integrations.verl`)"""
    caps_group_mass: bool = False
    """its cap scales a whole group at once (GMC's one `alpha_b` per group), so its capped unit
    is the group: `ratio/capped_frac` counts groups (`loss_config` hands it to the core loss,
    `gmc_grpo.estimators.capped_units`), else trajectories; needs a trajectory-level method"""
    class_cap: Callable[[MethodSettings], float] | None = None
    """the `eps` with `(1/G) sum_i c_i <= 1 + eps` in every group: the method is in the
    weighted class of eq. 4-5, so Prop. 1's second-moment bound applies; None outside it"""
    removed_mass_bound: Literal["tic", "gmc"] | None = None
    """which removed-mass bound of §4.2 (step 2) it obeys: `KL / c_eps` (TIC's clip) or
    `KL / log(1 + 2 eps)` (GMC's group cap); the toy sweep checks it"""
    coefficient_rule: Callable[[Tensor, float], Tensor] | None = None
    """a user's trajectory weighting `(s [..., G] float64, eps) -> log c [..., G]`"""
    baseline: Baseline | None = None
    """advantage hook (VCPO's minimum-variance baseline); used under `advantage="paper"`"""
    gradient_edit: GradientEdit | None = None
    """gradient hook with state (GAC's projection)"""
    step_scale: StepScale | None = None
    """step-size hook (VCPO's ESS factor)"""

    @property
    def trajectory_level(self) -> bool:
        """Its coefficient weights whole trajectories (`c_i`), the weighted class's form."""
        return self.coefficient_rule is not None or self.loss in TRAJECTORY_LOSSES

    def advantage_kind(self, choice: str = "paper") -> str:
        """The advantage kind to use: `choice`, or this method's own for `"paper"`."""
        return self.advantage if choice == "paper" else choice

    def uses_baseline(self, choice: str = "paper") -> bool:
        """True when the method's `baseline` replaces the advantage (`choice == "paper"`)."""
        return self.baseline is not None and choice == "paper"

    def loss_config(
        self,
        settings: MethodSettings,
        *,
        max_length: int | None = None,
        aggregation: str = "paper",
    ) -> PolicyLossConfig:
        """The core loss config of this method with `settings` (`T = max_length`)."""
        from gmc_grpo.losses import PolicyLossConfig

        return PolicyLossConfig(
            method=self.loss,
            eps=settings.eps,
            clip_low=settings.clip_low,
            clip_high=settings.clip_high,
            truncation=settings.truncation,
            a3po_mask_threshold=settings.a3po_mask_threshold,
            aggregation=aggregation,  # type: ignore[arg-type]
            max_length=max_length,
            coefficient_rule=self.coefficient_rule,
            caps_group_mass=self.caps_group_mass,
        )


# ----------------------------------------------------------------------------------------------
# The built-in methods
# ----------------------------------------------------------------------------------------------


def _cap_eps(settings: MethodSettings) -> float:
    return settings.eps


def _vcpo_cap(settings: MethodSettings) -> float:
    # min(rho_i, c) <= c = 1 + (c - 1); for c <= 1 every group mass is below 1 + eps for any eps,
    # and the paper's eps is used
    return settings.truncation - 1.0 if settings.truncation > 1 else PAPER_EPS


def _vcpo_baseline(
    rewards: Tensor, log_ratio: Tensor, score_norm_sq: Tensor, settings: MethodSettings
) -> Tensor:
    from gmc_grpo.hooks import vcpo_baseline_advantages

    return vcpo_baseline_advantages(rewards, log_ratio, score_norm_sq)


def _vcpo_group_baseline(
    rewards: Tensor, log_ratio: Tensor, score_norm_sq: Tensor, settings: MethodSettings
) -> Tensor:
    from gmc_grpo.hooks import vcpo_group_baseline

    return vcpo_group_baseline(rewards, log_ratio, score_norm_sq)


def _vcpo_step_scale(log_ratio: Tensor, settings: MethodSettings) -> float:
    from gmc_grpo.hooks import vcpo_step_scale

    return vcpo_step_scale(log_ratio, settings.vcpo_rho_ref)


def _gac_state() -> Any:
    from gmc_grpo.hooks import GACState

    return GACState()


def _gac_project(
    gradient: Tensor, state: Any, settings: MethodSettings
) -> tuple[Tensor, dict[str, float]]:
    from gmc_grpo.hooks import gac_project

    return gac_project(gradient, state, low=settings.gac_low, high=settings.gac_high)


def _gac_project_in_place(
    parameters: list[Any], state: Any, settings: MethodSettings
) -> dict[str, float]:
    from gmc_grpo.hooks import gac_project_parameters

    return gac_project_parameters(parameters, state, low=settings.gac_low, high=settings.gac_high)


PAPER_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec(
        name="is",
        label="IS",
        loss="is",
        # the same advantage as GMC/TIC, so only the weighting differs (unbiased reference)
        advantage="loo",
        source="eq. 2 (unbiased reference)",
    ),
    MethodSpec(
        name="grpo",
        label="GRPO",
        loss="grpo",
        advantage="centered",  # "the unnormalized group-centered advantage" (B.1)
        source="Shao et al. 2024; Appendix B.1",
    ),
    MethodSpec(
        name="tic",
        label="TIC-GRPO",
        loss="tic",
        advantage="loo",  # B.1
        source="§3, §4.3; Pang et al. 2025; Appendix B.1",
        uses_eps=True,
        class_cap=_cap_eps,
        removed_mass_bound="tic",
    ),
    MethodSpec(
        name="gmc",
        label="GMC-GRPO",
        loss="gmc",
        advantage="loo",  # B.1
        source="eq. 9, Prop. 2; Appendix B.1",
        uses_eps=True,
        caps_group_mass=True,
        class_cap=_cap_eps,
        removed_mass_bound="gmc",
    ),
    MethodSpec(
        name="vcpo",
        label="VCPO",
        loss="vcpo",
        advantage="std",  # VCPO's code normalises by the group std (used without the baseline)
        source="Huang et al. 2026 and its code",
        uses_truncation=True,
        class_cap=_vcpo_cap,
        baseline=Baseline(
            _vcpo_baseline, needs_score_norms=True, group_baseline=_vcpo_group_baseline
        ),
        step_scale=StepScale(_vcpo_step_scale, metric="vcpo/step_scale"),
    ),
    MethodSpec(
        name="gac",
        label="GAC",
        loss="grpo",  # GAC projects the gradient of the base GRPO loss
        advantage="centered",
        source="Xu et al. 2026 (no public code: our interpretation)",
        gradient_edit=GradientEdit(_gac_state, _gac_project, _gac_project_in_place),
    ),
    MethodSpec(
        name="a3po",
        label="A-3PO",
        loss="a3po",
        advantage="std",  # AReaL's default group normalisation (our choice; B.1 does not say)
        source="Li et al. 2025 (AReaL's log-linear proximal policy)",
        needs_version_lag=True,
    ),
)

# ----------------------------------------------------------------------------------------------
# Registry API
# ----------------------------------------------------------------------------------------------


def check_spec(spec: MethodSpec) -> None:
    """Raise `ValueError` naming the field when a spec cannot run (the registry checks the
    name)."""
    if spec.coefficient_rule is None and spec.loss not in CORE_LOSSES:
        raise ValueError(
            f"MethodSpec.loss={spec.loss!r} of {spec.name!r}: must be one of {CORE_LOSSES}, "
            "or give a coefficient_rule"
        )
    if spec.coefficient_rule is not None and not callable(spec.coefficient_rule):
        raise ValueError(f"MethodSpec.coefficient_rule of {spec.name!r} must be callable")
    if spec.advantage not in ADVANTAGE_CHOICES[1:]:
        raise ValueError(
            f"MethodSpec.advantage={spec.advantage!r} of {spec.name!r}: must be one of "
            f"{ADVANTAGE_CHOICES[1:]}"
        )
    if spec.caps_group_mass and not spec.trajectory_level:
        raise ValueError(
            f"MethodSpec.caps_group_mass of {spec.name!r}: only a trajectory-level method (a "
            f"coefficient_rule, or loss in {TRAJECTORY_LOSSES}) scales a group's mass"
        )
    if spec.removed_mass_bound not in (None, "tic", "gmc"):
        raise ValueError(
            f"MethodSpec.removed_mass_bound={spec.removed_mass_bound!r}: None, 'tic' or 'gmc'"
        )


_METHODS: Registry[MethodSpec] = Registry(
    "method",
    PAPER_METHODS,
    PLUGINS_ENV,
    check_spec,
    register_hint="register your own with gmc_grpo.methods.register_method",
)


def register_method(spec: MethodSpec, *, replace: bool = False) -> MethodSpec:
    """Add `spec` to the registry (every config, learner and figure then knows it).

    `replace=True` overwrites a spec of the same name; otherwise a taken name is an error.
    """
    return _METHODS.register(spec, replace=replace)


def unregister_method(name: str) -> None:
    """Remove a user's method (the paper's methods cannot be removed)."""
    _METHODS.unregister(name)


def method_names() -> tuple[str, ...]:
    """Every registered method, the paper's first (in the order of the figures)."""
    return _METHODS.names()


def get_method(name: str) -> MethodSpec:
    """The spec of `name`; an unknown name raises `ValueError` listing the registered ones."""
    return _METHODS.get(name)


def trajectory_method_names() -> tuple[str, ...]:
    """The registered methods that weight whole trajectories (`MethodSpec.trajectory_level`), in
    registry order: those a trajectory coefficient alone runs (the verl adapter's losses)."""
    return tuple(name for name in method_names() if get_method(name).trajectory_level)


def paper_advantage(name: str) -> str:
    """The advantage kind the paper uses for method `name` (Appendix B.1)."""
    return get_method(name).advantage
