"""What each verdict of the claims table rests on (issue 31): the kind of its evidence.

A verdict such as `verified` pools unlike evidence; this module says, per row, which kind backs
it, so every count can name its kinds:

* `search`: a proof (ours or the paper's) checked by a search that reaches near the bound's
  extremum; `nearness` says how near (the fraction of the bound the search reached);
* `algebra`: exact algebra, limits or numeric minimisation of the printed expressions;
* `exact`: an exact computation or enumeration on constructed examples;
* `measured`: a measurement on toy runs that could have exceeded its bound (the bound below
  the a-priori ceiling);
* `comparison`: a measured comparison with paired intervals over seeds;
* `non-binding`: consistent with a bound that no run could reach (a vacuous or far-off bound);
* `derivation`: our derivation from the paper's ingredients, nothing computed could contradict it;
* `tautology`: true by construction (class membership of the estimators' own coefficients, an
  optimum of the linear program that defines the estimator, code against its own twin): checked
  in the tests, **not counted**;
* `merged`: the same statement as another row (row 27, the second moment uniform in the delay,
  is Proposition 1's bound, which holds for every behavior policy): shown with that row's
  verdict and nearness, **not counted** again.

`evidence_kind(row)` gives `{kind, counted, nearness, note}` for one row of
`theory.claims.evaluate_claims`; `kind_counts(rows)` counts each kind per section (tautologies
and merged rows apart, as `not_counted`). The mapping is ours, row by row, and fixed here; the dynamic rows are
Theorems 1-2 (measured where a run at the bound-minimising step had a bound below the ceiling,
`evidence.bite`; non-binding where every run's bound was vacuous), the drift (measured) and the
rows without runs (`needs runs`: no kind yet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SEARCH, ALGEBRA, EXACT = "search", "algebra", "exact"
MEASURED, COMPARISON, NON_BINDING = "measured", "comparison", "non-binding"
DERIVATION, TAUTOLOGY, MERGED = "derivation", "tautology", "merged"
KINDS = (SEARCH, ALGEBRA, EXACT, MEASURED, COMPARISON, NON_BINDING, DERIVATION, TAUTOLOGY, MERGED)
# kinds whose rows are shown but not counted
NOT_COUNTED = (TAUTOLOGY, MERGED)
KIND_MEANINGS = {
    SEARCH: "a proof checked by a search that reaches near its extremum (nearness: the fraction "
    "of the bound reached)",
    ALGEBRA: "exact algebra, limits or numeric minimisation of the printed expressions",
    EXACT: "an exact computation or enumeration on constructed examples",
    MEASURED: "a measurement on toy runs that could have exceeded its bound",
    COMPARISON: "a measured comparison with paired intervals over seeds",
    NON_BINDING: "consistent with a bound no run could reach (vacuous or far above every run)",
    DERIVATION: "our derivation from the paper's ingredients; nothing computed could contradict it",
    TAUTOLOGY: "true by construction; checked in the tests, not counted",
    MERGED: "the same statement as another row, graded there (its nearness that row's); not "
    "counted again",
}

# row key -> (kind, the evidence field that says how near a search came, note)
STATIC_KINDS: dict[str, tuple[str, str | None, str]] = {
    "lemma1": (SEARCH, "smoothness_fraction_reached", "the smoothness search on small trees"),
    "prop1_second_moment": (
        SEARCH,
        "fraction_of_paper",
        "adversarial search, constant 8; the search over eq. 5's whole class (|A| >= 3, "
        "G >= 4) reaches class_fraction_of_paper",
    ),
    "prop1_bias": (SEARCH, "fraction_reached", ""),
    "class_tic_gmc": (
        TAUTOLOGY,
        None,
        "TIC's and GMC's coefficients meet the cap by construction",
    ),
    "class_vcpo": (EXACT, None, "exact group masses"),
    "grpo_outside": (
        SEARCH,
        "fraction_reached",
        "upper bound: our proof of C^2 R^2 S^2 checked by a search (nearness: its pathwise "
        "fraction); one coverage-C family attains C^2 (a lower bound)",
    ),
    "is_unbiased": (EXACT, None, ""),
    "prop2": (TAUTOLOGY, None, "GMC is the optimum of the linear program that defines it"),
    "gmc_removed_mass": (SEARCH, "fraction_reached", "near-extremal two-point laws"),
    "tic_removed_mass": (SEARCH, "fraction_reached", "near-extremal two-point laws"),
    "kl_drift": (SEARCH, "fraction_reached", ""),
    "drift": (MEASURED, None, "drift below eta^2 tau^2 M and the measured-moment bound"),
    "c_through_log": (DERIVATION, None, ""),
    "c_eps_below": (ALGEBRA, None, "interval arithmetic and a sign proof"),
    "denominator_orders": (ALGEBRA, None, ""),
    "penalties": (ALGEBRA, None, ""),
    "improvement_factor": (ALGEBRA, None, ""),
    "tuned_rate": (ALGEBRA, None, ""),
    "corollary1": (
        ALGEBRA,
        None,
        "minimises the tuned surrogate; the exact minimiser of Theorem 1's bound scales as "
        "tau4^(1/3) N^(-1/2) (row 33), and eps* is censored in most toy-learner cells",
    ),
    "delay_tolerance": (ALGEBRA, None, ""),
    "large_delay": (ALGEBRA, None, ""),
    "corollary2": (DERIVATION, None, ""),
    "group_bias": (SEARCH, None, "exact bias vectors over many policy pairs"),
    "delay_regularity": (
        COMPARISON,
        None,
        "pooled and per lag (Holm over lags); a drift-gated WorkerSchedule (negative control, "
        "toy_mdps.train.drift_control, in the tests) is rejected",
    ),
    "uniform_second_moment": (
        MERGED,
        "fraction_of_paper",
        "merged into Proposition 1 (second moment): the same statement; the runs' comparison "
        "cannot bind (the bound lies decades above every measured second moment)",
    ),
    "gmc_minimiser": (TAUTOLOGY, None, "GMC is defined as this minimiser"),
    "ours_prop1_constant": (SEARCH, "fraction_reached", ""),
    "ours_bias_constant": (SEARCH, "fraction_reached", ""),
    "ours_explicit_theorem": (TAUTOLOGY, None, "a code twin: evaluators against our sympy chain"),
    "ours_tight_constants": (SEARCH, "fraction_reached", ""),
    "ours_joint_minimiser": (ALGEBRA, None, ""),
    "ours_centered": (EXACT, None, ""),
    "ours_grpo_mean": (EXACT, None, ""),
    "ours_group_removed_mass": (SEARCH, None, "exact binomial removed mass over searched laws"),
    "ours_tic_bias_constant_in_g": (EXACT, None, ""),
}


def evidence_kind(row: dict[str, Any]) -> dict[str, Any]:
    """`{kind, counted, nearness, note}` of one claims-table row (module docstring); `kind` is
    None for a row that still needs runs or has no entry here."""
    key, verdict = str(row.get("key", "")), str(row["verdict"])
    evidence = row.get("evidence") or {}
    if verdict == "needs runs" or key not in STATIC_KINDS and key not in ("theorem1", "theorem2"):
        return {"kind": None, "counted": False, "nearness": None, "note": ""}
    if key in ("theorem1", "theorem2"):
        checks = int(evidence.get("bite_checks", 0) or 0)
        if checks:
            kind, note = MEASURED, f"{checks} runs at the bound-minimising step below the ceiling"
        elif "runs" in evidence:
            kind, note = NON_BINDING, "every run's explicit bound is above the ceiling"
        else:
            kind, note = DERIVATION, "our reconstruction of the §4.2 chain"
        return {"kind": kind, "counted": True, "nearness": None, "note": note}
    kind, near_key, note = STATIC_KINDS[key]
    nearness = evidence.get(near_key) if near_key else None
    return {
        "kind": kind,
        "counted": kind not in NOT_COUNTED,
        "nearness": float(nearness) if isinstance(nearness, int | float) else None,
        "note": note,
    }


def kind_counts(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per section (`paper`, `ours`): how many rows of each kind (every kind named, zeros
    included), the tautologies and merged rows apart as `not_counted`, and `verdicts_by_kind`: each counted
    kind's verdicts."""
    out: dict[str, dict[str, Any]] = {}
    for section in ("paper", "ours"):
        part = [r for r in rows if r["section"] == section]
        kinds = [evidence_kind(r) for r in part]
        counted = {k: 0 for k in KINDS if k not in NOT_COUNTED}
        by_kind: dict[str, dict[str, int]] = {}
        for r, k in zip(part, kinds, strict=True):
            if k["kind"] is None or not k["counted"]:
                continue
            counted[k["kind"]] += 1
            verdicts = by_kind.setdefault(k["kind"], {})
            verdicts[str(r["verdict"])] = verdicts.get(str(r["verdict"]), 0) + 1
        out[section] = {
            "kinds": counted,
            "not_counted": {n: sum(k["kind"] == n for k in kinds) for n in NOT_COUNTED},
            "without_kind": sum(k["kind"] is None for k in kinds),
            "verdicts_by_kind": by_kind,
        }
    return out


def kinds_text(counts: dict[str, Any]) -> str:
    """`"11 search, 8 algebra, ...; not counted: 3 tautology, 1 merged"` for one section's
    `kind_counts`."""
    main = ", ".join(f"{n} {k}" for k, n in counts["kinds"].items() if n) or "no rows"
    apart = ", ".join(f"{n} {k}" for k, n in counts["not_counted"].items() if n)
    return main + (f"; not counted: {apart}" if apart else "")
