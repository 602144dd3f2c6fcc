"""Bound evaluators: hand values, Proposition 1 and the KL drift bound on exact softmax trees."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theory.bounds import (
    corollary2_bound,
    drift_bound,
    group_removed_mass_bound,
    kl_drift_bound,
    lemma1_rhs,
    removed_mass_bound,
    second_moment_bound,
    theorem_bound,
    tuned_bound,
)
from theory.constants import c_eps
from theory.softmax_tree import (
    TABULAR_SOFTMAX_L,
    exact_second_moment,
    trajectory_kl,
    tree_contexts,
)


def test_hand_values() -> None:
    assert second_moment_bound(0.28, 4, 0.5, 1.0, 100) == pytest.approx(
        8 / 4 * 1.28 * 0.5 * np.log(100)
    )
    assert removed_mass_bound(0.1, 0.28, "gmc") == pytest.approx(0.1 / np.log(1.56))
    assert removed_mass_bound(0.1, 0.28, "tic") == pytest.approx(0.1 / c_eps(0.28))
    assert group_removed_mass_bound(0.1, 0.2, 4, 0.5) == pytest.approx(1.5 * 0.1 / (2 * 0.2 * 4))
    assert kl_drift_bound(10, 0.5, 2.0) == pytest.approx(5.0)
    assert drift_bound(0.1, 3, 2.0) == pytest.approx(0.01 * 9 * 2.0)
    assert theorem_bound(0.1, 100, 1.0, 0.0) == pytest.approx(0.1 + 0.2)
    assert tuned_bound(100, 1.0, 0.0) == pytest.approx(np.sqrt(2 / 100))
    assert corollary2_bound(100, 1.0, 0.0, 8, 0.1) == pytest.approx(np.sqrt(2 / 100))
    arr = second_moment_bound(np.array([0.1, 0.2]), 4, 0.5, 1.0, 100)
    assert isinstance(arr, np.ndarray) and arr.shape == (2,)
    with pytest.raises(ValueError, match="method"):
        removed_mass_bound(0.1, 0.2, "grpo")


def test_lemma1_rhs_hand_case() -> None:
    g2, b2 = np.array([1.0, 3.0]), np.array([0.5, 0.5])
    coef = 0.1 * 1.0 * 0.5 * (2 * np.log(10) + 1)
    expected = 2 * 4 * 2.0 / (0.1 * 2) + 16 / 2 * np.sum(coef * g2 + b2)
    assert lemma1_rhs(0.1, 4, 2.0, 1.0, 0.5, 10, g2, b2) == pytest.approx(expected)
    with pytest.raises(ValueError, match="one length"):
        lemma1_rhs(0.1, 4, 2.0, 1.0, 0.5, 10, g2, b2[:1])


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(["tic", "gmc"]),
    st.integers(2, 3),
    st.floats(0.05, 2.0),
)
def test_proposition1_on_softmax_trees(seed: int, method: str, group: int, eps: float) -> None:
    """Exact E||g||^2 is below Prop. 1 with our constant 2 (|A_hat| <= R) -- hence below the 8."""
    rng = np.random.default_rng(seed)
    vocab, depth = 2, 2
    n_ctx = len(tree_contexts(vocab, depth))
    theta = rng.normal(scale=3.0, size=(n_ctx, vocab))
    behavior = theta + rng.normal(scale=3.0, size=(n_ctx, vocab))
    rewards = rng.uniform(0, 1, size=vocab**depth)
    value = exact_second_moment(theta, behavior, rewards, eps, method, group, vocab, depth)
    ours = second_moment_bound(eps, depth, TABULAR_SOFTMAX_L, 1.0, vocab) / 4
    assert 0 <= value <= ours


def test_raw_importance_sampling_breaks_the_bound() -> None:
    """The class constraint matters: raw IS (not in the class) exceeds the bound, TIC/GMC do not."""
    theta, behavior = np.array([[0.0, 0.0]]), np.array([[0.0, -12.0]])
    rewards = np.array([0.0, 1.0])
    bound = second_moment_bound(0.28, 1, TABULAR_SOFTMAX_L, 1.0, 2)
    assert exact_second_moment(theta, behavior, rewards, 0.28, "is", 2, 2, 1) > 100 * bound
    for method in ("tic", "gmc"):
        assert exact_second_moment(theta, behavior, rewards, 0.28, method, 2, 2, 1) <= bound / 4


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.01, 3.0))
def test_kl_drift_bound_on_softmax_trees(seed: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    vocab, depth = 3, 2
    n_ctx = len(tree_contexts(vocab, depth))
    theta = rng.normal(size=(n_ctx, vocab))
    delta = rng.normal(scale=scale, size=theta.shape)
    kl = trajectory_kl(theta, theta + delta, vocab, depth)
    assert (
        0 <= kl <= kl_drift_bound(depth, TABULAR_SOFTMAX_L, float(np.sum(delta**2))) * (1 + 1e-12)
    )
