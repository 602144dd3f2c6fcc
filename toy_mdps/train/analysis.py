"""Analysis of toy training experiments: the paper's orderings with intervals, and the eps* fit.

An experiment's records are read once (`load_experiment_records`: the results table, every
point's `summary.json`, and for `gmc_tic_gap` the tracked runs' first-order splits) into an
`ExperimentRecords`; the statistics below take those numbers (`PerSeed`: per point, per seed,
its metrics) and return numbers with intervals, opening no file. `ANALYSES` maps each
experiment kind to its analysis, the one place that dispatches on the kind; `analyse` is the
whole step (load, then `analyse_records`). The report text is `toy_mdps.train.report`.

Every comparison between two methods is **paired over seeds**: the learners of one seed share
the initial parameters and the generator seed, so the per-seed difference of a metric is
summarised with a Student-t interval (`gmc_grpo.stats.paired_difference`). Verdicts
(`verdict`), each a test that could fail:

- `holds`: every difference the claim needs has its 95% interval strictly on the claimed side;
- `does not hold`: some difference has its interval strictly on the other side;
- `not significant`: neither (some interval contains 0; the data cannot tell).

"All similar at `D = 0`" is an equivalence claim (`equivalence_verdict`): it holds when every
paired interval of the final-`J` differences among GMC, TIC and GRPO lies inside
`[-SIMILAR_TOL, SIMILAR_TOL]` (1% of the reward range), does not hold when one lies entirely
outside it, and is not significant otherwise. "GRPO degrades with the delay" is paired too (the
learners of one seed share `theta_0` and their generator seed at every delay).

Corollary 1: for each `(N, D)` the empirically best `eps` is the grid value minimising the mean
convergence metric `(1/N) sum ||grad J(theta_n)||^2`, refined by a parabola through it and its
two neighbours in `log eps` when it is interior; `tau4` is the realised mean of `lag^4`. Once
`1 + eps` exceeds every group's mean ratio, GMC *is* IS and the metric is exactly flat (the
seeds share their random numbers); a minimum attained (up to ties, relative `TIE_RTOL`) at the
largest `eps` is therefore **censored** (`eps* >=` the smallest tied value, "no cap is best"),
and one at the smallest `eps` censored from below. The fit, least squares of
`log eps* = c + a log tau4 + b log N` over the *interior* cells only, is reported next to the
paper's `a = 1/7`, `b = -3/14` when at least four interior cells (one residual degree of freedom)
vary in both `tau4` and `N`. The same is repeated with the `eps` of the best final `J`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gmc_grpo import stats
from gmc_grpo.json_files import read_json
from gmc_grpo.stats import interval_text
from toy_mdps.train.config import ExperimentConfig
from toy_mdps.train.workers_analysis import delay_regularity_analysis, mixed_delay_analysis

SIMILAR_TOL = 0.01
"""equivalence margin of "similar at D = 0": 1% of the reward range (rewards lie in [0, 1])"""
TIE_RTOL = 1e-9
"""relative tolerance for tied metric values (GMC equals IS once the cap is never hit)"""
LAG_RATIO_LIMIT = 1.5
"""criterion of "mean realised lag comparable across methods": max / min at most this"""
PAPER_TAU4_EXPONENT = 1.0 / 7.0
PAPER_N_EXPONENT = -3.0 / 14.0
GAP_METHODS = ("gmc", "tic")
"""the pair of `gmc_tic_gap` (§4.3's comparison)"""
PAPER_ORDER = ("gmc", "tic", "grpo")
"""the paper's ordering under delay (Table 3): GMC >= TIC >= GRPO"""
# the convergence metric `(1/N) sum ||grad J(theta_n)||^2` as a formula (Markdown reports)
CONVERGENCE_LATEX = r"$\frac{1}{N}\sum_n\Vert\nabla J(\theta_n)\Vert^2$"

PerSeed = Mapping[str, Mapping[str, Mapping[str, float]]]
"""per point, per seed, its metrics: each point's `summary.json["per_seed"]`"""


# ----------------------------------------------------------------------------------------------
# The records, read once
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentRecords:
    """A finished experiment's records, read once (`load_experiment_records`): what every
    analysis takes, so that no statistic opens a file."""

    config: ExperimentConfig
    rows: list[dict[str, Any]]
    """the results table: one row per point (`toy_mdps.train.run.result_row`)"""
    summaries: dict[str, dict[str, Any]]
    """point -> its `summary.json` (per seed and mean over seeds)"""
    tracked: dict[str, TrackedPoint] = field(default_factory=dict)
    """point -> what its bound tracking gives (`toy_mdps.train.run_records`, `theory.run_terms`), for the tracked
    GMC and TIC runs of a `gmc_tic_gap` experiment"""

    @property
    def per_seed(self) -> dict[str, Mapping[str, Mapping[str, float]]]:
        """Per point, per seed, its metrics (`PerSeed`)."""
        return {point: summary["per_seed"] for point, summary in self.summaries.items()}


def load_experiment_records(
    config: ExperimentConfig, rows: list[dict[str, Any]], out_dir: Path
) -> ExperimentRecords:
    """Read every point's `summary.json` below `out_dir` (and, for an analysis that compares
    first-order splits, the tracked runs' bounds) once."""
    out_dir = Path(out_dir)
    summaries = {
        label: read_json(out_dir / label / "summary.json") for label, _, _ in config.points()
    }
    tracked = {}
    if ANALYSES[config.kind].reads_bounds:
        tracked = _tracked_points(rows, out_dir)
    return ExperimentRecords(config, rows, summaries, tracked)


@dataclass(frozen=True)
class TrackedPoint:
    """What a tracked GMC / TIC run's bounds give the GMC/TIC comparison."""

    first_order: dict[str, Any] | None
    """the first-order split of its metric (`toy_mdps.train.run_records.first_order_identity`), if any"""
    bound: float | None
    """its whole bound (Theorem 1 or 2 with explicit constants and its own constants)"""


def _tracked_points(rows: list[dict[str, Any]], out_dir: Path) -> dict[str, TrackedPoint]:
    """Each tracked GMC / TIC run's first-order split and whole bound, read once: the records by
    `toy_mdps.train.run_records` (the reader beside this track's writer), the bound by
    `theory.run_terms` (numbers in, numbers out; `evidence.measured` computes the same)."""
    from gmc_grpo.methods import get_method
    from theory.run_terms import theorem_at_constants
    from toy_mdps.train.run_records import (
        first_order_split,
        is_tracked_run,
        load_series,
        run_constants,
    )

    out = {}
    for row in rows:
        point = row["point"]
        if row["method"] in GAP_METHODS and is_tracked_run(out_dir / point):
            series = load_series(out_dir / point)
            kind = get_method(series.config["method"]).removed_mass_bound
            paper = theorem_at_constants(kind, run_constants(series)).get("paper")
            bound = None if paper is None else float(paper["total"])
            out[point] = TrackedPoint(first_order_split(series) or None, bound)
    return out


def seed_values(per_seed: PerSeed, point: str, key: str) -> dict[str, float]:
    """`key` of each seed of `point`."""
    return {seed: values[key] for seed, values in per_seed[point].items()}


def paired_difference(
    per_seed: PerSeed, point_a: str, point_b: str, key: str, level: float = 0.95
) -> dict[str, float]:
    """t-interval of the per-seed difference `key(a) - key(b)` (seeds present in both)."""
    return stats.paired_difference(
        seed_values(per_seed, point_a, key), seed_values(per_seed, point_b, key), level
    )


HOLDS, NOT_SIGNIFICANT, DOES_NOT_HOLD = "holds", "not significant", "does not hold"
VERDICTS = (HOLDS, NOT_SIGNIFICANT, DOES_NOT_HOLD)


def verdict(diffs: list[dict[str, float]], sign: float = 1.0) -> str:
    """Verdict for "every difference is on the side `sign`" (see the module docstring).

    `diffs`: paired intervals `{mean, lo, hi}`; `sign = 1`: the claim is `difference > 0`,
    `-1`: `difference < 0`. An interval with a NaN end (fewer than two seeds) is not significant.
    """
    if not diffs:
        return NOT_SIGNIFICANT
    sides = [sorted((sign * d["lo"], sign * d["hi"])) for d in diffs]
    if any(hi < 0 for _, hi in sides):
        return DOES_NOT_HOLD
    if all(lo > 0 for lo, _ in sides):
        return HOLDS
    return NOT_SIGNIFICANT


def equivalence_verdict(diffs: list[dict[str, float]], tolerance: float) -> str:
    """ "Every difference is within `+-tolerance`": holds when every interval lies inside
    `[-tolerance, tolerance]`, does not hold when one lies entirely outside it."""
    if not diffs:
        return NOT_SIGNIFICANT
    if any(d["lo"] > tolerance or d["hi"] < -tolerance for d in diffs):
        return DOES_NOT_HOLD
    if all(-tolerance <= d["lo"] and d["hi"] <= tolerance for d in diffs):
        return HOLDS
    return NOT_SIGNIFICANT


def fmt(stat: dict[str, float], digits: int = 3) -> str:
    """`mean [lo, hi]` (one seed: `mean (1 seed, no interval)`; `gmc_grpo.stats.interval_text`)."""
    return interval_text(stat, f".{digits}f")


def _find(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None


def _ordering(
    per_seed: PerSeed,
    claim: str,
    chain: list[str],
    rows_of: dict[str, dict[str, Any]],
    key: str,
    level: float,
    larger_is_better: bool = True,
    claim_markdown: str | None = None,
) -> dict[str, Any]:
    """`chain[0] >= chain[1] >= ...` on `key` (or `<=` when smaller is better), each step paired
    over seeds; `claim` is plain text, `claim_markdown` the same with `$...$` formulas (default:
    `claim`)."""
    diffs = []
    parts = []
    for hi, lo in zip(chain, chain[1:], strict=False):
        d = paired_difference(per_seed, rows_of[hi]["point"], rows_of[lo]["point"], key, level)
        diffs.append(d)
        parts.append(f"{hi} - {lo} = {fmt(d, 4)}")
    return {
        "claim": claim,
        "claim_markdown": claim_markdown or claim,
        "metric": key,
        "verdict": verdict(diffs, 1.0 if larger_is_better else -1.0),
        "differences": diffs,
        "detail": "; ".join(parts),
    }


# ----------------------------------------------------------------------------------------------
# One analysis per experiment kind
# ----------------------------------------------------------------------------------------------


def _delay_sweep(records: ExperimentRecords, level: float) -> dict[str, Any]:
    return {"orderings": delay_orderings(records.rows, records.per_seed, level)}


def _group_size(records: ExperimentRecords, level: float) -> dict[str, Any]:
    return {"orderings": group_orderings(records.rows, records.per_seed, level)}


def _length_coupled(records: ExperimentRecords, level: float) -> dict[str, Any]:
    return {"orderings": length_orderings(records.rows, records.per_seed, level)}


def _eps_star(records: ExperimentRecords, level: float) -> dict[str, Any]:
    return {"eps_star": eps_star_fit(records.rows, records.per_seed, level)}


def _gmc_tic_gap(records: ExperimentRecords, level: float) -> dict[str, Any]:
    gap = gmc_tic_gap(records.rows, records.per_seed, level, records.tracked)
    return {"gap": gap, "orderings": [g["ordering"] for g in gap]}


def _mixed_delay(records: ExperimentRecords, level: float) -> dict[str, Any]:
    analysis = mixed_delay_analysis(records.config, records.summaries, level)
    orderings = analysis.pop("orderings")
    return {"mixed_delay": analysis, "orderings": orderings}


def _delay_regularity(records: ExperimentRecords, level: float) -> dict[str, Any]:
    analysis = delay_regularity_analysis(records.config, records.summaries, level)
    orderings = analysis.pop("orderings")
    return {"delay_regularity": analysis, "orderings": orderings}


@dataclass(frozen=True)
class KindAnalysis:
    """What the summary of one experiment kind adds to the results table."""

    analyse: Callable[[ExperimentRecords, float], dict[str, Any]]
    """`(records, confidence level) -> the summary's keys` (`orderings`, `eps_star`, ...)"""
    reads_bounds: bool = False
    """it compares the tracked runs' first-order splits and bounds (`ExperimentRecords.tracked`)"""


ANALYSES: dict[str, KindAnalysis] = {
    "runs": KindAnalysis(lambda records, level: {}),  # the results table only
    "delay_sweep": KindAnalysis(_delay_sweep),
    "group_size": KindAnalysis(_group_size),
    "length_coupled": KindAnalysis(_length_coupled),
    "eps_star": KindAnalysis(_eps_star),
    "gmc_tic_gap": KindAnalysis(_gmc_tic_gap, reads_bounds=True),
    "mixed_delay": KindAnalysis(_mixed_delay),
    "delay_regularity": KindAnalysis(_delay_regularity),
}
"""experiment kind (`ExperimentConfig.kind`) -> its analysis: the one dispatch on the kind"""


def analyse_records(records: ExperimentRecords) -> dict[str, Any]:
    """The experiment's summary: the results table, and its kind's orderings or fit."""
    config = records.config
    out: dict[str, Any] = {
        "name": config.name,
        "kind": config.kind,
        "description": config.description,
        "num_points": len(records.rows),
        "results": records.rows,
        "orderings": [],
    }
    out.update(ANALYSES[config.kind].analyse(records, config.confidence))
    return out


def analyse(config: ExperimentConfig, rows: list[dict[str, Any]], out_dir: Path) -> dict[str, Any]:
    """The summary of the experiment in `out_dir` (`load_experiment_records`, then
    `analyse_records`)."""
    return analyse_records(load_experiment_records(config, rows, out_dir))


# ----------------------------------------------------------------------------------------------
# The statistics: data in, numbers with intervals out
# ----------------------------------------------------------------------------------------------

PAIR_KEYS = ("delay", "schedule", "group_size", "eps", "total_steps", "lr")


def gmc_tic_gap(
    rows: list[dict[str, Any]],
    per_seed: PerSeed,
    level: float = 0.95,
    tracked: Mapping[str, TrackedPoint] | None = None,
) -> list[dict]:
    """GMC's convergence metric over TIC's at each grid point, beside the theory's factors.

    Per GMC point, the TIC point with the same `PAIR_KEYS`: the per-seed ratio of
    `(1/N) sum ||grad J||^2`, paired over seeds (t-interval of the log-ratio, exponentiated),
    with the verdict of "GMC below TIC" (`verdict` on the log-ratio); beside it, for runs that
    tracked their bound quantities (`tracked`: point -> its `TrackedPoint`, loaded once by
    `load_experiment_records`), the bounds' ratio at the same `eta` (Theorem 1 over Theorem
    2 with explicit constants, each with its own run's constants: a bound's ratio beside the
    measured ratio of the same quantity, `evidence.pairs`); the removed-mass bounds' ratio
    `c_eps / log(1+2eps)` at equal KL; `theory_tuned_factor`, `(c_eps / log(1+2eps))^(2/5)`,
    compares the two bounds' delay terms after tuning `eta` per method (§4.3), a ratio of upper
    bounds at different step sizes, not a prediction of the measured ratio at one `eta`; and the
    first-order split of each metric
    (`toy_mdps.train.run_records.first_order_identity`): the share of the bias term `-(T/N) sum <grad J, b>`
    in the metric, and GMC's bias term over TIC's.
    """
    from theory.constants import c_eps, gmc_denominator, improvement_factor

    tracked = tracked or {}
    gmc_name, tic_name = GAP_METHODS
    out = []
    for gmc in (r for r in rows if r["method"] == gmc_name):
        tic = _find(rows, method=tic_name, **{k: gmc[k] for k in PAIR_KEYS})
        if tic is None:
            continue
        a = seed_values(per_seed, gmc["point"], "convergence_metric")
        b = seed_values(per_seed, tic["point"], "convergence_metric")
        log_ratio = stats.t_interval([math.log(a[k] / b[k]) for k in a if k in b], level)
        ratio = {k: math.exp(log_ratio[k]) for k in ("mean", "lo", "hi")}
        entry: dict[str, Any] = {
            **{k: gmc[k] for k in PAIR_KEYS},
            "gmc_point": gmc["point"],
            "tic_point": tic["point"],
            "ratio": {**ratio, "n": log_ratio["n"]},
            "theory_tuned_factor": float(improvement_factor(gmc["eps"])),
            "theory_denominator_ratio": float(c_eps(gmc["eps"]) / gmc_denominator(gmc["eps"])),
        }
        shares = {
            method: tracked[point].first_order
            for method, point in (("gmc", gmc["point"]), ("tic", tic["point"]))
            if point in tracked and tracked[point].first_order
        }
        bounds = {
            method: tracked[point].bound
            for method, point in (("gmc", gmc["point"]), ("tic", tic["point"]))
            if point in tracked
        }
        if bounds.get("gmc") and bounds.get("tic"):
            entry["bound_ratio_same_eta"] = bounds["gmc"] / bounds["tic"]
        if len(shares) == 2:
            entry.update(_bias_shares(shares))
        detail = f"GMC/TIC = {fmt(ratio, 3)} (paired over {log_ratio['n']} seeds)"
        if "bound_ratio_same_eta" in entry:
            detail += (
                f"; the bounds' ratio at this eta: {entry['bound_ratio_same_eta']:.3g} "
                "(Theorem 1 / Theorem 2, each run's constants)"
            )
        entry["ordering"] = {
            "claim": f"GMC's (1/N) sum ||grad J||^2 below TIC's (D = {gmc['delay']}, "
            f"eps = {gmc['eps']:g}, eta = {gmc['lr']:g})",
            "metric": "convergence_metric",
            "verdict": verdict([log_ratio], -1.0),
            "differences": [log_ratio],
            "detail": detail,
        }
        out.append(entry)
    return out


def _bias_shares(shares: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """From GMC's and TIC's first-order splits: each one's bias share of its metric, the splits'
    terms, and GMC's bias term over TIC's."""
    return {
        "bias_share": {m: shares[m]["bias"]["mean"] / shares[m]["total"]["mean"] for m in shares},
        "first_order": {
            m: {k: shares[m][k] for k in ("total", "progress", "curvature", "bias", "residual")}
            for m in shares
        },
        "bias_term_ratio": float(
            np.divide(shares["gmc"]["bias"]["mean"], shares["tic"]["bias"]["mean"])
        ),
    }


def delay_orderings(rows: list[dict[str, Any]], per_seed: PerSeed, level: float) -> list[dict]:
    """A delay sweep's claims: GMC >= TIC >= GRPO at the largest delay (final `J`, and `<=` on
    the convergence metric); and, with `D = 0` swept, the three similar there (equivalence
    within `SIMILAR_TOL`) and GRPO degrading from `D = 0` to the largest delay."""
    delays = sorted({r["delay"] for r in rows})
    result: list[dict] = []
    if not set(PAPER_ORDER) <= {r["method"] for r in rows}:
        return result
    big = delays[-1]
    at_big = {m: _find(rows, method=m, delay=big) for m in PAPER_ORDER}
    result.append(
        _ordering(
            per_seed,
            f"GMC >= TIC >= GRPO, final J, D = {big}",
            list(PAPER_ORDER),
            at_big,
            "final_objective",
            level,
            claim_markdown=rf"GMC ≥ TIC ≥ GRPO, final $J$, $D = {big}$",
        )
    )
    result.append(
        _ordering(
            per_seed,
            f"GMC <= TIC <= GRPO, (1/N) sum ||grad J||^2, D = {big}",
            list(PAPER_ORDER),
            at_big,
            "convergence_metric",
            level,
            larger_is_better=False,
            claim_markdown=rf"GMC ≤ TIC ≤ GRPO, {CONVERGENCE_LATEX}, $D = {big}$",
        )
    )
    if 0 in delays:
        at_zero = {m: _find(rows, method=m, delay=0) for m in PAPER_ORDER}
        result.append(_similar_at_zero(at_zero, per_seed, level))
        result.append(_grpo_degrades(at_zero["grpo"], at_big["grpo"], big, per_seed, level))
    return result


def _similar_at_zero(
    at_zero: dict[str, dict[str, Any]], per_seed: PerSeed, level: float
) -> dict[str, Any]:
    """GMC, TIC and GRPO similar at `D = 0`: every pair's paired difference of final `J`
    within `+-SIMILAR_TOL` (`equivalence_verdict`)."""
    diffs, parts = [], []
    for a, b in (("gmc", "tic"), ("gmc", "grpo"), ("tic", "grpo")):
        d = paired_difference(
            per_seed, at_zero[a]["point"], at_zero[b]["point"], "final_objective", level
        )
        diffs.append(d)
        parts.append(f"{a} - {b} = {fmt(d, 4)}")
    return {
        "claim": "GMC, TIC, GRPO similar at D = 0 (final J)",
        "claim_markdown": "GMC, TIC, GRPO similar at $D = 0$ (final $J$)",
        "metric": "final_objective",
        "verdict": equivalence_verdict(diffs, SIMILAR_TOL),
        "differences": diffs,
        "detail": "; ".join(parts) + f" (equivalence margin +-{SIMILAR_TOL})",
    }


def _grpo_degrades(
    grpo0: dict[str, Any], grpo_big: dict[str, Any], big: int, per_seed: PerSeed, level: float
) -> dict[str, Any]:
    """GRPO's final `J` lower at the largest delay than at `D = 0`, paired over seeds."""
    d = paired_difference(per_seed, grpo0["point"], grpo_big["point"], "final_objective", level)
    return {
        "claim": f"GRPO degrades from D = 0 to D = {big} (final J)",
        "claim_markdown": f"GRPO degrades from $D = 0$ to $D = {big}$ (final $J$)",
        "metric": "final_objective",
        "verdict": verdict([d]),
        "differences": [d],
        "detail": f"D=0: {grpo0['final_objective']:.3f}, "
        f"D={big}: {grpo_big['final_objective']:.3f}; D=0 - D={big} = {fmt(d, 4)}",
    }


GROUP_METRICS = (
    ("mean_objective", "mean J over training", "mean $J$ over training"),
    ("objective_at_quarter", "J at N/4", "$J$ at $N/4$"),
    ("final_objective", "final J", "final $J$"),
)
"""the group-size study's metrics: key, plain name, Markdown name"""


def group_orderings(rows: list[dict[str, Any]], per_seed: PerSeed, level: float) -> list[dict]:
    """A group-size study's claims: larger `G` helps GMC more than TIC, per metric of
    `GROUP_METRICS`: the change of the GMC - TIC gap from the smallest to the largest `G`,
    paired over seeds (a difference of differences)."""
    sizes = sorted({r["group_size"] for r in rows})
    result: list[dict] = []
    points: dict[int, dict[str, str]] = {}
    for g in sizes:
        gmc, tic = _find(rows, method="gmc", group_size=g), _find(rows, method="tic", group_size=g)
        if gmc is not None and tic is not None:
            points[g] = {"gmc": gmc["point"], "tic": tic["point"]}
    if len(points) < 2:
        return result
    gaps = {
        g: {
            key: paired_difference(per_seed, p["gmc"], p["tic"], key, level)
            for key, _, _ in GROUP_METRICS
        }
        for g, p in points.items()
    }
    small, large = min(gaps), max(gaps)
    for key, name, name_markdown in GROUP_METRICS:
        gmc_s, tic_s = (seed_values(per_seed, points[small][m], key) for m in ("gmc", "tic"))
        gmc_l, tic_l = (seed_values(per_seed, points[large][m], key) for m in ("gmc", "tic"))
        dd = stats.t_interval(
            [(gmc_l[s] - tic_l[s]) - (gmc_s[s] - tic_s[s]) for s in gmc_s if s in gmc_l],
            level,
        )
        detail = "; ".join(f"G={g}: GMC - TIC = {fmt(gaps[g][key], 4)}" for g in sorted(gaps))
        result.append(
            {
                "claim": f"larger G helps GMC more than TIC ({name}, G={small} -> {large})",
                "claim_markdown": f"larger $G$ helps GMC more than TIC ({name_markdown}, "
                rf"$G = {small} \to {large}$)",
                "metric": key,
                "verdict": verdict([dd]),
                "differences": [dd],
                "detail": detail + f"; change of the gap {fmt(dd, 4)}",
            }
        )
    return result


def length_orderings(rows: list[dict[str, Any]], per_seed: PerSeed, level: float) -> list[dict]:
    """Length-coupled delays: the methods' mean realised lags comparable (max / min at most
    `LAG_RATIO_LIMIT`), and GMC >= TIC >= GRPO on final `J`."""
    result: list[dict] = []
    rows_of = {r["method"]: r for r in rows}
    lags = [r["lag_mean"] for r in rows]
    if lags:
        ratio = max(lags) / max(min(lags), 1e-12)
        result.append(
            {
                "claim": "mean realised lag comparable across methods",
                "metric": "lag_mean",
                "verdict": "holds" if ratio <= LAG_RATIO_LIMIT else "does not hold",
                "detail": ", ".join(f"{r['method']}: {r['lag_mean']:.1f}" for r in rows)
                + f" (max/min {ratio:.2f}; criterion <= {LAG_RATIO_LIMIT})",
            }
        )
    if set(PAPER_ORDER) <= set(rows_of):
        result.append(
            _ordering(
                per_seed,
                "GMC >= TIC >= GRPO, final J, length-coupled delays",
                list(PAPER_ORDER),
                rows_of,
                "final_objective",
                level,
                claim_markdown=r"GMC ≥ TIC ≥ GRPO, final $J$, length-coupled delays",
            )
        )
    return result


def _refine(eps: list[float], values: list[float], best: int) -> float:
    """Parabola through the minimum and its neighbours in `log eps` (interior minima only)."""
    if not 0 < best < len(eps) - 1:
        return eps[best]
    x = np.log(np.array(eps[best - 1 : best + 2]))
    y = np.array(values[best - 1 : best + 2])
    a, b, _ = np.polyfit(x, y, 2)
    if not a > 0:
        return eps[best]
    vertex = float(np.clip(-b / (2 * a), x[0], x[2]))
    return float(math.exp(vertex))


def best_eps(eps: list[float], values: list[float], minimise: bool = True) -> dict[str, Any]:
    """The best `eps` of one cell: `{eps_star, eps_star_grid, censored}` (module docstring)."""
    signed = [v if minimise else -v for v in values]
    low = min(signed)
    tied = [i for i, v in enumerate(signed) if v - low <= TIE_RTOL * abs(low)]
    best = tied[0]
    if tied[-1] == len(eps) - 1:
        censored = "above"  # the largest eps (no cap / IS-equivalent) is best: eps* >= eps[best]
    elif best == 0:
        censored = "below"
    else:
        censored = None
    star = eps[best] if censored else _refine(eps, signed, best)
    return {"eps_star": star, "eps_star_grid": eps[best], "censored": censored}


def interior_test(
    cell: list[dict[str, Any]],
    key: str,
    best: dict[str, Any],
    per_seed: PerSeed,
    minimise: bool = True,
    level: float = 0.95,
) -> dict[str, Any]:
    """Is the cell's best `eps` an interior optimum? Paired over seeds against its neighbours.

    Interior best (by the means): the claim "the neighbours are worse" is tested on the paired
    differences `neighbour - best` (`- (neighbour - best)` when maximising): `holds` when both
    intervals exclude 0 on the worse side, else `not significant`. Best at an edge of the grid
    (censored; for a tied plateau, its first point): `does not hold` when its one neighbour is
    significantly worse (the edge is a genuine local optimum), else `not significant`.
    """
    eps = [r["eps"] for r in cell]
    best_i = eps.index(best["eps_star_grid"])
    sign = 1.0 if minimise else -1.0
    if best["censored"] is None:
        neighbours = [best_i - 1, best_i + 1]
    elif best["censored"] == "above":
        neighbours = [best_i - 1] if best_i > 0 else []
    else:
        neighbours = [best_i + 1] if best_i + 1 < len(eps) else []
    diffs = [
        paired_difference(per_seed, cell[j]["point"], cell[best_i]["point"], key, level)
        for j in neighbours
    ]
    worse = verdict(diffs, sign)
    if best["censored"] is None:
        result = HOLDS if worse == HOLDS else NOT_SIGNIFICANT
    else:
        result = DOES_NOT_HOLD if worse == HOLDS else NOT_SIGNIFICANT
    return {
        "verdict": result,
        "best_eps": eps[best_i],
        "neighbours": [eps[j] for j in neighbours],
        "differences": diffs,
    }


def _fit_exponents(cells: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Least squares `log eps* = c + a log tau4 + b log N` over the cells interior under `key`."""
    usable = [t for t in cells if t["tau4"] > 0 and t[key]["censored"] is None]
    out: dict[str, Any] = {"censored_cells": sum(t[key]["censored"] is not None for t in cells)}
    taus = {round(t["tau4"], 6) for t in usable}
    ns = {t["total_steps"] for t in usable}
    if len(usable) < 4 or len(taus) < 2 or len(ns) < 2:  # 3 coefficients + 1 residual dof
        return out
    X = np.column_stack(
        [
            np.ones(len(usable)),
            np.log([t["tau4"] for t in usable]),
            np.log([t["total_steps"] for t in usable]),
        ]
    )
    y = np.log([t[key]["eps_star"] for t in usable])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    dof = len(y) - 3
    se = [math.nan] * 3
    if dof > 0:
        sigma2 = float(resid @ resid) / dof
        cov = sigma2 * np.linalg.pinv(X.T @ X)
        se = [float(math.sqrt(max(c, 0.0))) for c in np.diag(cov)]
    out.update(
        intercept=float(coef[0]),
        tau4_exponent=float(coef[1]),
        n_exponent=float(coef[2]),
        tau4_exponent_se=se[1],
        n_exponent_se=se[2],
        num_cells=len(usable),
    )
    return out


def eps_star_fit(
    rows: list[dict[str, Any]], per_seed: PerSeed | None = None, level: float = 0.95
) -> dict[str, Any]:
    """`eps*` per `(N, D)` and the least-squares exponents (see the module docstring).

    The top-level keys describe the paper's criterion (minimum convergence metric);
    `objective_fit` repeats the fit for the `eps` with the best final `J` (a second view). With
    `per_seed` (the points' per-seed metrics), each cell also gets `interior_test` for both
    criteria: is its `eps*` interior, paired over seeds against both neighbours?
    """
    cells: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in rows:
        if row["method"] != "gmc":
            continue
        cells.setdefault((row["total_steps"], row["delay"]), []).append(row)
    table = []
    for (n, d), cell in sorted(cells.items()):
        cell.sort(key=lambda r: r["eps"])
        eps = [r["eps"] for r in cell]
        conv = [r["convergence_metric"] for r in cell]
        final = [r["final_objective"] for r in cell]
        by_conv = best_eps(eps, conv, minimise=True)
        by_final = best_eps(eps, final, minimise=False)
        if per_seed is not None:
            by_conv["interior_test"] = interior_test(
                cell, "convergence_metric", by_conv, per_seed, True, level
            )
            by_final["interior_test"] = interior_test(
                cell, "final_objective", by_final, per_seed, False, level
            )
        table.append(
            {
                "total_steps": n,
                "delay": d,
                "tau4": float(np.mean([r["lag_tau4"] for r in cell])),
                "eps_grid": eps,
                "convergence_metric": conv,
                "final_objective": final,
                **by_conv,
                "eps_star_interior": by_conv["censored"] is None,
                "by_convergence": by_conv,
                "by_final_objective": by_final,
                "eps_best_final_objective": by_final["eps_star"],
            }
        )
    fit: dict[str, Any] = {
        "table": table,
        "paper_tau4_exponent": PAPER_TAU4_EXPONENT,
        "paper_n_exponent": PAPER_N_EXPONENT,
        **_fit_exponents(table, "by_convergence"),
        "objective_fit": _fit_exponents(table, "by_final_objective"),
    }
    return fit
