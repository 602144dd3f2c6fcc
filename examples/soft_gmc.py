"""A user's own estimator as one registry spec: "soft GMC", a smooth group-mass cap.

GMC scales a group by `alpha_b = min{1, (1 + eps) / rho_bar_b}` (eq. 9), a kink at
`rho_bar = 1 + eps`. Soft GMC replaces the minimum by a smooth one,

    alpha_b = (1 + (rho_bar_b / (1 + eps))^k)^(-1/k),      k = SHARPNESS,

which is below GMC's scale everywhere and tends to it as `k` grows. It stays in the weighted
class of eq. 4-5: `w_i = alpha_b <= 1` and the group mass `alpha_b rho_bar_b <= 1 + eps`, so
Prop. 1's second-moment bound applies (`class_cap`). It removes more mass than GMC, so GMC's
removed-mass bound is not claimed (`removed_mass_bound` stays None).

Importing this module registers the method; then `method="soft_gmc"` works in the toy sweep
(`SweepConfig.methods`), the toy learner and the LLM learner (`LLMTrainConfig.method`), and the
figures draw it. On the command line, name the module in `GMC_GRPO_METHODS`:

    GMC_GRPO_METHODS=examples.soft_gmc gmc-grpo toy train --method soft_gmc --delay 16
"""

from __future__ import annotations

import math

import torch

from gmc_grpo.methods import MethodSettings, MethodSpec, register_method

SHARPNESS = 4.0  # k: 4 keeps alpha within 16% of GMC's scale (2^(-1/4) at rho_bar = 1 + eps)


def soft_gmc_log_coefficients(log_ratio: torch.Tensor, eps: float) -> torch.Tensor:
    """`log c_i = s_i + log alpha_b` in log space: `[..., G] -> [..., G]` (float64 in, out)."""
    group_size = log_ratio.shape[-1]
    log_rho_bar = torch.logsumexp(log_ratio, dim=-1) - math.log(group_size)
    # log alpha = -(1/k) log(1 + exp(k (log rho_bar - log(1 + eps)))), a softplus: stable for
    # any log-ratio, no overflow of rho itself
    excess = SHARPNESS * (log_rho_bar - math.log1p(eps))
    log_alpha = -torch.nn.functional.softplus(excess) / SHARPNESS
    return log_ratio + log_alpha.unsqueeze(-1)


def _cap(settings: MethodSettings) -> float:
    return settings.eps


SOFT_GMC = register_method(
    MethodSpec(
        name="soft_gmc",
        label="soft GMC",
        loss="soft_gmc",  # with a coefficient rule: the trajectory surrogate of eq. 4
        advantage="loo",  # as GMC (Appendix B.1)
        source="the docs' worked example (a smooth variant of eq. 9)",
        uses_eps=True,
        class_cap=_cap,
        coefficient_rule=soft_gmc_log_coefficients,
    ),
    replace=True,  # importing twice is harmless
)
