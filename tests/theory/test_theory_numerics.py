"""Numeric minimisation confirms every symbolic exponent to within 1%."""

from __future__ import annotations

import numpy as np
import pytest

from theory import numerics
from theory.bounds import theorem_bound, tuned_bound, tuned_step_size
from theory.curves import corollary1_closed_form, rate_exponent


def _check(fits: list[numerics.SlopeFit]) -> None:
    for f in fits:
        if f.expected == 0:
            assert abs(f.slope) < 0.01, f.name
        else:
            assert f.rel_error < 0.01, (f.name, f.slope, f.expected)


def test_step_size_and_penalty_slopes() -> None:
    _check(numerics.fit_no_delay_step_size() + numerics.fit_penalties())


@pytest.mark.parametrize("p", [2.0, 3.0, 3.5])
def test_large_delay_slopes(p: float) -> None:
    _check(numerics.fit_large_delay(p))


def test_corollary1_slopes_and_constant() -> None:
    _check(numerics.fit_corollary1())
    for n in (1e16, 1e24):
        assert numerics.corollary1_eps_star(n, 10.0) == pytest.approx(
            float(corollary1_closed_form(n, 10.0)), rel=0.01
        )


def test_joint_minimiser_slopes_and_constant() -> None:
    _check(numerics.fit_joint_minimiser())
    eps, _ = numerics.joint_eps_star(1e20, 8.0)
    assert eps == pytest.approx((8.0 / 2) ** (1 / 3) * 1e-10, rel=0.01)


def test_delay_tolerance_and_group_size() -> None:
    _check(numerics.fit_delay_tolerance())
    _check([numerics.fit_corollary2()])
    assert list(rate_exponent(np.array([1.0, 1.5, 2.0, 3.5, 4.0]))) == pytest.approx(
        [-0.5, -0.5, -0.4, -0.1, 0.0]
    )


def test_interval_check() -> None:
    ok, cells = numerics.interval_check_denominators(cells=100)
    assert ok and cells == 100


def test_min_over_eta_matches_closed_form_without_delay() -> None:
    eta, val = numerics.min_over_eta(1e-6, 1.28, 0.0)
    assert eta == pytest.approx((1.28 * 1e6) ** -0.5, rel=1e-6)
    assert val == pytest.approx(2 * np.sqrt(1.28 / 1e6), rel=1e-10)


@pytest.mark.parametrize("method", ["gmc", "tic"])
@pytest.mark.parametrize(
    ("n", "tau4", "eps"), [(1e4, 1.0, 0.28), (1e8, 1e12, 0.1), (1e6, 1e20, 1.0)]
)
def test_tuned_step_size_within_factor_two(method: str, n: float, tau4: float, eps: float) -> None:
    """Sandwich of `theory.rates.derive_step_size`: tuned eta is within 2x of the best bound."""
    k = numerics.penalty(eps, method)
    _, best = numerics.min_over_eta(1 / n, 1 + eps, k * tau4)
    at_tuned = theorem_bound(tuned_step_size(n, eps, tau4, method), n, eps, tau4, method)
    assert best <= at_tuned <= 2 * tuned_bound(n, eps, tau4, method) * (1 + 1e-12)
    assert tuned_bound(n, eps, tau4, method) <= 1.2 * best  # S + D <= const * min B
