"""The headline checks of a sweep: group-size slopes and the paper's claims, from the table rows.

Slopes. For each `(method, staleness, eps)` the squared bias is regressed on `G` in log-log by
weighted least squares, `log bias_sq = a + slope log G`, with the delta-method variance
`(se / bias_sq)^2` of each point (`se` = interval half-width / z; replicate seeds averaged first).
Only points whose squared bias is significantly positive (`bias_sq > z se`) enter the fit -- the
log of a bias indistinguishable from zero is undefined -- and the number left out is reported
(`n_zero`). The slope's standard error is inflated by `sqrt(chi^2 / dof)` when the points scatter
more than their errors allow; the interval is normal at the sweep's confidence level.

`summarise_sweep` returns the results (numbers, intervals, verdicts, and each claim's wording in
plain text and in LaTeX); the pipeline renders them (`pipeline.toy_report.sweep_claims_markdown`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from gmc_grpo.defaults import PAPER_EPS
from gmc_grpo.methods import get_method
from gmc_grpo.stats import holm_adjust, normal_quantile, paired_t_test
from toy_mdps.sweep.config import SweepConfig

# the denominators of §4.2's removed-mass bounds, as the claims print them (plain text, LaTeX)
BOUND_TEXT = {"gmc": "log(1+2 eps)", "tic": "c_eps"}
BOUND_LATEX = {"gmc": r"\log(1+2\epsilon)", "tic": r"c_\epsilon"}


def _se(row: dict[str, Any], z: float) -> float:
    return (float(row["estimator/bias_sq_hi"]) - float(row["estimator/bias_sq_lo"])) / (2 * z)


def bias_by_group_size(
    rows: list[dict[str, Any]], method: str, staleness: float, eps: float | None, z: float
) -> list[tuple[int, float, float]]:
    """`[(G, mean bias_sq over seeds, its se)]` sorted by `G`."""
    by_g: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        if r["method"] != method or float(r["staleness"]) != float(staleness):
            continue
        if (r["eps"] is None) != (eps is None) or (eps is not None and float(r["eps"]) != eps):
            continue
        by_g[int(r["group_size"])].append((float(r["estimator/bias_sq"]), _se(r, z)))
    out = []
    for g in sorted(by_g):
        vals = by_g[g]
        n = len(vals)
        mean = sum(v for v, _ in vals) / n
        se = math.sqrt(sum(s * s for _, s in vals)) / n
        out.append((g, mean, se))
    return out


def fit_log_log_slope(points: list[tuple[int, float, float]], z: float) -> dict[str, Any]:
    """WLS slope of `log bias_sq` on `log G` over significantly positive points (module doc)."""
    used = [(g, v, s) for g, v, s in points if v > z * s and v > 0]
    result: dict[str, Any] = {
        "n_points": len(used),
        "n_zero": len(points) - len(used),
        "group_sizes_used": [g for g, _, _ in used],
        "slope": None,
        "slope_lo": None,
        "slope_hi": None,
    }
    if len(used) < 2:
        return result
    xs = [math.log(g) for g, _, _ in used]
    ys = [math.log(v) for _, v, _ in used]
    ws = [(v / s) ** 2 if s > 0 else 1e12 for _, v, s in used]
    sw = sum(ws)
    xw = sum(w * x for w, x in zip(ws, xs, strict=True)) / sw
    yw = sum(w * y for w, y in zip(ws, ys, strict=True)) / sw
    sxx = sum(w * (x - xw) ** 2 for w, x in zip(ws, xs, strict=True))
    slope = sum(w * (x - xw) * (y - yw) for w, x, y in zip(ws, xs, ys, strict=True)) / sxx
    intercept = yw - slope * xw
    se = 1.0 / math.sqrt(sxx)
    if len(used) > 2:
        chi2 = sum(w * (y - intercept - slope * x) ** 2 for w, x, y in zip(ws, xs, ys, strict=True))
        se *= math.sqrt(max(1.0, chi2 / (len(used) - 2)))
    result.update(
        slope=slope, slope_lo=slope - z * se, slope_hi=slope + z * se, intercept=intercept
    )
    return result


def group_size_slopes(
    rows: list[dict[str, Any]], config: SweepConfig, methods: tuple[str, ...] = ("gmc", "tic")
) -> list[dict[str, Any]]:
    """One fitted slope per `(method, staleness, eps)` with at least two group sizes."""
    z = normal_quantile(config.confidence)
    out = []
    if len(config.group_sizes) < 2:
        return out
    for method in methods:
        if method not in config.methods:
            continue
        for staleness in config.staleness_values:
            for eps in config.eps_values:
                points = bias_by_group_size(rows, method, staleness, eps, z)
                if len(points) < 2:
                    continue
                fit = fit_log_log_slope(points, z)
                first, last = points[0], points[-1]
                fit.update(
                    method=method,
                    staleness=staleness,
                    eps=eps,
                    bias_sq_smallest_G=first[1],
                    bias_sq_smallest_G_significant=first[1] > z * first[2],
                    bias_sq_largest_G=last[1],
                    bias_sq_largest_G_significant=last[1] > z * last[2],
                    smallest_G=first[0],
                    largest_G=last[0],
                )
                out.append(fit)
    return out


def _fraction(flags: list[bool]) -> dict[str, Any]:
    return {
        "holds": sum(flags),
        "of": len(flags),
        "fraction": sum(flags) / len(flags) if flags else None,
    }


def gmc_below_tic(
    rows: list[dict[str, Any]], level: float = 0.95, key: str = "estimator/relative_bias_sq"
) -> dict[str, Any]:
    """GMC's squared bias below TIC's at each stale grid point `(staleness, eps, G)`, paired
    over the replicate seeds (each seed is one learning problem; GMC and TIC share its samples).

    The t-interval of `key(GMC) - key(TIC)` over seeds, by default the squared bias relative to
    `||grad J / T||^2` (the seeds' problems differ in scale, their relative biases much less).
    `holds` at a point when the interval lies below 0, `does not hold` when above, else
    `not significant` (always with a single seed). `holds` / `of` count the points where it
    holds, unadjusted. The declared primary comparison is one point (`primary_point`: the
    largest staleness at the paper's `eps` and `G`); the other points are one family, their
    two-sided paired-t p-values Holm-adjusted (`secondary_holm`; each point's `p_holm` and
    `verdict_holm`), so the headline count holds at family-wise level `1 - level`.
    """
    tic = {
        (r["staleness"], r["eps"], r["group_size"], r["seed"]): float(r[key])
        for r in rows
        if r["method"] == "tic" and r.get(key) is not None
    }
    diffs: dict[tuple[Any, Any, Any], dict[Any, float]] = defaultdict(dict)
    for r in rows:
        point = (r["staleness"], r["eps"], r["group_size"], r["seed"])
        if r["method"] == "gmc" and point in tic and r.get(key) is not None:
            diffs[point[:3]][point[3]] = float(r[key]) - tic[point]
    points = []
    for (staleness, eps, g), per_seed in sorted(diffs.items(), key=lambda kv: str(kv[0])):
        stat = paired_t_test(per_seed.values(), level)
        if stat["n"] >= 2 and stat["hi"] < 0:
            result = "holds"
        elif stat["n"] >= 2 and stat["lo"] > 0:
            result = "does not hold"
        else:
            result = "not significant"
        points.append(
            {"staleness": staleness, "eps": eps, "group_size": g, **stat, "verdict": result}
        )
    verdicts = [p["verdict"] for p in points]
    primary = primary_point(points)
    rest = [p for p in points if p is not primary]
    alpha = 1.0 - level
    adjusted = holm_adjust([p["p"] for p in rest])
    for p, adj in zip(rest, adjusted, strict=True):
        p["p_holm"] = adj
        p["verdict_holm"] = (
            "holds"
            if adj < alpha and p["mean"] < 0
            else "does not hold"
            if adj < alpha and p["mean"] > 0
            else "not significant"
        )
    holm = [p["verdict_holm"] for p in rest]
    return {
        "primary": None
        if primary is None
        else {
            k: primary[k]
            for k in ("staleness", "eps", "group_size", "mean", "lo", "hi", "n", "p", "verdict")
        },
        "secondary_holm": {
            "holds": holm.count("holds"),
            "of": len(rest),
            "not_significant": holm.count("not significant"),
            "does_not_hold": holm.count("does not hold"),
            "alpha": alpha,
        },
        "claim": "GMC's relative squared bias < TIC's at a stale grid point (paired over seeds)",
        "claim_markdown": "GMC's relative squared bias $<$ TIC's at a stale grid point "
        "(paired over seeds)",
        "holds": verdicts.count("holds"),
        "of": len(points),
        "not_significant": verdicts.count("not significant"),
        "does_not_hold": verdicts.count("does not hold"),
        "fraction": verdicts.count("holds") / len(points) if points else None,
        "num_seeds": len({s for d in diffs.values() for s in d}),
        "points": points,
    }


PAPER_GROUP_SIZE = 8
"""Appendix B.1: 8 responses per prompt (the group size of the declared primary point)."""


def primary_point(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The declared primary comparison among `gmc_below_tic`'s points: the largest staleness
    (where the claim is about), at the paper's `eps` (`PAPER_EPS`) and group size
    (`PAPER_GROUP_SIZE`) when the grid has them, else the nearest; None without points."""
    if not points:
        return None
    largest = max(p["staleness"] for p in points)
    return min(
        (p for p in points if p["staleness"] == largest),
        key=lambda p: (abs(p["eps"] - PAPER_EPS), abs(p["group_size"] - PAPER_GROUP_SIZE)),
    )


RELIABLE_DRAWS = 100
"""effective draws per prompt, `draws / (1 + max chi^2)`, from which plain IS's interval covers:
below it the sample rarely holds the heavy-tailed ratios and the interval undercovers"""


def summarise_sweep(rows: list[dict[str, Any]], config: SweepConfig) -> dict[str, Any]:
    """`summary.json` of a sweep: slopes and one entry per claim, each with its evidence; a claim
    reads `claim` (plain text, for a terminal) and `claim_markdown` (`$...$` LaTeX, for reports)."""
    z = normal_quantile(config.confidence)
    slopes = group_size_slopes(rows, config)
    stale = [r for r in rows if float(r["ratio/kl_exact"]) > 0]
    claims: dict[str, Any] = {"is_unbiased": _is_unbiased(rows)}
    claims.update(_removed_mass_claims(rows, config))
    claims["class_second_moment_below_prop1"] = _class_second_moment(rows, config)
    claims["grpo_exceeds_prop1"] = _grpo_exceeds(rows)
    claims["kl_drift_bound"] = {
        "claim": "KL <= (T L / 2) ||theta - theta_behavior||^2 (§4.2 step 3)",
        "claim_markdown": r"$\mathrm{KL}\le\frac{TL}{2}\Vert\theta-\theta_{\mathrm{behavior}}\Vert^2$"
        " (§4.2 step 3)",
        **_fraction([bool(r["chain/kl_drift_bound_holds"]) for r in rows]),
    }
    claims["gmc_bias_below_tic"] = gmc_below_tic(stale, config.confidence)
    claims.update(_slope_claims(slopes))
    return {
        "num_rows": len(rows),
        "confidence": config.confidence,
        "z": z,
        "group_size_slopes": slopes,
        "claims": claims,
        "wall_s_rows": sum(float(r.get("perf/wall_s", 0.0)) for r in rows),
    }


def _of(rows: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["method"] == method]


def _is_unbiased(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Plain IS: 0 inside its squared bias's interval, everywhere and where it is reliable."""
    is_rows = _of(rows, "is")
    reliable = [
        r for r in is_rows if float(r.get("estimator/effective_draws", 0.0)) >= RELIABLE_DRAWS
    ]
    return {
        "claim": "plain IS (LOO advantages) is unbiased: 0 inside its bias_sq interval",
        "claim_markdown": "plain IS (leave-one-out advantages) is unbiased: 0 inside the interval "
        r"of its squared bias $\Vert b\Vert^2$",
        **_fraction([float(r["estimator/bias_sq_lo"]) <= 0 for r in is_rows]),
        "holds_where_reliable": sum(float(r["estimator/bias_sq_lo"]) <= 0 for r in reliable),
        "reliable_rows": len(reliable),
        "note": f"reliable: draws per prompt / (1 + max chi^2) >= {RELIABLE_DRAWS}; below that "
        "the sample rarely contains the heavy-tailed ratios and the interval undercovers",
    }


def _removed_mass_claims(rows: list[dict[str, Any]], config: SweepConfig) -> dict[str, Any]:
    """Removed mass below its KL bound, for every swept method whose spec claims one."""
    claims = {}
    bounded = [
        (method, kind)
        for kind in BOUND_TEXT
        for method in config.methods
        if get_method(method).removed_mass_bound == kind
    ]
    for method, kind in bounded:
        mine = _of(rows, method)
        flags = [bool(r["chain/removed_mass_bound_holds"]) for r in mine]
        ratios = [
            float(r["ratio/removed_mass"]) / float(r["chain/removed_mass_bound"])
            for r in mine
            if r["chain/removed_mass_bound"]
        ]
        claims[f"{method}_removed_mass_below_kl_bound"] = {
            "claim": f"{method.upper()} removed mass <= KL / {BOUND_TEXT[kind]} (§4.2 step 2)",
            "claim_markdown": f"{method.upper()} removed mass "
            rf"$\le \mathrm{{KL}}/{BOUND_LATEX[kind]}$ (§4.2 step 2)",
            **_fraction(flags),
            "max_removed_over_bound": max(ratios) if ratios else None,
        }
    return claims


def _class_second_moment(rows: list[dict[str, Any]], config: SweepConfig) -> dict[str, Any]:
    """The weighted class's second moment below Proposition 1's bound (methods whose spec has a
    class cap)."""
    class_methods = [m for m in config.methods if get_method(m).class_cap is not None]
    in_class = [r for r in rows if r["method"] in class_methods]
    names = ", ".join(m.upper() for m in class_methods)
    return {
        "claim": f"{names} second moment <= Prop. 1 bound 8/T (1+eps) L R^2 log|A|",
        "claim_markdown": f"{names} second moment "
        r"$\le \frac{8}{T}(1+\epsilon)LR^2\log\lvert\mathcal{A}\rvert$ (Proposition 1)",
        **_fraction([not bool(r["chain/second_moment_exceeds"]) for r in in_class]),
        "max_ratio_to_bound": max(
            (
                float(r["estimator/second_moment"]) / float(r["chain/second_moment_bound"])
                for r in in_class
            ),
            default=None,
        ),
    }


def _grpo_exceeds(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Vanilla GRPO (outside the class) exceeding Proposition 1's bound where C is large."""
    grpo = _of(rows, "grpo")
    ratio = [
        float(r["estimator/second_moment"]) / float(r["chain/second_moment_bound"]) for r in grpo
    ]
    return {
        "claim": "vanilla GRPO's second moment exceeds Prop. 1's bound when C is large",
        "claim_markdown": "vanilla GRPO's second moment exceeds Proposition 1's bound when "
        r"$\mathcal{C}$ is large",
        "exceeds": sum(bool(r["chain/second_moment_exceeds"]) for r in grpo),
        "of": len(grpo),
        "max_ratio_to_bound": max(ratio) if ratio else None,
        "max_C": max((float(r["policy/coverage_C"]) for r in grpo), default=None),
    }


def _slope_claims(slopes: list[dict[str, Any]]) -> dict[str, Any]:
    """GMC's bias shrinks with `G` and TIC's persists, over the stale slopes whose smallest `G`
    has a significant bias."""
    stale_slopes = [s for s in slopes if s["staleness"] != 0]

    def shrinks(s: dict[str, Any]) -> bool:
        if s["slope_hi"] is not None and s["slope_hi"] < 0:
            return True
        return bool(s["bias_sq_smallest_G_significant"] and not s["bias_sq_largest_G_significant"])

    def fits(method: str) -> list[dict[str, Any]]:
        return [
            s for s in stale_slopes if s["method"] == method and s["bias_sq_smallest_G_significant"]
        ]

    gmc_slopes, tic_slopes = fits("gmc"), fits("tic")
    return {
        "gmc_bias_shrinks_with_G": {
            "claim": "GMC's bias shrinks as G grows (slope interval < 0, or vanishes at the "
            "largest G)",
            "claim_markdown": "GMC's bias shrinks as $G$ grows (slope interval $<0$, or vanishes "
            "at the largest $G$)",
            **_fraction([shrinks(s) for s in gmc_slopes]),
            "points_per_fit": sorted({s["n_points"] for s in gmc_slopes}),
        },
        "tic_bias_persists_with_G": {
            "claim": "TIC's bias persists at the largest G (significantly > 0)",
            "claim_markdown": "TIC's bias persists at the largest $G$ (significantly $>0$)",
            **_fraction([bool(s["bias_sq_largest_G_significant"]) for s in tic_slopes]),
            "points_per_fit": sorted({s["n_points"] for s in tic_slopes}),
        },
    }
