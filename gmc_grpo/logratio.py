"""Per-token and trajectory log-ratios between the current policy and the behavior policy.

Notation (`docs/METHODS.md`): `delta_{i,t} = log pi_theta(y_{i,t}|...) - log mu(y_{i,t}|...)`,
`s_i = sum_t delta_{i,t}` over response tokens, `rho_i = exp(s_i)` (eq. 3 of the paper).
Everything is computed in float32 (or float64 if given) even for bf16 inputs: a bf16 sum of
thousands of token log-ratios would lose the few nats that decide whether a group is capped.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def _as_float(x: Tensor) -> Tensor:
    """Promote half-precision inputs to float32; keep float32/float64 as they are."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def token_log_ratio(logprobs: Tensor, behavior_logprobs: Tensor, mask: Tensor) -> Tensor:
    """Per-token log-ratio `delta`, zero outside the response mask.

    Args:
        logprobs: `[..., T]` log pi_theta of the sampled tokens (may carry gradients).
        behavior_logprobs: `[..., T]` log mu of the same tokens, recorded at generation time.
        mask: `[..., T]` 1 for response tokens, 0 for padding (bool or float).
    Returns:
        `[..., T]` float tensor `delta` (padding positions are exactly 0).
    """
    if logprobs.shape != behavior_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(
            "logprobs, behavior_logprobs and mask must have the same shape, got "
            f"{tuple(logprobs.shape)}, {tuple(behavior_logprobs.shape)}, {tuple(mask.shape)}"
        )
    delta = _as_float(logprobs) - _as_float(behavior_logprobs)
    return torch.where(mask.bool(), delta, torch.zeros_like(delta))


def trajectory_log_ratio(logprobs: Tensor, behavior_logprobs: Tensor, mask: Tensor) -> Tensor:
    """Trajectory log-ratio `s_i = sum_t delta_{i,t}` (eq. 3, in log space).

    Args:
        logprobs, behavior_logprobs, mask: `[B, G, T]` (any leading dims `[..., T]`).
    Returns:
        `[B, G]` (i.e. `[...]`) trajectory log-ratios; differentiable through `logprobs`.
    """
    return token_log_ratio(logprobs, behavior_logprobs, mask).sum(dim=-1)


def log_group_mean_ratio(log_ratio: Tensor) -> Tensor:
    """`log rho_bar = logsumexp(s) - log G` over the last (group) dim: `[B, G] -> [B]`."""
    group_size = log_ratio.shape[-1]
    return torch.logsumexp(log_ratio, dim=-1) - math.log(group_size)


def effective_sample_size(log_ratio: Tensor) -> Tensor:
    """Normalised ESS `(sum rho)^2 / (N sum rho^2)` over all entries, in log space (VCPO).

    Args:
        log_ratio: any shape; all entries form one sample of size `N`.
    Returns:
        scalar in `(0, 1]`; 1 when every ratio is equal.
    """
    flat = log_ratio.detach().reshape(-1).double()
    log_ess = 2 * torch.logsumexp(flat, 0) - math.log(flat.numel()) - torch.logsumexp(2 * flat, 0)
    return log_ess.exp().to(log_ratio.dtype if log_ratio.is_floating_point() else torch.float32)


def group_weight_concentration(log_weight: Tensor) -> tuple[Tensor, Tensor]:
    """How much of each group's importance weight one response holds (ours: a diagnostic).

    With shares `p_i = w_i / sum_j w_j` over the group (the last dim, size G), the largest share
    `max_i p_i` (in `[1/G, 1]`) and the normalised effective sample size `(sum w)^2 / (G sum w^2)
    = 1 / (G sum p_i^2)` (in `[1/G, 1]`; 1 when the weights are equal). Computed from log
    weights by a softmax, so `rho_i = exp(s_i)` of tens of nats does not overflow. Example:
    weights (1, 1, 2): largest share 1/2, ESS 16 / 18 = 8/9.

    A group whose weights are all zero (TIC drops every response of it: log weights all
    `-inf`) has no effective sample: its share and ESS are 0.

    Args:
        log_weight: `[..., G]` log of non-negative weights (`s_i`, or a method's log
            coefficients `log c_i`).
    Returns:
        `(largest_share [...], ess [...])`, detached float64.
    """
    logs = log_weight.detach().double()
    alive = torch.isfinite(torch.logsumexp(logs, dim=-1))
    shares = torch.softmax(torch.where(alive.unsqueeze(-1), logs, torch.zeros_like(logs)), -1)
    ess = 1.0 / (logs.shape[-1] * (shares * shares).sum(dim=-1))
    zero = torch.zeros_like(ess)
    return torch.where(alive, shares.max(dim=-1).values, zero), torch.where(alive, ess, zero)
