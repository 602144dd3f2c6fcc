"""Where the proof loses: the slack of each step of the §4.2 chain on a tracked toy run.

The delay term of Theorems 1-2 bounds the measured `T^2 ||b_n||^2` through a chain of
inequalities (`theory.chain`; ours where the paper prints no constant). Squared, as the theorem
uses it, each step is a factor between a smaller and a larger side, both recorded by a tracked
run (`toy_mdps.train.bounds`) at its recorded steps:

| step | smaller side | larger side |
| --- | --- | --- |
| 1. Proposition 1, bias | `||b_n||^2` | `(K_b E[m_n])^2`, `K_b = R sqrt(2 L log C_n)` |
| 2. removed mass | `E[m_n]^2` | `(KL_n / den)^2` |
| 3. KL drift | `KL_n^2` | `((T L / 2) ||theta_n - theta_{n-tau}||^2)^2` |
| 4. drift | `||theta_n - theta_{n-tau}||^2` | `eta^2 tau^2 M` (Proposition 1's `M`) |
| 5. squaring, pathwise factor | `||theta_n - theta_{n-tau}||^2` | `eta^2 tau^2 P`, `P = 2(1+eps)^2 R^2 L log C_n` |

and, inside step 4, Proposition 1 itself: the measured `E[||g_n||^2 | F_n^-]` against `M`. Each
factor is the ratio of the two sides' means over the run's *stale* recorded steps (lag > 0) and
its seeds; the product of steps 1-5 is the chain's total at those steps (`T^2` cancels). Step 1 is
left out where the squared bias is not resolved (the mean of its intervals' lower ends is not
above zero: the estimate is sampling noise around a bias too small to measure). Beside
it, the run-level ratio the bounds table shows: the theorem's delay term over the measured
`T^2 mean ||b_n||^2`. A factor is `None` when its smaller side has no positive mean (no group
was capped: GMC and TIC removed nothing, steps 1 and 2 are not measurable).

Lemma 1's own slack (its right-hand side with measured moments over the measured metric) and the
theorem's total over the measured metric are reported with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from evidence.measured import RunBounds, coverage
from gmc_grpo.methods import get_method
from theory.bounds import (
    bias_per_removed_mass,
    denominator,
    second_moment_bound,
    update_norm_sq_bound,
)
from toy_mdps.train.run_records import RunSeries, load_series

STEPS = (
    ("bias", "1. ||b|| <= K_b E[m] (Prop. 1, bias)"),
    ("removed_mass", "2. E[m] <= KL / den"),
    ("kl", "3. KL <= (TL/2)||dtheta||^2"),
    ("drift", "4. ||dtheta||^2 <= eta^2 tau^2 M"),
    ("pathwise", "5. squaring: ||dtheta||^2 <= eta^2 tau^2 P"),
)
SECOND_MOMENT = ("second_moment", "Prop. 1: E||g||^2 <= M (inside step 4)")
LABELS = dict((*STEPS, SECOND_MOMENT))
# the same steps for Markdown tables: `$...$` math, no `|` (it would split a table cell)
LATEX = {
    "bias": r"1. $\Vert b\Vert\le K_b\mathbb{E}[m]$",
    "removed_mass": r"2. $\mathbb{E}[m]\le\mathrm{KL}/\mathrm{den}$",
    "kl": r"3. $\mathrm{KL}\le\frac{TL}{2}\Vert\Delta\theta\Vert^2$",
    "drift": r"4. $\Vert\Delta\theta\Vert^2\le\eta^2\tau^2M$",
    "pathwise": r"5. squaring: $\Vert\Delta\theta\Vert^2\le\eta^2\tau^2P$",
    "second_moment": r"Prop. 1: $\mathbb{E}\Vert g\Vert^2\le M$ (inside 4)",
}


def _factor(larger: np.ndarray, smaller: np.ndarray) -> float | None:
    """Ratio of the sides' means; None unless both are positive (nothing removed: the bias is
    zero up to sampling noise, and steps 1-2 compare nothing)."""
    lo, hi = float(np.nanmean(smaller)), float(np.nanmean(larger))
    return hi / lo if lo > 0 and hi > 0 else None


def run_slack(result: RunBounds, series: RunSeries | None = None) -> dict[str, Any] | None:
    """The chain's slack for one tracked run of a method with a theorem (module docstring);
    None for other runs or a run without stale recorded steps."""
    spec = get_method(result.method)
    c = result.constants
    if spec.removed_mass_bound is None or c["eps"] is None:
        return None
    series = series or load_series(result.run_dir)
    ev, rec, marks = series.every, series.recorded, series.recorded_steps
    if marks.size == 0:
        return None
    stale = ev["lag"][:, marks] > 0  # [S, R]
    if not stale.any():
        return None
    T, L, R, eta, eps = c["T"], c["L"], c["R"], c["eta"], c["eps"]
    cover = coverage(ev["log_coverage"][:, marks])
    k_b = np.asarray(bias_per_removed_mass(R, L, cover))
    den = float(denominator(eps, spec.removed_mass_bound))
    m_bound = float(second_moment_bound(eps, T, L, R, c["vocab_size"], "paper"))
    pathwise = np.asarray(update_norm_sq_bound(eps, R, L, cover))
    drift = ev["drift_sq"][:, marks]
    tau2 = ev["lag_sq"][:, marks]

    def at(x: np.ndarray) -> np.ndarray:
        return np.where(stale, x, np.nan)

    removed, kl, bias_sq = rec["removed_mass"], rec["kl_mean"], rec["bias_sq"]
    # the squared bias is a U-statistic: where its interval's lower ends are not above zero on
    # average, the measured bias is sampling noise and step 1 compares nothing
    resolved = float(np.nanmean(at(rec["bias_sq_lo"]))) > 0
    factors = {
        "bias": _factor(at((k_b * removed) ** 2), at(bias_sq)) if resolved else None,
        "removed_mass": _factor(at((kl / den) ** 2), at(removed**2)),
        "kl": _factor(at((T * L / 2.0 * drift) ** 2), at(kl**2)),
        "drift": _factor(at(eta**2 * tau2 * m_bound), at(drift)),
        "pathwise": _factor(at(eta**2 * tau2 * pathwise), at(drift)),
        "second_moment": _factor(at(np.full_like(drift, m_bound)), at(rec["second_moment"])),
    }
    chain = [factors[k] for k, _ in STEPS]
    total = math.prod(chain) if all(f is not None for f in chain) else None
    delay = result.terms.get("delay", {})
    measured_delay = delay.get("measured", {}).get("mean")
    bound_delay = delay.get("paper", {}).get("bound")
    lemma = result.lemma1
    return {
        "run": result.name,
        "method": result.method,
        "eta": eta,
        "delay": series.config.get("delay"),
        "schedule": series.config.get("schedule"),
        "stale_steps": int(stale[0].sum()),
        "factors": factors,
        "decades": {k: log10_or_none(f) for k, f in factors.items()},
        "chain_total": total,
        "measured_bias_term": float(np.nanmean(at(bias_sq))) * T**2,
        "run_delay_ratio": (
            bound_delay / measured_delay
            if bound_delay and measured_delay and measured_delay > 0
            else None
        ),
        # the measured delay term's interval over seeds excludes 0: the ratio's denominator is
        # resolved from sampling noise (else the ratio is marked, not read as a slack)
        "run_delay_resolved": bool(delay.get("measured", {}).get("lo", 0.0) > 0),
        "lemma1_slack": (
            lemma["rhs_with_measured_moments"]["mean"] / lemma["measured_total"]["mean"]
            if lemma
            else None
        ),
        "theorem_slack": (
            result.terms["total"]["paper"]["bound"] / result.terms["total"]["measured"]["mean"]
            if "paper" in result.terms.get("total", {})
            else None
        ),
    }


def chain_slack(results: Sequence[RunBounds]) -> list[dict[str, Any]]:
    """`run_slack` of every run it applies to, in the order given."""
    return [s for r in results if (s := run_slack(r)) is not None]


def slack_summary(slacks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per step: the median and range of the decades over the runs where it is measurable, and
    the number of runs; the step that loses most (largest median)."""
    out: dict[str, Any] = {"runs": len(slacks), "steps": {}}
    for key, label in (*STEPS, SECOND_MOMENT):
        values = [s["decades"][key] for s in slacks if s["decades"][key] is not None]
        out["steps"][key] = {
            "label": label,
            "runs": len(values),
            "median": float(np.median(values)) if values else None,
            "min": min(values) if values else None,
            "max": max(values) if values else None,
        }
    measured = [(k, v["median"]) for k, v in out["steps"].items() if k != "second_moment"]
    measured = [(k, m) for k, m in measured if m is not None]
    if measured:
        out["largest"] = max(measured, key=lambda kv: kv[1])[0]
    return out


def log10_or_none(x: float | None) -> float | None:
    """`log10(x)`, None for a missing or non-positive `x`."""
    return None if x is None or not x > 0 else math.log10(x)
