"""How far the explicit bounds sit above the toy runs' measurements, and whether a run could have
contradicted them at all.

A bound on `(1/N) sum_n ||grad J(theta_n)||^2` is **vacuous** for a run when it exceeds the
a-priori ceiling `T L R^2 log|A| / 2` (`theory.bounds.gradient_norm_sq_ceiling`, ours): no run's
measurement can exceed the ceiling, so no outcome could have contradicted the bound, and its
"holding" is not a passed check. Beside it: the slack in decades, `log10(bound / measured)`.

`theorem_vacuity(results)` summarises Theorems 1-2 (explicit constants, `evidence.measured`) over
the runs in the theorems' setting: per run the decades and the vacuity with Proposition 1's
constant 8 and with our 2, and the same without the delay term (`optimisation + variance`);
the runs with `eta <= 1/L_J` (`L_J` the smoothness behind Lemma 1: the regime the descent
lemma favours) are summarised apart. `lemma1_ratios(results)` gives Lemma 1 with the measured
moments: measured total over the right-hand side, a consistency check (a right-hand side above
the ceiling is vacuous and not counted as holding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from evidence.measured import SMOOTHNESS_CHECK, RunBounds
from theory.bounds import gradient_norm_sq_ceiling, objective_smoothness


def _decades(bound: float, measured: float) -> float:
    return math.log10(bound / measured) if bound > 0 and measured > 0 else math.inf


def run_vacuity(result: RunBounds) -> dict[str, Any] | None:
    """One run in the setting with theorem terms: decades and vacuity (module docstring)."""
    if not result.in_setting or "paper" not in result.terms.get("total", {}):
        return None
    c = result.constants
    ceiling = float(gradient_norm_sq_ceiling(c["T"], c["L"], c["R"], c["vocab_size"]))
    smooth = float(objective_smoothness(c["T"], c["R"], c["L"], c["vocab_size"]))
    measured = float(result.terms["total"]["measured"]["mean"])
    out: dict[str, Any] = {
        "run": result.name,
        "method": result.method,
        "eta": c["eta"],
        "N": c["N"],
        "tau4": c["tau4"],
        "eta_L_J": c["eta"] * smooth,
        "small_step": c["eta"] * smooth <= 1.0,
        "measured": measured,
        "ceiling": ceiling,
    }
    for const in ("paper", "ours"):
        terms = {t: float(result.terms[t][const]["bound"]) for t in result.terms}
        without_delay = terms["optimisation"] + terms["variance"]
        out[const] = {
            "bound": terms["total"],
            "decades": _decades(terms["total"], measured),
            "vacuous": terms["total"] >= ceiling,
            "delay_share": terms["delay"] / terms["total"],
            "without_delay": without_delay,
            "without_delay_decades": _decades(without_delay, measured),
            "without_delay_vacuous": without_delay >= ceiling,
        }
    return out


def _spread(values: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=np.float64)
    return {"min": float(arr.min()), "median": float(np.median(arr)), "max": float(arr.max())}


def theorem_vacuity(results: Sequence[RunBounds], method: str | None = None) -> dict[str, Any]:
    """Summary over the runs in the setting (optionally of one method): counts, the decades'
    min/median/max with both constants, and the small-step (`eta L_J <= 1`) runs apart."""
    runs = [v for r in results if (v := run_vacuity(r)) is not None]
    if method is not None:
        runs = [v for v in runs if v["method"] == method]
    out: dict[str, Any] = {"runs": len(runs), "per_run": runs}
    if not runs:
        return out
    for part, chosen in (("all", runs), ("small_step", [v for v in runs if v["small_step"]])):
        if not chosen:
            out[part] = {"runs": 0}
            continue
        out[part] = {"runs": len(chosen)}
        for const in ("paper", "ours"):
            out[part][const] = {
                "vacuous": sum(v[const]["vacuous"] for v in chosen),
                "decades": _spread([v[const]["decades"] for v in chosen]),
                "without_delay_vacuous": sum(v[const]["without_delay_vacuous"] for v in chosen),
                "without_delay_decades": _spread(
                    [v[const]["without_delay_decades"] for v in chosen]
                ),
                "delay_share_min": min(v[const]["delay_share"] for v in chosen),
            }
    out["refuted"] = sum(v["paper"]["bound"] < v["measured"] for v in runs)
    return out


def lemma1_ratios(results: Sequence[RunBounds]) -> dict[str, Any]:
    """Lemma 1 with the measured moments (a consistency check: `evidence.measured`), over the runs
    in the setting: measured total over the right-hand side per run and its min/median/max;
    `vacuous` the runs whose right-hand side reaches the ceiling (not counted as holding),
    `holds` the others whose paired interval allows the bound, `violated` those whose does not;
    each term's share of the right-hand side (min/median/max); how many runs carry moments at
    every step (`every_step`) and the spread of the recorded steps per run (`moment_steps`)."""
    inside = [r for r in results if r.in_setting and r.lemma1]
    ratios = [
        r.lemma1["measured_total"]["mean"] / r.lemma1["rhs_with_measured_moments"]["mean"]
        for r in inside
    ]
    vacuous = [bool(r.lemma1.get("vacuous", False)) for r in inside]
    out: dict[str, Any] = {
        "runs": len(inside),
        "vacuous": sum(vacuous),
        "holds": sum(
            bool(r.lemma1["holds"]) and not v for r, v in zip(inside, vacuous, strict=True)
        ),
        "violated": sum(not r.lemma1["holds"] for r in inside),
        "every_step": sum(
            r.lemma1.get("moment_steps", 0) >= r.lemma1.get("steps", math.inf) for r in inside
        ),
        "per_run": {r.name: x for r, x in zip(inside, ratios, strict=True)},
        "vacuous_runs": [r.name for r, v in zip(inside, vacuous, strict=True) if v],
    }
    if inside and all("shares" in r.lemma1 for r in inside):
        out["shares"] = {
            t: _spread([r.lemma1["shares"][t] for r in inside])
            for t in ("optimisation", "variance", "delay")
        }
        out["moment_steps"] = _spread([r.lemma1["moment_steps"] for r in inside])
    if ratios:
        out["ratio"] = _spread(ratios)
        small = [
            x
            for r, x in zip(inside, ratios, strict=True)
            if r.constants["eta"]
            * float(
                objective_smoothness(
                    r.constants["T"], r.constants["R"], r.constants["L"], r.constants["vocab_size"]
                )
            )
            <= 1.0
        ]
        if small:
            out["small_step_ratio"] = _spread(small)
    return out


def smoothness_summary(results: Sequence[RunBounds]) -> dict[str, Any]:
    """Lemma 1's descent step tested directly at every step (`evidence.measured`'s
    `SMOOTHNESS_CHECK`): runs, steps evaluated, violations, and the largest measured curvature
    `-2 r_n / ||dtheta||^2` over `L_J` (how much of `L_J` any step used)."""
    entries = [r.checks[SMOOTHNESS_CHECK] for r in results if SMOOTHNESS_CHECK in r.checks]
    used = [
        r.smoothness["max_curvature_over_L_J"]
        for r in results
        if r.smoothness.get("max_curvature_over_L_J") is not None
    ]
    return {
        "runs": len(entries),
        "evaluated": sum(e["evaluated"] for e in entries),
        "violations": sum(e["violations"] for e in entries),
        "max_curvature_over_L_J": max(used) if used else None,
    }
