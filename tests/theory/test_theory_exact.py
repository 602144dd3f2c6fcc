"""Token trees and exact group expectations: hand cases and brute-force twins."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theory.checks import grpo_example
from theory.exact import (
    class_coefficients,
    compositions,
    group_moments,
    problem_from_tree,
    single_token_moments,
)
from theory.trees import (
    objective,
    objective_gradient,
    objective_hessian,
    shared_tree,
    tables,
    tabular_tree,
    trajectory_kl,
)


def test_tree_structure_and_smoothness() -> None:
    tree = tabular_tree(3, 2)
    assert tree.trajectories.shape == (9, 2) and tree.dim == 4 * 3
    assert tree.contexts[:, 0].tolist() == [0] * 9
    assert tree.contexts[:, 1].tolist() == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert tree.smoothness == 0.5  # one-hot features: ||e_a - e_b||^2 / 4
    assert shared_tree(np.array([[0.0], [2.0]]), 3).smoothness == 1.0
    probs = tables(tree, np.random.default_rng(0).normal(size=12)).prob
    assert probs.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="theta must have 12"):
        tables(tree, np.zeros(3))


def test_gradient_and_hessian_match_finite_differences() -> None:
    tree = shared_tree(np.random.default_rng(1).normal(size=(3, 2)), 3)
    rng = np.random.default_rng(2)
    theta, rewards = rng.normal(size=2), rng.uniform(size=27)
    h = 1e-5
    eye = np.eye(2)
    grad_fd = [
        (objective(tree, theta + h * e, rewards) - objective(tree, theta - h * e, rewards))
        / (2 * h)
        for e in eye
    ]
    hess_fd = [
        (
            objective_gradient(tree, theta + h * e, rewards)
            - objective_gradient(tree, theta - h * e, rewards)
        )
        / (2 * h)
        for e in eye
    ]
    assert objective_gradient(tree, theta, rewards) == pytest.approx(np.array(grad_fd), abs=1e-8)
    assert objective_hessian(tree, theta, rewards) == pytest.approx(np.array(hess_fd), abs=1e-7)


def test_kl_hand_case() -> None:
    """One token, logits (0, 0) vs (0, log 3): KL((1/2, 1/2) || (1/4, 3/4))."""
    tree = tabular_tree(2, 1)
    expected = 0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75)
    assert trajectory_kl(tree, np.zeros(2), np.array([0.0, np.log(3.0)])) == pytest.approx(expected)


def test_compositions() -> None:
    c = compositions(5, 3)
    assert c.shape == (comb(7, 2), 3) and np.all(c.sum(axis=1) == 5) and np.all(c >= 0)
    assert len({tuple(r) for r in c}) == len(c)


def test_single_token_hand_case() -> None:
    """p = (1/2, 1/2), mu = (1/4, 3/4): rho = (2, 2/3); advantages (1, -1); eps = 0.28.

    TIC: c = (0, 2/3); E||g||^2 = 3/4 (2/3)^2 (1/2) = 1/6; removed 1/4 * 2 = 1/2;
    bias = 1/4 (0 - 2) (1) s_0 = -(1/2)(1/2, -1/2). GMC (G = 1): c = (1.28, 2/3), removed 0.18.
    """
    tree = tabular_tree(2, 1)
    prob = problem_from_tree(
        tree, np.zeros(2), np.array([0.0, np.log(3.0)]), advantages=np.array([1.0, -1.0])
    )
    tic = group_moments(prob, "tic", 0.28, 1, advantage="fixed")
    assert tic.second_moment == pytest.approx(1 / 6)
    assert tic.removed_mass == pytest.approx(0.5)
    assert tic.bias == pytest.approx(np.array([-0.25, 0.25]))
    assert group_moments(prob, "gmc", 0.28, 1, advantage="fixed").removed_mass == pytest.approx(
        0.18
    )
    fast = single_token_moments(
        np.zeros(2), np.array([0.0, np.log(3.0)]), np.array([1.0, -1.0]), 0.28, "tic"
    )
    assert float(fast.second_moment) == pytest.approx(1 / 6)
    assert float(fast.min_prob) == pytest.approx(0.25)


@settings(max_examples=20, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.sampled_from(["is", "tic", "gmc", "vcpo", "grpo"]),
    st.sampled_from(["loo", "centered", "fixed"]),
    st.integers(2, 3),
)
def test_count_engine_matches_ordered_enumeration(
    seed: int, method: str, advantage: str, group: int
) -> None:
    tree = tabular_tree(2, 2)
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=tree.dim)
    prob = problem_from_tree(
        tree,
        theta,
        theta + rng.normal(scale=2, size=tree.dim),
        rewards=rng.uniform(size=4),
        advantages=rng.uniform(-1, 1, size=4),
    )
    kw = dict(advantage=advantage, vcpo_cap=1.5)
    a = group_moments(prob, method, 0.28, group, **kw)
    b = group_moments(prob, method, 0.28, group, engine="ordered", **kw)
    assert a.mean == pytest.approx(b.mean, abs=1e-12)
    assert a.second_moment == pytest.approx(b.second_moment, rel=1e-10)
    assert a.max_sq_norm == pytest.approx(b.max_sq_norm, rel=1e-10)
    if method != "grpo":
        assert a.removed_mass == pytest.approx(b.removed_mass, rel=1e-10, abs=1e-14)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["tic", "gmc"]), st.integers(2, 3))
def test_single_token_twin(seed: int, method: str, vocab: int) -> None:
    rng = np.random.default_rng(seed)
    lg, bl, adv = rng.normal(size=vocab), rng.normal(scale=2, size=vocab), rng.uniform(-1, 1, vocab)
    eps = float(rng.uniform(0.01, 1))
    ref = group_moments(
        problem_from_tree(tabular_tree(vocab, 1), lg, bl, advantages=adv),
        method,
        eps,
        1,
        advantage="fixed",
    )
    fast = single_token_moments(lg, bl, adv, eps, method)
    assert float(fast.second_moment) == pytest.approx(ref.second_moment, rel=1e-10)
    assert fast.bias == pytest.approx(ref.bias, abs=1e-12)
    assert float(fast.removed_mass) == pytest.approx(ref.removed_mass, rel=1e-10, abs=1e-14)


def test_importance_sampling_unbiased_with_leave_one_out_only() -> None:
    tree = tabular_tree(2, 2)
    rng = np.random.default_rng(5)
    theta = rng.normal(size=tree.dim)
    rewards = rng.uniform(size=4)
    prob = problem_from_tree(tree, theta, theta + rng.normal(size=tree.dim), rewards=rewards)
    target = objective_gradient(tree, theta, rewards) / tree.depth
    for g in (2, 4):
        assert group_moments(prob, "is", 0.28, g).mean == pytest.approx(target, abs=1e-14)
        centred = group_moments(prob, "is", 0.28, g, advantage="centered").mean
        assert centred == pytest.approx((g - 1) / g * target, abs=1e-14)


def test_coefficients_and_errors() -> None:
    rho = np.array([[0.5, 2.5, 1.2]])  # mean 1.4 > 1.28: GMC rescales by 1.28/1.4
    assert class_coefficients(rho, 0.28, "tic").tolist() == [[0.5, 0.0, 1.2]]
    gmc = class_coefficients(rho, 0.28, "gmc")
    assert gmc.mean() == pytest.approx(1.28) and gmc[0, 1] / gmc[0, 0] == pytest.approx(5.0)
    assert class_coefficients(rho, 0.28, "vcpo", vcpo_cap=1.0).tolist() == [[0.5, 1.0, 1.0]]
    with pytest.raises(ValueError, match="vcpo_cap"):
        class_coefficients(rho, 0.28, "vcpo")
    prob = problem_from_tree(
        tabular_tree(2, 1), np.zeros(2), np.zeros(2), rewards=np.array([0.0, 1.0])
    )
    with pytest.raises(ValueError, match="group_size >= 2"):
        group_moments(prob, "tic", 0.28, 1)
    with pytest.raises(ValueError, match="method"):
        group_moments(prob, "ppo", 0.28, 2)
    with pytest.raises(ValueError, match="problem.advantages"):
        group_moments(prob, "tic", 0.28, 2, advantage="fixed")


def test_grpo_example_closed_forms() -> None:
    """C = 4: worst group ||g||^2 = C^4/(32 (C-1)^2) = 8/9, mean C^2/(16 (C-1)) = 1/3."""
    mean, worst = grpo_example(4.0)
    assert worst == pytest.approx(256 / 288)
    assert mean == pytest.approx(1 / 3)
