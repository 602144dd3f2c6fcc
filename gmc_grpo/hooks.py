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
    s = log_ratio.detach().double()
    norms = score_norm_sq.detach().double().clamp(min=0.0)
    log_w = 2 * s + norms.log()  # log W_i, -inf where the score norm is 0
    top = log_w.max(dim=-1, keepdim=True).values
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    scaled = (log_w - top).exp()  # W_i / exp(top)
    # the 1e-8 of the formula, in the same scale: 1e-8 / exp(top), kept finite
    floor = torch.exp((math.log(weight_floor) - top).clamp(max=700.0))
    baseline = (scaled * rewards).sum(-1, keepdim=True) / (scaled.sum(-1, keepdim=True) + floor)
    sigma = rewards.std(dim=-1, keepdim=True, unbiased=True)
    adv = (rewards - baseline) / sigma.clamp(min=std_floor)
    return torch.where(sigma < std_floor, torch.zeros_like(adv), adv).float()


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
