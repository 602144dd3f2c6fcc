"""Closed forms of the denominators against mpmath, vectorisation, and the pointwise inequalities."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from theory.constants import (
    c_eps,
    gmc_denominator,
    gmc_penalty,
    gmc_slack,
    gmc_tangent_point,
    improvement_factor,
    phi,
    tic_penalty,
    tight_gmc_denominator,
    tight_tic_denominator,
)

EPS_GRID = np.logspace(-8, 4, 121)


def _kappa_mp(eps: float) -> mpmath.mpf:
    """Tight GMC constant at 50 digits from the Lambert W closed form."""
    with mpmath.workdps(50):
        k = 1 + mpmath.mpf(eps)
        return -mpmath.lambertw(-(mpmath.e ** (-1 / k)) / k, -1).real - 1 / k


@pytest.mark.parametrize("eps", [1e-10, 1e-6, 1e-3, 0.05, 0.28, 1.0, 7.0, 1e3, 1e6])
def test_closed_forms_match_mpmath(eps: float) -> None:
    with mpmath.workdps(50):
        e = mpmath.mpf(eps)
        c_ref = mpmath.log(1 + e) - e / (1 + e)
        assert float(c_eps(eps)) == pytest.approx(float(c_ref), rel=1e-12)
        assert float(gmc_denominator(eps)) == pytest.approx(float(mpmath.log(1 + 2 * e)), rel=1e-14)
    assert float(tight_gmc_denominator(eps)) == pytest.approx(float(_kappa_mp(eps)), rel=1e-12)


def test_vectorised_scalar_in_float_out() -> None:
    for f in (c_eps, gmc_denominator, tight_tic_denominator, tight_gmc_denominator):
        assert isinstance(f(0.28), float)
        arr = f(np.array([0.1, 0.28, 1.0]))
        assert isinstance(arr, np.ndarray) and arr.shape == (3,)
        assert np.allclose(arr, [f(0.1), f(0.28), f(1.0)], rtol=1e-15)


@pytest.mark.parametrize("bad", [0.0, -0.1, np.inf, np.nan])
def test_rejects_non_positive_eps(bad: float) -> None:
    with pytest.raises(ValueError, match="eps"):
        c_eps(bad)
    with pytest.raises(ValueError, match="eps"):
        tight_gmc_denominator(np.array([0.1, bad]))


def test_ordering_on_grid() -> None:
    c, g, k = c_eps(EPS_GRID), gmc_denominator(EPS_GRID), tight_gmc_denominator(EPS_GRID)
    assert np.all(c < g)
    assert np.all(g <= k * (1 + 1e-12))
    assert np.all(tight_tic_denominator(EPS_GRID) == c)
    assert np.all((improvement_factor(EPS_GRID) > 0) & (improvement_factor(EPS_GRID) < 1))


def test_leading_coefficients() -> None:
    e = 1e-6
    assert c_eps(e) / e**2 == pytest.approx(0.5, rel=1e-5)
    assert gmc_denominator(e) / e == pytest.approx(2.0, rel=1e-5)
    assert tight_gmc_denominator(e) / e == pytest.approx(2.0, rel=1e-5)
    assert tic_penalty(e) * e**4 == pytest.approx(4.0, rel=1e-4)
    assert gmc_penalty(e) * e**2 == pytest.approx(0.25, rel=1e-4)
    assert improvement_factor(e) == pytest.approx((e / 4) ** 0.4, rel=1e-4)
    assert gmc_slack(1e-4) == pytest.approx(1 - 1e-4 / 3, rel=1e-7)
    assert improvement_factor(1e8) > 0.9  # -> 1 as eps -> oo


@pytest.mark.parametrize("eps", [1e-3, 0.1, 0.28, 1.0, 10.0])
def test_pointwise_inequalities_and_their_tightness(eps: float) -> None:
    x = np.concatenate([np.linspace(0, 3 * (1 + eps), 20001), np.geomspace(1, 1e6, 2001)])
    ph = phi(x)
    tic = c_eps(eps) * x * (x > 1 + eps)
    assert np.all(tic <= ph + 1e-15)
    for kappa in (gmc_denominator(eps), tight_gmc_denominator(eps)):
        assert np.all(kappa * np.maximum(x - 1 - eps, 0) <= ph * (1 + 1e-12) + 1e-15)
    # Tight: 1% larger constants fail somewhere (just above 1+eps for TIC, at x* for GMC).
    x_tic = (1 + eps) * (1 + 1e-6)
    assert 1.01 * c_eps(eps) * x_tic > phi(x_tic)
    xs = gmc_tangent_point(eps)
    assert 1.01 * tight_gmc_denominator(eps) * (xs - 1 - eps) > phi(xs)
    assert xs - 1 == pytest.approx((1 + eps) * np.log(xs), rel=1e-12)


def test_log_1_plus_2eps_is_valid_but_not_tight() -> None:
    # The paper's GMC constant is strictly below the tight one (slack grows with eps).
    e = np.array([0.01, 0.28, 1.0, 10.0])
    slack = gmc_slack(e)
    assert np.all(slack < 1)
    assert slack[0] > 0.99 and slack[2] < 0.9
