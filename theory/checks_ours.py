"""Checks of our readings and extensions (the "ours" section of the claims table, never counted
against the paper): Proposition 1 with the constant 2, the bias constant `K_b`, the explicit
theorems, the tight denominators, the joint `(eta, eps)` minimiser, centred advantages, GRPO in
expectation, Corollary 2's removed-mass constant, TIC's bias being independent of `G`.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from gmc_grpo.defaults import PAPER_EPS
from theory import adversarial, chain, class_search, numerics, rates, symbolic
from theory.checks_chain import evaluator_twin_error
from theory.checks_estimators import (
    GRPO_COVERAGES,
    check_prop1_bias,
    check_prop1_second_moment,
    grpo_closed_forms,
    grpo_example,
    unbiasedness_residual,
)
from theory.checks_rates import group_bias_table
from theory.constants import c_eps, gmc_denominator, tight_gmc_denominator
from theory.divergences import (
    gmc_removed_mass,
    kl_divergence,
    near_extremal_distribution,
    tic_removed_mass,
)
from theory.verdicts import (
    NOT_REPRODUCED,
    RECONSTRUCTED,
    REFUTED,
    REL_TOL,
    VERIFIED,
    Check,
    bound_verdict,
    equal,
    fits_text,
    fits_within,
    short,
)


def check_ours_prop1_constant(constant: float = 2.0) -> Check:
    """Ours: Proposition 1 holds with the constant 2 (`|A_hat| <= R`); the search gets to 0.72 of it."""
    search = adversarial.search_second_moment()
    whole = class_search.search_class_second_moment()
    reached = max(search.ratio, whole.ratio)
    base = check_prop1_second_moment(constant)
    return Check(
        bound_verdict(constant, 2.0, 2.0 * reached),
        f"Derivation as in Proposition 1's row; the adversarial search reaches {short(search.ratio)} "
        "of the constant-2 bound (supremum 1/(2 ln 2) = 0.7213 for one token at ε → 0), the "
        f"search over eq. 5's whole class (|A| ≥ 3, G ≥ 4) {short(whole.ratio)}, so the "
        f"constant cannot be below {short(2 * reached)}; it is 4 times sharper than the paper's 8.",
        base.expr,
        {"fraction_reached": reached, "class_fraction_reached": whole.ratio},
        reason="an exact adversarial search could have exceeded the constant-2 bound",
    )


def check_ours_tight_constants(multiplier: float = 1.0) -> Check:
    """Ours: `c_eps` (TIC) and `kappa_eps` (GMC, Lambert W) are the largest valid denominators;
    `multiplier` scales both (a larger one is refuted by near-extremal laws)."""
    s, t = symbolic.derive_gmc_slack(), symbolic.derive_tight_gmc()
    attained = 0.0
    for eps in (0.01, PAPER_EPS, 1.0):
        for method in ("tic", "gmc"):
            mu, pi = near_extremal_distribution(eps, method)
            if method == "tic":
                mass, tight = tic_removed_mass(mu, pi, eps), float(c_eps(eps))
            else:
                mass, tight = gmc_removed_mass(mu, pi, eps), float(tight_gmc_denominator(eps))
            attained = max(attained, mass * tight / kl_divergence(mu, pi))
    slack = [
        float(gmc_denominator(x) / tight_gmc_denominator(x)) for x in (0.01, PAPER_EPS, 1.0, 10.0)
    ]
    verdict = bound_verdict(1.0 / multiplier, 1.0 if s.ok and t.ok else np.inf, attained)
    return Check(
        verdict,
        f"TIC: c_ε is already tight. GMC: tight κ_ε = −W₋₁(−e^(−1/k)/k) − 1/k (k = 1+ε) > "
        f"log(1+2ε); {s.derived}; slack log(1+2ε)/κ_ε at ε = 0.01, 0.28, 1, 10: "
        f"{', '.join(short(v, 4) for v in slack)}. Near-extremal two-point laws reach "
        f"{short(attained, 5)} of the tight bounds, so no larger constant is valid.",
        t.details["kappa_series"],
        {"slack": slack, "fraction_reached": attained},
        reason="near-extremal two-point laws could have exceeded the tight denominators",
    )


def check_ours_joint_minimiser(n_exponent: float = -0.5, tau_exponent: float = 1 / 3) -> Check:
    """Ours: minimising Theorem 1's bound jointly over `(eta, eps)` gives `eps* ~ tau4^(1/3) N^(-1/2)`."""
    jm = rates.derive_joint_minimiser()
    fits = numerics.fit_joint_minimiser()
    pairs = [(fits[0], n_exponent), (fits[1], tau_exponent)]
    n0 = 1e20
    eps_joint, exc_joint = numerics.joint_eps_star(n0, 1.0)
    eps_c1 = numerics.corollary1_eps_star(n0, 1.0)
    exc_c1 = numerics.joint_excess_at(eps_c1, n0, 1.0)
    star = jm.details["eps_star"]
    ok = (
        jm.ok
        and equal(chain.exponent(star, rates.N), n_exponent)
        and equal(chain.exponent(star, rates.TAU), tau_exponent)
        and fits_within(pairs)
    )
    return Check(
        VERIFIED if ok else REFUTED,
        "A second reading of Corollary 1 (not the paper's statement, which concerns the step-size-"
        f"tuned form and holds): {jm.derived}; numeric: {fits_text(pairs)}. At N = 1e20, "
        f"τ̄₄ = 1: joint ε* = {short(eps_joint)} (bound − 2/√N = {short(exc_joint)}), Corollary 1's "
        f"ε = {short(eps_c1)} gives {short(exc_c1)}; the difference is a relative "
        f"{short((exc_c1 - exc_joint) * np.sqrt(n0) / 2, 2)} of the whole bound.",
        star,
        {"eps_joint": eps_joint, "eps_corollary1": eps_c1},
        reason="numeric joint minimisation could have given other exponents",
    )


def check_ours_centered(factor_offset: float = 0.0) -> Check:
    """Ours: with centred advantages `E[g^IS] = ((G-1)/G + offset) grad J / T` (so LOO is needed)."""
    cases, cen = unbiasedness_residual("centered", factor_offset)
    return Check(
        VERIFIED if cen < REL_TOL else REFUTED,
        "Centring with the member's own reward, Aᵢ = rᵢ − r̄, correlates Aᵢ with ρᵢsᵢ: exactly "
        f"(G−1)/G × ∇J/T on {cases} cases (largest relative deviation {short(cen, 2)}); the paper's "
        "leave-one-out advantages (Appendix B.1) are what makes Assumption 3's unbiasedness hold.",
        (chain.G - 1) / chain.G * chain.NABLA_J / chain.T,
        {"max_relative_residual": cen},
        reason="exact enumeration could have shown another factor",
    )


def check_ours_bias_constant(multiplier: float = 1.0) -> Check:
    """Ours: the bias constant `K_b = R sqrt(2 L log C)` is within 10% of tight."""
    base = check_prop1_bias(multiplier)
    search = adversarial.search_bias()
    return Check(
        base.verdict,
        f"The search reaches {short(search.ratio)} of K_b·m (Assumption 2 loses the rest: "
        "‖∇log p‖² ≤ 2L(−log p) ≤ 2L log C) and "
        f"{short(float(search.example.get('ratio_exact_score', np.nan)), 4)} of the exact first step "
        "(largest score norm), which one removed trajectory with an aligned advantage attains.",
        base.expr,
        base.evidence,
        reason="an exact adversarial search could have exceeded K_b times the removed mass",
    )


def check_ours_grpo_mean(exponent: float = 1.0) -> Check:
    """Ours: GRPO's expected second moment on the example grows as `C^exponent` (worst case `C^2`)."""
    _, mean_expr = grpo_closed_forms()
    c = chain.C
    derived = sp.limit(c * sp.diff(sp.log(mean_expr), c), c, sp.oo)
    xs = np.array(GRPO_COVERAGES)
    ys = np.array([grpo_example(cv)[0] for cv in GRPO_COVERAGES])
    fit = numerics.SlopeFit(
        "GRPO E‖g‖² vs C", xs, ys, numerics.loglog_slope(xs, ys), float(derived)
    )
    ok = equal(derived, exponent) and fit.within(exponent, 0.02)
    return Check(
        VERIFIED if ok else REFUTED,
        f"In expectation over the stale policy the unclipped ratio C/2 occurs with probability "
        f"about 2/C: E‖g‖² = C²/(16(C−1)), exponent {derived} ({fit.text(exponent)}). The paper's "
        "O(C²) is the worst case over realised groups (row above); both are unbounded in C, "
        "unlike Proposition 1's C-free bound.",
        mean_expr,
        {"exponent": float(derived), "fit_slope": fit.slope},
        reason="exact enumeration measures the exponent",
    )


def check_ours_explicit_theorem(
    delay_t_power: float = 3.0, delay_log_c_power: float = 2.0
) -> Check:
    """Ours: Theorems 1-2 with explicit constants; numeric evaluators equal the sympy chain.

    The claimed powers of `T` and `log C` in the delay term are parameters."""
    twin = evaluator_twin_error()
    terms = chain.theorem_terms(den=sp.log(1 + 2 * chain.EPS))
    ell = sp.Symbol("ell", positive=True)
    t_pow = chain.exponent(terms.delay, chain.T)
    c_pow = chain.exponent(terms.delay.subs(sp.log(chain.C), ell), ell)
    ok = twin < 1e-9 and equal(t_pow, delay_t_power) and equal(c_pow, delay_log_c_power)
    return Check(
        RECONSTRUCTED if ok else NOT_REPRODUCED,
        "(1/N)Σ E‖∇J‖² ≤ 2TΔ_J/(ηN) + κT L²R³ log|A|(2log|A|+1)(1+ε)η + "
        "κT³L⁵R⁶ log²C log|A|(1+ε)³η⁴τ̄₄/log²(1+2ε) (κ = 8 paper, 2 ours; TIC: c_ε for "
        f"log(1+2ε)); powers of T and log C in the delay term: {t_pow}, {c_pow}. "
        f"theory.bounds.theorem_terms equals this sympy chain to {short(twin, 2)} at random points; "
        "it is what the toy runs' measured-vs-bound tables evaluate.",
        terms.total,
        {"twin_error": twin},
        reason="a code twin: the numeric evaluators equal our sympy chain; nothing measured could contradict the constants",
    )


def check_ours_group_removed_mass(multiplier: float = 1.0) -> Check:
    """Ours: Corollary 2's removed-mass bound `(1+delta) KL/(2 eps G)`; how much of it is attained."""
    searches = adversarial.search_group_removed_mass()
    worst = max(s.ratio for s in searches.values())
    den_g, _ = chain.derive_group_removed_mass_denominator()
    return Check(
        bound_verdict(multiplier, 1.0, worst),
        "Exact binomial removed mass over two-point laws with |ρ−1| ≤ δ = 0.5 and ε < δ "
        "(search over the law and ε): "
        + ", ".join(f"{short(s.ratio)} of the bound at G = {g}" for g, s in searches.items())
        + ". The 1/G from concentration is the slack that grows: the exact mass decays faster.",
        chain.KL / den_g,
        {str(g): s.ratio for g, s in searches.items()},
        reason="exact binomial removed mass over searched laws could have exceeded the bound",
    )


def check_ours_tic_bias_constant_in_g(constant_in_g: bool = True) -> Check:
    """Ours: with leave-one-out advantages TIC's bias vector does not depend on `G >= 2` at all."""
    tab = group_bias_table()
    lim = tab["tic_limit"][0]
    spread = max(abs(t - lim) for t in tab["tic"]) / lim
    return Check(
        VERIFIED if (spread < REL_TOL) == constant_in_g else REFUTED,
        "TIC's coefficient depends on a trajectory's own ratio only, and E[mean of the others' "
        "rewards] = E_μ r for every G, so E[gᵀᴵᶜ] − ∇J/T = E_μ[(c−ρ)s(r − E_μ r)]/T exactly: "
        f"relative spread over G = 2 … 32 is {short(spread, 2)}.",
        chain.TIC_BIAS / chain.T,
        {"relative_spread": spread},
        reason="exact bias vectors could have differed between group sizes",
    )


# Registry: key -> check function (defaults = the paper's or our claimed values).
