"""Property tests: removed masses are below KL / denominator for random finite distributions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theory.bounds import group_removed_mass_bound, removed_mass_bound
from theory.constants import c_eps, tight_gmc_denominator
from theory.divergences import (
    gmc_removed_mass,
    gmc_single_removed_mass,
    group_removed_mass_binomial,
    kl_divergence,
    near_extremal_distribution,
    ratios,
    tic_removed_mass,
    two_point,
)


@st.composite
def distributions(draw: st.DrawFn, max_n: int = 5) -> tuple[np.ndarray, np.ndarray]:
    n = draw(st.integers(2, max_n))
    mu = np.array(draw(st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n)))
    pi = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    pi[draw(st.integers(0, n - 1))] += 0.05  # not all zero
    return mu / mu.sum(), pi / pi.sum()


eps_st = st.floats(0.01, 3.0)


@settings(max_examples=150, deadline=None)
@given(distributions(), eps_st)
def test_tic_removed_mass_below_kl_over_c_eps(d: tuple[np.ndarray, np.ndarray], eps: float) -> None:
    mu, pi = d
    kl, mass = kl_divergence(mu, pi), tic_removed_mass(mu, pi, eps)
    assert mass <= removed_mass_bound(kl, eps, "tic") * (1 + 1e-9) + 1e-12
    assert mass <= removed_mass_bound(kl, eps, "tic", tight=True) * (1 + 1e-9) + 1e-12


@settings(max_examples=100, deadline=None)
@given(distributions(max_n=4), eps_st, st.integers(1, 3))
def test_gmc_removed_mass_chain(d: tuple[np.ndarray, np.ndarray], eps: float, g: int) -> None:
    mu, pi = d
    kl = kl_divergence(mu, pi)
    group = gmc_removed_mass(mu, pi, eps, group_size=g)
    single = gmc_single_removed_mass(mu, pi, eps)
    assert group <= single + 1e-12  # convexity of (.)_+
    assert single <= removed_mass_bound(kl, eps, "gmc", tight=True) * (1 + 1e-9) + 1e-12
    assert removed_mass_bound(kl, eps, "gmc", tight=True) <= removed_mass_bound(kl, eps, "gmc")
    delta = float(np.max(np.abs(ratios(mu, pi) - 1)))
    assert group <= group_removed_mass_bound(kl, eps, g, delta) * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("eps", [0.01, 0.28, 1.0, 5.0])
@pytest.mark.parametrize("method", ["tic", "gmc"])
def test_tight_constants_are_attained_within_one_percent(eps: float, method: str) -> None:
    mu, pi = near_extremal_distribution(eps, method)
    kl = kl_divergence(mu, pi)
    mass = tic_removed_mass(mu, pi, eps) if method == "tic" else gmc_removed_mass(mu, pi, eps)
    tight = c_eps(eps) if method == "tic" else tight_gmc_denominator(eps)
    assert 1.0 - 1e-9 <= kl / (mass * tight) < 1.01


def test_binomial_matches_enumeration() -> None:
    mu, pi = two_point(0.4, 2.5)
    for g in (1, 2, 5):
        brute = gmc_removed_mass(mu, pi, 0.28, group_size=g)
        assert group_removed_mass_binomial(0.4, 2.5, 0.28, g) == pytest.approx(brute, rel=1e-12)


def test_gmc_bias_vanishes_with_group_size_tic_does_not() -> None:
    masses = [group_removed_mass_binomial(0.5, 2.0, 0.28, g) for g in (1, 4, 16, 64, 256)]
    assert all(b < a for a, b in zip(masses, masses[1:], strict=False))
    assert masses[-1] < 1e-6
    mu, pi = two_point(0.5, 2.0)
    assert tic_removed_mass(mu, pi, 0.28) == pytest.approx(2 / 3)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 20.0), min_size=1, max_size=8), eps_st)
def test_proposition2_alpha_star(rho: list[float], eps: float) -> None:
    rho_bar = float(np.mean(rho))
    alpha_star = min(1.0, (1 + eps) / rho_bar) if rho_bar > 0 else 1.0
    alphas = np.linspace(0, 1, 2001)
    feasible = alphas[alphas * rho_bar <= 1 + eps]
    assert alpha_star * rho_bar >= feasible.max() * rho_bar - 1e-12
    assert rho_bar - alpha_star * rho_bar == pytest.approx(max(rho_bar - 1 - eps, 0.0), abs=1e-12)


def test_kl_and_masses_hand_case() -> None:
    mu, pi = np.array([0.5, 0.5]), np.array([0.25, 0.75])
    assert kl_divergence(mu, pi) == pytest.approx(0.25 * np.log(0.5) + 0.75 * np.log(1.5))
    assert tic_removed_mass(mu, pi, 0.2) == pytest.approx(0.75)  # rho = 1.5 > 1.2
    assert gmc_single_removed_mass(mu, pi, 0.2) == pytest.approx(0.5 * 0.3)
    groups = list(itertools.product([0.5, 1.5], repeat=2))
    expected = sum(0.25 * max(np.mean(gr) - 1.2, 0) for gr in groups)
    assert gmc_removed_mass(mu, pi, 0.2, group_size=2) == pytest.approx(expected)


def test_invalid_inputs() -> None:
    with pytest.raises(ValueError, match="mu > 0"):
        kl_divergence([0.0, 1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="sum to 1"):
        kl_divergence([0.4, 0.4], [0.5, 0.5])
    with pytest.raises(ValueError, match="method"):
        near_extremal_distribution(0.1, "grpo")
