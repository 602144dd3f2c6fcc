"""The prefix-tree recursion of the toy learner against the token-by-token enumeration."""

from __future__ import annotations

import pytest
import torch

from toy_mdps.enumeration import (
    exact_gradient,
    exact_objective,
    exact_token_entropy,
    log_policy_table,
    response_token_logprobs,
)
from toy_mdps.mdp import TokenMDP
from toy_mdps.policies import make_policy
from toy_mdps.train.tree import PrefixTree, exact_state

torch.set_num_threads(1)

SHAPES = [(2, 2, 1), (2, 2, 4), (3, 3, 3), (2, 4, 5), (3, 5, 4)]  # (K, V, T): V = 2 has w = 1


@pytest.mark.parametrize(("num_prompts", "vocab_size", "max_length"), SHAPES)
@pytest.mark.parametrize("policy", ["tabular", "loglinear"])
def test_tree_equals_token_enumeration(
    num_prompts: int, vocab_size: int, max_length: int, policy: str
) -> None:
    mdp = TokenMDP(
        num_prompts=num_prompts,
        vocab_size=vocab_size,
        max_length=max_length,
        reward="length",
        pattern_length=1,
    )
    pol = make_policy(mdp, policy)
    theta = torch.stack([pol.random_parameters(seed, 2.0) for seed in range(3)])
    state = exact_state(mdp, pol, theta, PrefixTree.build(mdp))
    for s in range(3):
        # the response log-probs are the same additions in the same order as a running sum
        # over the tokens (zeros after the end add nothing): bit for bit
        tokens = response_token_logprobs(mdp, state.log_table[s])
        running = torch.zeros(mdp.num_responses, dtype=tokens.dtype)
        for t in range(max_length):
            running = running + tokens[:, t]
        assert torch.equal(state.response_logprobs[s].reshape(-1), running)
        table = log_policy_table(mdp, theta[s], pol)
        assert torch.allclose(state.log_table[s], table, rtol=0, atol=1e-13)
        want_j = exact_objective(mdp, theta[s], pol)
        assert torch.allclose(state.objective[s], want_j, rtol=1e-14, atol=0)
        # grad J by Q - V per state vs the scatter of pi(y) r(y) / K minus row mass: the same
        # sums in another order; every term is at most R = 1, so absolute rounding ~1e-16
        grad = exact_gradient(mdp, theta[s], pol)
        assert torch.allclose(state.gradient[s], grad, rtol=0, atol=1e-13)
        entropy = exact_token_entropy(mdp, theta[s], pol).mean()
        assert torch.allclose(state.entropy[s], entropy, rtol=1e-13, atol=0)


def test_gradient_of_a_two_token_tree_by_hand() -> None:
    """K = 1, V = 2 (token 0 and EOS), T = 1: responses "EOS" and "0" (truncated).

    Logits `z = (a, b)` at the root, `p = pi(0) = sigmoid(a - b)`; with the length reward both
    responses have length 1 and reward 1, so `J = 1` and `grad J = 0`; with the pattern reward
    (pattern "0") `J = p`, `dJ/da = p (1 - p) = -dJ/db`.
    """
    mdp = TokenMDP(num_prompts=1, vocab_size=2, max_length=1, pattern_length=1)
    pol = make_policy(mdp, "tabular")
    theta = torch.tensor([[[0.3, -0.4]]], dtype=torch.float64)
    state = exact_state(mdp, pol, theta)
    p = torch.sigmoid(torch.tensor(0.7, dtype=torch.float64))
    assert torch.allclose(state.objective[0], p)
    want = torch.stack([p * (1 - p), -p * (1 - p)])
    assert torch.allclose(state.gradient[0, 0], want)
    assert torch.allclose(state.response_logprobs[0, 0], torch.log(torch.stack([1 - p, p])))


def test_tree_rejects_an_mdp_in_another_order() -> None:
    mdp = TokenMDP(num_prompts=2, vocab_size=3, max_length=3)
    mdp.response_length = mdp.response_length.flip(0)
    with pytest.raises(ValueError, match="ordered by length"):
        PrefixTree.build(mdp)
