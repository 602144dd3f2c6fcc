"""TokenMDP enumeration, policies and exact quantities against brute-force twins."""

from __future__ import annotations

import math

import pytest
import torch

from toy_mdps import (
    TokenMDP,
    exact_gradient,
    exact_kl,
    exact_objective,
)
from toy_mdps.enumeration import (
    coverage_constant,
    exact_chi_square,
    exact_token_entropy,
    lipschitz_constant,
    log_policy_table,
    min_token_probability,
    response_logprobs,
    response_probabilities,
)
from toy_mdps.mdp import num_responses_per_prompt
from toy_mdps.policies import LogLinearSoftmax, TabularSoftmax, make_policy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def small() -> TokenMDP:
    return TokenMDP(num_prompts=2, vocab_size=3, max_length=3, seed=1)


def test_default_sizes_and_counts() -> None:
    mdp = TokenMDP()
    assert (mdp.num_prompts, mdp.vocab_size, mdp.max_length) == (8, 4, 6)
    assert mdp.responses_per_prompt == 1093 == sum(3**l for l in range(7))
    assert mdp.num_responses == 8 * 1093
    assert mdp.num_states == 8 * sum(3**l for l in range(6))
    assert num_responses_per_prompt(2, 5) == 6  # V=2: EOS at each position, or T non-EOS tokens


def test_response_set_is_exactly_the_documented_one(small: TokenMDP) -> None:
    n_x = small.responses_per_prompt
    seqs = set()
    for i in range(n_x):
        length = int(small.response_length[i])
        toks = tuple(small.response_tokens[i, :length].tolist())
        assert all(t != small.eos for t in toks[:-1])
        assert toks[-1] == small.eos or length == small.max_length
        assert bool(small.response_mask[i, :length].all()) and not bool(
            small.response_mask[i, length:].any()
        )
        seqs.add(toks)
    assert len(seqs) == n_x  # all distinct
    expected = {(small.eos,)} | {(a, small.eos) for a in range(2)}
    expected |= {
        (a, b, c) for a in range(3) for b in range(3) for c in range(3) if a != 2 and b != 2
    }
    assert seqs == expected


def test_states_follow_prefixes(small: TokenMDP) -> None:
    mask = small.response_mask
    depth = small.state_depth[small.response_states]
    positions = torch.arange(small.max_length).expand_as(depth)
    assert torch.equal(depth[mask], positions[mask])
    prompts = small.state_prompt[small.response_states]
    assert torch.equal(prompts[mask], small.response_prompt.unsqueeze(1).expand_as(prompts)[mask])
    # Two responses share the state at position t iff they share prompt and prefix y_<t.
    key = {}
    for i in range(small.num_responses):
        for t in range(int(small.response_length[i])):
            prefix = (int(small.response_prompt[i]), tuple(small.response_tokens[i, :t].tolist()))
            s = int(small.response_states[i, t])
            assert key.setdefault(prefix, s) == s
    assert len(key) == small.num_states


@pytest.mark.parametrize("policy_name", ["tabular", "loglinear"])
def test_probabilities_sum_to_one_and_match_a_loop(small: TokenMDP, policy_name: str) -> None:
    pol = make_policy(small, policy_name)
    theta = pol.random_parameters(3, 2.0)
    probs = response_probabilities(small, theta, pol)
    assert torch.allclose(probs.sum(dim=1), torch.ones(small.num_prompts, dtype=torch.float64))
    logits = pol.logits(theta)
    lp = response_logprobs(small, theta, pol)
    for i in range(0, small.num_responses, 5):  # brute force: a softmax per token
        total = 0.0
        for t in range(int(small.response_length[i])):
            row = logits[int(small.response_states[i, t])]
            total += float(row[int(small.response_tokens[i, t])] - torch.logsumexp(row, 0))
        assert math.isclose(float(lp[i]), total, rel_tol=1e-12, abs_tol=1e-12)


def test_pattern_reward_hand_case() -> None:
    mdp = TokenMDP(num_prompts=1, vocab_size=3, max_length=3, pattern_length=2, seed=0)
    pattern = tuple(mdp.patterns[0].tolist())
    for i in range(mdp.num_responses):
        toks = mdp.response_tokens[i, : int(mdp.response_length[i])].tolist()
        body = [t for t in toks if t != mdp.eos]
        hit = any(tuple(body[j : j + 2]) == pattern for j in range(len(body) - 1))
        assert float(mdp.rewards[i]) == (1.0 if hit else 0.0)


def test_length_reward() -> None:
    mdp = TokenMDP(num_prompts=2, vocab_size=3, max_length=4, reward="length", reward_scale=2.0)
    assert torch.allclose(mdp.rewards, 2.0 * mdp.response_length.double() / 4)


def test_objective_matches_direct_sum(small: TokenMDP) -> None:
    theta = small.random_parameters(0)
    probs = response_probabilities(small, theta).reshape(-1)
    assert math.isclose(
        float(exact_objective(small, theta)),
        float((probs * small.rewards).sum()) / small.num_prompts,
        rel_tol=1e-13,
    )


@pytest.mark.parametrize("policy_name", ["tabular", "loglinear"])
def test_gradient_matches_central_finite_differences(small: TokenMDP, policy_name: str) -> None:
    pol = make_policy(small, policy_name)
    theta = pol.random_parameters(7)
    grad = exact_gradient(small, theta, pol)
    assert grad.shape == theta.shape
    h = 1e-5
    fd = torch.zeros(theta.numel(), dtype=torch.float64)
    flat = theta.reshape(-1)
    for k in range(flat.numel()):  # every coordinate
        e = torch.zeros_like(flat)
        e[k] = h
        fd[k] = (
            exact_objective(small, (flat + e).view_as(theta), pol)
            - exact_objective(small, (flat - e).view_as(theta), pol)
        ) / (2 * h)
    rel = float((fd - grad.reshape(-1)).norm() / grad.norm())
    assert rel < 1e-6


@pytest.mark.parametrize("policy_name", ["tabular", "loglinear"])
def test_gradient_directional_fd_at_default_sizes(policy_name: str) -> None:
    mdp = TokenMDP()
    pol = make_policy(mdp, policy_name)
    theta = pol.random_parameters(11)
    grad = exact_gradient(mdp, theta, pol)
    gen = torch.Generator().manual_seed(0)
    h = 1e-5
    for _ in range(3):
        u = torch.randn(theta.shape, generator=gen, dtype=torch.float64)
        fd = (
            exact_objective(mdp, theta + h * u, pol) - exact_objective(mdp, theta - h * u, pol)
        ) / (2 * h)
        exact = float((grad * u).sum())
        assert abs(float(fd) - exact) < 1e-6 * abs(exact)
    # and the autograd twin
    t = theta.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(exact_objective(mdp, t, pol), t)
    assert torch.allclose(auto, grad, rtol=1e-10, atol=1e-14)


def test_kl_and_chi_square(small: TokenMDP) -> None:
    a, b = small.random_parameters(0), small.random_parameters(1)
    assert torch.allclose(
        exact_kl(small, a, a), torch.zeros(small.num_prompts, dtype=torch.float64), atol=1e-14
    )
    kl = exact_kl(small, a, b)
    assert kl.shape == (small.num_prompts,)
    p, q = response_probabilities(small, a), response_probabilities(small, b)
    assert torch.allclose(kl, (p * (p / q).log()).sum(dim=1), rtol=1e-12)
    chi2 = exact_chi_square(small, a, b)
    assert torch.allclose(chi2, (p**2 / q).sum(dim=1) - 1, rtol=1e-10)
    assert bool((kl <= torch.log1p(chi2) + 1e-12).all())  # KL <= log(1 + chi^2)


def test_entropy_min_probability_and_coverage(small: TokenMDP) -> None:
    theta = small.random_parameters(0)
    ent = exact_token_entropy(small, theta)
    assert bool((ent > 0).all()) and bool((ent <= math.log(small.vocab_size) + 1e-12).all())
    uniform = torch.zeros_like(theta)
    assert torch.allclose(exact_token_entropy(small, uniform), torch.full_like(ent, math.log(3)))
    assert math.isclose(min_token_probability(small, uniform), 1 / 3, rel_tol=1e-12)
    pmin = float(log_policy_table(small, theta).exp().min())
    assert math.isclose(coverage_constant(small, theta, uniform), 1 / pmin, rel_tol=1e-12)


@pytest.mark.parametrize("policy_name", ["tabular", "loglinear"])
def test_lipschitz_constant_bounds_the_score_jacobian(small: TokenMDP, policy_name: str) -> None:
    pol = make_policy(small, policy_name)
    L = lipschitz_constant(small, pol)
    assert L == (0.5 if policy_name == "tabular" else pol.lipschitz_constant())
    worst = 0.0
    for trial in range(3):
        theta = pol.random_parameters(trial, 3.0)
        for s in range(0, small.num_states, 4):
            # The Jacobian of the score of token 0 at state s is the Hessian of its log-prob.
            hess = torch.autograd.functional.hessian(
                lambda x, s=s: torch.log_softmax(pol.logits(x), -1)[s, 0], theta
            ).reshape(theta.numel(), theta.numel())
            worst = max(worst, float(torch.linalg.matrix_norm(hess, ord=2)))
    assert worst <= L + 1e-12
    assert worst > 0.2 * L  # the bound is not vacuous: near-two-point rows come close


def test_loglinear_features_are_shared() -> None:
    mdp = TokenMDP()
    pol = LogLinearSoftmax(mdp)
    assert pol.param_shape == (4, 1 + 6 + 4 + 8)
    assert pol.lipschitz_constant() == 2.0
    assert isinstance(make_policy(mdp), TabularSoftmax)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"num_prompts": 0}, "num_prompts"),
        ({"vocab_size": 1}, "vocab_size"),
        ({"max_length": 0}, "max_length"),
        ({"reward": "dense"}, "reward"),
        ({"pattern_length": 9}, "pattern_length"),
        ({"vocab_size": 12, "max_length": 9}, "responses"),
    ],
)
def test_invalid_mdp_arguments_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        TokenMDP(**kwargs)


@pytest.mark.parametrize("policy_name", ["tabular", "loglinear"])
def test_lipschitz_constant_is_exact_not_just_a_bound(small: TokenMDP, policy_name: str) -> None:
    """At a near-two-point distribution on the state of largest feature norm the score Jacobian
    reaches L to 1e-3: no smaller constant satisfies Assumption 1 (hand-worked: 1/2 tabular,
    ||h||^2 / 2 = 4 / 2 log-linear, where h has four ones off the root)."""
    pol = make_policy(small, policy_name)
    L = pol.lipschitz_constant()
    assert L == (0.5 if policy_name == "tabular" else 2.0)
    state = int((small.state_depth > 0).nonzero()[0])  # a non-root state: ||h||^2 = 4
    logits = torch.tensor([0.0, 0.0] + [-12.0] * (small.vocab_size - 2), dtype=torch.float64)
    if policy_name == "tabular":
        theta = torch.zeros(pol.param_shape, dtype=torch.float64)
        theta[state] = logits
    else:
        h = pol.features[state]
        theta = logits.unsqueeze(1) * h.unsqueeze(0) / h.pow(2).sum()  # z(state) = logits
    assert torch.allclose(pol.logits(theta)[state], logits)
    hess = torch.autograd.functional.hessian(
        lambda x: torch.log_softmax(pol.logits(x), -1)[state, 0], theta
    ).reshape(theta.numel(), theta.numel())
    norm = float(torch.linalg.matrix_norm(hess, ord=2))
    assert L * (1 - 1e-3) <= norm <= L + 1e-12


def test_the_torch_free_policy_names_are_the_policy_classes():
    """`toy_mdps.problem` checks `policy` against `response_space.POLICY_NAMES` (no torch);
    `policies.POLICY_CLASSES` builds them: the two lists must be the same."""
    from toy_mdps.policies import POLICY_CLASSES
    from toy_mdps.response_space import POLICY_NAMES

    assert tuple(POLICY_CLASSES) == POLICY_NAMES
