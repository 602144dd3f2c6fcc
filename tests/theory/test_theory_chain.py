"""The §4.2 chain in sympy: Lemma 1's constants, the (1+eps)^3, Corollary 2's exponents, printing."""

from __future__ import annotations

import sympy as sp

from theory import chain


def test_lemma1_reproduces_the_printed_coefficients() -> None:
    lem = chain.derive_lemma1()
    for derived, printed in zip(
        (lem.opt, lem.var, lem.bias), chain.paper_lemma1_coefficients(), strict=True
    ):
        assert sp.simplify(derived - printed) == 0
    assert (
        sp.simplify(lem.smoothness - chain.T * chain.R * chain.L * (2 * sp.log(chain.A) + 1)) == 0
    )


def test_second_moment_constant_and_pathwise_bounds() -> None:
    assert chain.derive_second_moment_constant() == 2 * chain.RA**2 / chain.R**2
    assert (
        sp.simplify(
            chain.pathwise_update_bound()
            - 2 * chain.ONEP**2 * chain.R**2 * chain.L * sp.log(chain.C)
        )
        == 0
    )
    assert (
        sp.simplify(chain.bias_per_removed_mass() ** 2 - 2 * chain.R**2 * chain.L * sp.log(chain.C))
        == 0
    )


def test_delay_term_powers() -> None:
    delay = chain.theorem_terms().delay
    powers = {
        chain.ONEP: 3,
        chain.ETA: 4,
        chain.TAU4: 1,
        chain.DEN: -2,
        chain.T: 3,
        chain.L: 5,
        chain.R: 6,
        chain.KAPPA: 1,
    }
    for symbol, power in powers.items():
        assert chain.exponent(delay, symbol) == power, symbol
    assert chain.only_through_log(chain.theorem_terms().total, chain.C)
    assert not chain.only_through_log(chain.C * sp.log(chain.C), chain.C)


def test_corollary2_exponents_from_the_chain() -> None:
    den_g, proof_ok = chain.derive_group_removed_mass_denominator()
    assert proof_ok and sp.simplify(den_g - 2 * chain.EPS * chain.G / chain.ONEPDELTA) == 0
    tuned = chain.tuned_delay_term(chain.theorem_terms(den=den_g))
    expected = {
        chain.G: sp.Rational(-2, 5),
        chain.ONEPDELTA: sp.Rational(2, 5),
        chain.EPS: sp.Rational(-2, 5),
        chain.ONEP: sp.Rational(3, 5),
        chain.TAU4: sp.Rational(1, 5),
        chain.N: sp.Rational(-4, 5),
    }
    for symbol, power in expected.items():
        assert chain.exponent(tuned, symbol) == power, symbol


def test_printing() -> None:
    expr = chain.second_moment(8)
    assert chain.to_plain(expr) == "8*L*R^2*(1+eps)*log(A)/T"
    tex = chain.to_latex(chain.theorem_terms().delay)
    assert (
        r"\lvert\mathcal{A}\rvert" in tex
        and r"\bar\tau_4" in tex
        and "|" not in tex.replace(r"\lvert", "").replace(r"\rvert", "")
    )
