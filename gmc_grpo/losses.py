"""Policy losses: one surrogate per method, selected by one `Literal` name.

Each loss is a scalar whose gradient at the current parameters is `-g`, with `g` the method's
estimator (`gmc_grpo.estimators.token_gradient_weights` writes `g` out by hand; the tests check
autograd against it). The paper's normalisation is `1/(T B G)` (eq. 2, 4, 9) with `T` the
maximum response length; `aggregation` offers the usual alternatives.

| `method` | surrogate (per minibatch, before normalisation)                         | source      |
|----------|-------------------------------------------------------------------------|-------------|
| `is`     | `-sum_i sg(rho_i) A_i log pi(y_i)`                                      | eq. 2       |
| `tic`    | `-sum_i sg(rho_i 1{rho_i <= 1+eps}) A_i log pi(y_i)`                    | §4.3        |
| `gmc`    | `-sum_i sg(rho_i / max{1, rho_bar/(1+eps)}) A_i log pi(y_i)`            | eq. 9       |
| `vcpo`   | `-sum_i sg(min{rho_i, c}) A_i log pi(y_i)`                              | VCPO (§3)   |
| `grpo`   | `-sum_{i,t} min(r_t A_i, clip(r_t, 1-eps_l, 1+eps_h) A_i)`              | Shao et al. |
| `a3po`   | `-sum_{i,t} sg(pi_prox/mu) min(r A, clip(r) A) 1{pi_prox/mu <= 5}`, `r = pi/pi_prox` | A-3PO |

With several optimizer steps on one batch the coefficients are recomputed from the current
log-probs at every step (`docs/METHODS.md`): call the loss again, nothing is cached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from gmc_grpo.defaults import A3PO_MASK_THRESHOLD, PAPER_EPS, TOKEN_CLIP, VCPO_TRUNCATION
from gmc_grpo.estimators import (
    AGGREGATIONS,
    METHODS,
    TRAJECTORY_METHODS,
    Aggregation,
    CoefficientRule,
    a3po_log_prox_weight,
    capped_units,
    group_diagnostics,
    log_coefficients,
    normaliser,
    token_clip_active,
    token_gradient_weights,
)
from gmc_grpo.logratio import effective_sample_size, group_weight_concentration, token_log_ratio


@dataclass(frozen=True)
class PolicyLossConfig:
    """Which surrogate and with what constants (`gmc_grpo.methods` builds one per method)."""

    method: str = "gmc"
    """one of `is`, `tic`, `gmc`, `vcpo`, `grpo`, `a3po`; any name with `coefficient_rule`"""
    eps: float = PAPER_EPS
    """the cap `1 + eps` of TIC and GMC (0.28, Appendix B.1); `inf` gives plain IS"""
    clip_low: float = TOKEN_CLIP
    """lower token clip `1 - clip_low` of GRPO and A-3PO (0.2, Appendix B.1)"""
    clip_high: float = TOKEN_CLIP
    """upper token clip `1 + clip_high` of GRPO and A-3PO (0.2, Appendix B.1)"""
    truncation: float = VCPO_TRUNCATION
    """VCPO's sequence-level truncation `c` (8 in VCPO's public code)"""
    a3po_mask_threshold: float = A3PO_MASK_THRESHOLD
    """A-3PO masks tokens with `pi_prox / mu` above this (5, AReaL)"""
    aggregation: Aggregation = "paper"
    """`paper` (`1/(T B G)`), `token_mean` or `seq_mean_token_mean`"""
    max_length: int | None = None
    """`T` in `1/(T B G)`; None uses the padded length (paper: 4,096, Appendix B.1)"""
    coefficient_rule: CoefficientRule | None = None
    """a user's trajectory weighting `(s, eps) -> log c` (a registered method's, see
    `gmc_grpo.methods`); the loss is then the trajectory surrogate with these coefficients"""
    caps_group_mass: bool | None = None
    """the cap scales whole groups, so `ratio/capped_frac` counts groups, not trajectories (a
    registered method's `MethodSpec.caps_group_mass`, which its `loss_config` sets); None: the
    core loss's own (`gmc`'s one scale per group: yes; the others: no)"""

    @property
    def counts_groups(self) -> bool:
        """`ratio/capped_frac` counts capped groups (`caps_group_mass`, else the core loss's)."""
        if self.caps_group_mass is None:
            return self.method == "gmc"  # the core's GMC loss: one scale per group (eq. 9)
        return self.caps_group_mass

    @property
    def trajectory_level(self) -> bool:
        """The surrogate weights whole trajectories (`c_i`), the weighted class of eq. 4-5."""
        return self.method in TRAJECTORY_METHODS or self.coefficient_rule is not None

    def __post_init__(self) -> None:
        if self.method not in METHODS and self.coefficient_rule is None:
            raise ValueError(
                f"PolicyLossConfig.method must be one of {METHODS} (or come with a "
                f"coefficient_rule), got {self.method!r}"
            )
        if not self.eps > 0:
            raise ValueError(f"PolicyLossConfig.eps must be > 0 (cap 1 + eps), got {self.eps}")
        if not 0 <= self.clip_low < 1:
            raise ValueError(f"PolicyLossConfig.clip_low must be in [0, 1), got {self.clip_low}")
        if not self.clip_high >= 0:
            raise ValueError(f"PolicyLossConfig.clip_high must be >= 0, got {self.clip_high}")
        if not self.truncation > 0:
            raise ValueError(f"PolicyLossConfig.truncation must be > 0, got {self.truncation}")
        if not self.a3po_mask_threshold > 0:
            raise ValueError(
                f"PolicyLossConfig.a3po_mask_threshold must be > 0, got {self.a3po_mask_threshold}"
            )
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(
                f"PolicyLossConfig.aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}"
            )
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"PolicyLossConfig.max_length must be >= 1, got {self.max_length}")


def _check_inputs(
    logprobs: Tensor, behavior_logprobs: Tensor, advantages: Tensor, mask: Tensor
) -> None:
    if logprobs.dim() != 3:
        raise ValueError(f"logprobs must be [B, G, T], got shape {tuple(logprobs.shape)}")
    if advantages.shape != logprobs.shape[:2]:
        raise ValueError(
            f"advantages must be [B, G] = {tuple(logprobs.shape[:2])}, got {tuple(advantages.shape)}"
        )
    if logprobs.shape[1] < 2:
        raise ValueError(f"group size G must be >= 2, got G={logprobs.shape[1]}")
    valid = mask.bool()
    for name, tensor in (("logprobs", logprobs), ("behavior_logprobs", behavior_logprobs)):
        bad = ~torch.isfinite(tensor.detach()) & valid
        if bool(bad.any()):
            raise ValueError(
                f"{name} has {int(bad.sum())} non-finite values on response tokens "
                "(NaN/inf log-probs: check the rollout engine's output and the mask)"
            )


def policy_loss(
    logprobs: Tensor,
    behavior_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    config: PolicyLossConfig,
    *,
    version_lag: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The method's surrogate loss and its diagnostics.

    Args:
        logprobs: `[B, G, T]` log pi_theta of the sampled tokens (requires grad).
        behavior_logprobs: `[B, G, T]` log mu recorded at generation time.
        advantages: `[B, G]`.
        mask: `[B, G, T]` response mask.
        config: `PolicyLossConfig`.
        version_lag: A-3PO only, `[B, G]` learner versions since the behavior policy.
    Returns:
        `(loss, diagnostics)`: a scalar loss (float32 for half-precision inputs, else their dtype), and detached scalar tensors keyed by the
        metric names of `gmc_grpo.records.METRIC_NAMES` (`ratio/log_max`, `ratio/log_mean`,
        `ratio/ess`, `ratio/capped_frac`, `ratio/removed_mass`, `ratio/clipped_token_frac`,
        `ratio/kl_estimate`).
    """
    _check_inputs(logprobs, behavior_logprobs, advantages, mask)
    method = config.method
    delta = token_log_ratio(logprobs, behavior_logprobs, mask)  # [B, G, T], carries grad
    valid = mask.bool()
    norm = normaliser(mask, config.aggregation, config.max_length).to(delta.dtype)
    adv = advantages.detach().to(delta.dtype)
    log_ratio = delta.detach().sum(dim=-1)  # s_i, [B, G]
    diagnostics = _ratio_diagnostics(log_ratio)

    if config.trajectory_level:
        constants = {"truncation": config.truncation, "rule": config.coefficient_rule}
        log_c = log_coefficients(method, log_ratio, config.eps, **constants)
        weight = (log_c.exp() * adv).unsqueeze(-1)  # [B, G, 1], detached
        lp = logprobs.float() if logprobs.dtype in (torch.bfloat16, torch.float16) else logprobs
        loss = -(_masked(weight * lp, valid) / norm).sum()
        groups = group_diagnostics(method, log_ratio, config.eps, **constants)
        diagnostics.update(_group_concentration("weight", log_c))
        frac = capped_units(config.counts_groups, groups["capped"])
        diagnostics["ratio/capped_frac"] = frac.float().mean()
        diagnostics["ratio/removed_mass"] = groups["removed_mass"].mean().float()
        return loss, diagnostics

    adv_t = adv.unsqueeze(-1)
    if method == "grpo":
        ratio = delta.exp()
        clipped = ratio.clamp(1 - config.clip_low, 1 + config.clip_high)
        per_token = torch.minimum(ratio * adv_t, clipped * adv_t)
        active = token_clip_active(ratio.detach(), adv_t, config.clip_low, config.clip_high)
        kept = torch.ones_like(active)
        prox_weight = torch.ones_like(delta)
    elif method == "a3po":
        if version_lag is None:
            raise ValueError("method 'a3po' needs version_lag ([B, G] learner versions behind)")
        lag = version_lag.to(delta.dtype).unsqueeze(-1)
        log_prox = a3po_log_prox_weight(delta.detach(), lag)  # log(pi_prox / mu), detached
        ratio = (delta - log_prox).exp()  # pi_theta / pi_prox
        clipped = ratio.clamp(1 - config.clip_low, 1 + config.clip_high)
        kept = log_prox <= math.log(config.a3po_mask_threshold)
        prox_weight = log_prox.exp() * kept
        per_token = torch.minimum(ratio * adv_t, clipped * adv_t)
        active = token_clip_active(ratio.detach(), adv_t, config.clip_low, config.clip_high)
        diagnostics["a3po/masked_token_frac"] = _token_frac(~kept, mask)
    else:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    loss = -(_masked(prox_weight * per_token, valid) / norm).sum()
    zero_gradient = (~active | ~kept) & (adv_t != 0)
    diagnostics["ratio/clipped_token_frac"] = _token_frac(zero_gradient, mask)
    return loss, diagnostics


def _masked(values: Tensor, valid: Tensor) -> Tensor:
    """`values` on response tokens, exactly 0 on padding, `[B, G, T]`.

    Selected with `torch.where`, not multiplied by the mask: a padded position may hold `-inf`
    (an engine's log-prob of a pad token) and `0 * -inf` is NaN, which would make the loss NaN
    (its gradient stays finite: `where` sends none to the unselected branch).
    """
    return torch.where(valid, values, torch.zeros((), dtype=values.dtype, device=values.device))


def _token_frac(flags: Tensor, mask: Tensor) -> Tensor:
    valid = mask.bool()
    return (flags & valid).sum().float() / valid.sum().clamp(min=1).float()


def _ratio_diagnostics(log_ratio: Tensor) -> dict[str, Tensor]:
    """Log-ratio statistics of a batch `[B, G]`, detached scalars."""
    s = log_ratio.double()
    rho = s.exp()
    # Per-trajectory estimate of KL(pi_theta || mu) under mu-samples: rho s - rho + 1 (>= 0).
    kl_terms = torch.where(s == 0, torch.zeros_like(s), rho * s - rho + 1)
    return {
        "ratio/log_max": log_ratio.max().float(),
        "ratio/log_mean": log_ratio.mean().float(),
        "ratio/ess": effective_sample_size(log_ratio).float(),
        "ratio/kl_estimate": kl_terms.mean().float(),
        **_group_concentration("ratio", log_ratio),
    }


def _group_concentration(prefix: str, log_weight: Tensor) -> dict[str, Tensor]:
    """Per group of `log_weight` `[B, G]`, the largest weight share and the normalised ESS
    (`gmc_grpo.logratio.group_weight_concentration`), summarised over the batch's B groups:
    `<prefix>/group_share_max` (the largest share of any group), `<prefix>/group_ess_min` and
    `<prefix>/group_ess_mean`."""
    share, ess = group_weight_concentration(log_weight)
    return {
        f"{prefix}/group_share_max": share.max().float(),
        f"{prefix}/group_ess_min": ess.min().float(),
        f"{prefix}/group_ess_mean": ess.mean().float(),
    }


def gradient_weights(
    config: PolicyLossConfig,
    logprobs: Tensor,
    behavior_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    version_lag: Tensor | None = None,
) -> Tensor:
    """The loss's estimator as per-token weights `psi` (`estimators.token_gradient_weights` with
    the constants of `config`): `g = sum psi grad log pi`, the negative gradient of the loss.

    Shapes as in `token_gradient_weights` (`[..., B, G, T]`, advantages `[..., B, G]`).
    """
    return token_gradient_weights(
        config.method,
        logprobs,
        behavior_logprobs,
        advantages,
        mask,
        eps=config.eps,
        truncation=config.truncation,
        clip_low=config.clip_low,
        clip_high=config.clip_high,
        version_lag=version_lag,
        a3po_mask_threshold=config.a3po_mask_threshold,
        aggregation=config.aggregation,
        max_length=config.max_length,
        coefficient_rule=config.coefficient_rule,
    )


def minibatch_diagnostics(
    config: PolicyLossConfig, log_ratio: Tensor, psi: Tensor, advantages: Tensor, mask: Tensor
) -> dict[str, Tensor]:
    """Per-minibatch diagnostics of `M` minibatches of the loss's estimator, all `[M]` float64.

    Args:
        log_ratio: `[M, B, G]` trajectory log-ratios; psi, mask: `[M, B, G, T]` (`psi` from
            `gradient_weights`); advantages: `[M, B, G]`.
    Returns:
        `removed_mass` (mean over groups of `(1/G) sum (1 - w_i) rho_i`) and `capped_frac`
        (fraction of groups for GMC, of trajectories otherwise, with `w < 1`) for the
        trajectory-level losses, NaN for the token-level ones; `clipped_token_frac` (fraction of
        response tokens with `A != 0` whose gradient the token clip or A-3PO's mask removed,
        i.e. `psi = 0`) for the token-level losses, NaN for the trajectory-level ones.
    """
    nan = torch.full((log_ratio.shape[0],), math.nan, dtype=torch.float64)
    if not config.trajectory_level:
        relevant = mask.bool() & (advantages != 0).unsqueeze(-1)
        zeroed = relevant & (psi == 0)
        clipped = (
            zeroed.flatten(1).sum(1).double() / relevant.flatten(1).sum(1).clamp(min=1).double()
        )
        return {"removed_mass": nan, "capped_frac": nan, "clipped_token_frac": clipped}
    diag = group_diagnostics(
        config.method,
        log_ratio,
        config.eps,
        truncation=config.truncation,
        rule=config.coefficient_rule,
    )
    capped = capped_units(config.counts_groups, diag["capped"])
    return {
        "removed_mass": diag["removed_mass"].mean(dim=-1),
        "capped_frac": capped.double().flatten(1).mean(dim=1),
        "clipped_token_frac": nan,
    }
