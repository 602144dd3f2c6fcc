"""Checks behind the claims table: each takes the claimed value as a parameter and can fail.

Every `check_*` function returns a `Check` (verdict, a one-paragraph result with the numbers, the
derived expression as sympy, the evidence as a dict). The claimed constant or exponent is an
argument with the paper's value as default, so a test can inject a perturbed value (`c_eps x 1.1`,
an exponent off by 0.05, `(1+eps)^4`) and see the verdict flip. Verdicts:

* `verified`: a proof (sympy derivation, interval arithmetic) covers the claim and no exact
  example contradicts it;
* `refuted`: an exact example or an exact computation contradicts the claim (a bound exceeded,
  an exponent that differs from the one the stated formula has);
* `not reproduced`: our derivation from the paper's stated ingredients gives something different
  (a larger constant, another power) and no counterexample is known;
* `not checkable here`: nothing here can decide it.

Everything is exact or a deterministic (seeded) search: no Monte Carlo, so no intervals apply.
Fitted slopes report the number of points they rest on.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import sympy as sp
from scipy.optimize import linprog

from theory import adversarial, chain, numerics, rates, symbolic
from theory.bounds import (
    bias_per_removed_mass,
    second_moment_bound,
    theorem_terms,
)
from theory.constants import c_eps, gmc_denominator, tight_gmc_denominator
from theory.divergences import (
    gmc_removed_mass,
    kl_divergence,
    near_extremal_distribution,
    tic_removed_mass,
)
from theory.exact import (
    GroupProblem,
    class_coefficients,
    group_moments,
    group_updates,
    problem_from_tree,
)
from theory.trees import (
    min_token_prob,
    objective,
    objective_gradient,
    tabular_tree,
    trajectory_kl,
)

VERIFIED, REFUTED, NOT_REPRODUCED, NOT_CHECKABLE = (
    "verified",
    "refuted",
    "not reproduced",
    "not checkable here",
)
VERDICTS = (VERIFIED, REFUTED, NOT_REPRODUCED, NOT_CHECKABLE)
PAPER_EPS = 0.28  # eps_high of TIC-GRPO and GMC-GRPO in Appendix B.1
TREE = tabular_tree(2, 2)  # the random cases' tree: two tokens, vocabulary 2
REL_TOL = 1e-9


@dataclass(frozen=True)
class Check:
    """Outcome of one check: verdict, result text (Unicode, no Markdown), derived sympy expression."""

    verdict: str
    result: str
    expr: sp.Basic
    evidence: dict[str, object] = field(default_factory=dict)


def bound_verdict(claimed: float, proven: float, attained: float) -> str:
    """Verdict for a claimed upper-bound constant (larger = weaker claim; for a claimed
    denominator pass its inverse).

    `attained`: the largest constant an exact example needs (a claim below it is refuted);
    `proven`: the constant our derivation proves (a claim at or above it is verified).
    """
    if claimed < attained * (1.0 - REL_TOL):
        return REFUTED
    return VERIFIED if claimed >= proven * (1.0 - REL_TOL) else NOT_REPRODUCED


def _eq(a: object, b: object) -> bool:
    """Exact equality for sympy numbers, `1e-12` for floats."""
    try:
        return (
            bool(sp.simplify(sp.nsimplify(a) - sp.nsimplify(b)) == 0)
            and abs(
                float(a) - float(b)  # type: ignore[arg-type]
            )
            < 1e-12
        )
    except (TypeError, ValueError):
        return a == b


def _g(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


def _fits_ok(pairs: list[tuple[numerics.SlopeFit, float]], tol: float = 0.01) -> bool:
    return all(f.within(c, tol) for f, c in pairs)


def _fits_text(pairs: list[tuple[numerics.SlopeFit, float]]) -> str:
    return "; ".join(f.text(c) for f, c in pairs)


@dataclass(frozen=True)
class RandomCase:
    """A seeded two-token tabular tree with a current policy, a stale one and rewards in [0, 1]."""

    theta: np.ndarray
    behavior: np.ndarray
    rewards: np.ndarray
    problem: GroupProblem


def random_case(seed: int, shift: float = 1.5) -> RandomCase:
    """Current logits `N(0, 1)`, stale logits shifted by `N(0, shift^2)`, uniform rewards."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=TREE.dim)
    behavior = theta + rng.normal(scale=shift, size=TREE.dim)
    rewards = rng.uniform(0, 1, size=4)
    return RandomCase(
        theta, behavior, rewards, problem_from_tree(TREE, theta, behavior, rewards=rewards)
    )


# --- §3: Lemma 1, Proposition 1, the class -----------------------------------------------------


@lru_cache(maxsize=1)
def one_step_descent_cases() -> tuple[int, float]:
    """Exact one-step form of Lemma 1 on random tabular trees: `(cases, smallest slack)`.

    For `T = 2`, `|A| = 2`, TIC and GMC with `G = 2` and leave-one-out advantages, and step sizes
    0.05, 0.5, 5: `E J(theta + eta g) - J(theta) >= eta/(2T) ||grad J||^2 - eta T/2 ||b||^2 -
    (L_J/2) eta^2 E||g||^2` (the inequality the telescoping sum of Lemma 1 adds up). Returns the
    number of cases and `min (lhs - rhs) / max(|rhs|, 1e-12)` (non-negative when all hold).
    """
    tree = TREE
    smooth = tree.depth * 1.0 * tree.smoothness * (2 * np.log(2) + 1)
    worst, cases = np.inf, 0
    for seed in range(3):
        case = random_case(100 + seed)
        theta, rewards, prob = case.theta, case.rewards, case.problem
        grad = objective_gradient(tree, theta, rewards)
        j0 = objective(tree, theta, rewards)
        for method in ("tic", "gmc"):
            upd = group_updates(prob, method, PAPER_EPS, 2)
            mom = upd.moments()
            bias = mom.mean - grad / tree.depth
            for eta in (0.05, 0.5, 5.0):
                gain = (
                    sum(
                        w * objective(tree, theta + eta * g, rewards)
                        for w, g in zip(upd.weight, upd.g, strict=True)
                    )
                    - j0
                )
                rhs = (
                    eta / (2 * tree.depth) * grad @ grad
                    - eta * tree.depth / 2 * bias @ bias
                    - smooth / 2 * eta**2 * mom.second_moment
                )
                worst = min(worst, (gain - rhs) / max(abs(rhs), 1e-12))
                cases += 1
    return cases, float(worst)


def check_lemma1(
    opt_coef: float = 2.0, var_coef: float = 1.0, bias_coef: float = 1.0, smoothness: float = 1.0
) -> Check:
    """Lemma 1: coefficients `opt_coef T/(eta N)`, `var_coef T^2 eta R L (2 log|A|+1)`,
    `bias_coef T^2`; `smoothness` scales the implied `L_J = T R L (2 log|A| + 1)`."""
    lem = chain.derive_lemma1()
    derived = (
        sp.simplify(lem.opt / (chain.T / (chain.ETA * chain.N))),
        sp.simplify(
            lem.var / (chain.T**2 * chain.ETA * chain.R * chain.L * (2 * sp.log(chain.A) + 1))
        ),
        sp.simplify(lem.bias / chain.T**2),
    )
    search = adversarial.search_smoothness()
    cases, slack = one_step_descent_cases()
    refuted = search.ratio > smoothness * (1 + REL_TOL) or slack < -REL_TOL
    covered = all(
        float(c) >= float(d) * (1 - REL_TOL)
        for c, d in zip((opt_coef, var_coef, bias_coef), derived, strict=True)
    )
    verdict = REFUTED if refuted else VERIFIED if covered and smoothness >= 1 else NOT_REPRODUCED
    return Check(
        verdict,
        "The descent argument (ascent step on the L_J-smooth J, E[g] = ∇J/T + b, Young's "
        "inequality with weight 1/T) gives "
        f"{derived[0]}T/(ηN), {derived[1]}·T²ηRL(2log|A|+1) and {derived[2]}·T²: the printed "
        "coefficients. Smoothness: adversarial search over θ and rewards "
        f"({search.restarts} starts, {search.evaluations} evaluations) reaches "
        f"‖∇²J‖ = {_g(search.ratio)} × T R L(2log|A|+1). One-step inequality checked exactly on "
        f"{cases} cases (random trees, TIC/GMC, η = 0.05, 0.5, 5): smallest relative slack "
        f"{_g(slack)}.",
        lem.rhs,
        {
            "derived_coefficients": [float(d) for d in derived],
            "smoothness_fraction_reached": search.ratio,
            "one_step_cases": cases,
            "one_step_min_slack": slack,
        },
    )


def check_prop1_second_moment(constant: float = 8.0) -> Check:
    """Proposition 1's constant (`8` in the paper) against the search and our proof of 2."""
    search = adversarial.search_second_moment()
    kappa = chain.derive_second_moment_constant().subs(chain.RA, chain.R)
    attained = float(kappa) * search.ratio
    verdict = bound_verdict(constant, float(kappa), attained)
    return Check(
        verdict,
        f"Our derivation proves the constant {kappa} for |Â| ≤ R (8 when |Â| ≤ 2R). Exact "
        f"adversarial search over policies, behavior policies, advantages and ε "
        f"({search.restarts} starts, {search.evaluations} evaluations; one token, G = 1, 2, T = 2) "
        f"reaches {_g(search.ratio)} of the bound with constant 2 and {_g(attained / 8)} of the "
        f"paper's 8, so any constant below {_g(attained)} would be refuted (claimed {_g(constant)}). "
        "The supremum for one token is 1/(2 ln 2) = 0.721 of our bound.",
        chain.second_moment(kappa),
        {
            "fraction_of_ours": search.ratio,
            "fraction_of_paper": attained / 8,
            "example": search.example,
        },
    )


@lru_cache(maxsize=1)
def _bias_on_random_trees() -> tuple[int, float]:
    """Max `||bias|| / (K_b removed)` for TIC/GMC with leave-one-out advantages on random trees."""
    worst, cases = 0.0, 0
    for seed in range(4):
        case = random_case(200 + seed, shift=2.0)
        prob = case.problem
        cover = 1.0 / min_token_prob(TREE, case.theta, case.behavior)
        k_b = bias_per_removed_mass(1.0, TREE.smoothness, cover)
        for method in ("tic", "gmc"):
            for group in (2, 3):
                mom = group_moments(prob, method, PAPER_EPS, group)
                if mom.removed_mass > 1e-12:
                    worst = max(worst, float(np.linalg.norm(mom.bias)) / (k_b * mom.removed_mass))
                cases += 1
    return cases, worst


def check_prop1_bias(multiplier: float = 1.0) -> Check:
    """Proposition 1's bias half with our constant: `||group bias|| <= multiplier K_b m`."""
    search = adversarial.search_bias()
    cases, worst = _bias_on_random_trees()
    attained = max(search.ratio, worst)
    exact = float(search.example.get("ratio_exact_score", float("nan")))
    return Check(
        bound_verdict(multiplier, 1.0, attained),
        "Each group's bias E[gʷ − gᴵˢ | group] = (1/(TG)) Σ (cᵢ − ρᵢ) sᵢ Aᵢ is at most "
        "R · maxᵢ‖sᵢ‖/T times the removed mass (1/G) Σ (ρᵢ − cᵢ), and Assumption 2 bounds the "
        "score by T√(2L log C): constant K_b = R√(2L log C), free of ε and of the delay (ours; "
        f"the paper prints no constant). Exact adversarial search ({search.restarts} starts, "
        f"{search.evaluations} evaluations) reaches {_g(search.ratio)} of K_b·m, and "
        f"{_g(exact, 4)} of the first, exact step; random trees with leave-one-out advantages "
        f"({cases} cases) reach {_g(worst)}. A constant below {_g(attained)} × K_b is refuted.",
        chain.bias_per_removed_mass() * chain.MASS,
        {"fraction_reached": search.ratio, "fraction_exact_step": exact, "random_cases": cases},
    )


def _class_groups(eps: float) -> list[np.ndarray]:
    """Groups probing the class constraints, stacked per size `[n, G]`: all groups of up to three
    ratios from a grid with boundary values at `1+eps`, zeros and huge ratios, plus seeded random
    log-normal groups of 5, 8 and 16."""
    cap = 1.0 + eps
    values = [0.0, 0.5, 1.0, cap * (1 - 1e-12), cap, cap * (1 + 1e-12), 2.0, 10.0, 1e3]
    groups = [np.array(list(itertools.product(values, repeat=n))) for n in (1, 2, 3)]
    rng = np.random.default_rng(5)
    groups += [np.exp(rng.normal(scale=1.5, size=(200, n))) for n in (5, 8, 16)]
    return groups


def _max_mean_coefficient(
    method: str, eps: float, vcpo_cap: float | None = None
) -> tuple[float, float, float]:
    """Over `_class_groups`: largest `mean(c)/(1+eps)` and the range of `w = c/rho`."""
    worst, w_lo, w_hi = 0.0, np.inf, -np.inf
    for rho in _class_groups(eps):
        c = class_coefficients(rho, eps, method, vcpo_cap)
        worst = max(worst, float(c.mean(axis=1).max()) / (1.0 + eps))
        pos = rho > 0
        w = c[pos] / rho[pos]
        w_lo, w_hi = min(w_lo, float(w.min())), max(w_hi, float(w.max()))
    return worst, w_lo, w_hi


def check_class_membership(cap_multiplier: float = 1.0) -> Check:
    """TIC and GMC satisfy eq. 5: `0 <= w <= 1` and `mean_i w_i rho_i <= cap_multiplier (1+eps)`."""
    rows = []
    for eps in (0.05, PAPER_EPS, 1.0):
        for method in ("tic", "gmc"):
            rows.append((eps, method, *_max_mean_coefficient(method, eps)))
    worst = max(r[2] for r in rows)
    w_ok = all(r[3] >= 0 and r[4] <= 1 + 1e-12 for r in rows)
    n_groups = sum(len(g) for g in _class_groups(PAPER_EPS))
    verdict = bound_verdict(cap_multiplier, 1.0, worst) if w_ok else REFUTED
    return Check(
        verdict,
        "TIC: each cᵢ = ρᵢ 1{ρᵢ ≤ 1+ε} ≤ 1+ε; GMC: the mean coefficient is min{ρ̄, 1+ε}; both "
        f"have w ∈ [0, 1]. Exact on {n_groups} groups per ε (boundary ratios at 1+ε, zeros, 1e3; "
        "ε = 0.05, 0.28, 1): largest mean coefficient "
        f"{_g(worst, 6)} × (1+ε) (attained just below the cap), w in [{_g(min(r[3] for r in rows))}, "
        f"{_g(max(r[4] for r in rows))}]. A cap below (1+ε) would be refuted.",
        sp.Min(chain.RHOBAR, chain.ONEP),
        {"max_mean_coefficient_over_cap": worst, "groups_per_eps": n_groups},
    )


def _vcpo_example(cap: float, eps: float = PAPER_EPS) -> tuple[float, float]:
    """Exact `E||g||^2` of VCPO with truncation `cap` on one token (`mu(y0) = 1/(2 cap)`, uniform
    current policy, advantages +-1), and Proposition 1's bound with the paper's 8."""
    tree = tabular_tree(2, 1)
    mu0 = 1.0 / (2.0 * cap)
    behavior = np.array([np.log(mu0), np.log1p(-mu0)])
    prob = problem_from_tree(tree, np.zeros(2), behavior, advantages=np.array([1.0, -1.0]))
    m2 = group_moments(prob, "vcpo", eps, 1, advantage="fixed", vcpo_cap=cap).second_moment
    return m2, float(second_moment_bound(eps, 1, tree.smoothness, 1.0, 2, "paper"))


def check_vcpo(threshold_multiplier: float = 1.0) -> Check:
    """VCPO (`c = min{rho, cap}`) is in the class for every `cap <= threshold_multiplier (1+eps)`."""
    eps = PAPER_EPS
    claimed_cap = threshold_multiplier * (1.0 + eps)
    inside = [_max_mean_coefficient("vcpo", eps, c)[0] for c in (0.5, 1.0, claimed_cap)]
    outside = _max_mean_coefficient("vcpo", eps, 2.0 * (1.0 + eps))[0]
    m2, paper = _vcpo_example(64.0)
    verdict = bound_verdict(1.0, 1.0, max(inside))
    return Check(
        verdict,
        "VCPO's coefficient min{ρ, c} has mean at most c, reached by a group of ratios ≥ c: it is in "
        "the class exactly when c ≤ 1+ε (the paper lists VCPO without this condition). "
        f"Largest mean coefficient for c = 0.5, 1, {_g(claimed_cap)}: "
        f"{', '.join(_g(v, 6) for v in inside)} × (1+ε); for c = 2(1+ε): {_g(outside, 6)} × (1+ε). "
        f"Outside the class the second-moment bound fails: with c = 64 an exact one-token example "
        f"has E‖g‖² = {_g(m2)}, {_g(m2 / paper)} × Proposition 1's bound (constant 8).",
        sp.Le(chain.CAP, 1 + chain.EPS),
        {"max_mean_inside": inside, "max_mean_outside": outside, "example_over_bound": m2 / paper},
    )


def grpo_example(coverage: float, eps: float = PAPER_EPS) -> tuple[float, float]:
    """Vanilla GRPO on one token, `G = 2`, leave-one-out advantages of rewards `(0, 1)`, current
    policy uniform, behavior `mu(y0) = 1/C` (Assumption 2 holds with exactly `C`):
    `(E||g||^2, max ||g||^2)`, exact."""
    tree = tabular_tree(2, 1)
    behavior = np.array([0.0, np.log(coverage - 1.0)])
    prob = problem_from_tree(tree, np.zeros(2), behavior, rewards=np.array([0.0, 1.0]))
    mom = group_moments(prob, "grpo", eps, 2)
    return mom.second_moment, mom.max_sq_norm


GRPO_COVERAGES = tuple(2.0**k for k in range(8, 14))


def _grpo_closed_forms() -> tuple[sp.Expr, sp.Expr]:
    """Closed forms of `grpo_example`: worst `C^4/(32 (C-1)^2)`, mean `C^2/(16 (C-1))`.

    The mixed group has token ratios `C/2` (advantage -1, kept: `>= 1-eps`) and `C/(2(C-1))`
    (advantage +1, kept: `<= 1+eps`), opposite scores of norm `1/sqrt 2`, so
    `||g||^2 = (C/2 + C/(2(C-1)))^2 / 8`; it has probability `2 (C-1)/C^2`.
    """
    c = chain.C
    worst = c**4 / (32 * (c - 1) ** 2)
    return worst, sp.simplify(2 * (c - 1) / c**2 * worst)


def check_grpo(exponent: float = 2.0) -> Check:
    """Vanilla GRPO is outside the class; its worst-case second moment scales as `C^exponent`."""
    worst_expr, mean_expr = _grpo_closed_forms()
    c = chain.C
    worst_exp = sp.limit(c * sp.diff(sp.log(worst_expr), c), c, sp.oo)
    rows = [grpo_example(cv) for cv in GRPO_COVERAGES]
    closed_ok = all(
        abs(m - float(mean_expr.subs(c, cv))) <= 1e-9 * m
        and abs(w - float(worst_expr.subs(c, cv))) <= 1e-9 * w
        for (m, w), cv in zip(rows, GRPO_COVERAGES, strict=True)
    )
    xs = np.array(GRPO_COVERAGES)
    worst_fit = numerics.SlopeFit(
        "GRPO worst-case E‖g‖² vs C",
        xs,
        np.array([w for _, w in rows]),
        numerics.loglog_slope(xs, np.array([w for _, w in rows])),
        float(worst_exp),
    )
    paper = float(second_moment_bound(PAPER_EPS, 1, 0.5, 1.0, 2, "paper"))
    exceeds = [cv for (m, _), cv in zip(rows, GRPO_COVERAGES, strict=True) if m > paper]
    ok = closed_ok and bool(exceeds) and _eq(worst_exp, exponent)
    return Check(
        VERIFIED if ok else REFUTED,
        "Exact one-token example (uniform current policy, behavior probability 1/C, G = 2, "
        "leave-one-out advantages): the negative-advantage token with ratio C/2 is never clipped. "
        f"Worst case over groups ‖g‖² = C⁴/(32(C−1)²), exponent {worst_exp} as C → ∞ "
        f"({worst_fit.text(exponent)}); the expected second moment C²/(16(C−1)) grows like C and "
        f"exceeds Proposition 1's bound {_g(paper)} (constant 8) from C = {int(min(exceeds)) if exceeds else 'never'} "
        f"on the grid C = 2^8 … 2^13. Closed forms match the exact engine: {closed_ok}.",
        worst_expr,
        {
            "worst_exponent": float(worst_exp),
            "fit_slope": worst_fit.slope,
            "fit_points": worst_fit.points,
        },
    )


@lru_cache(maxsize=8)
def _is_residual(advantage: str = "loo", factor_offset: float = 0.0) -> tuple[int, float]:
    """`(cases, max relative |E g^IS - (f(G) + offset) grad J / T|)` on random trees, exact.

    `f(G) = 1` for leave-one-out advantages, `(G-1)/G` for centred ones.
    """
    worst, cases = 0.0, 0
    for seed in range(3):
        case = random_case(300 + seed)
        prob = case.problem
        target = objective_gradient(TREE, case.theta, case.rewards) / TREE.depth
        for group in (2, 3, 5):
            factor = (1.0 if advantage == "loo" else (group - 1) / group) + factor_offset
            mean = group_moments(prob, "is", PAPER_EPS, group, advantage=advantage).mean
            worst = max(
                worst, float(np.linalg.norm(mean - factor * target) / np.linalg.norm(target))
            )
            cases += 1
    return cases, worst


def check_unbiased(factor: float = 1.0) -> Check:
    """Assumption 3: `E[g^IS | F_n^-] = factor * grad J / T` with leave-one-out advantages."""
    cases, worst = _is_residual("loo", factor - 1.0)
    return Check(
        VERIFIED if worst < REL_TOL else REFUTED,
        "Exact enumeration of all groups on random two-token softmax trees with stale behavior "
        f"policies, G = 2, 3, 5 ({cases} cases): largest relative deviation of E[gᴵˢ] from the "
        f"claimed {_g(factor)} × ∇J/T is {_g(worst, 2)}. (Leave-one-out advantages are needed: "
        "centred ones give (G−1)/G × ∇J/T, see our rows.)",
        chain.NABLA_J / chain.T,
        {"max_relative_residual": worst, "cases": cases},
    )


def check_kl_drift(constant: float = 0.5, t_exponent: float = 1.0) -> Check:
    """§4.2 step 3: `KL <= constant T^t_exponent L ||dtheta||^2` (paper: `T L / 2`)."""
    search = adversarial.search_kl_drift()
    depth = int(search.example["depth"])
    attained = search.ratio * 0.5 * depth / (constant * depth**t_exponent)
    tab = _tabular_kl_ratio()
    proven = constant >= 0.5 and t_exponent >= 1.0
    verdict = REFUTED if attained > 1 + REL_TOL else VERIFIED if proven else NOT_REPRODUCED
    return Check(
        verdict,
        "Per token the KL is a function of the stale parameter with zero value and gradient at θₙ "
        "and an L-Lipschitz gradient; T tokens add up. Exact search on log-linear trees whose "
        f"parameter is shared by all T = {depth} positions ({search.restarts} starts, "
        f"{search.evaluations} evaluations) reaches {_g(search.ratio, 5)} of (TL/2)‖Δθ‖², i.e. "
        f"{_g(attained, 5)} of the claimed bound: the factor T is tight (tabular trees, whose "
        f"parameters are not shared, reach only {_g(tab)} of it).",
        chain.kl_drift_factor() * chain.DTHETA2,
        {"fraction_reached": search.ratio, "tabular_fraction": tab},
    )


@lru_cache(maxsize=1)
def _tabular_kl_ratio() -> float:
    """Largest `KL / ((T L/2)||dtheta||^2)` over random tabular trees (`T = 3`, small steps)."""
    tree = tabular_tree(2, 3)
    worst = 0.0
    for seed in range(6):
        rng = np.random.default_rng(400 + seed)
        theta = rng.normal(scale=0.3, size=tree.dim)
        step = rng.normal(scale=1e-3, size=tree.dim)
        kl = trajectory_kl(tree, theta, theta + step)
        worst = max(worst, kl / (tree.depth * tree.smoothness / 2 * float(step @ step)))
    return worst


def check_drift(tau_exponent: float = 2.0, eta_exponent: float = 2.0) -> Check:
    """`E||theta_n - theta_{n-tau}||^2 <= eta^eta_exponent tau^tau_exponent M` (paper `eta^2 tau^2`)."""
    worst = 0.0
    for tau in range(1, 65):
        for eta in (1e-3, 0.1, 1.0):
            aligned = eta**2 * tau**2  # tau equal updates of squared norm M = 1
            worst = max(worst, aligned / (eta**eta_exponent * tau**tau_exponent))
    proven = tau_exponent >= 2 and _eq(eta_exponent, 2)
    verdict = REFUTED if worst > 1 + REL_TOL else VERIFIED if proven else NOT_REPRODUCED
    return Check(
        verdict,
        "‖Σ_{k<τ} η gₖ‖² ≤ τ Σ η²‖gₖ‖² (Cauchy–Schwarz) and E‖gₖ‖² ≤ M give η²τ²M; with random "
        "lags the delay-regularity condition turns τ² into E[τ²] (and ‖Δ‖⁴ ≤ η⁴τ⁴PM with the "
        "pathwise bound P). Exact worst case: τ equal updates meet it with equality, so the power "
        f"of τ cannot be lowered (largest ratio to the claimed bound over τ ≤ 64: {_g(worst, 4)}); "
        "independent zero-mean updates give exactly 1/τ of it (E‖Σₖ gₖ‖² = τM).",
        chain.drift_second_moment(chain.MOMENT),
        {"max_ratio": worst},
    )


def check_gmc_removed_mass(multiplier: float = 1.0) -> Check:
    """§4.2 step 2 (GMC): `E(rho_bar - 1 - eps)_+ <= KL / (multiplier log(1+2eps))`, any `G`."""
    d = symbolic.prove_gmc_denominator_valid()
    iv_ok, cells = numerics.interval_check_denominators()
    attained = 0.0
    for eps in (0.01, PAPER_EPS, 1.0, 5.0):
        mu, pi = near_extremal_distribution(eps, "gmc")
        mass = gmc_removed_mass(mu, pi, eps)
        attained = max(attained, mass * float(gmc_denominator(eps)) / kl_divergence(mu, pi))
    masses, kl = _convexity_example()
    conv_ok = masses[2] <= masses[1] <= masses[0] <= kl / float(tight_gmc_denominator(PAPER_EPS))
    proven = d.ok and iv_ok and conv_ok
    verdict = bound_verdict(1.0 / multiplier, 1.0 if proven else np.inf, attained)
    return Check(
        verdict,
        f"Convexity of (·)₊ reduces any G to G = 1; the tangent of φ at 1+2ε proves the "
        f"denominator log(1+2ε) (sympy; mpmath interval arithmetic on {cells} cells). Near-extremal "
        f"two-point laws at ε = 0.01, 0.28, 1, 5 reach {_g(attained, 4)} of the bound (the tight "
        "constant κ_ε > log(1+2ε) is ours), so a denominator more than "
        f"{_g(1 / attained, 4)} × log(1+2ε) is refuted. Random 4-point law: removed mass at "
        f"G = 1, 2, 3: {', '.join(_g(m) for m in masses)} ≤ KL/κ = "
        f"{_g(kl / float(tight_gmc_denominator(PAPER_EPS)))}.",
        sp.log(1 + 2 * chain.EPS),
        {"fraction_reached": attained, "interval_cells": cells},
    )


def _convexity_example(seed: int = 3) -> tuple[list[float], float]:
    """GMC removed mass for G = 1, 2, 3 on a random 4-point law, and its KL (exact)."""
    rng = np.random.default_rng(seed)
    mu = rng.dirichlet(np.ones(4))
    pi = rng.dirichlet(np.ones(4) * 0.5)
    return [gmc_removed_mass(mu, pi, PAPER_EPS, group_size=g) for g in (1, 2, 3)], kl_divergence(
        mu, pi
    )


def check_tic_removed_mass(multiplier: float = 1.0) -> Check:
    """TIC: `E_mu[rho 1{rho > 1+eps}] <= KL / (multiplier c_eps)`; `c_eps` is tight."""
    d, t = symbolic.derive_c_eps(), symbolic.derive_tight_equals_pointwise()
    attained = 0.0
    for eps in (0.01, PAPER_EPS, 1.0, 5.0):
        mu, pi = near_extremal_distribution(eps, "tic")
        attained = max(
            attained, tic_removed_mass(mu, pi, eps) * float(c_eps(eps)) / kl_divergence(mu, pi)
        )
    verdict = bound_verdict(1.0 / multiplier, 1.0 if d.ok and t.ok else np.inf, attained)
    return Check(
        verdict,
        "c_ε = inf_{x>1+ε} φ(x)/x = log(1+ε) − ε/(1+ε) (sympy; the paper prints no formula), and "
        "no mean-one law does better (a shift a(x−1) is forced to a = 0). Near-extremal two-point "
        f"laws reach {_g(attained, 5)} of the bound at ε = 0.01, 0.28, 1, 5: any larger "
        "denominator is refuted.",
        symbolic.c_eps_expr(),
        {"fraction_reached": attained},
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
        f"claimed multiplier {_g(multiplier)} the scan of ε ∈ [1e-6, 1e40] finds "
        + (f"a counterexample at ε = {_g(float(bad[0]))}." if bad.size else "no counterexample."),
        sp.StrictLessThan(symbolic.c_eps_expr(), symbolic.gmc_denominator_expr()),
        {"counterexample_eps": float(bad[0]) if bad.size else None},
    )


def check_denominator_orders(tic_exponent: float = 2.0, gmc_exponent: float = 1.0) -> Check:
    """§4.3: `c_eps = Theta(eps^tic_exponent)`, `log(1+2eps) = Theta(eps^gmc_exponent)`."""
    e = symbolic.EPS
    d_tic = sp.limit(e * sp.diff(sp.log(symbolic.c_eps_expr()), e), e, 0)
    d_gmc = sp.limit(e * sp.diff(sp.log(symbolic.gmc_denominator_expr()), e), e, 0)
    a = symbolic.derive_asymptotics()
    ok = _eq(d_tic, tic_exponent) and _eq(d_gmc, gmc_exponent)
    return Check(
        VERIFIED if ok else REFUTED,
        f"Exponents at ε → 0 (limits of ε d log/dε): c_ε {d_tic}, log(1+2ε) {d_gmc}; {a.derived}.",
        sp.Tuple(
            sp.series(symbolic.c_eps_expr(), e, 0, 3).removeO(),
            sp.series(symbolic.gmc_denominator_expr(), e, 0, 2).removeO(),
        ),
        {"tic_exponent": float(d_tic), "gmc_exponent": float(d_gmc)},
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
    ok = _eq(d_tic, tic_exponent) and _eq(d_gmc, gmc_exponent) and _fits_ok(pairs)
    lead = symbolic.derive_penalty_asymptotics().details
    return Check(
        VERIFIED if ok else REFUTED,
        f"sympy: exponents {d_tic} (TIC) and {d_gmc} (GMC), leading constants "
        f"{lead['tic_lead']} and {lead['gmc_lead']}; numeric: {_fits_text(pairs)}.",
        sp.Tuple(4 * e**-4, e**-2 / 4),
        {"tic_exponent": float(d_tic), "gmc_exponent": float(d_gmc)},
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
    ok = _eq(derived, exponent) and below
    from theory.constants import improvement_factor

    return Check(
        VERIFIED if ok else REFUTED,
        f"The tuned delay term is (K τ̄₄/N⁴)^(1/5), so the ratio is (K_GMC/K_TIC)^(1/5) = "
        f"(c_ε/log(1+2ε))^{derived} (sympy, exact); < 1 because c_ε < log(1+2ε). At ε = 0.28: "
        f"{_g(float(improvement_factor(PAPER_EPS)), 4)} (tight constants, ours: "
        f"{_g(float(improvement_factor(PAPER_EPS, tight=True)), 4)}).",
        base ** sp.Rational(2, 5),
        {"exponent": float(derived)},
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
        _eq(ex["S_N"], s_exponent)
        and _eq(ex["D_N"], d_n_exponent)
        and _eq(ex["D_tau"], d_tau_exponent)
        and _fits_ok(pairs)
    )
    return Check(
        VERIFIED if ok else REFUTED,
        f"Pairwise balances of a/η + bη + cη⁴ (sympy): η_S ∝ N^{ex['eta_S_N']}, value ∝ N^{ex['S_N']}; "
        f"η_D ∝ N^{ex['eta_D_N']}, value ∝ N^{ex['D_N']} τ̄₄^{ex['D_tau']}; the tuned bound is "
        f"within a factor 2 of their sum. Numeric minimisation over η: {_fits_text(pairs)}.",
        st.details["D"],
        {k: float(v) for k, v in ex.items()},
    )


def check_corollary1(n_exponent: float = -3 / 14, tau_exponent: float = 1 / 7) -> Check:
    """Corollary 1: `eps*_GMC = Theta(tau4^(1/7) N^(-3/14))` (leading eps-terms of the tuned bound)."""
    d = rates.derive_corollary1("gmc")
    fits = numerics.fit_corollary1()
    pairs = [(fits[0], n_exponent), (fits[1], tau_exponent)]
    ok = (
        _eq(d.details["N_exp"], n_exponent)
        and _eq(d.details["tau_exp"], tau_exponent)
        and _fits_ok(pairs)
    )
    tic = rates.derive_corollary1("tic").details
    return Check(
        VERIFIED if ok else REFUTED,
        f"sympy argmin of the leading ε-terms ε/(2√N) + (τ̄₄/(4ε²N⁴))^(1/5): ε* ∝ "
        f"N^{d.details['N_exp']} τ̄₄^{d.details['tau_exp']} (TIC analogue: N^{tic['N_exp']} "
        f"τ̄₄^{tic['tau_exp']}); numeric minimisation of the whole tuned bound: {_fits_text(pairs)}.",
        d.details["eps_star"],
        {"N_exp": float(d.details["N_exp"]), "tau_exp": float(d.details["tau_exp"])},
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
    ok = float(derived) >= q_max - 1e-12 and _fits_ok(pairs, tol=0.005)
    return Check(
        VERIFIED if ok else REFUTED,
        f"With τ̄₄ = N^q and ε = min{{1, τ̄₄^a N^b}} (a = {_g(eps_tau_exponent, 4)}, "
        f"b = {_g(eps_n_exponent, 4)}), the delay term ∝ N^(q − 2 − 2(aq + b)) stays ≤ N^(−1/2) up "
        f"to q = {derived} (sympy; the cap ε = 1 takes over exactly there). Theorem 1's bound "
        f"at these choices, numerically: {_fits_text(pairs)}. The prescription matters: a threshold "
        f"shrinking like N^(−1/2) instead gives slope {fixed.slope:+.3f} at q = {_g(q_max)}.",
        sp.nsimplify(derived),
        {"q_max": float(derived), "slopes": [f.slope for f in fits], "points": fits[0].points},
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
    ok = bool(sym_ok) and _fits_ok(pairs)
    return Check(
        VERIFIED if ok else REFUTED,
        f"{lg.derived} (sympy). Numeric joint minimisation over (η, ε): {_fits_text(pairs)}.",
        lg.details["rate_exp"],
        {"points": pairs[0][0].points},
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
    shape_ok = all(_eq(5 * exps[k], v) for k, v in printed.items())
    searches = adversarial.search_group_removed_mass()
    worst = max(s.ratio for s in searches.values())
    fit = numerics.fit_corollary2()
    ok = (
        proof_ok
        and shape_ok
        and worst <= 1 + REL_TOL
        and _eq(exps["G"], g_exponent)
        and fit.within(g_exponent)
    )
    return Check(
        VERIFIED if ok else REFUTED,
        "From the group-average concentration: (y−ε)₊ ≤ y²/(4ε), E(ρ̄−1)² = χ²/G and "
        "χ² ≤ 2(1+δ)KL on |ρ−1| ≤ δ give E(ρ̄−1−ε)₊ ≤ KL/den_G with den_G = "
        f"{chain.to_plain(den_g).replace('onepdelta', '(1+δ)').replace('epsilon', 'ε')} (sympy). "
        "Put into the Theorem 1 chain and tuned over η, the delay term has exponents "
        + ", ".join(f"{k} {v}" for k, v in exps.items())
        + " (×5 = the printed (1+δ)²(1+ε)³τ̄₄/(G²ε²N⁴) inside the 1/5 power). Exact removed mass "
        "on two-point laws with |ρ−1| ≤ 0.5 reaches "
        + ", ".join(f"{_g(s.ratio)} (G = {g})" for g, s in searches.items())
        + f" of (1+δ)KL/(2εG); {fit.text(g_exponent)}.",
        delay,
        {
            "G_exponent": float(exps["G"]),
            "removed_mass_fraction": {str(g): s.ratio for g, s in searches.items()},
        },
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


def check_group_bias(gmc_vanishes: bool = True, tic_persists: bool = True) -> Check:
    """Abstract / Remark 3: for fixed policies the GMC bias vanishes as `G -> oo`, TIC's persists."""
    tab = group_bias_table()
    gmc, tic, lim = tab["gmc"], tab["tic"], tab["tic_limit"][0]
    gmc_decays = gmc[-1] <= 1e-2 * gmc[0] and all(
        b <= a * (1 + 1e-9) for a, b in zip(gmc[1:], gmc[2:], strict=False)
    )
    tic_stays = lim > 1e-3 and all(abs(t - lim) <= 1e-9 * lim for t in tic)
    ok = gmc_decays == gmc_vanishes and tic_stays == tic_persists
    gs = [int(g) for g in tab["G"]]
    return Check(
        VERIFIED if ok else REFUTED,
        "Exact bias vectors E[gʷ] − ∇J/T by enumeration of all group compositions (two-token tree, "
        f"fixed current and stale policies, largest ratio {_g(tab['max_rho'][0])}, ε = 0.28, "
        f"leave-one-out advantages). ‖bias‖ for G = {', '.join(map(str, gs))}: GMC "
        f"{', '.join(_g(v) for v in gmc)}; TIC {', '.join(_g(v) for v in tic)}. TIC's bias is the "
        f"same vector for every G ≥ 2 (its G → ∞ limit, norm {_g(lim)}): each trajectory is clipped "
        "on its own ratio, and the other members only enter through their mean reward.",
        chain.TIC_BIAS / chain.T,
        {"gmc": gmc, "tic": tic, "tic_limit": lim, "G": gs},
    )


def check_prop2(cap_multiplier: float = 1.0) -> Check:
    """Proposition 2: `alpha* = min{1, cap_multiplier (1+eps)/rho_bar}` solves eq. 8."""
    rng = np.random.default_rng(8)
    worst_alpha, worst_value, worst_removed, n = 0.0, 0.0, 0.0, 0
    for _ in range(30):
        g = int(rng.integers(1, 9))
        rho = np.exp(rng.normal(scale=1.0, size=g))
        eps = float(np.exp(rng.uniform(np.log(0.01), np.log(2.0))))
        rho_bar = float(rho.mean())
        # eq. 8 over all weights w in [0,1]^G (linprog) and over direction-preserving w = alpha.
        lp = linprog(-rho / g, A_ub=[rho / g], b_ub=[1 + eps], bounds=[(0, 1)] * g, method="highs")
        lp_a = linprog(
            [-rho_bar], A_ub=[[rho_bar]], b_ub=[1 + eps], bounds=[(0, 1)], method="highs"
        )
        alpha = min(1.0, cap_multiplier * (1 + eps) / rho_bar)
        worst_alpha = max(worst_alpha, abs(alpha - float(lp_a.x[0])))
        worst_value = max(worst_value, abs(-lp.fun - float(lp_a.x[0]) * rho_bar))
        worst_removed = max(worst_removed, abs(rho_bar * (1 - alpha) - max(rho_bar - 1 - eps, 0.0)))
        n += 1
    ok = worst_alpha < 1e-7 and worst_value < 1e-7 and worst_removed < 1e-7
    return Check(
        VERIFIED if ok else REFUTED,
        f"On {n} random groups (G ≤ 8, ε ∈ [0.01, 2]), scipy's LP solver: the direction-preserving "
        f"optimum matches the claimed α* to {_g(worst_alpha, 2)}, reaches the optimum over all "
        f"weightings w ∈ [0,1]^G to {_g(worst_value, 2)}, and the removed mass ρ̄(1−α*) equals "
        f"(ρ̄−1−ε)₊ to {_g(worst_removed, 2)}. αρ̄ is increasing in α, so α* is unique.",
        sp.Min(1, chain.ONEP / chain.RHOBAR),
        {"max_alpha_error": worst_alpha, "groups": n},
    )


def _theorem_exponents(den: sp.Expr) -> dict[tuple[str, str], sp.Expr]:
    terms = chain.theorem_terms(den=den)
    return {
        ("optimisation", "η"): chain.exponent(terms.optimisation, chain.ETA),
        ("optimisation", "N"): chain.exponent(terms.optimisation, chain.N),
        ("variance", "(1+ε)"): chain.exponent(terms.variance, chain.ONEP),
        ("variance", "η"): chain.exponent(terms.variance, chain.ETA),
        ("delay", "(1+ε)"): chain.exponent(terms.delay, chain.ONEP),
        ("delay", "η"): chain.exponent(terms.delay, chain.ETA),
        ("delay", "τ̄₄"): chain.exponent(terms.delay, chain.TAU4),
        ("delay", "den"): chain.exponent(terms.delay, chain.DEN),
    }


PRINTED_THEOREM_EXPONENTS = {
    ("optimisation", "η"): -1,
    ("optimisation", "N"): -1,
    ("variance", "(1+ε)"): 1,
    ("variance", "η"): 1,
    ("delay", "(1+ε)"): 3,
    ("delay", "η"): 4,
    ("delay", "τ̄₄"): 1,
    ("delay", "den"): -2,
}


@lru_cache(maxsize=1)
def evaluator_twin_error() -> float:
    """Largest relative gap between `theory.bounds.theorem_terms` and the sympy chain (GMC, TIC)."""
    rng = np.random.default_rng(9)
    symbols = (
        chain.T,
        chain.A,
        chain.R,
        chain.C,
        chain.L,
        chain.ETA,
        chain.N,
        chain.EPS,
        chain.TAU4,
    )
    worst = 0.0
    for method, den_fn in (
        ("gmc", symbolic.gmc_denominator_expr()),
        ("tic", symbolic.c_eps_expr()),
    ):
        terms = chain.theorem_terms(den=den_fn.subs(symbolic.EPS, chain.EPS))
        fixed = {chain.ONEP: 1 + chain.EPS, chain.KAPPA: 8, chain.GAP: chain.R}
        fns = {
            name: sp.lambdify(symbols, getattr(terms, name).subs(fixed), "numpy")
            for name in ("optimisation", "variance", "delay")
        }
        for _ in range(3):
            v = (
                float(rng.integers(1, 50)),
                float(rng.integers(2, 1000)),
                float(rng.uniform(0.5, 2)),
                float(rng.uniform(1e3, 1e6)),
                float(rng.uniform(0.1, 2)),
                float(rng.uniform(1e-3, 1e-1)),
                float(rng.integers(10, 10_000)),
                float(rng.uniform(0.05, 2)),
                float(rng.uniform(0, 1e4)),
            )
            names = ("T", "vocab_size", "R", "C", "L", "eta", "N", "eps", "tau4")
            num = theorem_terms(method, **dict(zip(names, v, strict=True)))
            for name, fn in fns.items():
                ref = float(fn(*v))
                worst = max(worst, abs(float(getattr(num, name)) - ref) / max(abs(ref), 1e-300))
    return worst


def check_theorem(method: str = "gmc", **claimed: float) -> Check:
    """Theorem 1 (`gmc`) / 2 (`tic`): each term's exponents, reconstructed from the §4.2 chain.

    `claimed` overrides entries of `PRINTED_THEOREM_EXPONENTS` by name `term_symbol`, e.g.
    `delay_onep=4` for `(1+eps)^4`; keys: `optimisation_eta`, `optimisation_N`, `variance_onep`,
    `variance_eta`, `delay_onep`, `delay_eta`, `delay_tau4`, `delay_den`.
    """
    names = {"η": "eta", "N": "N", "(1+ε)": "onep", "τ̄₄": "tau4", "den": "den"}
    want = {
        key: claimed.get(f"{key[0]}_{names[key[1]]}", value)
        for key, value in PRINTED_THEOREM_EXPONENTS.items()
    }
    unknown = set(claimed) - {f"{k[0]}_{names[k[1]]}" for k in PRINTED_THEOREM_EXPONENTS}
    if unknown:
        raise ValueError(f"unknown exponent names {sorted(unknown)}")
    derived = _theorem_exponents(chain.DEN)
    match = all(_eq(derived[k], want[k]) for k in want)
    twin = evaluator_twin_error()
    den = symbolic.gmc_denominator_expr() if method == "gmc" else symbolic.c_eps_expr()
    den = den.subs(symbolic.EPS, chain.EPS)
    terms = chain.theorem_terms(den=den)
    text = (
        "Reconstructed chain (Lemma 1 → Prop. 1 → removed mass → KL/den → (TL/2)‖Δ‖² → drift → "
        "squaring): E‖b‖² ≤ K_b²(TL/2)² E‖Δ‖⁴/den² with E‖Δ‖⁴ ≤ η⁴τ̄₄·P·M, where the pathwise "
        "bound P = 2(1+ε)²R²L log C (Assumption 2: Σᵢ cᵢ|Aᵢ| ≤ G(1+ε)R) contributes (1+ε)² and "
        "Proposition 1's M contributes (1+ε): the delay term carries (1+ε)^"
        f"{derived[('delay', '(1+ε)')]}. Exponents (derived / claimed): "
        + ", ".join(f"{t} {s}: {derived[(t, s)]}/{_g(float(want[(t, s)]))}" for t, s in want)
        + ". Without the delay-regularity condition (both fourth-moment factors pathwise) the "
        f"power would be 4. Numeric evaluators agree with the sympy chain to {_g(twin, 2)}."
    )
    if method == "tic":
        other = chain.theorem_terms(
            den=symbolic.gmc_denominator_expr().subs(symbolic.EPS, chain.EPS)
        )
        same = (
            sp.simplify(terms.optimisation - other.optimisation) == 0
            and sp.simplify(terms.variance - other.variance) == 0
        )
        ratio = sp.simplify(terms.delay / other.delay - (sp.log(1 + 2 * chain.EPS) / den) ** 2) == 0
        match = match and bool(same and ratio)
        text += " Theorems 1 and 2 differ only in the delay term, by (log(1+2ε)/c_ε)²."
    ok = match and twin < 1e-9
    return Check(
        VERIFIED if ok else NOT_REPRODUCED,
        text,
        terms.total,
        {f"{t}_{names[sym]}": float(v) for (t, sym), v in derived.items()},
    )


def check_c_through_log(second_moment_expr: sp.Expr | None = None) -> Check:
    """§2.1: `C` enters the bounds only through `log C` (Theorems 1, 2, Corollary 2)."""
    m = chain.second_moment() if second_moment_expr is None else second_moment_expr
    den_g, _ = chain.derive_group_removed_mass_denominator()
    # log(1+2eps) and c_eps are free of C; the generic `den` stands for both theorems.
    totals = {
        "Theorems 1 and 2": chain.theorem_terms(den=chain.DEN, m=m).total,
        "Corollary 2": chain.theorem_terms(den=den_g, m=m).total,
    }
    flags = {k: chain.only_through_log(v, chain.C) for k, v in totals.items()}
    kw = {
        "T": 8.0,
        "vocab_size": 100.0,
        "R": 1.0,
        "L": 0.5,
        "eta": 1e-3,
        "N": 1e4,
        "eps": PAPER_EPS,
        "tau4": 1e4,
    }
    growth = float(theorem_terms("gmc", C=1e12, **kw).delay) / float(
        theorem_terms("gmc", C=10.0, **kw).delay
    )
    ok = all(flags.values())
    return Check(
        VERIFIED if ok else REFUTED,
        "Symbolically, after replacing log C by a new symbol no C is left in "
        + ", ".join(f"{k} ({'yes' if v else 'no'})" for k, v in flags.items())
        + ". C enters through the pathwise bounds only (score ≤ T√(2L log C)): the delay term "
        f"carries log²C, so raising C from 10 to 1e12 multiplies it by {_g(growth, 4)} = "
        "(12/1)². Proposition 1 is free of C (entropy ≤ log|A|).",
        theorem_terms_expr_delay(),
        {"growth_10_to_1e12": growth},
    )


def theorem_terms_expr_delay() -> sp.Expr:
    """The delay term of Theorem 1 with explicit constants (the `log^2 C` is visible)."""
    return chain.theorem_terms().delay


# --- our readings and extensions (not counted) -------------------------------------------------


def check_ours_prop1_constant(constant: float = 2.0) -> Check:
    """Ours: Proposition 1 holds with the constant 2 (`|A_hat| <= R`); the search gets to 0.72 of it."""
    search = adversarial.search_second_moment()
    base = check_prop1_second_moment(constant)
    return Check(
        bound_verdict(constant, 2.0, 2.0 * search.ratio),
        f"Derivation as in Proposition 1's row; the adversarial search reaches {_g(search.ratio)} "
        "of the constant-2 bound (supremum 1/(2 ln 2) = 0.7213 for one token at ε → 0), so the "
        f"constant cannot be below {_g(2 * search.ratio)}; it is 4 times sharper than the paper's 8.",
        base.expr,
        {"fraction_reached": search.ratio},
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
        f"{', '.join(_g(v, 4) for v in slack)}. Near-extremal two-point laws reach "
        f"{_g(attained, 5)} of the tight bounds, so no larger constant is valid.",
        t.details["kappa_series"],
        {"slack": slack, "fraction_reached": attained},
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
        and _eq(chain.exponent(star, rates.N), n_exponent)
        and _eq(chain.exponent(star, rates.TAU), tau_exponent)
        and _fits_ok(pairs)
    )
    return Check(
        VERIFIED if ok else REFUTED,
        "A second reading of Corollary 1 (not the paper's statement, which concerns the step-size-"
        f"tuned form and holds): {jm.derived}; numeric: {_fits_text(pairs)}. At N = 1e20, "
        f"τ̄₄ = 1: joint ε* = {_g(eps_joint)} (bound − 2/√N = {_g(exc_joint)}), Corollary 1's "
        f"ε = {_g(eps_c1)} gives {_g(exc_c1)}; the difference is a relative "
        f"{_g((exc_c1 - exc_joint) * np.sqrt(n0) / 2, 2)} of the whole bound.",
        star,
        {"eps_joint": eps_joint, "eps_corollary1": eps_c1},
    )


def check_ours_centered(factor_offset: float = 0.0) -> Check:
    """Ours: with centred advantages `E[g^IS] = ((G-1)/G + offset) grad J / T` (so LOO is needed)."""
    cases, cen = _is_residual("centered", factor_offset)
    return Check(
        VERIFIED if cen < REL_TOL else REFUTED,
        "Centring with the member's own reward, Aᵢ = rᵢ − r̄, correlates Aᵢ with ρᵢsᵢ: exactly "
        f"(G−1)/G × ∇J/T on {cases} cases (largest relative deviation {_g(cen, 2)}); the paper's "
        "leave-one-out advantages (Appendix B.1) are what makes Assumption 3's unbiasedness hold.",
        (chain.G - 1) / chain.G * chain.NABLA_J / chain.T,
        {"max_relative_residual": cen},
    )


def check_ours_bias_constant(multiplier: float = 1.0) -> Check:
    """Ours: the bias constant `K_b = R sqrt(2 L log C)` is within 10% of tight."""
    base = check_prop1_bias(multiplier)
    search = adversarial.search_bias()
    return Check(
        base.verdict,
        f"The search reaches {_g(search.ratio)} of K_b·m (Assumption 2 loses the rest: "
        "‖∇log p‖² ≤ 2L(−log p) ≤ 2L log C) and "
        f"{_g(float(search.example.get('ratio_exact_score', np.nan)), 4)} of the exact first step "
        "(largest score norm), which one removed trajectory with an aligned advantage attains.",
        base.expr,
        base.evidence,
    )


def check_ours_grpo_mean(exponent: float = 1.0) -> Check:
    """Ours: GRPO's expected second moment on the example grows as `C^exponent` (worst case `C^2`)."""
    _, mean_expr = _grpo_closed_forms()
    c = chain.C
    derived = sp.limit(c * sp.diff(sp.log(mean_expr), c), c, sp.oo)
    xs = np.array(GRPO_COVERAGES)
    ys = np.array([grpo_example(cv)[0] for cv in GRPO_COVERAGES])
    fit = numerics.SlopeFit(
        "GRPO E‖g‖² vs C", xs, ys, numerics.loglog_slope(xs, ys), float(derived)
    )
    ok = _eq(derived, exponent) and fit.within(exponent, 0.02)
    return Check(
        VERIFIED if ok else REFUTED,
        f"In expectation over the stale policy the unclipped ratio C/2 occurs with probability "
        f"about 2/C: E‖g‖² = C²/(16(C−1)), exponent {derived} ({fit.text(exponent)}). The paper's "
        "O(C²) is the worst case over realised groups (row above); both are unbounded in C, "
        "unlike Proposition 1's C-free bound.",
        mean_expr,
        {"exponent": float(derived), "fit_slope": fit.slope},
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
    ok = twin < 1e-9 and _eq(t_pow, delay_t_power) and _eq(c_pow, delay_log_c_power)
    return Check(
        VERIFIED if ok else REFUTED,
        "(1/N)Σ E‖∇J‖² ≤ 2TΔ_J/(ηN) + κT L²R³ log|A|(2log|A|+1)(1+ε)η + "
        "κT³L⁵R⁶ log²C log|A|(1+ε)³η⁴τ̄₄/log²(1+2ε) (κ = 8 paper, 2 ours; TIC: c_ε for "
        f"log(1+2ε)); powers of T and log C in the delay term: {t_pow}, {c_pow}. "
        f"theory.bounds.theorem_terms equals this sympy chain to {_g(twin, 2)} at random points; "
        "it is what the toy runs' measured-vs-bound tables evaluate.",
        terms.total,
        {"twin_error": twin},
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
        + ", ".join(f"{_g(s.ratio)} of the bound at G = {g}" for g, s in searches.items())
        + ". The 1/G from concentration is the slack that grows: the exact mass decays faster.",
        chain.KL / den_g,
        {str(g): s.ratio for g, s in searches.items()},
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
        f"relative spread over G = 2 … 32 is {_g(spread, 2)}.",
        chain.TIC_BIAS / chain.T,
        {"relative_spread": spread},
    )


# Registry: key -> check function (defaults = the paper's or our claimed values).
PAPER_CHECKS = {
    "lemma1": check_lemma1,
    "prop1_second_moment": check_prop1_second_moment,
    "prop1_bias": check_prop1_bias,
    "class_tic_gmc": check_class_membership,
    "class_vcpo": check_vcpo,
    "grpo_outside": check_grpo,
    "is_unbiased": check_unbiased,
    "prop2": check_prop2,
    "gmc_removed_mass": check_gmc_removed_mass,
    "tic_removed_mass": check_tic_removed_mass,
    "kl_drift": check_kl_drift,
    "drift": check_drift,
    "theorem1": lambda **kw: check_theorem("gmc", **kw),
    "theorem2": lambda **kw: check_theorem("tic", **kw),
    "c_through_log": check_c_through_log,
    "c_eps_below": check_c_eps_below,
    "denominator_orders": check_denominator_orders,
    "penalties": check_penalties,
    "improvement_factor": check_improvement_factor,
    "tuned_rate": check_tuned_rate,
    "corollary1": check_corollary1,
    "delay_tolerance": check_delay_tolerance,
    "large_delay": check_large_delay,
    "corollary2": check_corollary2,
    "group_bias": check_group_bias,
}
OUR_CHECKS = {
    "ours_prop1_constant": check_ours_prop1_constant,
    "ours_bias_constant": check_ours_bias_constant,
    "ours_explicit_theorem": check_ours_explicit_theorem,
    "ours_tight_constants": check_ours_tight_constants,
    "ours_joint_minimiser": check_ours_joint_minimiser,
    "ours_centered": check_ours_centered,
    "ours_grpo_mean": check_ours_grpo_mean,
    "ours_group_removed_mass": check_ours_group_removed_mass,
    "ours_tic_bias_constant_in_g": check_ours_tic_bias_constant_in_g,
}
