"""Checks of §4.1 and §4.3: the two denominators and their orders, the delay penalties, the
improvement factor, the step-size-tuned rate, Corollaries 1-2, the remarks on delay tolerance and
large delays, and the bias of GMC and TIC as the group grows.

Each `check_*` takes the claimed constant or exponent as a parameter and returns a
`theory.verdicts.Check`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from gmc_grpo.defaults import PAPER_EPS
from theory import adversarial, chain, numerics, rates, symbolic
from theory.bounds import bias_per_removed_mass
from theory.constants import c_eps, gmc_denominator
from theory.exact import (
    class_coefficients,
    group_moments,
    problem_from_tree,
)
from theory.trees import (
    min_token_prob,
    objective_gradient,
    tabular_tree,
)
from theory.verdicts import (
    NOT_REPRODUCED,
    RECONSTRUCTED,
    REFUTED,
    REL_TOL,
    VERIFIED,
    Check,
    equal,
    fits_text,
    fits_within,
    short,
)


def check_c_eps_below(multiplier: float = 1.0) -> Check:
    """§4.3: `multiplier * c_eps < log(1+2eps)` for every `eps > 0`."""
    p = symbolic.prove_c_eps_below_gmc()
    iv_ok, cells = numerics.interval_check_denominators()
    grid = np.logspace(-6, 40, 4000)
    bad = grid[multiplier * np.asarray(c_eps(grid)) >= np.asarray(gmc_denominator(grid))]
    limit = sp.limit(symbolic.c_eps_expr() / symbolic.gmc_denominator_expr(), symbolic.EPS, sp.oo)
    if bad.size:
        verdict = REFUTED
    else:
        verdict = VERIFIED if multiplier <= 1 and p.ok and iv_ok else NOT_REPRODUCED
    return Check(
        verdict,
        f"{p.derived} (sympy); interval arithmetic on {cells} cells of [1e-4, 1e4]. The ratio "
        f"c_ε/log(1+2ε) rises to {limit} as ε → ∞, so the margin vanishes at large ε: for the "
        f"claimed multiplier {short(multiplier)} the scan of ε ∈ [1e-6, 1e40] finds "
        + (
            f"a counterexample at ε = {short(float(bad[0]))}." if bad.size else "no counterexample."
        ),
        sp.StrictLessThan(symbolic.c_eps_expr(), symbolic.gmc_denominator_expr()),
        {"counterexample_eps": float(bad[0]) if bad.size else None},
        reason="interval arithmetic and a scan up to ε = 1e40 could have found a counterexample (c_ε is the tight TIC constant, our formula)",
    )


def check_denominator_orders(tic_exponent: float = 2.0, gmc_exponent: float = 1.0) -> Check:
    """§4.3: `c_eps = Theta(eps^tic_exponent)`, `log(1+2eps) = Theta(eps^gmc_exponent)`."""
    e = symbolic.EPS
    d_tic = sp.limit(e * sp.diff(sp.log(symbolic.c_eps_expr()), e), e, 0)
    d_gmc = sp.limit(e * sp.diff(sp.log(symbolic.gmc_denominator_expr()), e), e, 0)
    a = symbolic.derive_asymptotics()
    ok = equal(d_tic, tic_exponent) and equal(d_gmc, gmc_exponent)
    return Check(
        VERIFIED if ok else REFUTED,
        f"Exponents at ε → 0 (limits of ε d log/dε): c_ε {d_tic}, log(1+2ε) {d_gmc}; {a.derived}.",
        sp.Tuple(
            sp.series(symbolic.c_eps_expr(), e, 0, 3).removeO(),
            sp.series(symbolic.gmc_denominator_expr(), e, 0, 2).removeO(),
        ),
        {"tic_exponent": float(d_tic), "gmc_exponent": float(d_gmc)},
        reason="limits of the two denominators could have given other orders",
    )


def check_penalties(tic_exponent: float = -4.0, gmc_exponent: float = -2.0) -> Check:
    """Abstract, §4.3: delay penalties `(1+eps)^3/c_eps^2 ~ eps^-4`, `(1+eps)^3/log^2(1+2eps) ~ eps^-2`."""
    e = symbolic.EPS
    k_tic = (1 + e) ** 3 / symbolic.c_eps_expr() ** 2
    k_gmc = (1 + e) ** 3 / symbolic.gmc_denominator_expr() ** 2
    d_tic = sp.limit(e * sp.diff(sp.log(k_tic), e), e, 0)
    d_gmc = sp.limit(e * sp.diff(sp.log(k_gmc), e), e, 0)
    fits = numerics.fit_penalties()[:2]
    pairs = [(fits[0], tic_exponent), (fits[1], gmc_exponent)]
    ok = equal(d_tic, tic_exponent) and equal(d_gmc, gmc_exponent) and fits_within(pairs)
    lead = symbolic.derive_penalty_asymptotics().details
    return Check(
        VERIFIED if ok else REFUTED,
        f"sympy: exponents {d_tic} (TIC) and {d_gmc} (GMC), leading constants "
        f"{lead['tic_lead']} and {lead['gmc_lead']}; numeric: {fits_text(pairs)}.",
        sp.Tuple(4 * e**-4, e**-2 / 4),
        {"tic_exponent": float(d_tic), "gmc_exponent": float(d_gmc)},
        reason="limits and log-log slopes of the printed penalties could have given other exponents",
    )


def check_improvement_factor(exponent: float = 0.4) -> Check:
    """§4.3: tuned delay terms differ by `(c_eps / log(1+2eps))^exponent < 1`."""
    c_sym, d_sym = sp.symbols("c_eps d_eps", positive=True)
    k_tic = chain.ONEP**3 / c_sym**2
    k_gmc = chain.ONEP**3 / d_sym**2
    ratio = (k_gmc / k_tic) ** sp.Rational(1, 5)  # tuned delay terms are (K tau4 / N^4)^(1/5)
    derived = chain.exponent(ratio, c_sym)
    base = symbolic.c_eps_expr() / symbolic.gmc_denominator_expr()
    below = symbolic.prove_c_eps_below_gmc().ok
    ok = equal(derived, exponent) and below
    from theory.constants import improvement_factor

    return Check(
        VERIFIED if ok else REFUTED,
        f"The tuned delay term is (K τ̄₄/N⁴)^(1/5), so the ratio is (K_GMC/K_TIC)^(1/5) = "
        f"(c_ε/log(1+2ε))^{derived} (sympy, exact); < 1 because c_ε < log(1+2ε). At ε = 0.28: "
        f"{short(float(improvement_factor(PAPER_EPS)), 4)} (tight constants, ours: "
        f"{short(float(improvement_factor(PAPER_EPS, tight=True)), 4)}).",
        base ** sp.Rational(2, 5),
        {"exponent": float(derived)},
        reason="the ratio of the tuned delay terms of the printed bounds is computed exactly",
    )


def check_tuned_rate(
    s_exponent: float = -0.5, d_n_exponent: float = -0.8, d_tau_exponent: float = 0.2
) -> Check:
    """Theorem 2 / Corollary 2 printed form `sqrt((1+eps)/N) + (K tau4/N^4)^(1/5)`."""
    st = rates.derive_step_size()
    ex = st.details["exponents"]
    nd = numerics.fit_no_delay_step_size()
    ld = numerics.fit_large_delay(2.0)[:2]
    pairs = [(nd[1], s_exponent), (ld[1], -0.4)]
    ok = (
        equal(ex["S_N"], s_exponent)
        and equal(ex["D_N"], d_n_exponent)
        and equal(ex["D_tau"], d_tau_exponent)
        and fits_within(pairs)
    )
    return Check(
        VERIFIED if ok else REFUTED,
        f"Pairwise balances of a/η + bη + cη⁴ (sympy): η_S ∝ N^{ex['eta_S_N']}, value ∝ N^{ex['S_N']}; "
        f"η_D ∝ N^{ex['eta_D_N']}, value ∝ N^{ex['D_N']} τ̄₄^{ex['D_tau']}; the tuned bound is "
        f"within a factor 2 of their sum. Numeric minimisation over η: {fits_text(pairs)}.",
        st.details["D"],
        {k: float(v) for k, v in ex.items()},
        reason="numeric minimisation over η of the printed shape could have given other exponents",
    )


def check_corollary1(n_exponent: float = -3 / 14, tau_exponent: float = 1 / 7) -> Check:
    """Corollary 1: `eps*_GMC = Theta(tau4^(1/7) N^(-3/14))` (leading eps-terms of the tuned bound)."""
    d = rates.derive_corollary1("gmc")
    fits = numerics.fit_corollary1()
    pairs = [(fits[0], n_exponent), (fits[1], tau_exponent)]
    ok = (
        equal(d.details["N_exp"], n_exponent)
        and equal(d.details["tau_exp"], tau_exponent)
        and fits_within(pairs)
    )
    tic = rates.derive_corollary1("tic").details
    return Check(
        VERIFIED if ok else REFUTED,
        f"sympy argmin of the leading ε-terms ε/(2√N) + (τ̄₄/(4ε²N⁴))^(1/5): ε* ∝ "
        f"N^{d.details['N_exp']} τ̄₄^{d.details['tau_exp']} (TIC analogue: N^{tic['N_exp']} "
        f"τ̄₄^{tic['tau_exp']}); numeric minimisation of the whole tuned bound: {fits_text(pairs)}.",
        d.details["eps_star"],
        {"N_exp": float(d.details["N_exp"]), "tau_exp": float(d.details["tau_exp"])},
        reason="numeric minimisation of the whole tuned bound could have given another ε*",
    )


def check_delay_tolerance(
    eps_tau_exponent: float = 1 / 7, eps_n_exponent: float = -3 / 14, q_max: float = 1.5
) -> Check:
    """Remark after Theorem 1: with `eps ~ min{1, tau4^a N^b}`, `eta ~ N^(-1/2)`, every
    `tau4 = O(N^q_max)` keeps the `O(N^(-1/2))` rate."""
    derived = rates.delay_tolerance_threshold(eps_tau_exponent, eps_n_exponent)
    qs = (0.5, 1.0, q_max)
    fits = numerics.fit_delay_tolerance(qs, tau_exp=eps_tau_exponent, n_exp=eps_n_exponent)
    pairs = [(f, -0.5) for f in fits]
    fixed = numerics.fit_delay_tolerance((q_max,), tau_exp=0.0, n_exp=-0.5)[0]
    ok = float(derived) >= q_max - 1e-12 and fits_within(pairs, tol=0.005)
    return Check(
        VERIFIED if ok else REFUTED,
        f"With τ̄₄ = N^q and ε = min{{1, τ̄₄^a N^b}} (a = {short(eps_tau_exponent, 4)}, "
        f"b = {short(eps_n_exponent, 4)}), the delay term ∝ N^(q − 2 − 2(aq + b)) stays ≤ N^(−1/2) up "
        f"to q = {derived} (sympy; the cap ε = 1 takes over exactly there). Theorem 1's bound "
        f"at these choices, numerically: {fits_text(pairs)}. The prescription matters: a threshold "
        f"shrinking like N^(−1/2) instead gives slope {fixed.slope:+.3f} at q = {short(q_max)}.",
        sp.nsimplify(derived),
        {"q_max": float(derived), "slopes": [f.slope for f in fits], "points": fits[0].points},
        reason="the bound's slopes at the prescription could have exceeded −1/2",
    )


def check_large_delay(rate_offset: float = 0.0, eta_offset: float = 0.0) -> Check:
    """Remark: `tau4 = Theta(N^p)`, `3/2 < p < 4`: `eps = Theta(1)`, `eta ~ N^(-(p+1)/5)`, rate
    `N^(-(4-p)/5)`; the claimed exponents are shifted by the offsets (for perturbation tests)."""
    lg = rates.derive_large_delay()
    p = rates.P
    sym_ok = sp.simplify(lg.details["rate_exp"] - (-(4 - p) / 5 + rate_offset)) == 0 and (
        sp.simplify(lg.details["eta_exp"] - (-(p + 1) / 5 + eta_offset)) == 0
    )
    pairs = []
    for p_ in (2.0, 3.0, 3.5):
        eta_fit, rate_fit, eps_fit = numerics.fit_large_delay(p_)
        pairs += [
            (eta_fit, -(p_ + 1) / 5 + eta_offset),
            (rate_fit, -(4 - p_) / 5 + rate_offset),
            (eps_fit, 0.0),
        ]
    ok = bool(sym_ok) and fits_within(pairs)
    return Check(
        VERIFIED if ok else REFUTED,
        f"{lg.derived} (sympy). Numeric joint minimisation over (η, ε): {fits_text(pairs)}.",
        lg.details["rate_exp"],
        {"points": pairs[0][0].points},
        reason="numeric joint minimisation over (η, ε) could have given other exponents",
    )


def check_corollary2(g_exponent: float = -0.4) -> Check:
    """Corollary 2: the tuned delay term decreases as `G^g_exponent`, derived from the chain."""
    den_g, proof_ok = chain.derive_group_removed_mass_denominator()
    delay = chain.tuned_delay_term(chain.theorem_terms(den=den_g))
    exps = {
        "G": chain.exponent(delay, chain.G),
        "(1+δ)": chain.exponent(delay, chain.ONEPDELTA),
        "ε": chain.exponent(delay, chain.EPS),
        "(1+ε)": chain.exponent(delay, chain.ONEP),
        "τ̄₄": chain.exponent(delay, chain.TAU4),
        "N": chain.exponent(delay, chain.N),
    }
    printed = {"G": -2, "(1+δ)": 2, "ε": -2, "(1+ε)": 3, "τ̄₄": 1, "N": -4}
    shape_ok = all(equal(5 * exps[k], v) for k, v in printed.items())
    searches = adversarial.search_group_removed_mass()
    worst = max(s.ratio for s in searches.values())
    fit = numerics.fit_corollary2()
    ok = proof_ok and shape_ok and equal(exps["G"], g_exponent) and fit.within(g_exponent)
    verdict = REFUTED if worst > 1 + REL_TOL else RECONSTRUCTED if ok else NOT_REPRODUCED
    return Check(
        verdict,
        "From the group-average concentration: (y−ε)₊ ≤ y²/(4ε), E(ρ̄−1)² = χ²/G and "
        "χ² ≤ 2(1+δ)KL on |ρ−1| ≤ δ give E(ρ̄−1−ε)₊ ≤ KL/den_G with den_G = "
        f"{chain.to_plain(den_g).replace('onepdelta', '(1+δ)').replace('epsilon', 'ε')} (sympy). "
        "Put into the Theorem 1 chain and tuned over η, the delay term has exponents "
        + ", ".join(f"{k} {v}" for k, v in exps.items())
        + " (×5 = the printed (1+δ)²(1+ε)³τ̄₄/(G²ε²N⁴) inside the 1/5 power). Exact removed mass "
        "on two-point laws with |ρ−1| ≤ 0.5 reaches "
        + ", ".join(f"{short(s.ratio)} (G = {g})" for g, s in searches.items())
        + f" of (1+δ)KL/(2εG); {fit.text(g_exponent)}.",
        delay,
        {
            "G_exponent": float(exps["G"]),
            "removed_mass_fraction": {str(g): s.ratio for g, s in searches.items()},
        },
        reason="the G^(−2/5) comes from our reconstruction (removed-mass bound from concentration, through our chain); its new ingredient, the removed-mass bound, is checked exactly",
    )


@lru_cache(maxsize=1)
def group_bias_table(
    group_sizes: tuple[int, ...] = (2, 4, 8, 16, 32),
) -> dict[str, list[float]]:
    """Exact bias vectors `E[g^w] - grad J/T` of TIC and GMC for growing `G` (fixed policies).

    Two-token tabular tree, one seeded current/stale pair, leave-one-out advantages. Returns the
    norms per `G` and TIC's `G -> oo` limit `||E_mu[(c - rho) s (r - E_mu r)]|| / T`.
    """
    tree = tabular_tree(2, 2)
    rng = np.random.default_rng(11)
    theta = rng.normal(scale=0.5, size=tree.dim)
    behavior = theta + rng.normal(scale=0.6, size=tree.dim)
    rewards = np.array([1.0, 0.0, 0.0, 1.0])
    prob = problem_from_tree(tree, theta, behavior, rewards=rewards)
    target = objective_gradient(tree, theta, rewards) / tree.depth
    out: dict[str, list[float]] = {"G": [float(g) for g in group_sizes], "tic": [], "gmc": []}
    for g in group_sizes:
        for method in ("tic", "gmc"):
            out[method].append(
                float(np.linalg.norm(group_moments(prob, method, PAPER_EPS, g).mean - target))
            )
    c = class_coefficients(prob.rho, PAPER_EPS, "tic")
    limit = (prob.mu * (c - prob.rho) * (rewards - prob.mu @ rewards)) @ prob.score / tree.depth
    out["tic_limit"] = [float(np.linalg.norm(limit))]
    out["max_rho"] = [float(prob.rho.max())]
    return out


# trees and policy pairs of the many-case group-bias check: each tree with `GROUP_BIAS_PAIRS`
# seeded (current, stale) pairs at every logit shift, rewards uniform in [0, 1]
GROUP_BIAS_TREES = ((2, 1), (3, 1), (4, 1), (2, 2))
GROUP_BIAS_SHIFTS = (0.5, 1.0, 2.0)
GROUP_BIAS_PAIRS = 4
GROUP_BIAS_SIZES = (2, 4, 8, 16, 32)


@lru_cache(maxsize=1)
def group_bias_cases() -> list[dict[str, object]]:
    """Exact bias norms of TIC and GMC for growing `G` on many fixed policy pairs and trees.

    Per case (tree `(|A|, T)` of `GROUP_BIAS_TREES`, seed, stale shift of the logits): the bias
    norms `||E[g^w] - grad J/T||` for `G` in `GROUP_BIAS_SIZES`, GMC's exact removed mass
    `E(rho_bar - 1 - eps)_+` beside the concentration envelope `chi^2 / (4 eps G)`
    (`(y - eps)_+ <= y^2/(4 eps)` and `E(rho_bar - 1)^2 = chi^2/G`: with Proposition 1's bias half
    GMC's bias is at most `K_b chi^2/(4 eps G)`, so it vanishes at least like `1/G`), and the
    largest ratio (a case without a ratio above `1+eps` has no bias at all); `k_b` is
    Proposition 1's bias constant `R sqrt(2 L log C)` of the case.
    """
    out = []
    for vocab, depth in GROUP_BIAS_TREES:
        tree = tabular_tree(vocab, depth)
        for shift in GROUP_BIAS_SHIFTS:
            for seed in range(GROUP_BIAS_PAIRS):
                rng = np.random.default_rng([600, vocab, depth, seed, int(10 * shift)])
                theta = rng.normal(scale=0.5, size=tree.dim)
                behavior = theta + rng.normal(scale=shift, size=tree.dim)
                rewards = rng.uniform(0.0, 1.0, size=vocab**depth)
                prob = problem_from_tree(tree, theta, behavior, rewards=rewards)
                target = objective_gradient(tree, theta, rewards) / tree.depth
                chi2 = float(prob.mu @ (prob.rho - 1.0) ** 2)
                cover = 1.0 / min_token_prob(tree, theta, behavior)
                case: dict[str, object] = {
                    "k_b": float(bias_per_removed_mass(1.0, tree.smoothness, cover)),
                    "tree": (vocab, depth),
                    "shift": shift,
                    "seed": seed,
                    "max_rho": float(prob.rho.max()),
                    "chi2": chi2,
                    "tic": [],
                    "gmc": [],
                    "gmc_removed": [],
                    "envelope": [],
                }
                for g in GROUP_BIAS_SIZES:
                    for method in ("tic", "gmc"):
                        mom = group_moments(prob, method, PAPER_EPS, g)
                        case[method].append(float(np.linalg.norm(mom.mean - target)))  # type: ignore[union-attr]
                        if method == "gmc":
                            case["gmc_removed"].append(mom.removed_mass)  # type: ignore[union-attr]
                    case["envelope"].append(chi2 / (4.0 * PAPER_EPS * g))  # type: ignore[union-attr]
                out.append(case)
    return out


def check_group_bias(gmc_vanishes: bool = True, tic_persists: bool = True) -> Check:
    """Abstract / Remark 3: for fixed policies the GMC bias vanishes as `G -> oo`, TIC's persists.

    Over `group_bias_cases()`: TIC's bias is the same vector for every `G >= 2` and positive
    whenever a ratio exceeds `1+eps`; GMC's removed mass stays under the `1/G` envelope (so its
    bias vanishes) and its bias falls with `G`. The claimed halves are parameters: claiming
    GMC's bias does *not* vanish, or TIC's does *not* persist, is contradicted by the cases."""
    cases = group_bias_cases()
    biased = [c for c in cases if c["max_rho"] > 1 + PAPER_EPS]  # type: ignore[operator]
    tic_flat = [
        max(abs(t - c["tic"][0]) for t in c["tic"]) <= 1e-9 * max(c["tic"][0], 1e-300)  # type: ignore[index]
        and c["tic"][0] > 0  # type: ignore[index]
        for c in biased
    ]
    # GMC's bias under K_b times the removed mass, the removed mass under chi^2/(4 eps G), at
    # every G: ||b_GMC(G)|| <= K_b chi^2/(4 eps G) -> 0
    under = [
        all(
            b <= c["k_b"] * m * (1 + REL_TOL) + 1e-15 and m <= e * (1 + REL_TOL)  # type: ignore[operator]
            for b, m, e in zip(c["gmc"], c["gmc_removed"], c["envelope"], strict=True)  # type: ignore[call-overload]
        )
        for c in biased
    ]
    monotone = [
        all(b <= a * (1 + 1e-9) for a, b in zip(c["gmc"], c["gmc"][1:], strict=False))  # type: ignore[call-overload, index]
        for c in biased
    ]
    both = [t and u for t, u in zip(tic_flat, under, strict=True)]
    ok = all(under) == gmc_vanishes and all(tic_flat) == tic_persists
    of_tic = [c["gmc"][-1] / c["tic"][-1] for c in biased]  # type: ignore[index, operator]
    worst = biased[int(np.argmax(of_tic))]
    gs = list(GROUP_BIAS_SIZES)
    return Check(
        VERIFIED if ok else REFUTED,
        f"Exact bias vectors E[gʷ] − ∇J/T by enumeration of all group compositions on "
        f"{len(cases)} fixed (current, stale) policy pairs: tabular trees (|A|, T) = "
        f"{', '.join(str(t) for t in GROUP_BIAS_TREES)}, stale logits shifted by "
        f"{', '.join(f'{x:g}' for x in GROUP_BIAS_SHIFTS)}, {GROUP_BIAS_PAIRS} seeds each, "
        f"ε = {PAPER_EPS:g}, leave-one-out advantages, G = {', '.join(map(str, gs))}. "
        f"{len(biased)} cases have a ratio above 1+ε (the others have no bias at all). Both "
        f"halves hold in {sum(both)} of {len(biased)}: TIC's bias is the same nonzero vector for "
        f"every G (relative spread ≤ 1e-9) in {sum(tic_flat)}, and GMC's is at most K_b·χ²/(4εG) "
        f"at every G (its bias ≤ K_b × removed mass ≤ K_b χ²/(4εG), both exact), so it vanishes "
        f"like 1/G, in {sum(under)}. GMC's bias at G = {gs[-1]} is a fraction "
        f"{short(float(np.median(of_tic)))} of TIC's (median), {short(max(of_tic))} at worst (tree "
        f"(|A|, T) = {worst['tree']}, shift {worst['shift']:g}, largest ratio "
        f"{short(worst['max_rho'])}, χ² = {short(worst['chi2'])}). It does not always fall "
        f"monotonically: in {len(biased) - sum(monotone)} cases it first rises (a small group "
        "rarely reaches the cap).",
        chain.TIC_BIAS / chain.T,
        {
            "cases": len(cases),
            "biased_cases": len(biased),
            "both_halves": sum(both),
            "tic_g_independent": sum(tic_flat),
            "gmc_under_envelope": sum(under),
            "gmc_monotone": sum(monotone),
            "gmc_over_tic_median": float(np.median(of_tic)),
            "gmc_over_tic_worst": max(of_tic),
        },
        reason="exact bias vectors on many policy pairs and trees could have shown GMC's bias "
        "staying or TIC's changing with G",
    )
