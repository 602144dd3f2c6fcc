"""Method-specific learner hooks: VCPO's ESS step size and baseline, GAC's projection.

These methods need more than a loss: VCPO rescales the step size and replaces the advantage's
baseline; GAC edits the gradient using the previous one. Each hook is a small pure function;
state that must survive between steps lives in an explicit object the learner owns (`GACState`),
so the toy learner and the LLM learner call the same code, through the method registry's hooks
(`gmc_grpo.methods`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from gmc_grpo.logratio import effective_sample_size

# --------------------------------------------------------------------------------------------
# VCPO (Huang et al. 2026, "Stable asynchrony"; `docs/METHODS.md`)
# --------------------------------------------------------------------------------------------


def vcpo_step_scale(log_ratio: Tensor, rho_ref: float = 1.0) -> float:
    """VCPO's ESS-guided step-size factor `sqrt(min(1, ESS / rho_ref))`.

    `ESS = (sum_i rho_i)^2 / (N sum_i rho_i^2)` over the whole minibatch with the unclipped
    ratios (in log space, so it is exact even when `rho_i` overflows). The learner multiplies
    the base learning rate by this factor for one step and restores it afterwards.

    Args:
        log_ratio: `[B, G]` trajectory log-ratios of the minibatch.
        rho_ref: VCPO's reference ESS (1 in its code).
    Returns:
        a float in `(0, 1]`.
    """
    if not rho_ref > 0:
        raise ValueError(f"rho_ref must be > 0, got {rho_ref}")
    ess = float(effective_sample_size(log_ratio))
    return math.sqrt(min(1.0, ess / rho_ref))


def vcpo_baseline_advantages(
    rewards: Tensor,
    log_ratio: Tensor,
    score_norm_sq: Tensor,
    *,
    std_floor: float = 1e-6,
    weight_floor: float = 1e-8,
) -> Tensor:
    """VCPO's off-policy minimum-variance baseline and normalised advantage, per group.

    `b_g = sum_i W_i R_i / (sum_i W_i + 1e-8)` with `W_i = rho_i^2 ||grad log pi(y_i)||^2` (the
    paper's form; VCPO's reference code measures the norm on a gradient that already contains the
    truncated weight, a discrepancy we note and do not follow), then `A_i = (R_i - b_g) / sigma_g`
    with `sigma_g` the sample std of the group's rewards; groups with `sigma_g < std_floor` get 0.
    Computed in log space (`rho_i^2` overflows long before the ratio of sums does).

    Args:
        rewards: `[B, G]`.
        log_ratio: `[B, G]` trajectory log-ratios `s_i` (unclipped).
        score_norm_sq: `[B, G]` `||grad_theta log pi_theta(y_i | x)||^2` (the caller computes them:
            exactly in the toy track; one backward per trajectory in the LLM learner).
    Returns:
        `[B, G]` advantages, detached.
    """
    rewards = rewards.detach().double()
    baseline = vcpo_group_baseline(rewards, log_ratio, score_norm_sq, weight_floor=weight_floor)
    sigma = rewards.std(dim=-1, keepdim=True, unbiased=True)
    adv = (rewards - baseline.unsqueeze(-1)) / sigma.clamp(min=std_floor)
    return torch.where(sigma < std_floor, torch.zeros_like(adv), adv).float()


def vcpo_group_baseline(
    rewards: Tensor, log_ratio: Tensor, score_norm_sq: Tensor, *, weight_floor: float = 1e-8
) -> Tensor:
    """VCPO's per-group minimum-variance baseline `b_g = sum_i W_i R_i / (sum_i W_i + 1e-8)`.

    `W_i = rho_i^2 ||grad log pi(y_i)||^2`, in log space (see `vcpo_baseline_advantages`, which
    turns it into advantages). The LLM learner that computes the score norms inside the backward
    pass needs `b_g` itself: it assembles `sum_i c_i (R_i - b_g) / sigma_g grad log pi(y_i)` once
    the norms are known.

    Args:
        rewards, log_ratio, score_norm_sq: `[B, G]`.
    Returns:
        `[B]` float64 baselines, detached.
    """
    rewards = rewards.detach().double()
    s = log_ratio.detach().double()
    norms = score_norm_sq.detach().double().clamp(min=0.0)
    log_w = 2 * s + norms.log()  # log W_i, -inf where the score norm is 0
    top = log_w.max(dim=-1, keepdim=True).values
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    scaled = (log_w - top).exp()  # W_i / exp(top)
    # the 1e-8 of the formula, in the same scale: 1e-8 / exp(top), kept finite
    floor = torch.exp((math.log(weight_floor) - top).clamp(max=700.0))
    baseline = (scaled * rewards).sum(-1, keepdim=True) / (scaled.sum(-1, keepdim=True) + floor)
    return baseline.squeeze(-1)


# --------------------------------------------------------------------------------------------
# GAC (Xu et al. 2026): no public code; OUR INTERPRETATION (`docs/METHODS.md`)
# --------------------------------------------------------------------------------------------


@dataclass
class GACState:
    """What GAC carries between learner steps: the previous raw (unprojected) gradient `[d]`."""

    previous_gradient: Tensor | None = None

    def state_dict(self) -> dict[str, Tensor | None]:
        return {"previous_gradient": self.previous_gradient}

    def load_state_dict(self, state: dict[str, Tensor | None]) -> None:
        self.previous_gradient = state["previous_gradient"]


def gac_project(
    gradient: Tensor,
    state: GACState,
    *,
    low: float = 0.05,
    high: float = 0.30,
) -> tuple[Tensor, dict[str, float]]:
    """GAC's gradient-alignment control, as we interpret it (no public code exists).

    `c = cos(g_t, g_{t-1})` on the flattened gradient of the base (GRPO) loss. No change if
    `c <= low`; if `c >= high` the component of `g_t` along `g_{t-1}` is removed; in between the
    removed fraction ramps linearly, `f = (c - low) / (high - low)`:
    `g'_t = g_t - f (g_t . u) u`, `u = g_{t-1} / ||g_{t-1}||`. Thresholds 0.05 and 0.30 are the
    paper's (Appendix B.1). `state.previous_gradient` is updated to the raw `g_t`.

    Args:
        gradient: `[d]` flattened gradient of this step.
        state: the learner's `GACState` (mutated: previous gradient replaced).
    Returns:
        `(projected_gradient [d], {"gac/cosine": c, "gac/removed_frac": f})`.
    """
    if not 0 <= low < high <= 1:
        raise ValueError(f"GAC thresholds need 0 <= low < high <= 1, got low={low}, high={high}")
    flat = gradient.reshape(-1)
    previous = state.previous_gradient
    state.previous_gradient = flat.detach().clone()
    if previous is None:
        return gradient, {"gac/cosine": 0.0, "gac/removed_frac": 0.0}
    prev = previous.to(flat.dtype)
    prev_norm = prev.norm()
    grad_norm = flat.norm()
    if prev_norm == 0 or grad_norm == 0:
        return gradient, {"gac/cosine": 0.0, "gac/removed_frac": 0.0}
    unit = prev / prev_norm
    parallel = torch.dot(flat, unit)
    cosine = float(parallel / grad_norm)
    fraction = min(1.0, max(0.0, (cosine - low) / (high - low)))
    if fraction == 0.0:
        return gradient, {"gac/cosine": cosine, "gac/removed_frac": 0.0}
    projected = flat - fraction * parallel * unit
    return projected.reshape(gradient.shape), {"gac/cosine": cosine, "gac/removed_frac": fraction}


def gac_project_parameters(
    params: list[torch.nn.Parameter],
    state: GACState,
    *,
    low: float = 0.05,
    high: float = 0.30,
    piece: int = 1 << 24,
) -> dict[str, float]:
    """`gac_project` applied to the parameters' `.grad` in place, without a flattened copy.

    The same rule and the same result as `gac_project` on `cat([p.grad.flatten() ...])` in
    float32 (up to the summation order of the dot products): `c = (g . g_prev) / (|g| |g_prev|)`
    and `|g|^2`, `|g_prev|^2` are accumulated parameter by parameter (in float64), then each
    `.grad` is updated in place, `g_p <- g_p - f (g . g_prev) / |g_prev|^2 g_prev,p`, while the
    raw `g_p` is copied into its slice of `state.previous_gradient`. Memory: the one float32
    `[d]` copy that `GACState` keeps between steps, plus a float32 temporary of at most `piece`
    elements (`gac_project` needs two more `[d]` float32 vectors: the flattened gradient and the
    projected one). A parameter without `.grad` counts as a zero gradient (and gets one if the
    projection changes it), as in `gac_project`.

    Args:
        params: the parameters, in the order of `state.previous_gradient`'s layout.
        state: the learner's `GACState` (its float32 `[d]` previous gradient is overwritten).
        piece: elements per in-place update step (bounds the temporary).
    Returns:
        `{"gac/cosine": c, "gac/removed_frac": f}`.
    """
    if not 0 <= low < high <= 1:
        raise ValueError(f"GAC thresholds need 0 <= low < high <= 1, got low={low}, high={high}")
    sizes = [p.numel() for p in params]
    total = sum(sizes)
    previous = state.previous_gradient
    if previous is not None and previous.numel() != total:
        raise ValueError(
            f"GACState.previous_gradient has {previous.numel()} entries, the parameters {total}: "
            "it belongs to another model (start GAC afresh with GACState())"
        )
    device = params[0].device if params else torch.device("cpu")
    if previous is None:
        state.previous_gradient = torch.zeros(total, dtype=torch.float32, device=device)
        for p, prev in zip(params, state.previous_gradient.split(sizes), strict=True):
            if p.grad is not None:
                prev.copy_(p.grad.reshape(-1))
        return {"gac/cosine": 0.0, "gac/removed_frac": 0.0}
    previous = previous.to(device=device, dtype=torch.float32)
    state.previous_gradient = previous
    slices = previous.split(sizes)
    dot = torch.zeros((), dtype=torch.float64, device=device)
    grad_sq = torch.zeros((), dtype=torch.float64, device=device)
    prev_sq = torch.zeros((), dtype=torch.float64, device=device)
    for p, prev in zip(params, slices, strict=True):
        prev_sq += _sq(prev, piece)
        if p.grad is not None:
            g = p.grad.reshape(-1)
            dot += _dot(g, prev, piece)
            grad_sq += _sq(g, piece)
    prev_norm, grad_norm = math.sqrt(float(prev_sq)), math.sqrt(float(grad_sq))
    fraction, cosine = 0.0, 0.0
    if prev_norm > 0 and grad_norm > 0:
        cosine = float(dot) / prev_norm / grad_norm
        fraction = min(1.0, max(0.0, (cosine - low) / (high - low)))
    # g' = g - f (g . u) u with u = g_prev / |g_prev|, as gac_project computes it
    coefficient = fraction * (float(dot) / prev_norm) if fraction > 0 else 0.0
    for p, prev in zip(params, slices, strict=True):
        if p.grad is None:
            if fraction == 0.0:
                prev.zero_()
                continue
            p.grad = torch.zeros_like(p)
        if not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        g = p.grad.view(-1)
        for start in range(0, g.numel(), piece):
            g_piece, prev_piece = g[start : start + piece], prev[start : start + piece]
            if fraction > 0:
                projected = g_piece.float() - coefficient * (prev_piece / prev_norm)
                prev_piece.copy_(g_piece)  # the raw gradient, for the next step
                g_piece.copy_(projected)
            else:
                prev_piece.copy_(g_piece)
    return {"gac/cosine": cosine, "gac/removed_frac": fraction}


def _dot(a: Tensor, b: Tensor, piece: int) -> Tensor:
    """`a . b` in float64, `piece` elements at a time (no full-size float64 copy)."""
    total = torch.zeros((), dtype=torch.float64, device=a.device)
    for start in range(0, a.numel(), piece):
        total += torch.dot(a[start : start + piece].double(), b[start : start + piece].double())
    return total


def _sq(a: Tensor, piece: int) -> Tensor:
    return _dot(a, a, piece)
