"""Exact quantities by enumerating every response of every prompt (vectorised, no loops).

All functions take the MDP, parameters `theta` and optionally a policy class (default: the
tabular softmax, `theta` the `[S, V]` logits table). Prompts are uniform, so
`J(theta) = (1/K) sum_x sum_y pi(y|x) r(x, y)`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import Policy, TabularSoftmax


def _policy(mdp: TokenMDP, policy: Policy | None) -> Policy:
    return TabularSoftmax(mdp) if policy is None else policy


def log_policy_table(mdp: TokenMDP, theta: Tensor, policy: Policy | None = None) -> Tensor:
    """`[S, V]` table of `log pi(a | s)`."""
    return torch.log_softmax(_policy(mdp, policy).logits(theta), dim=-1)


def response_token_logprobs(mdp: TokenMDP, log_table: Tensor) -> Tensor:
    """`[N, T]` `log pi(y_t | x, y_<t)` of every response (0 on padding): one gather."""
    lp = log_table[mdp.response_states, mdp.response_tokens]
    return torch.where(mdp.response_mask, lp, torch.zeros_like(lp))


def response_logprobs(mdp: TokenMDP, theta: Tensor, policy: Policy | None = None) -> Tensor:
    """`[N]` `log pi(y | x)` of every response (responses grouped by prompt)."""
    return response_token_logprobs(mdp, log_policy_table(mdp, theta, policy)).sum(dim=-1)


def response_probabilities(mdp: TokenMDP, theta: Tensor, policy: Policy | None = None) -> Tensor:
    """`[K, N_x]` `pi(y | x)`; each row sums to 1."""
    return response_logprobs(mdp, theta, policy).exp().view(mdp.num_prompts, -1)


def logit_gradient(
    mdp: TokenMDP,
    log_table: Tensor,
    states: Tensor,
    tokens: Tensor,
    psi: Tensor,
    *,
    probs: Tensor | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """`sum_t psi_t grad_z log pi(y_t | s_t)` w.r.t. the logits table, for many sums at once.

    The score of a softmax w.r.t. row `s` of the logits is `onehot(y_t) - pi(. | s)`, so the sum
    is a scatter-add of `psi` into `(s_t, y_t)` minus `(sum of psi on row s) * pi(. | s)`.

    Args:
        log_table: `[S, V]` log-policy.
        states, tokens: `[L, n]` long (`L` independent sums, `n` tokens each; padding must carry
            `psi = 0`).
        psi: `[L, n]` weights.
        probs: `log_table.exp()` if already computed.
        out: a contiguous buffer of `L S V` entries to write the result into (reused across
            calls, no fresh allocation); its previous content is overwritten.
    Returns:
        `[L, S, V]` dense gradients.
    """
    S, V = log_table.shape
    L = psi.shape[0]
    row = (torch.arange(L).unsqueeze(1) * S + states).reshape(-1)
    flat = psi.reshape(-1).to(log_table.dtype)
    if out is None:
        hit = torch.zeros(L * S * V, dtype=log_table.dtype)
    else:
        hit = out.view(-1)[: L * S * V].zero_()
    hit.index_add_(0, row * V + tokens.reshape(-1), flat)
    mass = torch.zeros(L * S, dtype=log_table.dtype)
    mass.index_add_(0, row, flat)
    probs = (log_table.exp() if probs is None else probs).unsqueeze(0)
    return hit.view(L, S, V).addcmul_(mass.view(L, S, 1), probs, value=-1.0)


def exact_objective(mdp: TokenMDP, theta: Tensor, policy: Policy | None = None) -> Tensor:
    """Scalar `J(theta) = (1/K) sum_x sum_y pi(y|x) r(x, y)`."""
    p = response_logprobs(mdp, theta, policy).exp()
    return (p * mdp.rewards).sum() / mdp.num_prompts


def exact_gradient(mdp: TokenMDP, theta: Tensor, policy: Policy | None = None) -> Tensor:
    """`grad J(theta)` by the score identity `(1/K) sum_{x,y} pi(y|x) r(x,y) grad log pi(y|x)`.

    Same shape as `theta`.
    """
    pol = _policy(mdp, policy)
    log_table = log_policy_table(mdp, theta, pol)
    p = response_token_logprobs(mdp, log_table).sum(dim=-1).exp()
    weight = (p * mdp.rewards / mdp.num_prompts).unsqueeze(1) * mdp.response_mask
    grad = logit_gradient(
        mdp,
        log_table,
        mdp.response_states.reshape(1, -1),
        mdp.response_tokens.reshape(1, -1),
        weight.reshape(1, -1),
    )[0]
    return pol.pullback(grad)


def exact_kl(
    mdp: TokenMDP, theta: Tensor, theta_behavior: Tensor, policy: Policy | None = None
) -> Tensor:
    """`[K]` per-prompt `KL(pi_theta(.|x) || pi_behavior(.|x))` of the response distributions."""
    lp = response_logprobs(mdp, theta, policy).view(mdp.num_prompts, -1)
    lq = response_logprobs(mdp, theta_behavior, policy).view(mdp.num_prompts, -1)
    return (lp.exp() * (lp - lq)).sum(dim=1).clamp(min=0.0)


def exact_chi_square(
    mdp: TokenMDP, theta: Tensor, theta_behavior: Tensor, policy: Policy | None = None
) -> Tensor:
    """`[K]` `chi^2(pi_theta || pi_behavior) = E_mu[rho^2] - 1` per prompt (log space)."""
    lp = response_logprobs(mdp, theta, policy).view(mdp.num_prompts, -1)
    lq = response_logprobs(mdp, theta_behavior, policy).view(mdp.num_prompts, -1)
    return torch.logsumexp(2 * lp - lq, dim=1).exp() - 1.0


def exact_token_entropy(mdp: TokenMDP, theta: Tensor, policy: Policy | None = None) -> Tensor:
    """`[K]` mean per-token entropy `E_pi[sum_t H(pi(.|s_t))] / E_pi[L]` per prompt (nats)."""
    log_table = log_policy_table(mdp, theta, policy)
    state_entropy = -(log_table.exp() * log_table).sum(dim=1)  # [S]
    per_token = state_entropy[mdp.response_states] * mdp.response_mask  # [N, T]
    p = response_token_logprobs(mdp, log_table).sum(dim=-1).exp()
    K = mdp.num_prompts
    ent = (p * per_token.sum(dim=1)).view(K, -1).sum(dim=1)
    length = (p * mdp.response_length.to(p.dtype)).view(K, -1).sum(dim=1)
    return ent / length


def min_token_probability(mdp: TokenMDP, *thetas: Tensor, policy: Policy | None = None) -> float:
    """`min_{s, a} pi(a | s)` over every given parameter vector: Assumption 2's `C = 1 / this`."""
    if not thetas:
        raise ValueError("min_token_probability needs at least one parameter tensor")
    return min(float(log_policy_table(mdp, th, policy).min().exp()) for th in thetas)


def coverage_constant(mdp: TokenMDP, *thetas: Tensor, policy: Policy | None = None) -> float:
    """Assumption 2's `C = 1 / min_{s,a} pi(a|s)` over the given policies."""
    return 1.0 / min_token_probability(mdp, *thetas, policy=policy)


def lipschitz_constant(mdp: TokenMDP, policy: Policy | None = None) -> float:
    """`L` of Assumption 1 for the policy class (tabular: 1/2; see `toy_mdps.policies`)."""
    return _policy(mdp, policy).lipschitz_constant()
