"""Autograd twins of `toy_mdps.statistics.gradient_estimates`.

- `loop_gradient_estimates`: one autograd pass per group. For every minibatch and every group,
  build the method's surrogate with `gmc_grpo.losses.policy_loss` (the loss the LLM learner
  minimises) on that group alone, divide it by `B`, and backpropagate into a fresh copy of
  `theta`; the minibatch's estimate is minus the accumulated gradient. With the paper's
  normalisation a one-group loss is normalised by `1/(T G)`, so the sum over groups divided by
  `B` is the minibatch's `1/(T B G)` estimator. Slow by design: the brute-force reference.
- `minibatch_gradient_estimates`: what a competent autograd implementation does, one surrogate
  over the minibatch's `B` groups at once (`[B, G, T]`, normalised by `1/(T B G)`) and one
  backward per minibatch. The speed baseline of `bench/bench_toy_statistics.py`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gmc_grpo import advantages as adv_lib
from gmc_grpo.losses import PolicyLossConfig, policy_loss
from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import Policy, TabularSoftmax


def _policy_and_behavior_table(
    mdp: TokenMDP, theta_behavior: Tensor, policy: Policy | None
) -> tuple[Policy, Tensor]:
    """The policy class (default tabular) and the behavior policy's `[S, V]` log-table."""
    pol = TabularSoftmax(mdp) if policy is None else policy
    with torch.no_grad():
        return pol, torch.log_softmax(pol.logits(theta_behavior), dim=-1)


def loop_gradient_estimates(
    mdp: TokenMDP,
    responses: Tensor,
    theta: Tensor,
    theta_behavior: Tensor,
    config: PolicyLossConfig,
    *,
    advantage: str = "loo",
    version_lag: float | None = None,
    policy: Policy | None = None,
) -> Tensor:
    """`[M, P]` estimates from `[M, B, G]` responses, one `policy_loss` + backward per group."""
    pol, behavior_table = _policy_and_behavior_table(mdp, theta_behavior, policy)
    M, B, G = responses.shape
    out = torch.zeros(M, theta.numel(), dtype=theta.dtype)
    lag = None if version_lag is None else torch.full((1, G), float(version_lag), dtype=theta.dtype)
    for m in range(M):
        param = theta.detach().clone().requires_grad_(True)
        for b in range(B):
            log_table = torch.log_softmax(pol.logits(param), dim=-1)
            idx = responses[m, b]
            tokens = mdp.response_tokens[idx]
            states = mdp.response_states[idx]
            mask = mdp.response_mask[idx]
            lp = torch.where(mask, log_table[states, tokens], torch.zeros((), dtype=theta.dtype))
            lb = torch.where(
                mask, behavior_table[states, tokens], torch.zeros((), dtype=theta.dtype)
            )
            adv = adv_lib.compute(mdp.rewards[idx].unsqueeze(0), advantage)  # type: ignore[arg-type]
            loss, _ = policy_loss(
                lp.unsqueeze(0), lb.unsqueeze(0), adv, mask.unsqueeze(0), config, version_lag=lag
            )
            (loss / B).backward()
        assert param.grad is not None
        out[m] = -param.grad.reshape(-1)
    return out


def minibatch_gradient_estimates(
    mdp: TokenMDP,
    responses: Tensor,
    theta: Tensor,
    theta_behavior: Tensor,
    config: PolicyLossConfig,
    *,
    advantage: str = "loo",
    version_lag: float | None = None,
    policy: Policy | None = None,
) -> Tensor:
    """`[M, P]` estimates from `[M, B, G]` responses, one `policy_loss` + backward per minibatch.

    The behavior log-probs, masks, rewards and advantages of all minibatches are gathered once,
    outside the loop (they carry no gradient).
    """
    pol, behavior_table = _policy_and_behavior_table(mdp, theta_behavior, policy)
    M, B, G = responses.shape
    tokens, states = mdp.response_tokens[responses], mdp.response_states[responses]
    mask = mdp.response_mask[responses]  # [M, B, G, T]
    zero = torch.zeros((), dtype=theta.dtype)
    behavior = torch.where(mask, behavior_table[states, tokens], zero)
    advantages = adv_lib.compute(mdp.rewards[responses], advantage)  # type: ignore[arg-type]
    lag = None
    if version_lag is not None:
        lag = torch.full((B, G), float(version_lag), dtype=theta.dtype)
    out = torch.zeros(M, theta.numel(), dtype=theta.dtype)
    for m in range(M):
        param = theta.detach().clone().requires_grad_(True)
        log_table = torch.log_softmax(pol.logits(param), dim=-1)
        lp = torch.where(mask[m], log_table[states[m], tokens[m]], zero)
        loss, _ = policy_loss(lp, behavior[m], advantages[m], mask[m], config, version_lag=lag)
        (grad,) = torch.autograd.grad(loss, param)
        out[m] = -grad.reshape(-1)
    return out
