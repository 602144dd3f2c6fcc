"""GMC-GRPO (and TIC-GRPO, VCPO's truncated IS, plain IS) as a verl policy loss (verl 0.9.x).

verl's policy losses (`verl.trainer.ppo.core_algos.register_policy_loss`; signature
`(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, config, rollout_is_weights)`,
all `[bs, T]`) see micro-batches without their group: verl reorders rows (`balance_batch`,
dynamic batch sizes) and micro-batches cut through groups. GMC's coefficient needs the whole
group (`rho_bar`, Prop. 2), so it is computed in two places:

1. The group step (`add_group_coefficients`), on the trainer process where the batch still has
   its group ids (`non_tensor_batch["uid"]`), the behavior log-probs of the rollout engine
   (`rollout_log_probs`, the policy that sampled the group, Appendix B.1) and verl's recomputed
   `old_log_probs` (`pi_old`, the learner's parameters at the start of the step). It computes
   `s_i = sum_t (log pi_old - log mu)` (core `trajectory_log_ratio`) and the detached
   coefficients `c_i(pi_old)` of the chosen method (core `log_coefficients`, regrouped by `uid`),
   and stores them per token in `batch["rollout_is_weights"]`, the tensor verl already carries to
   the policy loss. It runs inside verl's rollout-correction step
   (`verl.trainer.ppo.rollout_corr_helper.compute_rollout_correction_and_add_to_batch`), which
   `install_coefficient_step` wraps. Callers: the V1 trainer (`verl.trainer.ppo.v1.trainer_base`,
   `PPOTrainer._compute_advantage`, a from-import bound when that module is imported), the legacy
   `RayPPOTrainer.fit` and `SeparateRayPPOTrainer._fit_compute_advantage` (the base of the
   fully-async and one-step-off-policy trainers; both import the name when called). verl's own
   rejection sampling and metrics still run first.
2. The registered loss (`gmc_policy_loss`, under every trajectory-level method's name,
   `loss_names()`: `"gmc"`, `"tic"`, `"vcpo"`, `"is"` and a user's coefficient rule): per token
   `-c_i(theta) A_t log pi_theta(y_t)` with `c_i(theta) = c_i(pi_old) * pi_theta(y_i) / pi_old(y_i)`
   (trajectory ratio against `old_log_prob`, detached, its log clamped to +-20 as verl does per
   token), aggregated by verl's `agg_loss`. `loss_agg_mode="seq-mean-token-sum-norm"` with
   `loss_scale_factor = max response length` is the paper's `1/(T B G)` (eq. 2 and 9).

Switching it on, from verl's own config (keys of verl 0.9's schema; no new key, no environment
variable): `pip install -e ".[verl]"` (in a clone) declares the `verl.plugins` entry point
`gmc_grpo.integrations.verl_plugin`, which `import verl` loads in every verl process (driver,
trainer, workers). Then

- `algorithm.rollout_correction.rollout_is=gmc` (or `tic`, `vcpo`, `is`, any of `loss_names()`)
  selects the method of the group step; verl's own levels (`token`, `sequence`, null) keep verl's
  behaviour;
- `algorithm.rollout_correction.rollout_is_threshold` is the method's constant, as its spec says:
  the cap `1 + eps` for a method with `uses_eps` (GMC, TIC; 1.28 is the paper's eps = 0.28,
  Appendix B.1), the truncation for one with `uses_truncation` (VCPO; 8);
- `actor_rollout_ref.actor.policy_loss.loss_mode=gmc` (or the same method name) applies them.

verl's `validate_config` (called by `main_ppo` and the one-step-off-policy entry point) is wrapped
to refuse a loss and a group step that do not match. Fallback for setups that cannot pass
overrides: the environment variables `GMC_VERL_METHOD`, `GMC_VERL_EPS` (default 0.28) and
`GMC_VERL_TRUNCATION` (default 8), read when `rollout_is` is null.

Exactness (our interpretation, to be read with `docs/METHODS.md`, "recompute c_i at each step"): in
the paper's setting, one optimizer step per training batch (`ppo_epochs=1`,
`ppo_mini_batch_size = train_batch_size`; Appendix B.1, `inner_steps=1`), `pi_theta = pi_old` when
the loss is evaluated, and the gradient is exactly the method's estimator (eq. 4, 9). With several
mini-batches per step, the group decision (GMC's scale `alpha_b`, TIC's drop, VCPO's truncation)
is the one taken on `pi_old` and only the per-trajectory ratio follows `pi_theta`: verl gives the
loss no group, so the scale cannot be recomputed there. The same holds in the fully-async trainer
with `trigger_parameter_sync_step > 1`, whose `old_log_probs` come from the parameters of the last
weight sync (`FullyAsyncTrainer._compute_old_log_prob`).

Requirements: the rollout returns its log-probs (`actor_rollout_ref.rollout.calculate_log_probs=
True`, needed by the async modes anyway) and `algorithm.rollout_correction.bypass_mode=False`
(verl recomputes `old_log_probs`; the fully-async and one-step-off configs default to True, and
the installed step refuses it with an error).

This module imports verl only inside the functions that wire it (`register_policy_loss`,
`install_coefficient_step`, `activate`, the loss); the pure-tensor parts (`group_rows`,
`flat_log_coefficients`, `trajectory_coefficients`, `add_group_coefficients` on any object with
`.batch` / `.non_tensor_batch` mappings) run without it.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch
from torch import Tensor

from gmc_grpo.defaults import PAPER_EPS, VCPO_TRUNCATION
from gmc_grpo.estimators import capped_units, group_diagnostics, log_coefficients
from gmc_grpo.integrations.grouping import group_rows, groups_by_size
from gmc_grpo.logratio import effective_sample_size, trajectory_log_ratio
from gmc_grpo.methods import MethodSpec, get_method, trajectory_method_names

# verl versions whose hooks this module uses (registry signature, rollout-correction step and the
# trainers that call it) and that the tests ran on: 0.9.0 and 0.9.1.
SUPPORTED_VERL = ("0.9",)
TESTED_VERL_VERSIONS = ("0.9.0", "0.9.1")
LOSS_NAME = "gmc"
COEFFICIENT_KEY = "rollout_is_weights"  # verl's per-token channel from the batch to the loss
# verl clamps per-token log-ratios to +-20 before exp (compute_policy_loss_vanilla); we clamp the
# within-step trajectory drift log(pi_theta / pi_old) the same way.
DRIFT_CLAMP = 20.0
ENV_METHOD, ENV_EPS, ENV_TRUNCATION = "GMC_VERL_METHOD", "GMC_VERL_EPS", "GMC_VERL_TRUNCATION"


# ----------------------------------------------------------------------------------------------
# Pure-tensor parts (no verl).
# ----------------------------------------------------------------------------------------------


def loss_names() -> tuple[str, ...]:
    """Every name under which the loss is registered, so that `policy_loss.loss_mode` may name
    the method: the registered trajectory-level methods (`gmc_grpo.methods.
    trajectory_method_names`: `is`, `tic`, `gmc`, `vcpo` and a user's coefficient rule)."""
    return trajectory_method_names()


def trajectory_spec(method: str) -> MethodSpec:
    """The registry spec of `method`, which must weight whole trajectories (`is`, `tic`, `gmc`,
    `vcpo` or a registered method with a coefficient rule): the coefficient is all verl's loss
    receives. VCPO's baseline and step size are not used here (only its truncated IS)."""
    spec = get_method(method)
    if not spec.trajectory_level:
        allowed = list(trajectory_method_names())
        raise ValueError(f"method must be a trajectory-level method {allowed}, got {method!r}")
    return spec


def flat_log_coefficients(
    method: str,
    log_ratio: Tensor,
    uids: Sequence[Hashable],
    eps: float = PAPER_EPS,
    *,
    truncation: float = VCPO_TRUNCATION,
) -> Tensor:
    """`log c_i` of every row of a flat batch, the group found by `uid` (core `log_coefficients`).

    Args:
        method: `gmc`, `tic`, `vcpo`, `is` or a registered trajectory-level method.
        log_ratio: `[N]` trajectory log-ratios `s_i` in any row order.
        uids: `[N]` group ids.
        eps, truncation: as in `gmc_grpo.estimators.log_coefficients`.
    Returns:
        `[N]` detached log-coefficients in the input's row order; the result for a row does not
        depend on the order of the rows (the core computes on the regrouped `[B, G]` tensor).
    """
    spec = trajectory_spec(method)
    s = log_ratio.detach()
    if s.dim() != 1 or s.shape[0] != len(uids):
        raise ValueError(
            f"log_ratio must be [N] with N = len(uids) = {len(uids)}, got {tuple(s.shape)}"
        )
    out = torch.empty_like(s.float() if s.dtype in (torch.float16, torch.bfloat16) else s)
    for index in groups_by_size(group_rows(uids)).values():
        log_c = log_coefficients(
            spec.loss, s[index], eps, truncation=truncation, rule=spec.coefficient_rule
        )
        out[index] = log_c.to(out.dtype)
    return out


def trajectory_coefficients(
    old_log_probs: Tensor,
    behavior_log_probs: Tensor,
    response_mask: Tensor,
    uids: Sequence[Hashable],
    method: str = "gmc",
    eps: float = PAPER_EPS,
    *,
    truncation: float = VCPO_TRUNCATION,
) -> tuple[Tensor, dict[str, float]]:
    """Coefficients `c_i` at `pi_old` against the behavior policy, and diagnostics.

    Args:
        old_log_probs: `[N, T]` log-probs of the learner (verl's `old_log_probs`).
        behavior_log_probs: `[N, T]` log-probs of the rollout engine (`rollout_log_probs`).
        response_mask: `[N, T]`.
        uids: `[N]` group ids; rows in any order.
    Returns:
        `(c [N], metrics)`: detached float32 coefficients and scalar diagnostics named like the
        core's (`gmc/ratio/log_max`, `gmc/ratio/log_mean`, `gmc/ratio/ess`,
        `gmc/ratio/capped_frac` (groups for GMC, trajectories otherwise),
        `gmc/ratio/removed_mass` (mean over groups), `gmc/num_groups`).
    """
    s = trajectory_log_ratio(
        old_log_probs.detach(), behavior_log_probs.detach(), response_mask
    ).float()
    if not bool(torch.isfinite(s).all()):
        raise ValueError(
            "non-finite trajectory log-ratio: old_log_probs or rollout_log_probs has NaN/inf on "
            "response tokens (check the rollout engine's log-probs and the response mask)"
        )
    log_c = flat_log_coefficients(method, s, uids, eps, truncation=truncation)
    spec = trajectory_spec(method)
    capped, capped_total, removed, groups = 0.0, 0, 0.0, 0
    for index in groups_by_size(group_rows(uids)).values():
        diag = group_diagnostics(
            spec.loss, s[index], eps, truncation=truncation, rule=spec.coefficient_rule
        )
        flags = capped_units(spec.caps_group_mass, diag["capped"])
        capped += float(flags.sum())
        capped_total += flags.numel()
        removed += float(diag["removed_mass"].sum())
        groups += index.shape[0]
    metrics = {
        "gmc/ratio/log_max": float(s.max()),
        "gmc/ratio/log_mean": float(s.mean()),
        "gmc/ratio/ess": float(effective_sample_size(s)),
        "gmc/ratio/capped_frac": capped / max(capped_total, 1),
        "gmc/ratio/removed_mass": removed / max(groups, 1),
        "gmc/num_groups": float(groups),
    }
    return log_c.exp().float(), metrics


def add_group_coefficients(
    batch: Any,
    method: str = "gmc",
    eps: float = PAPER_EPS,
    *,
    truncation: float = VCPO_TRUNCATION,
) -> dict[str, float]:
    """The group step on a verl `DataProto` (or any object with `.batch` / `.non_tensor_batch`).

    Reads `non_tensor_batch["uid"]` `[N]`, `batch["old_log_probs"]`, `batch["rollout_log_probs"]`
    and `batch["response_mask"]` (`[N, T]`), writes `batch["rollout_is_weights"] = c_i *
    response_mask` (`[N, T]`, float32). Returns the diagnostics of `trajectory_coefficients`.
    """
    missing = [
        k
        for k in ("old_log_probs", "rollout_log_probs", "response_mask")
        if k not in batch.batch.keys()
    ]
    if "uid" not in batch.non_tensor_batch:
        missing.append("uid (non_tensor_batch)")
    if missing:
        raise KeyError(
            f"the GMC group step needs {missing} in the batch: set "
            "actor_rollout_ref.rollout.calculate_log_probs=True and keep "
            "algorithm.rollout_correction.bypass_mode=False"
        )
    mask = batch.batch["response_mask"]
    coef, metrics = trajectory_coefficients(
        batch.batch["old_log_probs"],
        batch.batch["rollout_log_probs"],
        mask,
        batch.non_tensor_batch["uid"],
        method,
        eps,
        truncation=truncation,
    )
    batch.batch[COEFFICIENT_KEY] = coef.to(mask.device).unsqueeze(-1) * mask.float()
    return metrics


def loss_matrix(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    coefficients: Tensor,
) -> tuple[Tensor, Tensor]:
    """Per-token surrogate `-c_i(theta) A_t log pi_theta(y_t)` before aggregation.

    Args:
        old_log_prob, log_prob, advantages, response_mask: `[bs, T]` (verl's loss inputs).
        coefficients: `[bs, T]` `c_i(pi_old)` per token (the group step's `rollout_is_weights`).
    Returns:
        `(loss_mat [bs, T], drift [bs])` with `drift = log pi_theta(y_i) - log pi_old(y_i)`
        (detached, clamped to +-DRIFT_CLAMP); `c_i(theta) = c_i(pi_old) exp(drift)`. Padded
        positions of `loss_mat` are exactly 0, whatever `log_prob` holds there.
    """
    valid = response_mask.bool()
    zero = torch.zeros((), dtype=torch.float32, device=log_prob.device)
    # torch.where, not a product with the mask: padding may hold -inf log-probs (0 * -inf = NaN)
    step = torch.where(valid, (log_prob.detach() - old_log_prob.detach()).float(), zero)
    drift = step.sum(dim=-1).clamp(-DRIFT_CLAMP, DRIFT_CLAMP)
    coef = coefficients.detach().float() * drift.exp().unsqueeze(-1)
    per_token = coef * advantages.detach().float() * log_prob.float()
    return -torch.where(valid, per_token, zero), drift


def gmc_policy_loss(
    old_log_prob: Tensor,
    log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    loss_agg_mode: str = "seq-mean-token-sum-norm",
    config: Any = None,
    rollout_is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Any]]:
    """The registered verl policy loss (`PolicyLossFn` signature of verl 0.9).

    Args:
        old_log_prob, log_prob, advantages, response_mask: `[bs, T]`.
        loss_agg_mode: verl's aggregation; `seq-mean-token-sum-norm` is the paper's `1/(T B G)`.
        config: verl's `ActorConfig`; only its `global_batch_info` (dp size, global batch size,
            loss scale factor) is used, passed on to `agg_loss`.
        rollout_is_weights: `[bs, T]` the group step's coefficients `c_i(pi_old)`.
    Returns:
        `(loss, metrics)` as verl expects.
    """
    if rollout_is_weights is None:
        raise RuntimeError(
            f"policy loss {LOSS_NAME!r} needs the group coefficients in batch['{COEFFICIENT_KEY}']: "
            "set algorithm.rollout_correction.rollout_is=gmc (or tic/vcpo/is, the method of the "
            "loss) with rollout_is_threshold=1.28 (the cap 1 + eps; VCPO: the truncation), "
            "actor_rollout_ref.rollout.calculate_log_probs=True and "
            "algorithm.rollout_correction.bypass_mode=False"
        )
    from verl.trainer.ppo.core_algos import agg_loss

    loss_mat, drift = loss_matrix(
        old_log_prob, log_prob, advantages, response_mask, rollout_is_weights
    )
    info = dict(getattr(config, "global_batch_info", None) or {})
    loss = agg_loss(loss_mat=loss_mat, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **info)
    metrics = {
        "actor/gmc_drift_abs_max": float(drift.abs().max()) if drift.numel() else 0.0,
        "actor/gmc_coef_mean": float(
            (rollout_is_weights * response_mask).sum() / response_mask.sum().clamp(min=1)
        ),
    }
    return loss, metrics


# ----------------------------------------------------------------------------------------------
# Which method the group step runs: verl's config, or the environment as a fallback.
# ----------------------------------------------------------------------------------------------


def _threshold(value: Any, method: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"algorithm.rollout_correction.rollout_is_threshold={value!r}: with rollout_is={method} it "
            "must be one number (the cap 1 + eps for gmc/tic, the truncation for vcpo), e.g. 1.28"
        ) from None
    if not math.isfinite(number):
        raise ValueError(
            f"algorithm.rollout_correction.rollout_is_threshold must be finite, got {value!r}"
        )
    return number


def resolve_method(
    rollout_corr_config: Any, environ: dict[str, str] | None = None
) -> tuple[str, float, float] | None:
    """`(method, eps, truncation)` that the group step runs for this config, or None (verl's own step).

    Args:
        rollout_corr_config: verl's `algorithm.rollout_correction` (a DictConfig, the dataclass or
            a dict; anything with `.get`), or None.
        environ: the environment (default `os.environ`), read only when `rollout_is` is null.
    Returns:
        None when `rollout_is` is one of verl's levels (`token`, `sequence`) or null with no
        `GMC_VERL_METHOD`; otherwise the method, `eps` (from `rollout_is_threshold = 1 + eps` for
        gmc/tic) and VCPO's truncation (from `rollout_is_threshold` for vcpo).
    """
    env = os.environ if environ is None else environ
    get = rollout_corr_config.get if rollout_corr_config is not None else (lambda *_: None)
    rollout_is = get("rollout_is", None)
    eps, truncation = PAPER_EPS, VCPO_TRUNCATION
    if rollout_is is not None and str(rollout_is) in trajectory_method_names():
        method = str(rollout_is)
        spec = get_method(method)
        threshold = _threshold(get("rollout_is_threshold", None), method)
        if spec.uses_eps:
            if not threshold > 1:
                raise ValueError(
                    f"algorithm.rollout_correction.rollout_is_threshold={threshold} with rollout_is={method}: "
                    "it is the cap 1 + eps and must be > 1 (the paper's eps = 0.28 is 1.28)"
                )
            eps = threshold - 1.0
        if spec.uses_truncation:
            truncation = threshold
    else:
        method = env.get(ENV_METHOD, "").strip()
        if not method:
            return None
        if rollout_is is not None:
            raise ValueError(
                f"{ENV_METHOD}={method} is set but algorithm.rollout_correction.rollout_is={rollout_is!r}: "
                f"set rollout_is={method} (and unset {ENV_METHOD}), or rollout_is=null"
            )
        eps = float(env.get(ENV_EPS, PAPER_EPS))
        truncation = float(env.get(ENV_TRUNCATION, VCPO_TRUNCATION))
        if not math.isfinite(truncation):
            raise ValueError(f"{ENV_TRUNCATION} must be finite, got {truncation}")
    _check_method(method, eps, truncation)
    return method, eps, truncation


def _check_method(method: str, eps: float, truncation: float) -> None:
    trajectory_spec(method)
    if not eps > 0:
        raise ValueError(f"eps must be > 0 (the cap is 1 + eps), got {eps}")
    if not truncation > 0:
        raise ValueError(f"truncation must be > 0, got {truncation}")


def _without_verl_weights(rollout_corr_config: Any) -> dict[str, Any]:
    """verl's config with `rollout_is=None`: verl's step then runs only its rejection sampling and
    metrics, and GMC's coefficients are the only weights the loss receives."""
    keys = (
        "rollout_is_threshold",
        "rollout_is_batch_normalize",
        "rollout_rs",
        "rollout_rs_threshold",
        "bypass_mode",
        "loss_type",
    )
    config = {key: rollout_corr_config.get(key, None) for key in keys}
    config["rollout_is_threshold"] = config["rollout_is_threshold"] or 2.0
    config["rollout_is_batch_normalize"] = bool(config["rollout_is_batch_normalize"])
    config["rollout_is"] = None
    return config


def check_loss_matches_step(config: Any, environ: dict[str, str] | None = None) -> None:
    """Refuse a verl config whose loss and group step disagree (wrapped into `validate_config`).

    Args:
        config: verl's whole trainer config (`actor_rollout_ref`, `algorithm`).
    Raises:
        ValueError naming the keys to set when `policy_loss.loss_mode` is one of `loss_names()` but
        the group step would not run (or runs another method), or when the group step runs but
        the loss is verl's (which would read GMC's coefficients as its own IS weights).
    """
    try:
        loss_mode = str(config.actor_rollout_ref.actor.policy_loss.loss_mode)
    except AttributeError:
        return
    algorithm = config.get("algorithm", None) if hasattr(config, "get") else None
    rollout_corr = algorithm.get("rollout_correction", None) if algorithm is not None else None
    choice = resolve_method(rollout_corr, environ)
    if loss_mode in loss_names():
        if choice is None:
            raise ValueError(
                f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode} needs the group step: set "
                f"algorithm.rollout_correction.rollout_is={loss_mode if loss_mode != LOSS_NAME else 'gmc'} "
                "and rollout_is_threshold (1.28 = the cap 1 + eps for gmc/tic, the truncation for vcpo)"
            )
        if loss_mode != LOSS_NAME and choice[0] != loss_mode:
            raise ValueError(
                f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode} but the group step runs "
                f"{choice[0]!r} (algorithm.rollout_correction.rollout_is): make them the same method"
            )
    elif choice is not None:
        raise ValueError(
            f"algorithm.rollout_correction.rollout_is={choice[0]} computes GMC-style group coefficients, "
            f"but actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode} would read them as verl's "
            f"IS weights: set loss_mode={choice[0]}"
        )


# ----------------------------------------------------------------------------------------------
# Wiring into verl (imports verl).
# ----------------------------------------------------------------------------------------------


def _require_verl() -> Any:
    try:
        import verl
    except ImportError as exc:
        raise ImportError(
            "the verl adapter needs verl 0.9.x: pip install -e '.[verl]' in a gmc-grpo clone "
            "(in an environment of its own: verl pins transformers<5.11)"
        ) from exc
    version = str(getattr(verl, "__version__", "unknown"))
    if ".".join(version.split(".")[:2]) not in SUPPORTED_VERL:
        raise ImportError(
            f"gmc_grpo.integrations.verl supports verl {', '.join(v + '.x' for v in SUPPORTED_VERL)} "
            f"(tested: {', '.join(TESTED_VERL_VERSIONS)}; its register_policy_loss signature and "
            f"rollout-correction step); found verl=={version}. pip install -e '.[verl]' in a gmc-grpo clone installs one."
        )
    return verl


def register_policy_loss(names: Sequence[str] | None = None) -> None:
    """Register `gmc_policy_loss` in verl's registry under each of `names` (`policy_loss.loss_mode`;
    default `loss_names()`, the trajectory-level methods registered now)."""
    _require_verl()
    from verl.trainer.ppo import core_algos

    for name in loss_names() if names is None else names:
        core_algos.register_policy_loss(name)(gmc_policy_loss)


def make_coefficient_step(
    original: Callable[[Any, Any], tuple[Any, dict]],
    environ: dict[str, str] | None = None,
) -> Callable[[Any, Any], tuple[Any, dict]]:
    """Wrap verl's `compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config)`.

    The wrapper reads the method from the config (`resolve_method`); when none is chosen it is
    verl's step unchanged. Otherwise it runs verl's step without verl's IS weights (rejection
    sampling, metrics), then `add_group_coefficients`, and merges the metrics (with `gmc/cap`,
    `1 + eps`, and `gmc/truncation`, so the constants in use show in verl's step log).
    """

    def step(batch: Any, rollout_corr_config: Any) -> tuple[Any, dict]:
        choice = resolve_method(rollout_corr_config, environ)
        if choice is None:
            return original(batch, rollout_corr_config)
        method, eps, truncation = choice
        batch, metrics = original(batch, _without_verl_weights(rollout_corr_config))
        metrics = dict(metrics)
        metrics.update(add_group_coefficients(batch, method, eps, truncation=truncation))
        metrics["gmc/cap"] = 1.0 + eps
        metrics["gmc/truncation"] = truncation
        return batch, metrics

    step.__gmc_original__ = original  # type: ignore[attr-defined]
    return step


def make_bypass_guard(
    original: Callable[..., Any], environ: dict[str, str] | None = None
) -> Callable[..., Any]:
    """Wrap verl's `apply_bypass_mode`: it stops with a clear error when a GMC method is chosen.

    In bypass mode verl skips the group step and forces `loss_mode="bypass_mode"`, which would
    silently train without GMC (the fully-async and one-step-off configs turn it on by default).
    """

    def guard(batch: Any = None, rollout_corr_config: Any = None, policy_loss_config: Any = None):
        choice = resolve_method(rollout_corr_config, environ)
        if choice is not None:
            raise ValueError(
                f"GMC method {choice[0]!r} chosen but algorithm.rollout_correction.bypass_mode=True: "
                "verl would skip the group step and replace the policy loss by 'bypass_mode'. Set "
                "algorithm.rollout_correction.bypass_mode=False (the fully-async and one-step-off-policy "
                "configs turn it on by default)"
            )
        return original(
            batch=batch,
            rollout_corr_config=rollout_corr_config,
            policy_loss_config=policy_loss_config,
        )

    guard.__gmc_original__ = original  # type: ignore[attr-defined]
    return guard


def make_config_check(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap verl's `validate_config(config, ...)`: `check_loss_matches_step` first."""

    def validate(config: Any, *args: Any, **kwargs: Any) -> Any:
        check_loss_matches_step(config)
        return original(config, *args, **kwargs)

    validate.__gmc_original__ = original  # type: ignore[attr-defined]
    return validate


def _wrap(
    module: Any, name: str, factory: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Any:
    current = getattr(module, name)
    wrapped = factory(getattr(current, "__gmc_original__", current))
    setattr(module, name, wrapped)
    return wrapped


# Modules that bind verl's step or config check with a from-import when they are imported: a
# module imported before `install_coefficient_step` ran gets the wrapped name set directly.
FROM_IMPORTERS = {
    "compute_rollout_correction_and_add_to_batch": ("verl.trainer.ppo.v1.trainer_base",),
    "validate_config": (
        "verl.trainer.main_ppo",
        "verl.trainer.main_ppo_v0",
        "verl.experimental.one_step_off_policy.main_ppo",
    ),
}


def install_coefficient_step() -> None:
    """Make verl's rollout-correction step also compute the group coefficients (this process).

    Wraps `verl.trainer.ppo.rollout_corr_helper.compute_rollout_correction_and_add_to_batch`
    (`make_coefficient_step`; looked up at call time by `RayPPOTrainer` and
    `SeparateRayPPOTrainer`, hence the fully-async and one-step-off-policy trainers, and bound by
    `verl.trainer.ppo.v1.trainer_base` when it is imported), `apply_bypass_mode`
    (`make_bypass_guard`) and `verl.utils.config.validate_config` (`make_config_check`). Each
    wrapper reads the method from the config it is given, so other configs keep verl's
    behaviour. Idempotent.
    """
    _require_verl()
    from verl.trainer.ppo import rollout_corr_helper
    from verl.utils import config as verl_config

    wrapped = {
        "compute_rollout_correction_and_add_to_batch": _wrap(
            rollout_corr_helper,
            "compute_rollout_correction_and_add_to_batch",
            make_coefficient_step,
        ),
        "validate_config": _wrap(verl_config, "validate_config", make_config_check),
    }
    _wrap(rollout_corr_helper, "apply_bypass_mode", make_bypass_guard)
    for name, modules in FROM_IMPORTERS.items():
        for module_name in modules:
            module = sys.modules.get(module_name)
            if module is not None and hasattr(module, name):
                setattr(module, name, wrapped[name])


def activate() -> None:
    """Register the losses and install the config-driven group step (what the plugin runs)."""
    register_policy_loss()
    install_coefficient_step()


def activate_from_environment(environ: dict[str, str] | None = None) -> str | None:
    """`activate()`, and the method the environment fallback chooses (`GMC_VERL_METHOD`) or None."""
    activate()
    choice = resolve_method(None, environ)
    return None if choice is None else choice[0]


__all__ = [
    "COEFFICIENT_KEY",
    "LOSS_NAME",
    "SUPPORTED_VERL",
    "TESTED_VERL_VERSIONS",
    "activate",
    "activate_from_environment",
    "add_group_coefficients",
    "check_loss_matches_step",
    "flat_log_coefficients",
    "gmc_policy_loss",
    "group_rows",
    "install_coefficient_step",
    "loss_names",
    "loss_matrix",
    "make_bypass_guard",
    "make_coefficient_step",
    "make_config_check",
    "register_policy_loss",
    "resolve_method",
    "trajectory_coefficients",
]
