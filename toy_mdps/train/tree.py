"""Exact quantities of `S` softmax policies at once, by dynamic programming over the prefix tree.

The states of a `TokenMDP` are the prefixes of its prompts (`toy_mdps.mdp`): within a prompt,
depth `d` holds the `w^d` words of `d` non-EOS tokens (`w = V - 1`) in lexicographic order, so
the children of the state of rank `r` at depth `d` are the ranks `r w + v` at depth `d + 1`
(`v < w`), and the responses of a prompt are, in order, the EOS-terminated ones of length
`1..T` (state of depth `l - 1`, then EOS) and the truncated ones (a state of depth `T - 1`, then a
non-EOS token). Every quantity is therefore a pass per depth over contiguous blocks of the
`[S, K, Z_x, V]` log-policy table (no gather, no scatter):

- forward, the prefix log-probabilities `log p(s) = log p(parent) + log pi(v | parent)` and the
  response log-probabilities `log pi(y | x) = log p(s_last) + log pi(y_last | s_last)`: the same
  additions, in the same order, as the token-by-token sum `sum_t log pi(y_t | s_t)` (so the
  values are bit-identical to it);
- backward, the values `Q(s, v)` (the reward of the response `(s, v)` ends, or `V(child)`) and
  `V(s) = sum_v pi(v | s) Q(s, v)`, which give the policy gradient with respect to the logits,
  `dJ / dz(s, v) = (1 / K) p(s) pi(v | s) (Q(s, v) - V(s))` (the policy-gradient theorem on the
  tree: the score identity `sum_y pi(y) r(y) sum_t (onehot(y_t) - pi(. | s_t)) / K` summed per
  state), and the token entropy `sum_s p(s) H(pi(. | s)) / sum_s p(s)` per prompt (the expected
  sum of the visited states' entropies over the expected length, as
  `toy_mdps.enumeration.exact_token_entropy`).

`grad J` and the entropy are the same numbers as the token-by-token sums of `toy_mdps.enumeration` up
to the order of floating-point additions (a test checks them to 1e-12); `J` and the log-probs are
identical. Cost per seed: a few passes over the `Z V` table entries instead of the `sum_y |y|`
response tokens (`K = 8, V = 4, T = 6`: 11,648 entries, 51,032 tokens).

Shapes: `S` seeds, `K` prompts, `Z_x` states per prompt, `Z = K Z_x`, `V` tokens, `n_x`
responses per prompt, `N = K n_x`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import LogLinearSoftmax, Policy, TabularSoftmax


@dataclass
class ExactState:
    """Exact quantities of the current policies of all seeds.

    log_table: `[S, Z, V]`; probs: `[S, Z, V]` its `exp`; response_logprobs: `[S, K, n_x]`
    `log pi(y | x)`; objective: `[S]` `J`; entropy: `[S]` mean over prompts of the per-token
    entropy (as `toy_mdps.enumeration.exact_token_entropy`); grad_norm_sq: `[S]` `||grad J||^2`;
    gradient: `[S, *param]` `grad J` (assembled on first access).
    """

    log_table: Tensor
    probs: Tensor
    response_logprobs: Tensor
    objective: Tensor
    entropy: Tensor
    grad_norm_sq: Tensor
    policy: Policy
    logit_gradient: Tensor  # [K, Z_x, V, S], the recursion's layout
    _gradient: Tensor | None = None

    @property
    def gradient(self) -> Tensor:
        """`[S, *param]` `grad J`."""
        if self._gradient is None:
            S = self.log_table.shape[0]
            logit_grad = self.logit_gradient.permute(3, 0, 1, 2).reshape(self.log_table.shape)
            self._gradient = self.policy.pullback(logit_grad.reshape(S, -1, self.probs.shape[-1]))
        return self._gradient


@dataclass(frozen=True)
class PrefixTree:
    """The block structure of an MDP's states and responses (built once per MDP).

    depth_slices: per depth `d`, the slice of the `Z_x` states of a prompt at that depth.
    eos_rewards: per depth `d`, `[K, w^d]` the reward of the response "state, then EOS".
    truncated_rewards: `[K, w^(T-1), w]` the reward of the truncated responses.
    """

    num_prompts: int
    vocab_size: int
    states_per_prompt: int
    depth_slices: tuple[slice, ...]
    eos_rewards: tuple[Tensor, ...]
    truncated_rewards: Tensor

    @classmethod
    def build(cls, mdp: TokenMDP) -> PrefixTree:
        K, V, T = mdp.num_prompts, mdp.vocab_size, mdp.max_length
        word = V - 1
        sizes = [word**d for d in range(T)]
        starts = [sum(sizes[:d]) for d in range(T)]
        slices = tuple(slice(a, a + n) for a, n in zip(starts, sizes, strict=True))
        rewards = mdp.rewards.view(K, -1)
        eos, offset = [], 0
        for n in sizes:  # EOS-terminated responses of length 1..T, in enumeration order
            eos.append(rewards[:, offset : offset + n].contiguous())
            offset += n
        truncated = rewards[:, offset:].reshape(K, sizes[-1], word).contiguous()
        tree = cls(K, V, sum(sizes), slices, tuple(eos), truncated)
        tree._check(mdp)
        return tree

    def _check(self, mdp: TokenMDP) -> None:
        """The block layout must be the MDP's enumeration order (it is by construction)."""
        K, T = self.num_prompts, len(self.depth_slices)
        if K * self.states_per_prompt != mdp.num_states:
            raise ValueError("PrefixTree: state count differs from the MDP's")
        depth = mdp.state_depth.view(K, -1)
        for d, block in enumerate(self.depth_slices):
            if not bool((depth[:, block] == d).all()):
                raise ValueError(f"PrefixTree: states of depth {d} are not in one block")
        lengths = mdp.response_length.view(K, -1)[0]
        if not bool((lengths[:-1] <= lengths[1:]).all()) or int(lengths[-1]) != T:
            raise ValueError("PrefixTree: responses are not ordered by length")

    def response_logprobs(self, table: Tensor) -> tuple[Tensor, Tensor]:
        """`(prefix [K, Z_x, S], response [K, n_x, S])` log-probabilities.

        Args:
            table: `[K, Z_x, V, S]` log-policies, seeds last (`seeds_last`).
        `prefix` is `log p(s)`, the log-probability of reaching each state.
        """
        K, Zx, V, S = table.shape
        word = V - 1
        eos = table[:, :, V - 1]  # [K, Z_x, S]
        prefix = torch.zeros(K, Zx, S, dtype=table.dtype)
        response = torch.empty(K, Zx + self.truncated_rewards[0].numel(), S, dtype=table.dtype)
        for d, block in enumerate(self.depth_slices):
            if d > 0:  # children of depth d - 1: rank r w + v <- parent r, token v
                above = self.depth_slices[d - 1]
                torch.add(
                    prefix[:, above].unsqueeze(2),
                    table[:, above, :word],
                    out=prefix[:, block].view(K, -1, word, S),
                )
            torch.add(prefix[:, block], eos[:, block], out=response[:, block])
        last = self.depth_slices[-1]
        torch.add(
            prefix[:, last].unsqueeze(2),
            table[:, last, :word],
            out=response[:, Zx:].view(K, -1, word, S),
        )
        return prefix, response

    def gradient_and_entropy(
        self, table: Tensor, probs: Tensor, prefix: Tensor
    ) -> tuple[Tensor, Tensor]:
        """`(dJ/dz [K, Z_x, V, S], token entropy [S])` (module docstring).

        Args:
            table, probs: `[K, Z_x, V, S]` log-policies and policies; prefix: `[K, Z_x, S]` from
                `response_logprobs`.
        """
        K, _, V, S = table.shape
        word = V - 1
        reach = prefix.exp()  # [K, Z_x, S]
        logit_grad = torch.empty_like(table)
        value_below: Tensor | None = None  # V(s) of the states one level deeper
        for d in range(len(self.depth_slices) - 1, -1, -1):
            block = self.depth_slices[d]
            pi = probs[:, block]  # [K, w^d, V, S]
            q = logit_grad[:, block]  # Q(s, v), then turned into dJ/dz in place
            q[:, :, V - 1] = self.eos_rewards[d].unsqueeze(-1)
            if value_below is None:
                q[:, :, :word] = self.truncated_rewards.unsqueeze(-1)
            else:
                q[:, :, :word] = value_below.view(K, -1, word, S)
            value = (pi * q).sum(dim=2)  # [K, w^d, S]
            q.sub_(value.unsqueeze(2)).mul_(pi).mul_(reach[:, block].unsqueeze(2) / K)
            value_below = value
        state_entropy = (probs * table).sum(dim=2).neg_()  # [K, Z_x, S]
        entropy = (reach * state_entropy).sum(dim=1) / reach.sum(dim=1)  # [K, S]
        return logit_grad, entropy.mean(dim=0)


def seeds_last(log_table: Tensor, num_prompts: int) -> Tensor:
    """`[S, Z, V] -> [K, Z_x, V, S]` (contiguous): the layout of the tree recursion."""
    S, Z, V = log_table.shape
    return log_table.permute(1, 2, 0).reshape(num_prompts, Z // num_prompts, V, S).contiguous()


def batched_logits(policy: Policy, theta: Tensor) -> Tensor:
    """`[S, *param] -> [S, Z, V]` logits tables."""
    if isinstance(policy, TabularSoftmax):
        return theta
    if isinstance(policy, LogLinearSoftmax):
        return torch.einsum("sf,nvf->nsv", policy.features, theta)
    return torch.stack([policy.logits(t) for t in theta])


def exact_state(
    mdp: TokenMDP, policy: Policy, theta: Tensor, tree: PrefixTree | None = None
) -> ExactState:
    """Exact `J`, `grad J`, entropy and response log-probs for `[S, *param]` parameters.

    `J = (1/K) sum_y pi(y | x) r(x, y)` from the response log-probs (the same reduction as
    `toy_mdps.enumeration.exact_objective`); `grad J` and the entropy by the tree recursion (module
    docstring). `tree`: the MDP's `PrefixTree` (built when None).
    """
    tree = PrefixTree.build(mdp) if tree is None else tree
    S, K = theta.shape[0], mdp.num_prompts
    log_table = torch.log_softmax(batched_logits(policy, theta), dim=-1)  # [S, Z, V]
    probs = log_table.exp()
    table = seeds_last(log_table, K)
    prefix, response = tree.response_logprobs(table)
    response = response.permute(2, 0, 1).contiguous()  # [S, K, n_x]
    objective = (response.view(S, -1).exp() * mdp.rewards).sum(dim=-1) / K
    logit_grad, entropy = tree.gradient_and_entropy(table, seeds_last(probs, K), prefix)
    state = ExactState(log_table, probs, response, objective, entropy, entropy, policy, logit_grad)
    if isinstance(policy, TabularSoftmax):  # theta is the logits table: no pullback needed
        state.grad_norm_sq = logit_grad.pow(2).sum(dim=(0, 1, 2))
    else:
        state.grad_norm_sq = state.gradient.reshape(S, -1).pow(2).sum(dim=1)
    return state


__all__ = ["ExactState", "PrefixTree", "batched_logits", "exact_state", "seeds_last"]
