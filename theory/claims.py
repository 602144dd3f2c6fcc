"""The claims table: each claim of the paper on constants and rates, what we derived, a verdict.

`evaluate_claims()` runs every sympy derivation (`theory.symbolic`, `theory.rates`), the numeric
confirmations (`theory.numerics`) and a few exact finite-distribution computations
(`theory.divergences`), and returns one dict per claim with keys
`claim, where, derived, verdict, how`. Verdicts: "verified", "refuted", "not checkable here".
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from theory import numerics, rates, softmax_tree, symbolic
from theory.bounds import kl_drift_bound, second_moment_bound
from theory.constants import (
    c_eps,
    gmc_denominator,
    improvement_factor,
    tight_gmc_denominator,
)
from theory.divergences import (
    gmc_removed_mass,
    group_removed_mass_binomial,
    kl_divergence,
    near_extremal_distribution,
    tic_removed_mass,
)

VERIFIED, REFUTED, NOT_CHECKABLE = "verified", "refuted", "not checkable here"
PAPER_EPS = 0.28  # eps_high of TIC-GRPO and GMC-GRPO in Appendix B.1


def _row(claim: str, where: str, derived: str, verdict: str, how: str) -> dict[str, str]:
    return {"claim": claim, "where": where, "derived": derived, "verdict": verdict, "how": how}


def _fits_ok(fits: list[numerics.SlopeFit], tol: float = 0.01) -> bool:
    return all(f.rel_error < tol for f in fits)


def _fits_text(fits: list[numerics.SlopeFit]) -> str:
    return "; ".join(f"{f.name}: slope {f.slope:+.4f} (exponent {f.expected:+.4f})" for f in fits)


def _tightness_gap(method: str, eps: float = PAPER_EPS) -> float:
    """Relative gap `KL/(mass * tight) - 1` on the near-extremal two-point law."""
    mu, pi = near_extremal_distribution(eps, method)
    kl = kl_divergence(mu, pi)
    mass = tic_removed_mass(mu, pi, eps) if method == "tic" else gmc_removed_mass(mu, pi, eps)
    tight = c_eps(eps) if method == "tic" else tight_gmc_denominator(eps)
    return kl / (mass * tight) - 1.0


def _group_vanishing() -> tuple[list[float], float]:
    """Exact GMC removed mass for G = 1, 8, 64, 512 vs TIC's, on rho in {0.5, 2} (mean one)."""
    x_low, x_high, eps = 0.5, 2.0, PAPER_EPS
    gmc = [group_removed_mass_binomial(x_low, x_high, eps, g) for g in (1, 8, 64, 512)]
    q = (1 - x_low) / (x_high - x_low)
    return gmc, q * x_high  # TIC removes rho 1{rho > 1+eps} = x_high with probability q


def _proposition1_check(seeds: int = 12) -> tuple[float, float]:
    """Exact second moments on random tabular softmax trees (vocab 2, depth 2, G = 2, 3).

    Returns the largest ratio of TIC/GMC second moments to Proposition 1 with our constant 2
    (must be <= 1), and the ratio of raw IS to the paper's bound in a low-coverage case (> 1
    shows the bound is not vacuous: estimators outside the class break it).
    """
    vocab, depth, eps = 2, 2, PAPER_EPS
    n_ctx = len(softmax_tree.tree_contexts(vocab, depth))
    ours = float(second_moment_bound(eps, depth, softmax_tree.TABULAR_SOFTMAX_L, 1.0, vocab)) / 4
    worst = 0.0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        theta = rng.normal(scale=3.0, size=(n_ctx, vocab))
        behavior = theta + rng.normal(scale=3.0, size=(n_ctx, vocab))
        rewards = rng.uniform(0.0, 1.0, size=vocab**depth)
        for method in ("tic", "gmc"):
            for group in (2, 3):
                m2 = softmax_tree.exact_second_moment(
                    theta, behavior, rewards, eps, method, group, vocab, depth
                )
                worst = max(worst, m2 / ours)
    theta, behavior = np.array([[0.0, 0.0]]), np.array([[0.0, -12.0]])
    raw = softmax_tree.exact_second_moment(
        theta, behavior, np.array([0.0, 1.0]), eps, "is", 2, 2, 1
    )
    paper = float(second_moment_bound(eps, 1, softmax_tree.TABULAR_SOFTMAX_L, 1.0, 2))
    return worst, raw / paper


def _kl_drift_check(seeds: int = 12) -> float:
    """Largest `KL / ((T L/2) ||dtheta||^2)` over random softmax trees (vocab 3, depth 2)."""
    vocab, depth = 3, 2
    n_ctx = len(softmax_tree.tree_contexts(vocab, depth))
    worst = 0.0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        theta = rng.normal(size=(n_ctx, vocab))
        delta = rng.normal(scale=0.1 + seed / 4, size=theta.shape)
        kl = softmax_tree.trajectory_kl(theta, theta + delta, vocab, depth)
        bound = kl_drift_bound(depth, softmax_tree.TABULAR_SOFTMAX_L, float(np.sum(delta**2)))
        worst = max(worst, kl / bound)
    return worst


def _convexity_example(seed: int = 3) -> tuple[list[float], float]:
    """GMC removed mass for G = 1, 2, 3 on a random 4-point law, and its KL (exact)."""
    rng = np.random.default_rng(seed)
    mu = rng.dirichlet(np.ones(4))
    pi = rng.dirichlet(np.ones(4) * 0.5)
    masses = [gmc_removed_mass(mu, pi, PAPER_EPS, group_size=g) for g in (1, 2, 3)]
    return masses, kl_divergence(mu, pi)


@lru_cache(maxsize=1)
def evaluate_claims() -> list[dict[str, str]]:
    """Evaluate every claim (a few seconds; cached). Returns rows `claim, where, derived, verdict, how`."""
    sym = {d.name: d for d in symbolic.all_derivations()}
    rat = {d.name: d for d in rates.all_rate_derivations()}
    iv_ok, iv_cells = numerics.interval_check_denominators()
    e = PAPER_EPS
    p1_worst, p1_raw = _proposition1_check()
    kl_worst = _kl_drift_check()
    conv_masses, conv_kl = _convexity_example()
    conv_ok = (
        conv_masses[2] <= conv_masses[1] <= conv_masses[0] <= conv_kl / tight_gmc_denominator(e)
    )
    rows: list[dict[str, str]] = []

    d = sym["c_eps < log(1+2eps)"]
    rows.append(
        _row(
            "c_eps < log(1+2 eps) for every eps > 0",
            "§4.3 (after Theorem 2)",
            f"{d.derived}; at eps = {e}: c_eps = {c_eps(e):.5f} < log(1+2eps) = {gmc_denominator(e):.5f}",
            VERIFIED if d.ok and iv_ok else REFUTED,
            f"sympy sign proof of the derivative; mpmath.iv on {iv_cells} cells of [1e-4, 1e4]",
        )
    )
    d, a = sym["c_eps closed form"], sym["asymptotics of the denominators"]
    rows.append(
        _row(
            "c_eps = Theta(eps^2) and log(1+2 eps) = Theta(eps) as eps -> 0",
            "§4.3",
            f"c_eps = log(1+eps) - eps/(1+eps) (largest valid constant; the paper prints no formula). "
            f"{a.derived}",
            VERIFIED if d.ok and a.ok else REFUTED,
            "sympy: inf_{x>1+eps} phi(x)/x, series and limits",
        )
    )
    d, t = sym["log(1+2eps) is a valid GMC denominator"], sym["tight GMC constant (Lambert W)"]
    rows.append(
        _row(
            "GMC removed mass E[(rho_bar - 1 - eps)_+] <= KL / log(1+2 eps)",
            "§4.2 step 2, Theorem 1",
            f"{d.derived}. Tight constant (ours): {t.derived}; at eps = {e}: kappa = "
            f"{tight_gmc_denominator(e):.5f} >= log(1+2eps) = {gmc_denominator(e):.5f}. Example "
            f"(random 4-point law): removed mass at G = 1, 2, 3: "
            + ", ".join(f"{m:.4f}" for m in conv_masses)
            + f" <= KL/kappa = {conv_kl / tight_gmc_denominator(e):.4f} <= KL/log(1+2eps) = "
            f"{conv_kl / gmc_denominator(e):.4f}",
            VERIFIED if d.ok and t.ok and iv_ok and conv_ok else REFUTED,
            "sympy proof (tangent at 1+2eps), mpmath.iv grid; hypothesis property tests on random "
            "finite mu, pi and groups G <= 3 (tests/theory)",
        )
    )
    te = sym["tight constants equal the pointwise ones"]
    rows.append(
        _row(
            "TIC removed mass E_mu[rho 1{rho > 1+eps}] <= KL / c_eps",
            "§4.3, Theorem 2",
            f"holds with c_eps = log(1+eps) - eps/(1+eps), which is tight: {te.derived}; "
            f"near-extremal two-point law at eps = {e} is within {_tightness_gap('tic'):.1e} of equality",
            VERIFIED if te.ok and abs(_tightness_gap("tic")) < 0.01 else REFUTED,
            "sympy (pointwise bound, shift argument, two-point limit); property tests",
        )
    )
    s = sym["GMC slack"]
    gap_gmc = _tightness_gap("gmc")
    rows.append(
        _row(
            "(ours) tight constants and the slack of the paper's",
            "beyond the paper",
            f"TIC: tight = c_eps (no slack). GMC: tight kappa = -W_-1(-e^(-1/k)/k) - 1/k > log(1+2eps); "
            f"{s.derived}; slack log(1+2eps)/kappa at eps = 0.01, {e}, 1, 10: "
            + ", ".join(
                f"{float(gmc_denominator(x) / tight_gmc_denominator(x)):.4f}"
                for x in (0.01, e, 1.0, 10.0)
            )
            + f"; near-extremal law within {gap_gmc:.1e} of equality",
            VERIFIED if s.ok and abs(gap_gmc) < 0.01 else REFUTED,
            "sympy series reversion, scipy/mpmath Lambert W, exact two-point law",
        )
    )
    p, r = sym["penalty scalings"], rat["tuned delay term vs eps"]
    pen_fits = numerics.fit_penalties()
    rows.append(
        _row(
            "TIC delay penalty scales as eps^-4, GMC as eps^-2 (eps -> 0)",
            "Abstract, §4.3",
            f"{p.derived}; {r.derived}",
            VERIFIED if p.ok and r.ok and _fits_ok(pen_fits) else REFUTED,
            f"sympy limits; numeric: {_fits_text(pen_fits)}",
        )
    )
    imp = sym["improvement factor"]
    rows.append(
        _row(
            "after tuning eta the delay term improves by (c_eps/log(1+2 eps))^(2/5) < 1",
            "§4.3",
            f"{imp.derived}; at eps = {e}: {improvement_factor(e):.4f} "
            f"(tight constants: {improvement_factor(e, tight=True):.4f})",
            VERIFIED if imp.ok and r.ok else REFUTED,
            "sympy: ratio of tuned delay terms, series and limits",
        )
    )
    st = rat["optimal step size and tuned rate"]
    nd = numerics.fit_no_delay_step_size()
    ld = numerics.fit_large_delay(2.0)[:2]
    rows.append(
        _row(
            "tuned rate O(sqrt((1+eps)/N) + ((1+eps)^3 tau4 / (den^2 N^4))^(1/5))",
            "Theorem 2, Corollary 2 (from Theorem 1's shape)",
            st.derived,
            VERIFIED if st.ok and _fits_ok(nd + ld) else REFUTED,
            f"sympy pairwise balances; numeric min over eta: {_fits_text(nd + ld)}",
        )
    )
    c1 = rat["Corollary 1 eps* (GMC)"]
    c1_fits = numerics.fit_corollary1()
    rows.append(
        _row(
            "eps*_GMC = Theta(tau4^(1/7) N^(-3/14))",
            "Corollary 1",
            f"{c1.derived} [leading eps-terms of the step-size-tuned bound sqrt((1+eps)/N) + "
            f"((1+eps)^3 tau4/(log^2(1+2eps) N^4))^(1/5)]; TIC analogue: "
            f"{rat['Corollary 1 eps* (TIC)'].derived.split('gives ')[-1]}",
            VERIFIED if c1.ok and _fits_ok(c1_fits) else REFUTED,
            f"sympy argmin; numeric min of the full tuned bound: {_fits_text(c1_fits)}",
        )
    )
    jm = rat["joint (eta, eps) minimiser of Theorem 1's bound"]
    j_fits = numerics.fit_joint_minimiser()
    n0 = 1e20
    eps_joint, exc_joint = numerics.joint_eps_star(n0, 1.0)
    eps_c1 = numerics.corollary1_eps_star(n0, 1.0)

    exc_c1 = numerics.joint_excess_at(eps_c1, n0, 1.0)
    rows.append(
        _row(
            "Corollary 1's eps* also minimises Theorem 1's bound when eta and eps are tuned jointly",
            "Corollary 1 (a second reading)",
            f"{jm.derived}. Counterexample N = 1e20, tau4 = 1: joint eps* = {eps_joint:.3e} (bound "
            f"- 2/sqrt N = {exc_joint:.3e}); Corollary 1's eps = {eps_c1:.3e} gives {exc_c1:.3e}",
            REFUTED if jm.ok and _fits_ok(j_fits) else NOT_CHECKABLE,
            f"sympy envelope expansion; numeric joint minimisation: {_fits_text(j_fits)}. Only the "
            "eps* scaling is refuted, not a rate: in this regime the eps-terms are lower order "
            "(relative size of the difference in the whole bound at the counterexample: "
            f"{(exc_c1 - exc_joint) * np.sqrt(n0) / 2:.1e}). The paper's statement holds "
            "for the step-size-tuned form (row above)",
        )
    )
    dt = rat["delay tolerance tau4 = O(N^(3/2))"]
    dt_fits = numerics.fit_delay_tolerance()
    rows.append(
        _row(
            "tau4 = O(N^(3/2)) keeps O(N^(-1/2)) with eps ~ min{1, tau4^(1/7) N^(-3/14)}, eta ~ N^(-1/2)",
            "Remark after Theorem 1",
            dt.derived,
            VERIFIED
            if dt.ok and _fits_ok(dt_fits[:3]) and dt_fits[3].rel_error < 0.01
            else REFUTED,
            f"sympy exponent algebra; numeric bound at those choices: {_fits_text(dt_fits)}",
        )
    )
    lg = rat["large delays tau4 = N^p"]
    lg_fits = [f for p_ in (2.0, 3.0, 3.5) for f in numerics.fit_large_delay(p_)]
    rows.append(
        _row(
            "tau4 = Theta(N^p), 3/2 < p < 4: eps = Theta(1), eta ~ N^(-(p+1)/5), rate N^(-(4-p)/5)",
            "Remark after Theorem 1",
            lg.derived,
            VERIFIED if lg.ok and _fits_ok(lg_fits) else REFUTED,
            f"sympy; numeric joint (eta, eps) minimisation: {_fits_text(lg_fits)}",
        )
    )
    c2 = rat["Corollary 2 group-size factor"]
    c2_fit = numerics.fit_corollary2()
    rows.append(
        _row(
            "the delay-dependent term decreases as G^(-2/5)",
            "Corollary 2",
            c2.derived,
            VERIFIED if c2.ok and c2_fit.rel_error < 0.01 else REFUTED,
            f"sympy exponent; numeric min over eta: {_fits_text([c2_fit])}; property tests of the "
            "removed-mass bound (1+delta) KL/(2 eps G)",
        )
    )
    gmc_g, tic_mass = _group_vanishing()
    vanishing = all(b < a for a, b in zip(gmc_g, gmc_g[1:], strict=False)) and gmc_g[-1] < 1e-6
    rows.append(
        _row(
            "for fixed policies the GMC bias vanishes as G -> oo, the TIC clipping bias persists",
            "Abstract, Remark 3",
            f"rho in {{0.5, 2}} with mean one, eps = {e}: GMC removed mass at G = 1, 8, 64, 512: "
            + ", ".join(f"{v:.2e}" for v in gmc_g)
            + f"; TIC removes {tic_mass:.4f} for every G",
            VERIFIED if vanishing else REFUTED,
            "exact binomial expectation (theory.divergences.group_removed_mass_binomial)",
        )
    )
    rows.append(
        _row(
            "Proposition 2: alpha* = min{1, (1+eps)/rho_bar} solves eq. 8; it removes (rho_bar - 1 - eps)_+",
            "Proposition 2, §4.2",
            "alpha rho_bar is increasing in alpha and the constraint is alpha <= (1+eps)/rho_bar, so "
            "alpha* = min{1, (1+eps)/rho_bar} (unique); removed rho_bar (1 - alpha*) = (rho_bar - 1 - eps)_+",
            VERIFIED,
            "derivation; tests/theory check the identity on random groups",
        )
    )
    rows.append(
        _row(
            "Proposition 1: E||g^w||^2 <= 8/T (1+eps) L R^2 log|A|",
            "Proposition 1",
            "our derivation gives the constant 2 when |A_hat| <= R (8 when |A_hat| <= 2R): "
            "Cauchy-Schwarz with sum_i w_i rho_i <= G(1+eps), change of measure, "
            "||grad log pi||^2 <= 2L(-log pi) and entropy <= log|A|. Exact second moments on "
            f"random softmax trees: TIC/GMC at most {p1_worst:.3f} of the constant-2 bound; raw IS "
            f"(outside the class) reaches {p1_raw:.0f}x the paper's bound",
            VERIFIED if p1_worst <= 1.0 and p1_raw > 1.0 else REFUTED,
            "derivation (theory.bounds.second_moment_bound); exact enumeration of all groups "
            "(theory.softmax_tree, L = 1/2 for tabular softmax)",
        )
    )
    rows.append(
        _row(
            "Assumption 1 gives D <= (T L / 2) ||theta_n - theta_(n - tau)||^2",
            "§4.2 step 3",
            "per token, theta' -> E_theta[log pi_theta - log pi_theta'] is 0 with zero gradient at "
            "theta' = theta and has L-Lipschitz gradient; sum over T tokens. Exact KL on random "
            f"softmax trees: at most {kl_worst:.3f} of the bound",
            VERIFIED if kl_worst <= 1.0 else REFUTED,
            "derivation (theory.bounds.kl_drift_bound); exact trajectory KL (theory.softmax_tree)",
        )
    )
    rows.append(
        _row(
            "Theorem 1's delay term is (1+eps)^3 eta^4 tau4 / log^2(1+2eps)",
            "Theorem 1, §4.2",
            "the three-step chain gives removed mass <= (TL/2) eta^2 tau^2 M / log(1+2eps) with "
            "M = 8/T (1+eps) L R^2 log|A|; squaring and averaging delays gives "
            "eta^4 tau4 (1+eps)^2 / log^2(1+2eps) times the bias-per-removed-mass scale; the third "
            "power of (1+eps) depends on that scale, proved in the absent appendix",
            NOT_CHECKABLE,
            "eta, tau4 and denominator exponents follow from the chain (theory.bounds); the (1+eps) "
            "power needs Appendix D",
        )
    )
    return rows


def claims_markdown(rows: list[dict[str, str]]) -> str:
    """The claims as a Markdown table (for a report): claim, where, verdict, derived, how."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| # | claim | where | verdict | derived | how |", "|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        lines.append(
            f"| {i} | {cell(r['claim'])} | {cell(r['where'])} | **{r['verdict']}** | "
            f"{cell(r['derived'])} | {cell(r['how'])} |"
        )
    return "\n".join(lines) + "\n"


def summary(rows: list[dict[str, str]]) -> dict[str, int]:
    """Count of rows per verdict."""
    out = {VERIFIED: 0, REFUTED: 0, NOT_CHECKABLE: 0}
    for row in rows:
        out[row["verdict"]] += 1
    return out
