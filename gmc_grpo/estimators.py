"""The weighted gradient estimators of the paper and their detached coefficients.

The weighted class (eq. 4 and 5): for a minibatch of `B` groups of `G` responses,

    g = 1/(T B G) sum_b sum_i w_i rho_i grad log pi_theta(y_i | x_b) A_i,
    0 <= w_i <= 1,   (1/G) sum_i w_i rho_i <= 1 + eps   for every group,

and the detached coefficient of a trajectory is `c_i = w_i rho_i`:

| method | `w_i`                                   | `c_i`                        | source                |
|--------|-----------------------------------------|------------------------------|-----------------------|
| `is`   | 1                                       | `rho_i`                      | eq. 2 (unbiased)      |
| `tic`  | `1{rho_i <= 1 + eps}`                   | `rho_i` or 0                 | §3, §4.3; Pang et al. |
| `gmc`  | `min{1, (1 + eps) / rho_bar_b}`         | `rho_i / max{1, rho_bar/(1+eps)}` | Prop. 2, eq. 9   |
| `vcpo` | `min{1, c / rho_i}`                     | `min{rho_i, c}`              | §3; Huang et al. 2026 |

Everything is computed in log space: `log c_i` is finite (or `-inf` for TIC's dropped
trajectories) for any finite `s_i`, and `c_i` itself is bounded by `G (1+eps)` (GMC), `1+eps`
(TIC) and `c` (VCPO) even when `rho_i = exp(s_i)` overflows. Plain IS is unbounded by definition:
its coefficient overflows to `inf` once `s_i > log(float max)` (about 88 in float32).

`token_gradient_weights` writes every method's estimator (also the token-level ones outside the
class: vanilla GRPO and A-3PO) as `g = sum_{i,t} psi_{i,t} grad log pi_theta(y_{i,t} | ...)`,
the hand-computed formula the surrogate losses of `gmc_grpo.losses` are tested against and the
toy-MDP track uses with its exact score functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, get_args

import torch
from torch import Tensor

from gmc_grpo.defaults import A3PO_MASK_THRESHOLD, PAPER_EPS, TOKEN_CLIP, VCPO_TRUNCATION
from gmc_grpo.logratio import log_group_mean_ratio, token_log_ratio

TrajectoryMethod = Literal["is", "tic", "gmc", "vcpo"]
TRAJECTORY_METHODS: tuple[str, ...] = get_args(TrajectoryMethod)

#: A user's trajectory-level weighting: `(s [..., G] float64 detached, eps) -> log c [..., G]`,
#: with `0 <= c_i <= rho_i` (`gmc_grpo.methods` registers such a rule with a method's spec).
CoefficientRule = Callable[[Tensor, float], Tensor]


def _check_eps(eps: float) -> None:
    if not eps > 0:  # also rejects NaN
        raise ValueError(f"eps must be > 0 (the cap is 1 + eps), got {eps}")


def log_coefficients(
    method: str,
    log_ratio: Tensor,
    eps: float = PAPER_EPS,
    *,
    truncation: float = VCPO_TRUNCATION,
    rule: CoefficientRule | None = None,
) -> Tensor:
    """`log c_i` for a trajectory-level method, detached.

    Args:
        method: `"is"`, `"tic"`, `"gmc"` or `"vcpo"`; any name when `rule` is given.
        log_ratio: `[B, G]` trajectory log-ratios `s_i` (any leading dims; group = last dim).
        eps: cap parameter (`1 + eps`), TIC and GMC; `float("inf")` turns both into plain IS.
        truncation: VCPO's `c` (`min(rho_i, c)`).
        rule: a user's own weighting (`CoefficientRule`), used instead of the named ones.
    Returns:
        `[B, G]` log-coefficients: finite for finite `s`, `-inf` where TIC drops a trajectory.
    """
    s = log_ratio.detach()
    out_dtype = torch.float32 if s.dtype in (torch.bfloat16, torch.float16) else s.dtype
    if rule is not None:
        return rule(s.double(), eps).to(out_dtype)
    if method == "is":
        return s.to(out_dtype)
    # float64 inside: `log(1+eps) - log rho_bar` is a difference of numbers of size |s| (up to
    # 1e4 nats), whose float32 rounding would let GMC's group mass exceed its cap.
    return _log_coefficients64(method, s.double(), eps, truncation).to(out_dtype)


def _log_coefficients64(method: str, s: Tensor, eps: float, truncation: float) -> Tensor:
    if method == "tic":
        _check_eps(eps)
        keep = s <= math.log1p(eps)
        return torch.where(keep, s, torch.full_like(s, -math.inf))
    if method == "gmc":
        _check_eps(eps)
        # log alpha* = min{0, log(1+eps) - log rho_bar}: one scale per group (Prop. 2).
        log_alpha = (math.log1p(eps) - log_group_mean_ratio(s)).clamp(max=0.0)
        return s + log_alpha.unsqueeze(-1)
    if method == "vcpo":
        if not truncation > 0:
            raise ValueError(f"VCPO truncation c must be > 0, got {truncation}")
        return s.clamp(max=math.log(truncation))
    raise ValueError(f"unknown trajectory method {method!r}; choose one of {TRAJECTORY_METHODS}")


def coefficients(
    method: str,
    log_ratio: Tensor,
    eps: float = PAPER_EPS,
    **kw: float | CoefficientRule | None,
) -> Tensor:
    """Detached per-trajectory coefficients `c_i = w_i rho_i` (`docs/DESIGN.md`, public API).

    Args:
        method: `"is"`, `"tic"`, `"gmc"` or `"vcpo"`.
        log_ratio: `[B, G]` trajectory log-ratios `s_i`.
        eps: the cap `1 + eps` (TIC, GMC). Paper: 0.28 (Appendix B.1).
        **kw: `truncation` for VCPO (default 8, its public code); `rule` for a user's weighting.
    Returns:
        `[B, G]` coefficients, each in `[0, rho_i]`; finite for every bounded method.
    """
    return log_coefficients(method, log_ratio, eps, **kw).exp()


def weights(
    method: str,
    log_ratio: Tensor,
    eps: float = PAPER_EPS,
    **kw: float | CoefficientRule | None,
) -> Tensor:
    """The weights `w_i = c_i / rho_i` in `[0, 1]`: `[B, G]`, detached."""
    s = log_ratio.detach()
    if s.dtype in (torch.bfloat16, torch.float16):
        s = s.float()
    return (log_coefficients(method, s, eps, **kw) - s).exp().clamp(max=1.0)


def group_diagnostics(
    method: str,
    log_ratio: Tensor,
    eps: float = PAPER_EPS,
    **kw: float | CoefficientRule | None,
) -> dict[str, Tensor]:
    """Per-group diagnostics of a trajectory-level correction, all detached.

    Args:
        log_ratio: `[B, G]`.
    Returns:
        `removed_mass` `[B]`: `(1/G) sum_i (1 - w_i) rho_i` (for GMC `(rho_bar - (1+eps))_+`,
            for TIC `(1/G) sum_i rho_i 1{rho_i > 1+eps}`); computed in float64, `inf` only if
            `rho_bar` itself overflows float64.
        `kept_mass` `[B]`: `(1/G) sum_i c_i` (at most `1 + eps` for GMC).
        `capped` `[B, G]`: bool, `w_i < 1`.
    """
    s = log_ratio.detach().double()
    log_c = log_coefficients(method, s, eps, **kw)
    rho = s.exp()
    c = log_c.exp()
    # (rho - c) >= 0 entrywise; an inf - inf cannot occur because c is bounded for capped methods.
    removed = torch.where(log_c < s, rho - c, torch.zeros_like(rho)).mean(dim=-1)
    return {"removed_mass": removed, "kept_mass": c.mean(dim=-1), "capped": log_c < s}


def capped_units(caps_group_mass: bool, capped: Tensor) -> Tensor:
    """The units `ratio/capped_frac` counts: groups when the cap scales a whole group at once
    (`MethodSpec.caps_group_mass`, GMC's one scale per group), else trajectories.

    capped: `[..., B, G]` bool (`group_diagnostics`). Returns `[..., B]`, or `capped` itself.
    """
    return capped.any(dim=-1) if caps_group_mass else capped


# ----------------------------------------------------------------------------------------------
# Every method's estimator as per-token gradient weights psi (the hand-computed formula).
# ----------------------------------------------------------------------------------------------

Method = Literal["is", "tic", "gmc", "vcpo", "grpo", "a3po"]
METHODS: tuple[str, ...] = get_args(Method)

Aggregation = Literal["paper", "token_mean", "seq_mean_token_mean"]
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)


def normaliser(
    mask: Tensor, aggregation: Aggregation = "paper", max_length: int | None = None
) -> Tensor:
    """The factor each token's term is divided by, broadcastable to `[B, G, T]`.

    - `paper`: `T B G` with `T = max_length` (eq. 2; default `T` = the padded length `mask.shape[-1]`).
    - `token_mean`: the number of response tokens in the minibatch (DAPO-style).
    - `seq_mean_token_mean`: `B G L_i`, each trajectory's tokens averaged, then trajectories
      (VCPO's and GRPO's original aggregation).
    Leading dims before `[B, G, T]` are independent minibatches (the toy track's `[M, B, G, T]`).
    """
    if mask.dim() < 3:
        raise ValueError(f"mask must be [..., B, G, T], got shape {tuple(mask.shape)}")
    num_traj = mask.shape[-3] * mask.shape[-2]
    maskf = mask.to(torch.float64 if mask.dtype == torch.float64 else torch.float32)
    if aggregation == "paper":
        length = mask.shape[-1] if max_length is None else max_length
        if length < mask.shape[-1]:
            raise ValueError(
                f"max_length={length} is shorter than the padded response length {mask.shape[-1]}"
            )
        return torch.full(
            maskf.shape[:-3] + (1, 1, 1),
            float(length * num_traj),
            dtype=maskf.dtype,
            device=mask.device,
        )
    if aggregation == "token_mean":
        return maskf.sum(dim=(-3, -2, -1), keepdim=True).clamp(min=1.0)
    if aggregation == "seq_mean_token_mean":
        return maskf.sum(dim=-1, keepdim=True).clamp(min=1.0) * num_traj
    raise ValueError(f"unknown aggregation {aggregation!r}; choose one of {AGGREGATIONS}")


def token_clip_active(
    ratio: Tensor, advantages: Tensor, clip_low: float, clip_high: float
) -> Tensor:
    """Where `min(r A, clip(r, 1 - clip_low, 1 + clip_high) A)` follows `r` (gradient flows).

    With `A > 0` the unclipped branch is the minimum iff `r <= 1 + clip_high`; with `A < 0` iff
    `r >= 1 - clip_low` (so large ratios with negative advantages keep their gradient: §3).
    Args: ratio `[..., T]`, advantages broadcastable to it. Returns bool `[..., T]`.
    """
    positive = advantages >= 0
    return torch.where(positive, ratio <= 1 + clip_high, ratio >= 1 - clip_low)


def a3po_log_prox_weight(delta: Tensor, version_lag: Tensor) -> Tensor:
    """`log(pi_prox / mu) = ((d - 1) / d) * delta` for `d >= 1`, 0 for `d = 0` (A-3PO, loglinear).

    Args:
        delta: `[..., T]` detached token log-ratios `log pi_theta - log mu`.
        version_lag: lag `d` broadcastable to `delta` (per group `[B, G, 1]` or per token).
    """
    d = version_lag.to(delta.dtype)
    frac = torch.where(d >= 1, (d - 1) / d.clamp(min=1), torch.zeros_like(d))
    return frac * delta


def token_gradient_weights(
    method: str,
    logprobs: Tensor,
    behavior_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps: float = PAPER_EPS,
    truncation: float = VCPO_TRUNCATION,
    clip_low: float = TOKEN_CLIP,
    clip_high: float = TOKEN_CLIP,
    version_lag: Tensor | None = None,
    a3po_mask_threshold: float = A3PO_MASK_THRESHOLD,
    aggregation: Aggregation = "paper",
    max_length: int | None = None,
    coefficient_rule: CoefficientRule | None = None,
) -> Tensor:
    """`psi` with `g = sum_{b,i,t} psi_{b,i,t} grad log pi_theta(y_{b,i,t} | ...)`, detached.

    The gradient of the matching surrogate loss (`gmc_grpo.losses`) is `-g`.

    - trajectory methods (`is`, `tic`, `gmc`, `vcpo`): `psi = c_i A_i / norm` on response tokens.
    - `grpo` (token clip, outside the class): `psi = r_t A_i 1{unclipped branch active} / norm`,
      `r_t = exp(delta_t)`.
    - `a3po` (decoupled loss, AReaL's loglinear proximal policy): with `pi_prox / mu = exp(((d-1)/d)
      delta_t)` and `r = pi_theta / pi_prox`, the token term `(pi_prox/mu) min(r A, clip(r) A)` has
      gradient `(pi_theta / mu) A 1{active(r)} 1{pi_prox / mu <= threshold}`.

    Args:
        logprobs, behavior_logprobs, mask: `[B, G, T]` (extra leading dims: independent minibatches).
        advantages: `[B, G]`.
        version_lag: A-3PO only, `[B, G]` (or `[B, G, T]`) learner versions between the current
            policy and the behavior policy.
        coefficient_rule: a user's trajectory weighting (`CoefficientRule`); `method` is then
            only its name and `psi = c_i A_i / norm` as for the named trajectory methods.
    Returns:
        `[B, G, T]` float tensor.
    """
    delta = token_log_ratio(logprobs.detach(), behavior_logprobs.detach(), mask)
    adv = advantages.detach().to(delta.dtype).unsqueeze(-1)
    maskf = mask.to(delta.dtype)
    norm = normaliser(mask, aggregation, max_length).to(delta.dtype)
    if method in TRAJECTORY_METHODS or coefficient_rule is not None:
        c = coefficients(
            method, delta.sum(dim=-1), eps, truncation=truncation, rule=coefficient_rule
        ).unsqueeze(-1)
        return c * adv * maskf / norm
    ratio = delta.exp()
    if method == "grpo":
        active = token_clip_active(ratio, adv, clip_low, clip_high)
        return ratio * adv * active * maskf / norm
    if method == "a3po":
        if version_lag is None:
            raise ValueError("method 'a3po' needs version_lag (learner versions behind, [B, G])")
        lag = version_lag if version_lag.dim() == delta.dim() else version_lag.unsqueeze(-1)
        log_prox = a3po_log_prox_weight(delta, lag)
        prox_ratio = (delta - log_prox).exp()  # r = pi_theta / pi_prox
        active = token_clip_active(prox_ratio, adv, clip_low, clip_high)
        kept = log_prox <= math.log(a3po_mask_threshold)
        return ratio * adv * active * kept * maskf / norm
    raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
