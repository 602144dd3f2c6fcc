"""Checks of the §4.2 proof chain and Theorems 1-2: the removed-mass steps (GMC, TIC), the KL
drift step, the parameter drift, the theorems' exponents (reconstructed from our chain) and `C`
entering only through `log C`.

Each `check_*` takes the claimed constant or exponent as a parameter and returns a
`theory.verdicts.Check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import sympy as sp

from gmc_grpo.defaults import PAPER_EPS
from theory import adversarial, chain, numerics, symbolic
from theory.bounds import (
    theorem_terms,
)
from theory.constants import c_eps, gmc_denominator, tight_gmc_denominator
from theory.divergences import (
    gmc_removed_mass,
    kl_divergence,
    near_extremal_distribution,
    tic_removed_mass,
)
from theory.run_rows import RunFinding, joined
from theory.trees import (
    tabular_tree,
    trajectory_kl,
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
    short,
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
        f"{search.evaluations} evaluations) reaches {short(search.ratio, 5)} of (TL/2)‖Δθ‖², i.e. "
        f"{short(attained, 5)} of the claimed bound: the factor T is tight (tabular trees, whose "
        f"parameters are not shared, reach only {short(tab)} of it).",
        chain.kl_drift_factor() * chain.DTHETA2,
        {"fraction_reached": search.ratio, "tabular_fraction": tab},
        reason="an exact adversarial search on shared-parameter trees could have exceeded (TL/2)‖Δθ‖²",
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
        f"two-point laws at ε = 0.01, 0.28, 1, 5 reach {short(attained, 4)} of the bound (the tight "
        "constant κ_ε > log(1+2ε) is ours), so a denominator more than "
        f"{short(1 / attained, 4)} × log(1+2ε) is refuted. Random 4-point law: removed mass at "
        f"G = 1, 2, 3: {', '.join(short(m) for m in masses)} ≤ KL/κ = "
        f"{short(kl / float(tight_gmc_denominator(PAPER_EPS)))}.",
        sp.log(1 + 2 * chain.EPS),
        {"fraction_reached": attained, "interval_cells": cells},
        reason="near-extremal two-point laws and interval arithmetic could have exceeded D/log(1+2ε)",
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
        f"laws reach {short(attained, 5)} of the bound at ε = 0.01, 0.28, 1, 5: any larger "
        "denominator is refuted.",
        symbolic.c_eps_expr(),
        {"fraction_reached": attained},
        reason="near-extremal two-point laws could have exceeded D/c_ε",
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


def check_theorem(method: str = "gmc", runs: Sequence[RunFinding] = (), **claimed: float) -> Check:
    """Theorem 1 (`gmc`) / 2 (`tic`): each term's exponents, reconstructed from the §4.2 chain;
    with `runs` (the findings the evidence layer hands this row, `evidence.checks_runs.
    theorem_part`) the explicit bounds beside the measurements.

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
    match = all(equal(derived[k], want[k]) for k in want)
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
        + ", ".join(f"{t} {s}: {derived[(t, s)]}/{short(float(want[(t, s)]))}" for t, s in want)
        + ". Without the delay-regularity condition (both fourth-moment factors pathwise) the "
        f"power would be 4. Numeric evaluators agree with the sympy chain to {short(twin, 2)}."
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
    runs_text, contradicted, found = joined(runs)
    measured = ok and not contradicted and found.get("bite_holds", 0) > 0
    verdict = (
        REFUTED
        if contradicted
        else VERIFIED
        if measured
        else RECONSTRUCTED
        if ok
        else NOT_REPRODUCED
    )
    reason = (
        "measured below its explicit bound (our constants, our reconstruction of the §4.2 chain) "
        f"in {found.get('bite_holds')} of {found.get('bite_checks')} toy runs at the "
        "bound-minimising step whose bound lies below the ceiling, where a measurement above it "
        "would have refuted it"
        if measured
        else "the exponents come from our reconstruction of the §4.2 chain (the (1+ε)³ from our "
        "choice of one pathwise and one mean factor); no computation could contradict them"
    )
    return Check(
        verdict,
        text + runs_text,
        terms.total,
        {f"{t}_{names[sym]}": float(v) for (t, sym), v in derived.items()} | found,
        reason=reason,
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
        RECONSTRUCTED if ok else NOT_REPRODUCED,
        "Symbolically, after replacing log C by a new symbol no C is left in "
        + ", ".join(f"{k} ({'yes' if v else 'no'})" for k, v in flags.items())
        + ". C enters through the pathwise bounds only (score ≤ T√(2L log C)): the delay term "
        f"carries log²C, so raising C from 10 to 1e12 multiplies it by {short(growth, 4)} = "
        "(12/1)². Proposition 1 is free of C (entropy ≤ log|A|).",
        theorem_terms_expr_delay(),
        {"growth_10_to_1e12": growth},
        reason="a property of our reconstructed chain (C enters through the pathwise score bound); nothing computed could contradict it",
    )


def theorem_terms_expr_delay() -> sp.Expr:
    """The delay term of Theorem 1 with explicit constants (the `log^2 C` is visible)."""
    return chain.theorem_terms().delay
