"""Every symbolic derivation passes and matches the paper's constants and exponents exactly."""

from __future__ import annotations

import pytest
import sympy as sp

from theory import rates, symbolic
from theory.rates import TAU, N, exponent


@pytest.mark.parametrize(
    "derivation", symbolic.all_derivations() + rates.all_rate_derivations(), ids=lambda d: d.name
)
def test_derivation_passes(derivation: symbolic.Derivation) -> None:
    assert derivation.ok, derivation.derived


def test_c_eps_closed_form_and_series() -> None:
    eps = symbolic.EPS
    assert (
        sp.simplify(symbolic.derive_c_eps().details["value"] - (sp.log(1 + eps) - eps / (1 + eps)))
        == 0
    )
    a = symbolic.derive_asymptotics().details
    assert a["c_lead"] == sp.Rational(1, 2) and a["gmc_lead"] == 2
    assert a["c_series"].coeff(eps, 3) == sp.Rational(-2, 3)
    assert symbolic.derive_tight_gmc().details["kappa_series"].coeff(eps, 2) == sp.Rational(-4, 3)


def test_penalty_leading_constants() -> None:
    d = symbolic.derive_penalty_asymptotics().details
    assert (d["tic_lead"], d["gmc_lead"]) == (4, sp.Rational(1, 4))
    r = rates.derive_penalty_rate_scaling().details
    assert (r["tic_exp"], r["gmc_exp"]) == (sp.Rational(-4, 5), sp.Rational(-2, 5))


def test_rate_exponents_match_paper() -> None:
    e = rates.derive_step_size().details["exponents"]
    assert e["S_N"] == sp.Rational(-1, 2) and e["D_N"] == sp.Rational(-4, 5)
    assert e["D_tau"] == sp.Rational(1, 5)
    c1 = rates.derive_corollary1("gmc").details
    assert (c1["N_exp"], c1["tau_exp"]) == (sp.Rational(-3, 14), sp.Rational(1, 7))
    lg = rates.derive_large_delay().details
    p = rates.P
    assert sp.simplify(lg["eta_exp"] + (p + 1) / 5) == 0
    assert sp.simplify(lg["rate_exp"] + (4 - p) / 5) == 0
    assert rates.derive_corollary2().details["G_exp"] == sp.Rational(-2, 5)
    assert sp.expand(rates.derive_delay_tolerance().details["delay_exponent"]) == sp.expand(
        5 * rates.Q / 7 - sp.Rational(11, 7)
    )


def test_joint_minimiser_differs_from_corollary1() -> None:
    d = rates.derive_joint_minimiser().details
    assert exponent(d["eps_star"], N) == sp.Rational(-1, 2)
    assert exponent(d["eps_star"], TAU) == sp.Rational(1, 3)
    assert d["excess_c1_slope"] == sp.Rational(-5, 7)


def test_argmin_helper_rejects_bad_input() -> None:
    x = sp.Symbol("x", positive=True)
    assert rates._argmin(x + 1 / x, x) == 1
    with pytest.raises(ValueError):
        rates._argmin(x + x**2, x)
