"""Figures of the worker-schedule experiments (issue 17), from an experiment's `summary.json`.

The numbers are computed by the toy track's analysis (`toy_mdps.train.workers_analysis`, stored
in the experiment's `summary.json`); this module turns them into arrays (`*_arrays`, `*_data`)
and draws them (`plot_*`, each taking arrays, `ax=None`, returning the figure). The two figures
are entries of `figures.registry` (`mixed_vs_tau4`, `regularity`).

- `plot_metric_vs_tau4`: a metric against the realised `tau4`, per method: the uniform fixed
  delays as a line with 95% intervals, the mixed-lag (worker) batches as a point with intervals
  in both directions. "Only `tau4` matters" puts the point on the line.
- `plot_regularity`: both sides of the delay-regularity condition against the lag `t`,
  `E[D_n(t) | tau = t]` (own drift of the groups of lag `t`) and `E[D_n(t)]` (the other seeds'
  drift at the same steps), with 95% intervals.
- `plot_regularity_gap`: their relative difference against `t`, one line per run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from figures.common import panel_axes, single_axes
from figures.style import method_color, method_label, method_rank

if TYPE_CHECKING:
    from figures.toy_training import ToyExperiment

METRIC_LABELS = {
    "final_objective": "final J(theta_N)",
    "convergence_metric": "(1/N) sum ||grad J(theta_n)||^2",
}


def mixed_delay_arrays(summary: dict[str, Any], metric: str) -> dict[str, dict[str, np.ndarray]]:
    """Per method: the uniform points (`tau4`, metric mean/lo/hi, sorted by `tau4`) and the
    mixed ones (`tau4` mean/lo/hi, metric mean/lo/hi), from `summary["mixed_delay"]`."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for method, kinds in summary["mixed_delay"]["methods"].items():
        uniform = sorted(kinds["uniform"], key=lambda e: e["tau4"]["mean"])
        arrays = {
            "uniform_tau4": np.array([e["tau4"]["mean"] for e in uniform]),
            "uniform_delay": np.array([e["delay"] for e in uniform]),
        }
        for part, entries in (("uniform", uniform), ("mixed", kinds["mixed"])):
            for stat in ("mean", "lo", "hi"):
                arrays[f"{part}_{stat}"] = np.array([e[metric][stat] for e in entries])
        for stat in ("mean", "lo", "hi"):
            arrays[f"mixed_tau4_{stat}"] = np.array([e["tau4"][stat] for e in kinds["mixed"]])
        out[method] = arrays
    return out


def plot_metric_vs_tau4(
    curves: dict[str, dict[str, np.ndarray]], *, ylabel: str, ax: Any = None
) -> Any:
    """`curves` from `mixed_delay_arrays`: uniform delays as lines, mixed batches as points."""
    fig, ax = single_axes(ax, (5.2, 3.7))
    for method in sorted(curves, key=method_rank):
        c, color = curves[method], method_color(method)
        y = c["uniform_mean"]
        ax.errorbar(
            c["uniform_tau4"],
            y,
            yerr=np.vstack([y - c["uniform_lo"], c["uniform_hi"] - y]),
            color=color,
            marker="o",
            ms=3,
            capsize=2,
            label=f"{method_label(method)}, uniform delays",
        )
        for x, d in zip(c["uniform_tau4"], c["uniform_delay"], strict=True):
            ax.annotate(
                f"D={d}",
                (x, 0),
                xycoords=("data", "axes fraction"),
                fontsize=6,
                ha="center",
                va="bottom",
                color="0.4",
            )
        m = c["mixed_mean"]
        ax.errorbar(
            c["mixed_tau4_mean"],
            m,
            xerr=np.vstack(
                [
                    c["mixed_tau4_mean"] - c["mixed_tau4_lo"],
                    c["mixed_tau4_hi"] - c["mixed_tau4_mean"],
                ]
            ),
            yerr=np.vstack([m - c["mixed_lo"], c["mixed_hi"] - m]),
            color=color,
            marker="*",
            ms=10,
            ls="none",
            capsize=2,
            label=f"{method_label(method)}, mixed lags (workers)",
        )
    ax.set_xscale("log")
    ax.set_xlabel(r"$\bar\tau_4$ = mean over groups of lag$^4$ (realised)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=6, loc="best")
    return fig


def regularity_arrays(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per run of a `delay_regularity` experiment: its method, variant and the per-lag arrays of
    `summary["delay_regularity"]["points"][point]["regularity"]["per_lag"]`."""
    out = {}
    for point, entry in summary["delay_regularity"]["points"].items():
        if "regularity" not in entry:
            continue
        arrays = {k: np.array(v, dtype=float) for k, v in entry["regularity"]["per_lag"].items()}
        out[point] = {"method": entry["method"], "variant": entry["variant"], **arrays}
    return out


def plot_regularity(
    lag: np.ndarray,
    lhs: tuple[np.ndarray, np.ndarray, np.ndarray],
    rhs: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    title: str = "",
    color: str = "C0",
    ax: Any = None,
) -> Any:
    """Both sides of the condition vs `t`: `lhs`, `rhs` each `(mean, lo, hi)` arrays."""
    fig, ax = single_axes(ax, (5.0, 3.6))
    ax.plot(lag, lhs[0], color=color, lw=1.4, label="E[D_n(t) | tau = t] (own groups)")
    ax.fill_between(lag, lhs[1], lhs[2], color=color, alpha=0.25, lw=0)
    ax.plot(lag, rhs[0], color="0.2", lw=1.0, ls="--", label="E[D_n(t)] (other seeds, same n)")
    ax.fill_between(lag, rhs[1], rhs[2], color="0.5", alpha=0.2, lw=0)
    ax.set_xlabel("lag t")
    ax.set_ylabel("D_n(t) = ||theta_n - theta_(n-t)||^2")
    if title:
        ax.set_title(title, fontsize=8)
    ax.legend(fontsize=6)
    return fig


def plot_regularity_gap(runs: dict[str, dict[str, Any]], ax: Any = None) -> Any:
    """`(lhs - rhs) / rhs` vs `t` with its 95% interval, one line per run (`regularity_arrays`)."""
    fig, ax = single_axes(ax, (5.0, 3.6))
    variants = sorted({r["variant"] for r in runs.values()})
    styles = ("-", "--", ":", "-.")
    for _, r in sorted(runs.items()):
        rhs = np.where(r["rhs"] > 0, r["rhs"], np.nan)
        color = method_color(r["method"])
        style = styles[variants.index(r["variant"]) % len(styles)]
        ax.plot(
            r["lag"],
            r["difference"] / rhs,
            color=color,
            ls=style,
            lw=1.2,
            label=f"{method_label(r['method'])}, {r['variant']}",
        )
        ax.fill_between(
            r["lag"],
            r["difference_lo"] / rhs,
            r["difference_hi"] / rhs,
            color=color,
            alpha=0.12,
            lw=0,
        )
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.set_xlabel("lag t")
    ax.set_ylabel("(E[D | tau = t] - E[D]) / E[D]")
    ax.legend(fontsize=6)
    return fig


def mixed_vs_tau4_data(experiment: ToyExperiment) -> dict[str, Any] | None:
    """Per metric (`METRIC_LABELS`) the `mixed_delay_arrays` of a mixed-delay experiment's
    analysis; None when its summary has none."""
    if "mixed_delay" not in experiment.summary:
        return None
    return {metric: mixed_delay_arrays(experiment.summary, metric) for metric in METRIC_LABELS}


def plot_mixed_vs_tau4(data: dict[str, Any], ax: Any = None) -> Any:
    """One panel per metric of `mixed_vs_tau4_data` (`plot_metric_vs_tau4`). `ax`: that many
    axes or None."""
    fig, axes = panel_axes(len(data), ax, width=5.2, height=3.8)
    for axis, (metric, curves) in zip(axes, data.items(), strict=True):
        plot_metric_vs_tau4(curves, ylabel=METRIC_LABELS[metric], ax=axis)
    fig.tight_layout()
    return fig


def regularity_data(experiment: ToyExperiment) -> dict[str, dict[str, Any]] | None:
    """The `regularity_arrays` of a delay-regularity experiment's analysis; None without it."""
    if "delay_regularity" not in experiment.summary:
        return None
    return regularity_arrays(experiment.summary)


def plot_regularity_panels(runs: dict[str, dict[str, Any]], ax: Any = None) -> Any:
    """Both sides of the condition for each GMC run (every run when there is no GMC run), then
    their relative gap for all runs (`regularity_data`). `ax`: that many axes or None."""
    shown = [p for p, r in sorted(runs.items()) if r["method"] == "gmc"] or sorted(runs)
    fig, axes = panel_axes(len(shown) + 1, ax, width=4.6, height=3.6)
    for axis, point in zip(axes, shown, strict=False):
        r = runs[point]
        plot_regularity(
            r["lag"],
            (r["lhs"], r["lhs_lo"], r["lhs_hi"]),
            (r["rhs"], r["rhs_lo"], r["rhs_hi"]),
            title=f"{method_label(r['method'])}, {r['variant']}",
            color=method_color(r["method"]),
            ax=axis,
        )
    plot_regularity_gap(runs, ax=axes[-1])
    fig.tight_layout()
    return fig


__all__ = [
    "mixed_delay_arrays",
    "mixed_vs_tau4_data",
    "plot_metric_vs_tau4",
    "plot_mixed_vs_tau4",
    "plot_regularity",
    "plot_regularity_gap",
    "plot_regularity_panels",
    "regularity_arrays",
    "regularity_data",
]
