"""Bound evaluators: hand values, the sympy twin, arrays per step, and exact checks on token trees."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from theory import chain
from theory.bounds import (
    BoundTerms,
    bias_norm_bound,
    bias_per_removed_mass,
    bias_sq_bound,
    corollary2_bound,
    corollary2_terms,
    denominator,
    drift_bound,
    drift_fourth_moment_bound,
    drift_second_moment_bound,
    group_bias_bound,
    group_removed_mass_bound,
    kl_drift_bound,
    lag_moments,
    lemma1_rhs,
    lemma1_terms,
    objective_smoothness,
    removed_mass_bound,
    score_norm_bound,
    second_moment_bound,
    theorem1_terms,
    theorem2_terms,
    theorem_bound,
    tuned_bound,
    update_norm_sq_bound,
)
from theory.constants import c_eps
from theory.exact import group_moments, problem_from_tree
from theory.trees import min_token_prob, shared_tree, tabular_tree, trajectory_kl


def test_hand_values() -> None:
    assert second_moment_bound(0.28, 4, 0.5, 1.0, 100) == pytest.approx(
        8 / 4 * 1.28 * 0.5 * np.log(100)
    )
    assert second_moment_bound(0.28, 4, 0.5, 1.0, 100, "ours") == pytest.approx(
        2 / 4 * 1.28 * 0.5 * np.log(100)
    )
    assert second_moment_bound(0.28, 4, 0.5, 1.0, 100, 3.0) == pytest.approx(
        3 / 4 * 1.28 * 0.5 * np.log(100)
    )
    assert objective_smoothness(4, 1.0, 0.5, 100) == pytest.approx(2 * (2 * np.log(100) + 1))
    assert score_norm_bound(3, 0.5, np.e**2) == pytest.approx(3 * np.sqrt(2))
    assert update_norm_sq_bound(0.28, 1.0, 0.5, np.e) == pytest.approx(1.28**2)
    assert bias_per_removed_mass(2.0, 0.5, np.e**4) == pytest.approx(4.0)
    assert group_bias_bound(0.1, 2.0, 0.5, np.e**4) == pytest.approx(0.4)
    assert removed_mass_bound(0.1, 0.28, "gmc") == pytest.approx(0.1 / np.log(1.56))
    assert removed_mass_bound(0.1, 0.28, "tic") == pytest.approx(0.1 / c_eps(0.28))
    assert group_removed_mass_bound(0.1, 0.2, 4, 0.5) == pytest.approx(1.5 * 0.1 / (2 * 0.2 * 4))
    assert denominator(0.2, "gmc", group_size=4, delta=0.5) == pytest.approx(2 * 0.2 * 4 / 1.5)
    assert kl_drift_bound(10, 0.5, 2.0) == pytest.approx(5.0)
    assert drift_bound(0.1, 3, 2.0) == pytest.approx(0.01 * 9 * 2.0)
    assert drift_second_moment_bound(0.1, 5.0, 2.0) == pytest.approx(0.01 * 5 * 2)
    assert drift_fourth_moment_bound(0.1, 7.0, 2.0, 3.0) == pytest.approx(1e-4 * 7 * 6)
    assert theorem_bound(0.1, 100, 1.0, 0.0) == pytest.approx(0.1 + 0.2)
    assert tuned_bound(100, 1.0, 0.0) == pytest.approx(np.sqrt(2 / 100))
    assert corollary2_bound(100, 1.0, 0.0, 8, 0.1) == pytest.approx(np.sqrt(2 / 100))
    arr = second_moment_bound(np.array([0.1, 0.2]), 4, 0.5, 1.0, 100)
    assert isinstance(arr, np.ndarray) and arr.shape == (2,)


def test_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match="method"):
        removed_mass_bound(0.1, 0.2, "grpo")
    with pytest.raises(ValueError, match="constant"):
        second_moment_bound(0.1, 1, 1, 1, 2, "loose")
    with pytest.raises(ValueError, match="group_size and delta"):
        denominator(0.1, "gmc", group_size=4)
    with pytest.raises(ValueError, match="lags"):
        lag_moments([])


def test_theorem_terms_hand_case() -> None:
    """T = 1, log|A| = log C = 1, R = L = 1, eps = 1, tau4 = 1, eta = 0.1, N = 10, kappa = 8."""
    kw = dict(T=1.0, vocab_size=np.e, R=1.0, C=np.e, L=1.0, eta=0.1, N=10.0, eps=1.0, tau4=1.0)
    gmc = theorem1_terms(**kw)
    assert gmc.optimisation == pytest.approx(2.0)
    assert gmc.variance == pytest.approx(8 * 3 * 2 * 0.1)
    assert gmc.delay == pytest.approx(8 * 2**3 * 1e-4 / np.log(3) ** 2)
    assert gmc.total == pytest.approx(2.0 + 4.8 + 0.0064 / np.log(3) ** 2)
    tic = theorem2_terms(**kw)
    assert tic.delay == pytest.approx(gmc.delay * (np.log(3) / c_eps(1.0)) ** 2)
    assert tic.variance == gmc.variance and tic.optimisation == gmc.optimisation
    ours = theorem1_terms(**kw, constant="ours")
    assert ours.variance == pytest.approx(gmc.variance / 4)
    cor2 = corollary2_terms(group_size=8, delta=0.5, **kw)
    assert cor2.delay == pytest.approx(gmc.delay * (np.log(3) * 1.5 / (2 * 8)) ** 2)


def test_bias_bounds_hand_case() -> None:
    """K_b = 4 (R = 2, L = 1/2, log C = 4), (TL/2) = 1 (T = 4), M = 8/4 * 2 * 0.5 * 4 * 1 = 8,
    P = 2 (1+eps)^2 R^2 L log C = 64."""
    kw = dict(eps=1.0, T=4.0, L=0.5, R=2.0, C=np.e**4, vocab_size=np.e, method="gmc")
    m = 8.0
    assert bias_norm_bound(eta=0.1, tau2=3.0, **kw) == pytest.approx(
        4 * 1 * 0.01 * 3 * m / np.log(3)
    )
    p = 2 * 4 * 4 * 0.5 * 4
    assert bias_sq_bound(eta=0.1, tau4=5.0, **kw) == pytest.approx(
        16 * 1e-4 * 5 * m * p / np.log(3) ** 2
    )
    per_step = bias_sq_bound(eta=0.1, tau4=np.array([0.0, 5.0, 10.0]), **kw)
    assert (
        per_step.shape == (3,)
        and per_step[0] == 0
        and per_step[2] == pytest.approx(2 * per_step[1])
    )


def test_theorem_terms_equal_the_sympy_chain() -> None:
    """Brute-force twin: the numpy evaluators against the symbolic chain (random point)."""
    v = dict(T=7.0, vocab_size=50.0, R=1.5, C=300.0, L=0.7, eta=0.02, N=500.0, eps=0.4, tau4=30.0)
    num = theorem2_terms(**v, constant="ours")
    den = sp.log(1 + chain.EPS) - chain.EPS / (1 + chain.EPS)
    sym = chain.theorem_terms(den=den)
    sub = {
        chain.T: 7,
        chain.A: 50,
        chain.R: 1.5,
        chain.C: 300,
        chain.L: 0.7,
        chain.ETA: 0.02,
        chain.N: 500,
        chain.EPS: 0.4,
        chain.ONEP: 1.4,
        chain.TAU4: 30,
        chain.KAPPA: 2,
        chain.GAP: 1.5,
    }
    for name in ("optimisation", "variance", "delay"):
        assert float(getattr(num, name)) == pytest.approx(
            float(getattr(sym, name).subs(sub)), rel=1e-12
        )


def test_bound_terms_step_size_and_arrays() -> None:
    terms = BoundTerms(eta=0.5, optimisation=2.0, variance=1.0, delay=0.0)
    a, b, c = terms.coefficients
    assert (a, b, c) == (1.0, 2.0, 0.0)
    assert terms.best_step_size() == pytest.approx(np.sqrt(1 / 2), rel=1e-6)
    moved = terms.at(0.25)
    assert moved.optimisation == pytest.approx(4.0) and moved.variance == pytest.approx(0.5)
    arr = theorem1_terms(
        T=1.0,
        vocab_size=2.0,
        R=1.0,
        C=4.0,
        L=0.5,
        eta=np.array([0.01, 0.1]),
        N=100.0,
        eps=0.28,
        tau4=8.0,
    )
    assert arr.total.shape == (2,)
    assert lag_moments([[0, 1], [2, 3]]) == pytest.approx((3.5, 24.5))


def test_lemma1_terms_hand_case() -> None:
    g2, b2 = np.array([1.0, 3.0]), np.array([0.5, 0.5])
    smooth = 4 * 1.0 * 0.5 * (2 * np.log(10) + 1)
    terms = lemma1_terms(0.1, 4, 1.0, 0.5, 10, g2, b2, objective_gap=2.0)
    assert terms.optimisation == pytest.approx(2 * 4 * 2.0 / (0.1 * 2))
    assert terms.variance == pytest.approx(4 * smooth * 0.1 * 2.0)
    assert terms.bias == pytest.approx(16 * 0.5)
    assert lemma1_rhs(0.1, 4, 2.0, 1.0, 0.5, 10, g2, b2) == pytest.approx(terms.total)
    assert lemma1_terms(0.1, 4, 1.0, 0.5, 10, g2, b2).optimisation == pytest.approx(2 * 4 / 0.2)
    with pytest.raises(ValueError, match="one length"):
        lemma1_terms(0.1, 4, 1.0, 0.5, 10, g2, b2[:1])


def _random_pair(seed: int, vocab: int, depth: int, scale: float) -> tuple:
    tree = tabular_tree(vocab, depth)
    rng = np.random.default_rng(seed)
    theta = rng.normal(scale=2.0, size=tree.dim)
    return tree, theta, theta + rng.normal(scale=scale, size=tree.dim), rng


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(["tic", "gmc"]),
    st.integers(2, 3),
    st.floats(0.05, 2.0),
)
def test_proposition1_both_halves_on_softmax_trees(
    seed: int, method: str, group: int, eps: float
) -> None:
    """Exact second moment <= Prop. 1 with constant 2; exact bias <= K_b * removed mass."""
    tree, theta, behavior, rng = _random_pair(seed, 2, 2, 3.0)
    prob = problem_from_tree(tree, theta, behavior, rewards=rng.uniform(0, 1, size=4))
    mom = group_moments(prob, method, eps, group)
    assert 0 <= mom.second_moment <= second_moment_bound(eps, 2, tree.smoothness, 1.0, 2, "ours")
    cover = 1.0 / min_token_prob(tree, theta, behavior)
    bound = group_bias_bound(mom.removed_mass, 1.0, tree.smoothness, cover)
    assert np.linalg.norm(mom.bias) <= bound * (1 + 1e-9) + 1e-15


def test_raw_importance_sampling_breaks_the_bound() -> None:
    """The class constraint matters: raw IS (not in the class) exceeds the bound, TIC/GMC do not."""
    tree = tabular_tree(2, 1)
    prob = problem_from_tree(
        tree, np.zeros(2), np.array([0.0, -12.0]), rewards=np.array([0.0, 1.0])
    )
    bound = second_moment_bound(0.28, 1, tree.smoothness, 1.0, 2)
    assert group_moments(prob, "is", 0.28, 2).second_moment > 100 * bound
    for method in ("tic", "gmc"):
        assert group_moments(prob, method, 0.28, 2).second_moment <= bound / 4


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.01, 3.0), st.integers(1, 4))
def test_kl_drift_bound_on_shared_trees(seed: int, scale: float, depth: int) -> None:
    rng = np.random.default_rng(seed)
    tree = shared_tree(rng.normal(size=(3, 2)), depth)
    theta = rng.normal(size=2)
    step = rng.normal(scale=scale, size=2)
    kl = trajectory_kl(tree, theta, theta + step)
    assert 0 <= kl <= kl_drift_bound(depth, tree.smoothness, float(step @ step)) * (1 + 1e-12)


def test_kl_drift_factor_t_is_attained_with_shared_parameters() -> None:
    """Shared features, uniform policy, a small step along phi_0 - phi_1: KL/bound -> 1 (any T)."""
    for depth in (1, 3, 5):
        tree = shared_tree(np.eye(2), depth)
        step = 1e-4 * np.array([1.0, -1.0])
        kl = trajectory_kl(tree, np.zeros(2), step)
        assert kl / kl_drift_bound(depth, tree.smoothness, float(step @ step)) == pytest.approx(
            1, abs=1e-3
        )
