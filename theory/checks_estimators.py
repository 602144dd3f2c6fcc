"""Checks of §3: Lemma 1, Proposition 1 (second moment and bias), the class of estimators (eq. 5)
and its members (TIC, GMC, VCPO; vanilla GRPO outside), Assumption 3's unbiasedness, Proposition 2
and GMC as the minimiser of the ratio-based bias bound over the class.

Each `check_*` takes the claimed constant or exponent as a parameter (the paper's value by
default) and returns a `theory.verdicts.Check`; the verdict kinds are those of `theory.verdicts`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import sympy as sp
from scipy.optimize import linprog

from gmc_grpo.defaults import PAPER_EPS, VCPO_TRUNCATION
from theory import adversarial, chain, class_search, grpo_worst, numerics
from theory.bounds import (
    bias_per_removed_mass,
    second_moment_bound,
)
from theory.exact import (
    class_coefficients,
    group_moments,
    group_updates,
    problem_from_tree,
)
from theory.run_rows import RunFinding, joined
from theory.trees import (
    min_token_prob,
    objective,
    objective_gradient,
    tabular_tree,
)
from theory.verdicts import (
    CONDITIONAL,
    NOT_REPRODUCED,
    REFUTED,
    REL_TOL,
    TREE,
    VERIFIED,
    Check,
    bound_verdict,
    random_case,
    short,
)


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
    runs: Sequence[RunFinding] = (),
    opt_coef: float = 2.0,
    var_coef: float = 1.0,
    bias_coef: float = 1.0,
    smoothness: float = 1.0,
) -> Check:
    """Lemma 1: coefficients `opt_coef T/(eta N)`, `var_coef T^2 eta R L (2 log|A|+1)`,
    `bias_coef T^2`; `smoothness` scales the implied `L_J = T R L (2 log|A| + 1)`. With runs,
    also Lemma 1 with each run's measured moments (`runs`: the findings the evidence layer
    hands this row, `evidence.checks_runs.lemma1_part`)."""
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
    runs_text, contradicted, found = joined(runs)
    refuted = refuted or contradicted
    verdict = REFUTED if refuted else VERIFIED if covered and smoothness >= 1 else NOT_REPRODUCED
    return Check(
        verdict,
        "The descent argument (ascent step on the L_J-smooth J, E[g] = ∇J/T + b, Young's "
        "inequality with weight 1/T) gives "
        f"{derived[0]}T/(ηN), {derived[1]}·T²ηRL(2log|A|+1) and {derived[2]}·T²: the printed "
        "coefficients. Smoothness: adversarial search over θ and rewards "
        f"({search.restarts} starts, {search.evaluations} evaluations) reaches "
        f"‖∇²J‖ = {short(search.ratio)} × T R L(2log|A|+1). One-step inequality checked exactly on "
        f"{cases} cases (random trees, TIC/GMC, η = 0.05, 0.5, 5): smallest relative slack "
        f"{short(slack)}." + runs_text,
        lem.rhs,
        {
            "derived_coefficients": [float(d) for d in derived],
            "smoothness_fraction_reached": search.ratio,
            "one_step_cases": cases,
            "one_step_min_slack": slack,
        }
        | found,
        reason="the exact one-step inequality on random trees and the smoothness search could "
        "have failed (the printed coefficients themselves are our reconstruction of the descent "
        "argument)",
    )


def check_prop1_second_moment(constant: float = 8.0) -> Check:
    """Proposition 1's constant (`8` in the paper) against the searches (one token and `T = 1..4`)
    and our proof of 2."""
    search = adversarial.search_second_moment()
    by_depth = adversarial.search_second_moment_by_depth()
    kappa = chain.derive_second_moment_constant().subs(chain.RA, chain.R)
    whole = class_search.search_class_second_moment()
    reached = max(search.ratio, whole.ratio, *(r.ratio for r in by_depth.values()))
    attained = float(kappa) * reached
    verdict = bound_verdict(constant, float(kappa), attained)
    depths = ", ".join(f"{short(r.ratio)} (T = {t})" for t, r in by_depth.items())
    shapes = whole.example["by_shape"]
    shape_text = "; ".join(
        f"{shape}: {short(v['fraction_of_ours'])} (chain ceiling {short(v['chain_ceiling'])})"
        for shape, v in shapes.items()
    )
    return Check(
        verdict,
        f"Our derivation proves the constant {kappa} for |Â| ≤ R (8 when |Â| ≤ 2R). Exact "
        f"adversarial search over policies, behavior policies, advantages and ε "
        f"({search.restarts} starts, {search.evaluations} evaluations; one token, G = 1, 2, T = 2) "
        f"reaches {short(search.ratio)} of the bound with constant 2; over response lengths "
        f"(tabular trees of vocabulary 2, G = 1, TIC and GMC, "
        f"{sum(r.evaluations for r in by_depth.values())} evaluations) {depths}: the 1/T of the "
        f"bound is earned at every T. Over the whole class of eq. 5 (any w with 0 ≤ w ≤ 1 and "
        f"group mean of wρ ≤ 1+ε, chosen per group at the worst vertex of that polytope; one "
        f"token, every ordered group enumerated, {whole.evaluations} evaluations) the search "
        f"reaches {short(whole.ratio)} of the constant-2 bound = {short(whole.ratio / 4)} of the "
        f"paper's ({shape_text}; the chain's ceiling is (1 − 1/|A|)/log|A| of ours on one "
        f"token). Overall {short(attained / 8)} of the paper's 8, so any "
        f"constant below {short(attained)} would be refuted (claimed {short(constant)}). The "
        "supremum for one token is 1/(2 ln 2) = 0.721 of our bound.",
        chain.second_moment(kappa),
        {
            "fraction_of_ours": reached,
            "fraction_of_paper": attained / 8,
            "class_fraction_of_ours": whole.ratio,
            "class_fraction_of_paper": whole.ratio / 4,
            "class_by_shape": shapes,
            "by_depth": {str(t): r.ratio for t, r in by_depth.items()},
            "example": search.example,
        },
        reason="exact adversarial searches over policies, behavior policies, advantages, eps, "
        "response lengths T = 1-4 and every weighting of eq. 5's class (|A| = 3-4, G = 4-5) "
        "could have exceeded the bound",
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
        f"{search.evaluations} evaluations) reaches {short(search.ratio)} of K_b·m, and "
        f"{short(exact, 4)} of the first, exact step; random trees with leave-one-out advantages "
        f"({cases} cases) reach {short(worst)}. A constant below {short(attained)} × K_b is refuted.",
        chain.bias_per_removed_mass() * chain.MASS,
        {"fraction_reached": search.ratio, "fraction_exact_step": exact, "random_cases": cases},
        reason="exact bias vectors and an adversarial search could have exceeded K_b times the "
        "removed mass",
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
        f"{short(worst, 6)} × (1+ε) (attained just below the cap), w in [{short(min(r[3] for r in rows))}, "
        f"{short(max(r[4] for r in rows))}]. A cap below (1+ε) would be refuted.",
        sp.Min(chain.RHOBAR, chain.ONEP),
        {"max_mean_coefficient_over_cap": worst, "groups_per_eps": n_groups},
        reason="the exact coefficients of boundary and random groups could have exceeded the cap",
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


def check_vcpo(condition_multiplier: float | None = None) -> Check:
    """§3 lists VCPO (`c_i = min{rho_i, c}`) in the class, with no condition on `c`.

    `condition_multiplier`: `None` checks the claim as printed (VCPO in the class, for its usual
    `c = 8` and any `c`); a number checks the conditional claim "in the class whenever
    `c <= condition_multiplier (1+eps)`" (1 is the condition we find). Exact: the largest group
    mass of `min{rho, c}` over boundary and random groups, at `eps = 0.28`.
    """
    eps = PAPER_EPS
    below = [_max_mean_coefficient("vcpo", eps, c)[0] for c in (0.5, 1.0, 1.0 + eps)]
    usual = _max_mean_coefficient("vcpo", eps, VCPO_TRUNCATION)[0]
    m2, paper = _vcpo_example(64.0)
    evidence: dict[str, object] = {
        "max_mean_below_cap": below,
        "max_mean_at_usual_c": usual,
        "usual_c": VCPO_TRUNCATION,
        "example_over_bound": m2 / paper,
    }
    text = (
        "VCPO's coefficient min{ρ, c} has group mass at most c, reached by a group of ratios ≥ c: "
        "it is in the class exactly when c ≤ 1+ε. Largest group mass for c = 0.5, 1, 1+ε: "
        f"{', '.join(short(v, 6) for v in below)} × (1+ε); for VCPO's usual c = "
        f"{VCPO_TRUNCATION:g}: {short(usual, 6)} × (1+ε) at ε = {eps:g}, outside the class. "
        "Outside the class Proposition 1's bound fails: with c = 64 an exact one-token example "
        f"has E‖g‖² = {short(m2)}, {short(m2 / paper)} × Proposition 1's bound (constant 8)."
    )
    if condition_multiplier is None:
        verdict = CONDITIONAL if max(below) <= 1 + REL_TOL and usual > 1 + REL_TOL else VERIFIED
        return Check(
            verdict,
            text + " The paper lists VCPO in the class without a condition on c.",
            sp.Le(chain.CAP, 1 + chain.EPS),
            evidence,
            reason="exact group masses: VCPO is in the class only for c ≤ 1+ε, a condition the "
            "paper does not state (its usual c = 8 is outside at ε = 0.28)",
            condition="VCPO's truncation c ≤ 1+ε",
        )
    claimed_cap = condition_multiplier * (1.0 + eps)
    at_claim = _max_mean_coefficient("vcpo", eps, claimed_cap)[0]
    evidence["max_mean_at_claimed_cap"] = at_claim
    return Check(
        bound_verdict(1.0, 1.0, max(*below, at_claim)),
        text + f" Claimed: in the class for c ≤ {short(claimed_cap)}: group mass "
        f"{short(at_claim, 6)} × (1+ε) there.",
        sp.Le(chain.CAP, 1 + chain.EPS),
        evidence,
        reason="exact group masses at the claimed largest c could have exceeded the cap",
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


def grpo_closed_forms() -> tuple[sp.Expr, sp.Expr]:
    """Closed forms of `grpo_example`: worst `C^4/(32 (C-1)^2)`, mean `C^2/(16 (C-1))`.

    The mixed group has token ratios `C/2` (advantage -1, kept: `>= 1-eps`) and `C/(2(C-1))`
    (advantage +1, kept: `<= 1+eps`), opposite scores of norm `1/sqrt 2`, so
    `||g||^2 = (C/2 + C/(2(C-1)))^2 / 8`; it has probability `2 (C-1)/C^2`.
    """
    c = chain.C
    worst = c**4 / (32 * (c - 1) ** 2)
    return worst, sp.simplify(2 * (c - 1) / c**2 * worst)


def check_grpo(exponent: float = 2.0) -> Check:
    """Vanilla GRPO is outside the class; its worst-case second moment is `O(C^exponent)`, graded
    as an upper bound (issue 31): refuted only by a family growing faster than `C^exponent`
    (the coverage-C family attains `C^2` pathwise), verified by our proof of `C^2 R^2 S^2`
    (`theory.grpo_worst`) when a search over problems does not exceed it."""
    worst_expr, mean_expr = grpo_closed_forms()
    c = chain.C
    worst_exp = sp.limit(c * sp.diff(sp.log(worst_expr), c), c, sp.oo)
    mean_exp = sp.limit(c * sp.diff(sp.log(mean_expr), c), c, sp.oo)
    rows = [grpo_example(cv) for cv in GRPO_COVERAGES]
    closed_ok = all(
        abs(m - float(mean_expr.subs(c, cv))) <= 1e-9 * m
        and abs(w - float(worst_expr.subs(c, cv))) <= 1e-9 * w
        for (m, w), cv in zip(rows, GRPO_COVERAGES, strict=True)
    )
    xs = np.array(GRPO_COVERAGES)
    worst_fit = numerics.SlopeFit(
        "GRPO worst-case ‖g‖² vs C",
        xs,
        np.array([w for _, w in rows]),
        numerics.loglog_slope(xs, np.array([w for _, w in rows])),
        float(worst_exp),
    )
    paper = float(second_moment_bound(PAPER_EPS, 1, 0.5, 1.0, 2, "paper"))
    exceeds = [cv for (m, _), cv in zip(rows, GRPO_COVERAGES, strict=True) if m > paper]
    found = grpo_worst.search_grpo_worst()
    worst_ratio, mean_ratio = found["worst"].ratio, found["mean"].ratio
    bound_ok = max(worst_ratio, mean_ratio) <= 1.0 + REL_TOL
    verdict = bound_verdict(exponent, 2.0, float(worst_exp))
    if verdict == VERIFIED and not (closed_ok and bound_ok and exceeds):
        verdict = NOT_REPRODUCED
    shapes = "; ".join(
        f"{shape}: {short(found['worst'].example['by_shape'][shape])} pathwise, "
        f"{short(found['mean'].example['by_shape'][shape])} in expectation"
        for shape in found["worst"].example["by_shape"]
    )
    loose = (
        f" The claimed exponent {short(exponent)} is an upper bound above the attained 2: true, "
        "not tight."
        if exponent > float(worst_exp) + 1e-9
        else ""
    )
    return Check(
        verdict,
        "Read as an upper bound on the worst case over groups (our reading of 'O(C²) in the worst "
        "case'). Lower bound: an exact one-token family (uniform current policy, behavior "
        "probability 1/C, G = 2, leave-one-out advantages) keeps the negative-advantage token "
        f"with ratio C/2 unclipped; its worst ‖g‖² = C⁴/(32(C−1)²), exponent {worst_exp} "
        f"({worst_fit.text(2.0)}), so no exponent below {worst_exp} can hold. Upper bound "
        "(ours): token ratios are at most C under Assumption 2, so ‖g‖² ≤ C²R²S² on every group "
        "(S the largest token-score norm) and E‖g‖² ≤ CR²S². An exact search ("
        f"{found['worst'].evaluations + found['mean'].evaluations} evaluations over softmax trees, "
        f"fixed advantages, ε; {shapes}) reaches {short(worst_ratio)} of the pathwise bound and "
        f"{short(mean_ratio)} of the expected one (above 1 would refute our proof). Under the "
        f"expectation reading the rate is lower: the family's E‖g‖² = C²/(16(C−1)) has exponent "
        f"{mean_exp}, so O(C²) holds under both readings. The family's E‖g‖² exceeds "
        f"Proposition 1's bound {short(paper)} (constant 8) from C = "
        f"{int(min(exceeds)) if exceeds else 'never'} on the grid C = 2^8 … 2^13 (outside the "
        f"class). Closed forms match the exact engine: {closed_ok}.{loose} Claimed exponent "
        f"{short(exponent)}.",
        worst_expr,
        {
            "worst_exponent": float(worst_exp),
            "mean_exponent": float(mean_exp),
            "fit_slope": worst_fit.slope,
            "fit_points": worst_fit.points,
            "fraction_reached": worst_ratio,
            "mean_fraction_reached": mean_ratio,
            "by_shape": {
                "worst": found["worst"].example["by_shape"],
                "mean": found["mean"].example["by_shape"],
            },
        },
        reason="an upper bound: a family attains C² (a smaller exponent is refuted); our proof "
        "of C²R²S² checked by an exact search that could have exceeded it",
    )


@lru_cache(maxsize=8)
def unbiasedness_residual(advantage: str = "loo", factor_offset: float = 0.0) -> tuple[int, float]:
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
    cases, worst = unbiasedness_residual("loo", factor - 1.0)
    return Check(
        VERIFIED if worst < REL_TOL else REFUTED,
        "Exact enumeration of all groups on random two-token softmax trees with stale behavior "
        f"policies, G = 2, 3, 5 ({cases} cases): largest relative deviation of E[gᴵˢ] from the "
        f"claimed {short(factor)} × ∇J/T is {short(worst, 2)}. (Leave-one-out advantages are needed: "
        "centred ones give (G−1)/G × ∇J/T, see our rows.)",
        chain.NABLA_J / chain.T,
        {"max_relative_residual": worst, "cases": cases},
        reason="exact enumeration of every group could have shown a deviation from grad J / T",
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
        f"optimum matches the claimed α* to {short(worst_alpha, 2)}, reaches the optimum over all "
        f"weightings w ∈ [0,1]^G to {short(worst_value, 2)}, and the removed mass ρ̄(1−α*) equals "
        f"(ρ̄−1−ε)₊ to {short(worst_removed, 2)}. αρ̄ is increasing in α, so α* is unique.",
        sp.Min(1, chain.ONEP / chain.RHOBAR),
        {"max_alpha_error": worst_alpha, "groups": n},
        reason="linear programs over all weightings could have found a better "
        "direction-preserving alpha",
    )


# the widened linear programs of the minimiser row: group sizes, thresholds and the spread of
# the log-ratios (sigma 5 gives ratios from about e^-15 to e^15 in a group of 256)
MINIMISER_GROUP_SIZES = (1, 2, 4, 8, 16, 64, 256)
MINIMISER_EPS = (0.01, 0.05, PAPER_EPS, 1.0, 10.0)
MINIMISER_SIGMAS = (0.5, 2.0, 5.0)
MINIMISER_REPEATS = 3


def check_gmc_minimiser(cap_multiplier: float = 1.0) -> Check:
    """Abstract, §3: within the class GMC minimises the ratio-based bias bound.

    The bound is `K_b` times the removed mass `(1/G) sum_i (rho_i - w_i rho_i)` (Proposition 1's
    bias half), so its minimiser over the class maximises `(1/G) sum_i w_i rho_i` subject to
    `0 <= w <= 1`, `(1/G) sum_i w_i rho_i <= 1+eps` (eq. 8): scipy's LP over all weightings on
    groups of `MINIMISER_GROUP_SIZES`, `MINIMISER_EPS` and log-normal ratios of spreads
    `MINIMISER_SIGMAS`, against GMC (`min{1, cap_multiplier (1+eps)/rho_bar}`), TIC and VCPO at
    its largest in-class truncation `c = 1+eps`. A GMC above the LP's optimum is outside the
    class (refuted as a member), one below it is not the minimiser.
    """
    rng = np.random.default_rng(13)
    worst_gap, n, tic_more, vcpo_more, capped = 0.0, 0, [], [], 0
    smallest, largest = np.inf, 0.0
    for g in MINIMISER_GROUP_SIZES:
        for eps in MINIMISER_EPS:
            for sigma in MINIMISER_SIGMAS:
                for _ in range(MINIMISER_REPEATS):
                    rho = np.exp(rng.normal(scale=sigma, size=g))
                    smallest, largest = min(smallest, rho.min()), max(largest, rho.max())
                    scale = max(float(rho.mean()), 1.0)
                    lp = linprog(
                        -rho / (g * scale),
                        A_ub=[rho / (g * scale)],
                        b_ub=[(1 + eps) / scale],
                        bounds=[(0, 1)] * g,
                        method="highs",
                    )
                    best = -float(lp.fun) * scale  # largest kept mass over the class
                    rho_bar = float(rho.mean())
                    gmc = rho_bar * min(1.0, cap_multiplier * (1 + eps) / rho_bar)
                    worst_gap = max(worst_gap, abs(gmc - best) / scale)
                    removed = {
                        "gmc": rho_bar - gmc,
                        "tic": float(np.mean(rho * (rho > 1 + eps))),
                        "vcpo": float(np.mean(rho - np.minimum(rho, 1 + eps))),
                    }
                    if removed["gmc"] > 1e-12 * scale:
                        capped += 1
                        tic_more.append(removed["tic"] / removed["gmc"])
                        vcpo_more.append(removed["vcpo"] / removed["gmc"])
                    n += 1
    ok = worst_gap < 1e-7
    below = min(min(tic_more), min(vcpo_more)) >= 1 - 1e-9
    return Check(
        VERIFIED if ok and below else REFUTED,
        f"Linear programs of eq. 8 over all weightings w ∈ [0,1]^G (scipy HiGHS) on {n} groups: "
        f"G = {', '.join(map(str, MINIMISER_GROUP_SIZES))}, ε = "
        f"{', '.join(f'{e:g}' for e in MINIMISER_EPS)}, log-normal ratios of spread σ = "
        f"{', '.join(f'{x:g}' for x in MINIMISER_SIGMAS)} (ratios from {short(smallest, 2)} to "
        f"{short(largest, 2)}). "
        f"GMC's kept mass min{{ρ̄, 1+ε}} equals the LP optimum to {short(worst_gap, 2)} "
        "(relative), so among all estimators of the class it removes the least importance mass, "
        f"i.e. minimises the bound K_b·(removed mass). In the {capped} groups where GMC removes "
        f"mass, TIC removes {short(float(np.median(tic_more)))}× as much (median; "
        f"{short(min(tic_more))} to {short(max(tic_more))}), VCPO with c = 1+ε "
        f"{short(float(np.median(vcpo_more)))}× ({short(min(vcpo_more))} to "
        f"{short(max(vcpo_more))}).",
        sp.Min(chain.RHOBAR, chain.ONEP),
        {
            "groups": n,
            "max_gap": worst_gap,
            "tic_over_gmc_median": float(np.median(tic_more)),
            "vcpo_over_gmc_median": float(np.median(vcpo_more)),
        },
        reason="linear programs over every weighting of the class could have kept more mass "
        "than GMC (or TIC and VCPO less)",
    )
