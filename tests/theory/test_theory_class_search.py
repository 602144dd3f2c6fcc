"""Proposition 1 over eq. 5's whole class (`theory.class_search`): the vertex enumeration, the
worst weighting per group, the chain's one-token ceiling and the search (issue 31)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from theory import class_search
from theory.exact import group_moments, problem_from_tree
from theory.trees import tabular_tree


def _vertices(rho: list[float], eps: float) -> set[tuple[float, ...]]:
    coef, valid = class_search.class_vertex_coefficients(np.array([rho]), eps)
    return {tuple(np.round(c, 9)) for c, ok in zip(coef[0], valid[0], strict=True) if ok}


def test_vertices_by_hand() -> None:
    # G = 2, rho = (3, 1), eps = 0.5: cap G(1+eps) = 3. Vertices of [0,1]^2 ∩ {3 w1 + w2 <= 3}:
    # (0,0), (1,0) -> c = (3,0), (0,1) -> c = (0,1), and (2/3, 1) -> c = (2, 1).
    assert _vertices([3.0, 1.0], 0.5) == {(0.0, 0.0), (3.0, 0.0), (0.0, 1.0), (2.0, 1.0)}
    # below the cap every 0/1 vector is a vertex and no fractional one exists
    assert _vertices([0.5, 0.5], 0.1) == {(0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.5, 0.5)}


def test_vertices_are_in_the_class() -> None:
    rng = np.random.default_rng(3)
    rho = np.exp(rng.normal(scale=1.5, size=(50, 4)))
    coef, valid = class_search.class_vertex_coefficients(rho, 0.2)
    w = coef / rho[:, None, :]
    ok = valid[..., None] & np.ones_like(w, dtype=bool)
    assert np.all((w[ok] >= -1e-12) & (w[ok] <= 1 + 1e-12))
    assert np.all(coef.mean(-1)[valid] <= 1.2 * (1 + 1e-9))


def _problem(seed: int, vocab: int = 3):
    rng = np.random.default_rng(seed)
    tree = tabular_tree(vocab, 1)
    return problem_from_tree(
        tree,
        rng.normal(size=vocab),
        rng.normal(size=vocab),
        advantages=np.tanh(rng.normal(size=vocab)),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_worst_weighting_dominates_members_and_random_weightings(seed: int) -> None:
    prob, eps, group = _problem(seed), 0.2, 4
    worst = class_search.worst_class_second_moment(prob, eps, group)
    for method in ("tic", "gmc"):
        named = group_moments(prob, method, eps, group, advantage="fixed").second_moment
        assert named <= worst * (1 + 1e-12)
    # random feasible weightings, one per ordered group, drawn then scaled into the cap
    rng = np.random.default_rng(10 + seed)
    idx = np.array(list(itertools.product(range(3), repeat=group)))
    rho = prob.rho[idx]
    vec = prob.advantages[idx][..., None] * prob.score[idx]
    for _ in range(20):
        w = rng.uniform(size=rho.shape)
        w *= np.minimum(1.0, (1 + eps) / (w * rho).mean(1, keepdims=True))
        g = np.einsum("ng,ngd->nd", w * rho, vec) / group
        second = float(np.prod(prob.mu[idx], 1) @ np.sum(g**2, 1))
        assert second <= worst * (1 + 1e-12)


def test_worst_weighting_by_hand_uniform() -> None:
    # two tokens, pi = mu uniform, advantages (1, -1): every A_i s_i = (1/2, -1/2), all ratios 1,
    # so keeping everyone (allowed: mean rho = 1 <= 1+eps) gives ||g||^2 = 1/2 on every group.
    prob = problem_from_tree(
        tabular_tree(2, 1), np.zeros(2), np.zeros(2), advantages=np.array([1.0, -1.0])
    )
    assert class_search.worst_class_second_moment(prob, 0.1, 4) == pytest.approx(0.5, rel=1e-12)


def test_chain_ceiling_by_hand() -> None:
    assert class_search.one_token_chain_ceiling(2) == pytest.approx(1 / (2 * np.log(2)))
    assert class_search.one_token_chain_ceiling(3) == pytest.approx(0.6068, abs=1e-4)
    assert class_search.one_token_chain_ceiling(4) == pytest.approx(0.5410, abs=1e-4)


def test_search_stays_below_the_chain_ceiling_and_reaches_a_share() -> None:
    found = class_search.search_class_second_moment()
    assert found.example["group_size"] >= 4 and found.example["vocab_size"] >= 3
    for shape in found.example["by_shape"].values():
        # the chain's own one-token ceiling: a search above it would refute our proof of 2
        assert shape["fraction_of_ours"] <= shape["chain_ceiling"] * (1 + 1e-9)
    # not a trivial search: well above the named members' random-start values
    assert found.ratio > 0.3
