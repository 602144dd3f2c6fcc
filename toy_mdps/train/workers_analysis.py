"""Analysis of the worker-schedule experiments (issue 17): mixed lags, and delay regularity.

Both take the finished points of an experiment (each point's `summary.json`, read once by
`toy_mdps.train.analysis.load_experiment_records`) and compare
**paired over seeds**: the runs of one seed share `theta_0`, the sampling generator and, under
constant or exponential generation times, the lags, so per-seed differences carry the
comparison and get Student-t intervals (`gmc_grpo.stats`). A comparison "holds" when its 95%
interval excludes 0.

**Mixed vs uniform delays at the same `tau4`** (`kind = "mixed_delay"`). Theorems 1 and 2 see the
delays only through `tau4 = (1 / NB) sum_n sum_b (tau_n^(b))^4`. The experiment runs, per method,
worker-schedule variants (one batch mixes lags: `schedule = "workers"`) and fixed-delay variants
(every group of every batch has lag `D`). For each seed, a fixed-delay metric at the mixed run's
realised `tau4` is interpolated linearly in `log tau4` between the two fixed delays that bracket
it (their `tau4` is deterministic); the paired difference "mixed - uniform at the same `tau4`"
then says whether `tau4` alone predicts the outcome (interval containing 0) or the lags' spread
matters too. The fixed delay with the closest mean lag is compared the same way ("same mean
lag"). Metrics: final `J` (higher is better) and the convergence metric
`(1/N) sum_n ||grad J(theta_n)||^2` (lower is better).

**Delay regularity** (`kind = "delay_regularity"`, runs with `drift_max_lag > 0`). §2.2's
condition `E[||theta_n - theta_(n-t)||^2 | tau_n^(b) = t] = E||theta_n - theta_(n-t)||^2`: the
left side is the mean of the seed's own drift `D_n(t)` over its groups of lag `t`; the right side
the mean, over the same groups, of the other seeds' `D_n(t)` at the same step `n` (the
unconditional expectation at step `n`, estimated across independent replicates). Per lag `t`
(with at least `MIN_GROUPS` groups) and pooled over all lags (the log of the ratio of sums), the
per-seed difference gets a t-interval over seeds; the condition "holds" where the interval
contains 0. A second right side, the seed's own time average of `D_n(t)` over all steps
`n >= t`, is reported beside it: it also differs when the lag distribution and the drift both
change during training (warm-up, cosine decay), which is not a violation of the condition.
GMC - TIC is compared per generation-time model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from gmc_grpo import stats
from gmc_grpo.staleness import get_schedule
from gmc_grpo.stats import interval_text
from toy_mdps.train.config import ExperimentConfig, ToyTrainConfig

MIN_GROUPS = 50
"""Fewest groups of one lag (over all seeds) for that lag's row of the regularity table."""
METRICS = {"final_objective": "final J", "convergence_metric": "(1/N) sum ||grad J||^2"}
LARGER_IS_BETTER = {"final_objective": True, "convergence_metric": False}


def _point_configs(config: ExperimentConfig) -> dict[str, tuple[ToyTrainConfig, dict[str, Any]]]:
    return {label: (cfg, varied) for label, cfg, varied in config.points()}


def _per_seed(summary: dict[str, Any], key: str) -> dict[str, float]:
    return {seed: float(values[key]) for seed, values in summary["per_seed"].items()}


def _interval(values: list[float], level: float) -> dict[str, float]:
    return stats.t_interval(values, level)


def _holds(interval: dict[str, float]) -> bool:
    return interval["lo"] > 0 or interval["hi"] < 0


# ----------------------------------------------------------------------------------------------
# Mixed vs uniform delays
# ----------------------------------------------------------------------------------------------


def interpolate_in_log_tau4(
    tau4_points: list[float], values: list[float], tau4: float
) -> tuple[float, bool]:
    """`values` (at `tau4_points`, increasing) linearly interpolated in `log tau4` at `tau4`;
    returns `(value, extrapolated)` (the end segment is extended outside the range)."""
    x = np.log(np.asarray(tau4_points, dtype=float))
    y = np.asarray(values, dtype=float)
    t = math.log(tau4)
    i = int(np.clip(np.searchsorted(x, t) - 1, 0, len(x) - 2))
    slope = (y[i + 1] - y[i]) / (x[i + 1] - x[i])
    return float(y[i] + slope * (t - x[i])), not (x[0] <= t <= x[-1])


def mixed_delay_analysis(
    config: ExperimentConfig, summaries: Mapping[str, dict[str, Any]], level: float = 0.95
) -> dict[str, Any]:
    """The comparisons of a `mixed_delay` experiment (module docstring), from each point's
    `summary.json` (`summaries`: point label -> summary, `toy_mdps.train.analysis.
    load_experiment_records`).

    Returns `{"methods": {method: {"uniform": [...], "mixed": [...]}}, "comparisons": [...],
    "orderings": [...]}`: per point its realised lag moments and metrics (mean and interval over
    seeds), and per mixed variant the paired differences with their intervals.
    """
    points = _point_configs(config)
    methods: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for label, (cfg, varied) in points.items():
        summary = summaries[label]
        mean = summary["mean"]
        spec = get_schedule(cfg.schedule)
        entry = {
            "point": label,
            "variant": varied.get("variant", label),
            "schedule": cfg.schedule,
            "delay": spec.setting(cfg, "delay"),
            "num_workers": spec.setting(cfg, "num_workers"),
            "generation_time": spec.setting(cfg, "generation_time"),
            "lag_mean": mean["lag_mean"]["mean"],
            "tau4": mean["lag_tau4"],
            "tau2": mean.get("lag_tau2"),
            "spread_std": mean.get("lag_spread_std", {"mean": 0.0, "lo": 0.0, "hi": 0.0}),
            **{key: mean[key] for key in METRICS},
        }
        kind = "mixed" if spec.mixes_lags else "uniform"
        methods.setdefault(cfg.method, {"uniform": [], "mixed": []})[kind].append(entry)
    comparisons: list[dict[str, Any]] = []
    for method, kinds in methods.items():
        uniform = sorted(kinds["uniform"], key=lambda e: e["tau4"]["mean"])
        if len(uniform) < 2:
            continue
        for mixed in kinds["mixed"]:
            comparisons += _mixed_comparisons(method, mixed, uniform, summaries, level)
    gaps = _method_gaps(methods, summaries, level)
    orderings = [
        {
            "claim": c["claim"],
            "verdict": c["verdict"],
            "detail": f"{c['detail']}",
            "differences": [c["difference"]],
        }
        for c in comparisons + gaps
    ]
    return {"methods": methods, "comparisons": comparisons, "gaps": gaps, "orderings": orderings}


def _mixed_comparisons(
    method: str,
    mixed: dict[str, Any],
    uniform: list[dict[str, Any]],
    summaries: Mapping[str, dict[str, Any]],
    level: float,
) -> list[dict[str, Any]]:
    mixed_summary = summaries[mixed["point"]]
    tau4_mixed = _per_seed(mixed_summary, "lag_tau4")
    tau4_uniform = [e["tau4"]["mean"] for e in uniform]  # deterministic per delay
    out = []
    same_mean = min(uniform, key=lambda e: abs(e["lag_mean"] - mixed["lag_mean"]))
    for key, name in METRICS.items():
        mine = _per_seed(mixed_summary, key)
        others = [_per_seed(summaries[e["point"]], key) for e in uniform]
        diffs, extrapolated = [], 0
        for seed, value in mine.items():
            predicted, outside = interpolate_in_log_tau4(
                tau4_uniform, [o[seed] for o in others], tau4_mixed[seed]
            )
            diffs.append(value - predicted)
            extrapolated += outside
        diff = _interval(diffs, level)
        better = (diff["mean"] > 0) == LARGER_IS_BETTER[key]
        verdict = (
            ("spread matters: mixed better" if better else "spread matters: mixed worse")
            if _holds(diff)
            else "tau4 alone consistent"
        )
        out.append(
            {
                "claim": f"{method}, {name}: mixed ({mixed['variant']}) - uniform at the same tau4",
                "method": method,
                "metric": key,
                "kind": "same_tau4",
                "mixed": mixed["point"],
                "difference": diff,
                "extrapolated_seeds": extrapolated,
                "verdict": verdict,
                "detail": f"{_fmt(diff)}; mixed tau4 {mixed['tau4']['mean']:.4g}, uniform D "
                + "/".join(str(e["delay"]) for e in uniform)
                + (f"; {extrapolated} seeds extrapolated" if extrapolated else ""),
            }
        )
        same = stats.paired_difference(mine, _per_seed(summaries[same_mean["point"]], key), level)
        out.append(
            {
                "claim": f"{method}, {name}: mixed ({mixed['variant']}) - uniform D = "
                f"{same_mean['delay']} (about the same mean lag)",
                "method": method,
                "metric": key,
                "kind": "same_mean",
                "mixed": mixed["point"],
                "uniform": same_mean["point"],
                "difference": same,
                "verdict": "differs" if _holds(same) else "no significant difference",
                "detail": f"{_fmt(same)}; mean lag {mixed['lag_mean']:.1f} vs "
                f"{same_mean['lag_mean']:.1f}",
            }
        )
    return out


def _method_gaps(
    methods: dict[str, dict[str, list[dict[str, Any]]]],
    summaries: Mapping[str, dict[str, Any]],
    level: float,
) -> list[dict[str, Any]]:
    """GMC - TIC per variant (paired over seeds), final J and convergence metric."""
    if not {"gmc", "tic"} <= set(methods):
        return []
    by_variant = {
        (e["variant"], m): e for m, kinds in methods.items() for es in kinds.values() for e in es
    }
    out = []
    for variant in sorted({v for v, _ in by_variant}):
        if (variant, "gmc") not in by_variant or (variant, "tic") not in by_variant:
            continue
        gmc, tic = by_variant[(variant, "gmc")], by_variant[(variant, "tic")]
        for key, name in METRICS.items():
            diff = stats.paired_difference(
                _per_seed(summaries[gmc["point"]], key),
                _per_seed(summaries[tic["point"]], key),
                level,
            )
            better = (diff["mean"] > 0) == LARGER_IS_BETTER[key]
            out.append(
                {
                    "claim": f"GMC better than TIC, {name}, {variant}",
                    "method": "gmc-tic",
                    "metric": key,
                    "kind": "method_gap",
                    "variant": variant,
                    "difference": diff,
                    "verdict": ("holds" if _holds(diff) else "holds (not significant)")
                    if better
                    else "does not hold",
                    "detail": f"GMC - TIC = {_fmt(diff)}",
                }
            )
    return out


# ----------------------------------------------------------------------------------------------
# Delay regularity
# ----------------------------------------------------------------------------------------------


def regularity_of_point(
    summary: dict[str, Any], level: float = 0.95, min_groups: int = MIN_GROUPS
) -> dict[str, Any]:
    """Both sides of the delay-regularity condition for one run (module docstring).

    Returns per lag `t` (arrays over the lags kept): `lag`, `groups`, `lhs`, `rhs` (means over
    seeds of the per-seed means, with intervals `lhs_lo`... ), `difference` (paired, with
    interval), `relative` (difference / rhs), `rhs_time` (the time-average right side); and
    `pooled`: the per-seed log of (sum of own drifts / sum of the other seeds' drifts) over all
    groups with lags `1..H`, its interval and the ratio `exp` of it, and the same against the
    time average; `corr_lag_length`: the mean over seeds of corr(lag, mean response length).
    """
    record = summary["delay_regularity"]
    seeds = record["per_seed"]
    H = int(record["max_lag"])
    time_count = np.asarray(record["time_count"], dtype=float)
    out: dict[str, Any] = {
        "per_lag": _regularity_per_lag(seeds, H, time_count, level, min_groups),
        "max_lag": H,
    }
    pooled, pooled_time = _pooled_log_ratios(seeds, time_count)
    for name, values in (("pooled", pooled), ("pooled_time", pooled_time)):
        if len(values) >= 2:
            interval = _interval(values, level)
            out[name] = {
                "log_ratio": interval,
                "ratio": {k: math.exp(interval[k]) for k in ("mean", "lo", "hi")},
                "holds": not _holds(interval),
            }
    correlations = [
        float(s["corr_lag_length"]) for s in seeds.values() if s.get("corr_lag_length") is not None
    ]
    beyond = sum(s["beyond_max_lag"] for s in seeds.values())
    grouped = sum(sum(s["groups"]) for s in seeds.values())
    out["beyond_max_lag_fraction"] = beyond / max(beyond + grouped, 1.0)
    out["corr_lag_length"] = float(np.mean(correlations)) if correlations else None
    return out


MIN_SEEDS_PER_LAG = 3
"""fewest seeds with groups of one lag for that lag's row (a t-interval over fewer is too wide
to read)"""
PER_LAG_KEYS = (
    "lag",
    "groups",
    "seeds",
    "lhs",
    "lhs_lo",
    "lhs_hi",
    "rhs",
    "rhs_lo",
    "rhs_hi",
    "rhs_time",
    "difference",
    "difference_lo",
    "difference_hi",
    "relative",
)


def _regularity_per_lag(
    seeds: dict[str, dict[str, Any]],
    H: int,
    time_count: np.ndarray,
    level: float,
    min_groups: int,
) -> dict[str, list[float]]:
    """Per lag `t = 1..H` with enough groups: both sides (mean over seeds of the per-seed
    means, with intervals), their paired difference and the time-average right side."""
    rows: dict[str, list[float]] = {k: [] for k in PER_LAG_KEYS}
    for t in range(1, H + 1):
        mine = [s for s in seeds.values() if s["groups"][t] > 0]
        total = sum(s["groups"][t] for s in mine)
        if total < min_groups or len(mine) < MIN_SEEDS_PER_LAG:
            continue
        lhs = [s["own_sum"][t] / s["groups"][t] for s in mine]
        rhs = [s["others_sum"][t] / s["groups"][t] for s in mine]
        rhs_time = [s["time_sum"][t] / time_count[t] for s in mine]
        li, ri = _interval(lhs, level), _interval(rhs, level)
        di = _interval([a - b for a, b in zip(lhs, rhs, strict=True)], level)
        values = {
            "lag": t,
            "groups": total,
            "seeds": len(mine),
            "rhs_time": float(np.mean(rhs_time)),
            "relative": di["mean"] / ri["mean"] if ri["mean"] > 0 else math.nan,
        }
        for name, interval in (("lhs", li), ("rhs", ri), ("difference", di)):
            values.update(
                {name: interval["mean"], f"{name}_lo": interval["lo"], f"{name}_hi": interval["hi"]}
            )
        for key in PER_LAG_KEYS:
            rows[key].append(values[key])
    return rows


def _pooled_log_ratios(
    seeds: dict[str, dict[str, Any]], time_count: np.ndarray
) -> tuple[list[float], list[float]]:
    """Per seed: log(sum of own drifts / sum of the other seeds' drifts) over all groups, and
    the same against the time-average right side."""
    pooled, pooled_time = [], []
    for s in seeds.values():
        counts = np.asarray(s["groups"], dtype=float)
        own, others = float(np.sum(s["own_sum"])), float(np.sum(s["others_sum"]))
        with np.errstate(divide="ignore", invalid="ignore"):
            per_time = np.where(time_count > 0, np.asarray(s["time_sum"]) / time_count, 0.0)
        expected_time = float(np.sum(counts * per_time))
        if own > 0 and others > 0:
            pooled.append(math.log(own / others))
        if own > 0 and expected_time > 0:
            pooled_time.append(math.log(own / expected_time))
    return pooled, pooled_time


def delay_regularity_analysis(
    config: ExperimentConfig, summaries: Mapping[str, dict[str, Any]], level: float = 0.95
) -> dict[str, Any]:
    """Both sides of the condition per point, and GMC - TIC per variant (module docstring),
    from each point's `summary.json` (`summaries`: point label -> summary)."""
    points = _point_configs(config)
    per_point: dict[str, dict[str, Any]] = {}
    methods: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for label, (cfg, varied) in points.items():
        summary = summaries[label]
        entry = {
            "point": label,
            "method": cfg.method,
            "variant": varied.get("variant", label),
            "generation_time": cfg.generation_time,
            "lag_mean": summary["mean"]["lag_mean"]["mean"],
            "tau4": summary["mean"]["lag_tau4"],
            **{key: summary["mean"][key] for key in METRICS},
        }
        if "delay_regularity" in summary:
            entry["regularity"] = regularity_of_point(summary, level)
        per_point[label] = entry
        methods.setdefault(cfg.method, {"mixed": []})["mixed"].append(entry)
    gaps = _method_gaps(methods, summaries, level)
    orderings = []
    for entry in per_point.values():
        pooled = entry.get("regularity", {}).get("pooled")
        if pooled is None:
            continue
        ratio = pooled["ratio"]
        orderings.append(
            {
                "claim": f"delay regularity, {entry['method']}, {entry['variant']}: "
                "E[D_n(t) | tau = t] = E[D_n(t)]",
                "verdict": "holds" if pooled["holds"] else "does not hold",
                "detail": f"pooled ratio {ratio['mean']:.3f} [{ratio['lo']:.3f}, "
                f"{ratio['hi']:.3f}]; corr(lag, length) "
                + (
                    f"{entry['regularity']['corr_lag_length']:.2f}"
                    if entry["regularity"]["corr_lag_length"] is not None
                    else "n/a"
                ),
                "differences": [pooled["log_ratio"]],
            }
        )
    orderings += [
        {
            "claim": g["claim"],
            "verdict": g["verdict"],
            "detail": g["detail"],
            "differences": [g["difference"]],
        }
        for g in gaps
    ]
    return {"points": per_point, "gaps": gaps, "orderings": orderings}


def _fmt(interval: dict[str, float]) -> str:
    return interval_text(interval, ".4g")


__all__ = [
    "MIN_GROUPS",
    "delay_regularity_analysis",
    "interpolate_in_log_tau4",
    "mixed_delay_analysis",
    "regularity_of_point",
]
