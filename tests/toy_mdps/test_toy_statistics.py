"""Estimator statistics: unbiasedness, Monte Carlo vs exact enumeration, vectorised vs loop."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from gmc_grpo.estimators import METHODS
from gmc_grpo.losses import PolicyLossConfig
from toy_mdps import TokenMDP, exact_gradient
from toy_mdps.behavior import (
    behavior_at_delay,
    perturb_to_kl,
    reference_trajectory,
    suppress_direction,
)
from toy_mdps.enumeration import (
    exact_kl,
    log_policy_table,
    response_probabilities,
    response_token_logprobs,
)
from toy_mdps.policies import LogLinearSoftmax
from toy_mdps.reference import loop_gradient_estimates, minibatch_gradient_estimates
from toy_mdps.statistics import (
    chunked_estimates,
    chunked_sample_tensors,
    estimator_statistics,
    exact_estimator_moments,
    gradient_estimates,
    sample_groups,
    squared_bias,
    summarise,
)

torch.set_num_threads(1)
statistics_module = sys.modules["toy_mdps.statistics"]


@pytest.fixture(scope="module")
def tiny() -> TokenMDP:
    """Two prompts, 7 responses each: all pairs of responses can be enumerated."""
    return TokenMDP(num_prompts=2, vocab_size=3, max_length=2, seed=0)


@pytest.fixture(scope="module")
def stale_tiny(tiny: TokenMDP) -> tuple[torch.Tensor, torch.Tensor]:
    theta = tiny.random_parameters(0)
    return theta, perturb_to_kl(tiny, theta, 0.5, seed=1)


def test_sampling_matches_the_behavior_distribution(tiny: TokenMDP) -> None:
    theta = tiny.random_parameters(4)
    lp = response_token_logprobs(tiny, log_policy_table(tiny, theta)).sum(-1)
    gen = torch.Generator().manual_seed(0)
    prompts, responses = sample_groups(tiny, lp, 2000, 2, 10, gen)
    assert prompts.shape == (2000, 2) and responses.shape == (2000, 2, 10)
    assert torch.equal(tiny.response_prompt[responses], prompts.unsqueeze(-1).expand_as(responses))
    n_x = tiny.responses_per_prompt
    probs = response_probabilities(tiny, theta)
    for x in range(tiny.num_prompts):
        drawn = responses[prompts == x].reshape(-1) - x * n_x
        freq = torch.bincount(drawn, minlength=n_x).double() / drawn.numel()
        se = (probs[x] * (1 - probs[x]) / drawn.numel()).sqrt()
        assert bool(((freq - probs[x]).abs() <= 5 * se + 1e-12).all())
    again = sample_groups(tiny, lp, 2000, 2, 10, torch.Generator().manual_seed(0))[1]
    assert torch.equal(again, responses)  # explicit generator: reproducible


def test_squared_bias_is_the_debiased_u_statistic() -> None:
    gen = torch.Generator().manual_seed(0)
    g = torch.randn(500, 7, generator=gen, dtype=torch.float64) + 0.3
    target = torch.zeros(7, dtype=torch.float64)
    est = squared_bias(g, target, 0.95)
    assert math.isclose(est.interval.value, est.raw - est.noise, rel_tol=1e-10)
    d = g - target
    u = (d.sum(0) @ d.sum(0) - (d * d).sum()) / (500 * 499)
    assert math.isclose(est.interval.value, float(u), rel_tol=1e-10)
    assert est.interval.contains(7 * 0.09)  # the true ||E g - target||^2
    zero = squared_bias(g - 0.3, target, 0.99)
    assert zero.interval.contains(0.0)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_is_exactly_unbiased_on_policy(tiny: TokenMDP, method: str) -> None:
    """theta_behavior = theta_current, LOO advantages: exact enumeration of all groups."""
    theta = tiny.random_parameters(0)
    ex = exact_estimator_moments(
        tiny, theta, theta, PolicyLossConfig(method=method), group_size=2, version_lag=0
    )
    target = exact_gradient(tiny, theta).reshape(-1) / tiny.max_length
    assert float(target.norm()) > 1e-3
    assert ex.bias_sq < 1e-28
    assert ex.removed_mass == 0 or math.isnan(ex.removed_mass)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_unbiased_on_policy_monte_carlo(method: str) -> None:
    """The same claim measured: 0 inside the 99% interval of the debiased squared bias."""
    mdp = TokenMDP()
    theta = mdp.random_parameters(2)
    st = estimator_statistics(
        mdp,
        theta,
        theta,
        PolicyLossConfig(method=method),
        num_minibatches=300,
        num_groups=2,
        group_size=4,
        generator=torch.Generator().manual_seed(5),
        version_lag=0,
        level=0.99,
    )
    assert st.bias.interval.lo <= 0.0


def test_centered_advantage_shrinks_is_by_g_minus_1_over_g(tiny: TokenMDP, stale_tiny) -> None:
    theta, behavior = stale_tiny
    target = exact_gradient(tiny, theta).reshape(-1) / tiny.max_length
    for G in (2, 3):
        loo = exact_estimator_moments(
            tiny, theta, behavior, PolicyLossConfig(method="is"), group_size=G
        )
        cen = exact_estimator_moments(
            tiny, theta, behavior, PolicyLossConfig(method="is"), group_size=G, advantage="centered"
        )
        assert torch.allclose(loo.mean, target, rtol=1e-10, atol=1e-15)
        assert torch.allclose(cen.mean, (G - 1) / G * target, rtol=1e-10, atol=1e-15)


def test_stale_exact_is_unbiased_tic_gmc_biased(tiny: TokenMDP, stale_tiny) -> None:
    theta, behavior = stale_tiny
    bias = {
        m: exact_estimator_moments(
            tiny, theta, behavior, PolicyLossConfig(method=m), group_size=2
        ).bias_sq
        for m in ("is", "tic", "gmc")
    }
    assert bias["is"] < 1e-28
    assert bias["tic"] > 1e-6 and bias["gmc"] > 1e-7
    assert bias["gmc"] < bias["tic"]


def test_stale_monte_carlo_is_unbiased_tic_gmc_not() -> None:
    """Plain IS unbiased within its 99% interval; TIC and GMC significantly biased."""
    mdp = TokenMDP(num_prompts=4, vocab_size=3, max_length=4, seed=0)
    theta = mdp.random_parameters(0)
    behavior = perturb_to_kl(mdp, theta, 0.5, seed=1)
    intervals = {}
    for method in ("is", "tic", "gmc"):
        st = estimator_statistics(
            mdp,
            theta,
            behavior,
            PolicyLossConfig(method=method),
            num_minibatches=4000,
            num_groups=1,
            group_size=2,
            generator=torch.Generator().manual_seed(0),
            level=0.99,
        )
        intervals[method] = st.bias.interval
    assert intervals["is"].lo <= 0.0 <= intervals["is"].hi
    assert intervals["tic"].lo > 0.0
    assert intervals["gmc"].lo > 0.0


@pytest.mark.parametrize("method", METHODS)
def test_monte_carlo_agrees_with_exact_enumeration(tiny: TokenMDP, stale_tiny, method: str) -> None:
    """G = 2: E g, the squared bias, E||g||^2 and the removed mass against all 98 groups."""
    theta, behavior = stale_tiny
    cfg = PolicyLossConfig(method=method)
    ex = exact_estimator_moments(tiny, theta, behavior, cfg, group_size=2, version_lag=3)
    st = estimator_statistics(
        tiny,
        theta,
        behavior,
        cfg,
        num_minibatches=20000,
        num_groups=1,
        group_size=2,
        generator=torch.Generator().manual_seed(1),
        version_lag=3,
        level=0.99,
    )
    assert st.bias.interval.lo - 1e-12 <= ex.bias_sq <= st.bias.interval.hi + 1e-12
    # second moment and removed mass: heavy-tailed for IS/GRPO (chi^2 large), so only for the
    # methods with bounded weights.
    if method in ("tic", "gmc", "vcpo", "a3po"):
        assert st.second_moment.contains(ex.second_moment)
    if method in ("tic", "gmc", "vcpo"):
        assert st.removed_mass.contains(ex.removed_mass)


@pytest.mark.parametrize("method", METHODS)
def test_vectorised_estimates_equal_the_per_group_autograd_loop(method: str) -> None:
    mdp = TokenMDP(num_prompts=3, vocab_size=3, max_length=4, seed=2)
    theta = mdp.random_parameters(0)
    behavior = theta + 0.7 * mdp.random_parameters(1)
    lt, lb = log_policy_table(mdp, theta), log_policy_table(mdp, behavior)
    lp_b = response_token_logprobs(mdp, lb).sum(-1)
    _, responses = sample_groups(mdp, lp_b, 6, 3, 4, torch.Generator().manual_seed(0))
    cfg = PolicyLossConfig(method=method, max_length=mdp.max_length)
    fast = gradient_estimates(mdp, responses, lt, lb, cfg, version_lag=2).gradients
    slow = loop_gradient_estimates(mdp, responses, theta, behavior, cfg, version_lag=2)
    assert torch.allclose(fast, slow, rtol=1e-10, atol=1e-15)
    assert float(fast.abs().sum()) > 0
    # the batched autograd baseline of bench/bench_toy_statistics.py: one backward per minibatch
    batched = minibatch_gradient_estimates(mdp, responses, theta, behavior, cfg, version_lag=2)
    assert torch.allclose(batched, slow, rtol=1e-10, atol=1e-15)


def test_estimates_into_a_reused_buffer_equal_fresh_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's path (shared sample tensors, one reused [M, P] buffer, statistics in place)
    gives the same numbers, bit for bit, as fresh tensors (chunks of 7 minibatches)."""
    mdp = TokenMDP(num_prompts=3, vocab_size=3, max_length=4, seed=2)
    monkeypatch.setattr(statistics_module, "_CHUNK_ENTRIES", 7 * mdp.num_states * 3)
    theta = mdp.random_parameters(0)
    behavior = theta + 0.7 * mdp.random_parameters(1)
    lt, lb = log_policy_table(mdp, theta), log_policy_table(mdp, behavior)
    lp_b = response_token_logprobs(mdp, lb).sum(-1)
    _, responses = sample_groups(mdp, lp_b, 40, 3, 4, torch.Generator().manual_seed(5))
    target = torch.randn(theta.numel(), dtype=torch.float64) * 1e-3
    samples = chunked_sample_tensors(mdp, responses, lt, lb)
    buffer = torch.full((40, theta.numel()), float("nan"), dtype=torch.float64)
    for method in ("gmc", "grpo"):
        cfg = PolicyLossConfig(method=method, max_length=mdp.max_length)
        fresh = chunked_estimates(mdp, responses, lt, lb, cfg, version_lag=1)
        reused = chunked_estimates(
            mdp, responses, lt, lb, cfg, version_lag=1, samples=samples, out=buffer
        )
        assert torch.equal(reused.gradients, fresh.gradients)
        want = summarise(fresh, target)
        got = summarise(reused, target, in_place=True)
        assert got.bias == want.bias
        assert got.second_moment == want.second_moment
        assert got.removed_mass == want.removed_mass or method == "grpo"
        assert torch.allclose(got.mean_gradient, fresh.gradients.mean(dim=0), rtol=1e-12)


def test_vectorised_equals_loop_for_the_loglinear_policy() -> None:
    mdp = TokenMDP(num_prompts=3, vocab_size=3, max_length=4, seed=2)
    pol = LogLinearSoftmax(mdp)
    theta = pol.random_parameters(0)
    behavior = theta + 0.5 * pol.random_parameters(1)
    lt = log_policy_table(mdp, theta, pol)
    lb = log_policy_table(mdp, behavior, pol)
    lp_b = response_token_logprobs(mdp, lb).sum(-1)
    _, responses = sample_groups(mdp, lp_b, 5, 2, 4, torch.Generator().manual_seed(3))
    cfg = PolicyLossConfig(method="gmc", max_length=mdp.max_length)
    fast = gradient_estimates(mdp, responses, lt, lb, cfg, policy=pol).gradients
    slow = loop_gradient_estimates(mdp, responses, theta, behavior, cfg, policy=pol)
    assert fast.shape == (5, theta.numel())
    assert torch.allclose(fast, slow, rtol=1e-10, atol=1e-15)


def test_reference_trajectory_and_delays() -> None:
    mdp = TokenMDP(num_prompts=2, vocab_size=3, max_length=3)
    theta0 = mdp.random_parameters(0)
    traj = reference_trajectory(mdp, theta0, 10, 2.0)
    assert traj.shape == (11, *theta0.shape)
    assert torch.allclose(traj[1], theta0 + 2.0 * exact_gradient(mdp, theta0))
    kls = [float(exact_kl(mdp, *behavior_at_delay(traj, d)).mean()) for d in range(0, 11, 2)]
    assert kls[0] == 0.0 and all(a < b for a, b in zip(kls, kls[1:], strict=False))
    noisy = reference_trajectory(mdp, theta0, 3, 2.0, noise_std=0.1, seed=4)
    assert torch.equal(noisy, reference_trajectory(mdp, theta0, 3, 2.0, noise_std=0.1, seed=4))
    with pytest.raises(ValueError, match="delay"):
        behavior_at_delay(traj, 11)


@pytest.mark.parametrize("direction", ["random", "suppress"])
def test_perturb_to_kl_hits_the_target(direction: str) -> None:
    mdp = TokenMDP(num_prompts=3, vocab_size=3, max_length=3)
    theta = mdp.random_parameters(0)
    for target in (0.05, 1.0):
        behavior = perturb_to_kl(mdp, theta, target, seed=2, direction=direction)
        assert math.isclose(float(exact_kl(mdp, theta, behavior).mean()), target, rel_tol=1e-3)
    assert torch.equal(perturb_to_kl(mdp, theta, 0.0), theta)
    u = suppress_direction(mdp, theta)
    assert math.isclose(float(u.norm()), 1.0, rel_tol=1e-12)
