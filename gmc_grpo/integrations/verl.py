"""GMC-GRPO (and TIC-GRPO, VCPO's truncated IS, plain IS) as a verl policy loss (verl 0.9.1).

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
   (`verl.trainer.ppo.rollout_corr_helper.compute_rollout_correction_and_add_to_batch`, called by
   `RayPPOTrainer.fit` and by `SeparateRayPPOTrainer._fit_compute_advantage`, the base of the
   fully-async and one-step-off-policy trainers), which `install_coefficient_step` wraps: verl's
   own rejection sampling and metrics still run first.
2. The registered loss (`gmc_policy_loss`, name `"gmc"`): per token
   `-c_i(theta) A_t log pi_theta(y_t)` with `c_i(theta) = c_i(pi_old) * pi_theta(y_i) / pi_old(y_i)`
   (trajectory ratio against `old_log_prob`, detached, its log clamped to +-20 as verl does per
   token), aggregated by verl's `agg_loss`. `loss_agg_mode="seq-mean-token-sum-norm"` with
   `loss_scale_factor = max response length` is the paper's `1/(T B G)` (eq. 2 and 9).

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
True`, needed by the async modes anyway), `algorithm.rollout_correction.bypass_mode=False` (verl
recomputes `old_log_probs`; the fully-async and one-step-off configs default to True, and the
installed step refuses it with an error) and `rollout_is=null` (GMC's coefficient replaces
verl's token/sequence IS weights). Enabling: the loss is registered in every verl process by
importing `gmc_grpo.integrations.verl_plugin` (verl imports the modules named in the environment
variable `VERL_USE_EXTERNAL_MODULES`); the group step is installed by the same import when the
environment variable `GMC_VERL_METHOD` names a method (`gmc`, `tic`, `vcpo`, `is`), with
`GMC_VERL_EPS` (default 0.28, Appendix B.1) and `GMC_VERL_TRUNCATION` (VCPO, default 8). Without
`GMC_VERL_METHOD` nothing in verl's data path changes, so other losses keep verl's behaviour.

This module imports verl only inside `register_policy_loss`, `install_coefficient_step`,
`activate_from_environment` and the loss itself; the pure-tensor parts (`group_rows`,
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

from gmc_grpo.estimators import (
    PAPER_CAP_EPS,
    VCPO_TRUNCATION,
    capped_units,
    group_diagnostics,
    log_coefficients,
)
from gmc_grpo.logratio import effective_sample_size, trajectory_log_ratio
from gmc_grpo.methods import MethodSpec, get_method, method_names

TARGET_VERL_VERSION = "0.9.1"
LOSS_NAME = "gmc"
COEFFICIENT_KEY = "rollout_is_weights"  # verl's per-token channel from the batch to the loss
# verl clamps per-token log-ratios to +-20 before exp (compute_policy_loss_vanilla); we clamp the
# within-step trajectory drift log(pi_theta / pi_old) the same way.
DRIFT_CLAMP = 20.0
ENV_METHOD, ENV_EPS, ENV_TRUNCATION = "GMC_VERL_METHOD", "GMC_VERL_EPS", "GMC_VERL_TRUNCATION"


# ----------------------------------------------------------------------------------------------
# Pure-tensor parts (no verl).
# ----------------------------------------------------------------------------------------------


def trajectory_spec(method: str) -> MethodSpec:
    """The registry spec of `method`, which must weight whole trajectories (`is`, `tic`, `gmc`,
    `vcpo` or a registered method with a coefficient rule): the coefficient is all verl's loss
    receives. VCPO's baseline and step size are not used here (only its truncated IS)."""
    spec = get_method(method)
    if not spec.trajectory_level:
        allowed = [m for m in method_names() if get_method(m).trajectory_level]
        raise ValueError(f"method must be a trajectory-level method {allowed}, got {method!r}")
    return spec


def group_rows(uids: Sequence[Hashable]) -> list[Tensor]:
    """Row indices of every group, in order of first appearance.

    Args:
        uids: `[N]` group id of each row (verl's `non_tensor_batch["uid"]`, a numpy object array
            of strings; anything hashable works). Rows of a group may be anywhere in the batch.
    Returns:
        one `LongTensor [G_b]` per group (rows in increasing order).
    """
    rows: dict[Hashable, list[int]] = {}
    for row, uid in enumerate(list(uids)):
        rows.setdefault(uid, []).append(row)
    return [torch.tensor(r, dtype=torch.long) for r in rows.values()]


def _buckets(groups: list[Tensor]) -> dict[int, Tensor]:
    """Groups of equal size stacked: `{G: LongTensor [B_G, G]}` (verl may drop rows)."""
    by_size: dict[int, list[Tensor]] = {}
    for g in groups:
        by_size.setdefault(int(g.numel()), []).append(g)
    return {size: torch.stack(gs) for size, gs in by_size.items()}


def flat_log_coefficients(
    method: str,
    log_ratio: Tensor,
    uids: Sequence[Hashable],
    eps: float = PAPER_CAP_EPS,
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
    for index in _buckets(group_rows(uids)).values():
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
    eps: float = PAPER_CAP_EPS,
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
    for index in _buckets(group_rows(uids)).values():
        diag = group_diagnostics(
            spec.loss, s[index], eps, truncation=truncation, rule=spec.coefficient_rule
        )
        flags = capped_units(spec.loss, diag["capped"])
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
    eps: float = PAPER_CAP_EPS,
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
    """The registered verl policy loss (`PolicyLossFn` signature of verl 0.9.1).

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
            f"set {ENV_METHOD}=gmc (or tic/vcpo/is) next to VERL_USE_EXTERNAL_MODULES="
            "gmc_grpo.integrations.verl_plugin, actor_rollout_ref.rollout.calculate_log_probs=True, "
            "algorithm.rollout_correction.rollout_is=null and bypass_mode=False"
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
# Wiring into verl (imports verl).
# ----------------------------------------------------------------------------------------------


def _require_verl() -> Any:
    try:
        import verl
    except ImportError as exc:
        raise ImportError(
            f"the verl adapter needs verl=={TARGET_VERL_VERSION}: pip install 'gmc-grpo[verl]' "
            "(in an environment of its own: verl pins transformers<5.11)"
        ) from exc
    version = getattr(verl, "__version__", "unknown")
    if version != TARGET_VERL_VERSION:
        raise ImportError(
            f"gmc_grpo.integrations.verl targets verl=={TARGET_VERL_VERSION} (its register_policy_loss "
            f"signature and rollout-correction step); found verl=={version}. "
            f"Install verl=={TARGET_VERL_VERSION}."
        )
    return verl


def register_policy_loss(name: str = LOSS_NAME) -> None:
    """Register `gmc_policy_loss` in verl's registry under `name` (`policy_loss.loss_mode`)."""
    _require_verl()
    from verl.trainer.ppo import core_algos

    core_algos.register_policy_loss(name)(gmc_policy_loss)


def _check_method(method: str, eps: float, truncation: float) -> None:
    trajectory_spec(method)
    if not eps > 0:
        raise ValueError(f"eps must be > 0 (the cap is 1 + eps), got {eps}")
    if not truncation > 0:
        raise ValueError(f"truncation must be > 0, got {truncation}")


def make_coefficient_step(
    original: Callable[[Any, Any], tuple[Any, dict]],
    method: str,
    eps: float,
    truncation: float,
) -> Callable[[Any, Any], tuple[Any, dict]]:
    """Wrap verl's `compute_rollout_correction_and_add_to_batch(batch, rollout_corr_config)`.

    The wrapper refuses verl's own IS weights (`rollout_is` must be null), runs verl's step
    (rejection sampling, metrics), then `add_group_coefficients` and merges the metrics.
    """
    _check_method(method, eps, truncation)

    def step(batch: Any, rollout_corr_config: Any) -> tuple[Any, dict]:
        rollout_is = (
            rollout_corr_config.get("rollout_is", None) if rollout_corr_config is not None else None
        )
        if rollout_is is not None:
            raise ValueError(
                f"algorithm.rollout_correction.rollout_is={rollout_is!r}: with GMC set it to null; the "
                "group coefficient against the rollout log-probs replaces verl's IS weights"
            )
        batch, metrics = original(batch, rollout_corr_config)
        metrics = dict(metrics)
        metrics.update(add_group_coefficients(batch, method, eps, truncation=truncation))
        return batch, metrics

    step.__gmc_original__ = original  # type: ignore[attr-defined]
    return step


def _refuse_bypass_mode(*_: Any, **__: Any) -> None:
    raise ValueError(
        f"{ENV_METHOD} is set (GMC group step installed) but algorithm.rollout_correction.bypass_mode="
        "True: verl would skip the group step and replace the policy loss by 'bypass_mode'. Set "
        "algorithm.rollout_correction.bypass_mode=False (the fully-async and one-step-off-policy "
        "configs turn it on by default)"
    )


def install_coefficient_step(
    method: str = "gmc",
    eps: float = PAPER_CAP_EPS,
    truncation: float = VCPO_TRUNCATION,
) -> None:
    """Make verl's rollout-correction step also compute the group coefficients (this process).

    Patches `verl.trainer.ppo.rollout_corr_helper.compute_rollout_correction_and_add_to_batch`
    (looked up at call time by `RayPPOTrainer` and `SeparateRayPPOTrainer`, hence the
    fully-async and one-step-off-policy trainers) and the name imported by
    `verl.trainer.ppo.v1.trainer_base` if that module is loaded, and makes verl's bypass mode
    (`apply_bypass_mode`, looked up the same way) stop with a clear error. Idempotent.
    """
    _require_verl()
    from verl.trainer.ppo import rollout_corr_helper

    current = rollout_corr_helper.compute_rollout_correction_and_add_to_batch
    original = getattr(current, "__gmc_original__", current)
    step = make_coefficient_step(original, method, eps, truncation)
    rollout_corr_helper.compute_rollout_correction_and_add_to_batch = step
    # In bypass mode verl skips the step above and forces `loss_mode="bypass_mode"`, which would
    # silently train without GMC (the fully-async and one-step-off configs turn it on by default).
    rollout_corr_helper.apply_bypass_mode = _refuse_bypass_mode
    v1 = sys.modules.get("verl.trainer.ppo.v1.trainer_base")
    if v1 is not None and hasattr(v1, "compute_rollout_correction_and_add_to_batch"):
        v1.compute_rollout_correction_and_add_to_batch = step


def activate_from_environment(environ: dict[str, str] | None = None) -> str | None:
    """Register the loss; install the group step if `GMC_VERL_METHOD` is set. Returns the method."""
    env = os.environ if environ is None else environ
    register_policy_loss()
    method = env.get(ENV_METHOD, "").strip()
    if not method:
        return None
    eps = float(env.get(ENV_EPS, PAPER_CAP_EPS))
    truncation = float(env.get(ENV_TRUNCATION, VCPO_TRUNCATION))
    if not math.isfinite(truncation):
        raise ValueError(f"{ENV_TRUNCATION} must be finite, got {truncation}")
    install_coefficient_step(method, eps, truncation)  # type: ignore[arg-type]
    return method


__all__ = [
    "COEFFICIENT_KEY",
    "LOSS_NAME",
    "TARGET_VERL_VERSION",
    "activate_from_environment",
    "add_group_coefficients",
    "flat_log_coefficients",
    "gmc_policy_loss",
    "group_rows",
    "install_coefficient_step",
    "loss_matrix",
    "make_coefficient_step",
    "register_policy_loss",
    "trajectory_coefficients",
]
