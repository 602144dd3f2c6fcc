"""Figures of the asynchronous toy learners, from saved records only.

An experiment directory (written by `gmc-grpo toy train`) holds `experiment.json`,
`results.csv` (one row per grid point), `summary.json` (the analysis) and one run directory per
point with `metrics.jsonl` (one row per step per seed). It is read once (`load_experiment`, a
`ToyExperiment`); each figure's numbers come from a `*_data` function and each plot (`plot_*`,
taking those numbers and `ax=None`, returning the figure) draws them. The figures are entries of
`figures.registry` (`reads="experiment"`, with the experiment kinds each draws):

- `curves` (`plot_training_curves`): `J(theta_n)` and `||grad J(theta_n)||^2` vs step per
  method, one column per delay (mean over seeds with a 95% t-band).
- `vs_delay` (`plot_vs_delay`): convergence metric and final `J` vs `D` per method.
- `group_size` (`plot_group_sizes`): GMC vs TIC over `G` (mean `J` over training and final `J`).
- `length_coupled` (`plot_length_coupled`): `J` and the realised lag vs step per method.
- `eps_star` (`plot_eps_star`): convergence metric vs `eps` per `(N, D)` and the fitted law.
- the worker-schedule experiments (mixed lags, delay regularity): `figures.toy_workers`.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from figures.common import panel_axes, single_axes
from figures.style import method_color, method_label, method_rank
from gmc_grpo.json_files import read_json, read_jsonl
from gmc_grpo.stats import t_quantile

TRAINING_METRICS = (
    ("policy/objective", r"$J(\theta_n)$", False),
    ("policy/grad_norm_sq", r"$\Vert\nabla J(\theta_n)\Vert^2$", True),
)
"""the two rows of `plot_training_curves`: metric key, axis label, log scale"""
GROUP_METHODS = ("gmc", "tic")
"""the methods of the group-size study (the paper's Table 4 compares these two)"""


@dataclass(frozen=True)
class ToyExperiment:
    """One toy training experiment's records, read once (`load_experiment`)."""

    path: Path
    experiment: dict[str, Any]
    """`experiment.json` (`ExperimentConfig.to_dict()`)"""
    rows: list[dict[str, Any]]
    """`results.csv`: one row per grid point"""
    summary: dict[str, Any] = field(default_factory=dict)
    """`summary.json` (the analysis; empty before it is written)"""

    @property
    def kind(self) -> str:
        return str(self.experiment.get("kind", "runs"))

    @property
    def name(self) -> str:
        return str(self.experiment.get("name", self.path.name))


def load_experiment(experiment_dir: str | Path) -> ToyExperiment:
    """The records of an experiment directory (`experiment.json`, `results.csv`, `summary.json`)."""
    path = Path(experiment_dir)
    experiment = read_json(path / "experiment.json")
    summary_path = path / "summary.json"
    summary = read_json(summary_path) if summary_path.exists() else {}
    return ToyExperiment(path=path, experiment=experiment, rows=load_results(path), summary=summary)


def load_results(experiment_dir: str | Path) -> list[dict[str, Any]]:
    """`results.csv` rows with numbers parsed (empty cells become None)."""
    rows = []
    with open(Path(experiment_dir) / "results.csv", encoding="utf-8") as handle:
        for raw in csv.DictReader(handle):
            row: dict[str, Any] = {}
            for key, value in raw.items():
                if value in ("", None):
                    row[key] = None
                    continue
                try:
                    number = float(value)
                    row[key] = int(number) if number.is_integer() and "." not in value else number
                except ValueError:
                    row[key] = value
            rows.append(row)
    return rows


def per_step_values(run_dir: str | Path, metric: str) -> dict[int, list[float]]:
    """`metric` of every seed at each step of one run (`metrics.jsonl`, one row per step per
    seed)."""
    per_step: dict[int, list[float]] = {}
    for row in read_jsonl(Path(run_dir) / "metrics.jsonl"):  # a torn last line is left out
        value = row.get(metric)
        if isinstance(value, (int, float)):
            per_step.setdefault(int(row["step"]), []).append(float(value))
    return per_step


def seed_band(per_step: dict[int, list[float]], level: float = 0.95) -> dict[str, np.ndarray]:
    """Mean over seeds per step with a t-band: `{step, mean, lo, hi}` arrays (no band for one
    seed)."""
    steps = np.array(sorted(per_step))
    values = [np.array(per_step[s]) for s in steps]
    mean = np.array([v.mean() for v in values])
    half = np.array(
        [
            t_quantile(len(v) - 1, level) * v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else 0.0
            for v in values
        ]
    )
    return {"step": steps, "mean": mean, "lo": mean - half, "hi": mean + half}


def metric_curve(run_dir: str | Path, metric: str, level: float = 0.95) -> dict[str, np.ndarray]:
    """Mean over seeds of `metric` per step with a t-band: `{step, mean, lo, hi}` arrays."""
    return seed_band(per_step_values(run_dir, metric), level)


def _point_curves(
    experiment: ToyExperiment, rows: Sequence[dict[str, Any]], metric: str
) -> dict[str, dict[str, np.ndarray]]:
    """`metric_curve` of each row's point, by method."""
    return {str(r["method"]): metric_curve(experiment.path / str(r["point"]), metric) for r in rows}


def plot_curve_set(
    curves: dict[str, dict[str, np.ndarray]],
    *,
    ylabel: str,
    title: str = "",
    log_y: bool = False,
    ax: Any = None,
) -> Any:
    """One line (with band) per method; `curves` maps method -> `metric_curve` output."""
    fig, ax = single_axes(ax, (5, 3.5))
    for method in sorted(curves, key=method_rank):
        c = curves[method]
        color = method_color(method)
        ax.plot(c["step"], c["mean"], color=color, label=method_label(method), lw=1.3)
        ax.fill_between(c["step"], c["lo"], c["hi"], color=color, alpha=0.2, lw=0)
    ax.set_xlabel("learner step n")
    ax.set_ylabel(ylabel)
    if log_y:
        ax.set_yscale("log")
    if title:
        ax.set_title(title, fontsize=9)
    return fig


def training_curves_data(
    experiment: ToyExperiment, delays: Sequence[int] | None = None
) -> dict[str, Any]:
    """The curves of `plot_training_curves`: `{"delays": [...], "curves": {metric: {delay:
    {method: metric_curve}}}}` for `delays` (default: the smallest, middle and largest)."""
    rows = [r for r in experiment.rows if r["delay"] is not None]
    all_delays = sorted({int(r["delay"]) for r in rows})
    if delays is None:
        delays = sorted({all_delays[0], all_delays[len(all_delays) // 2], all_delays[-1]})
    curves = {
        metric: {
            delay: _point_curves(experiment, [r for r in rows if int(r["delay"]) == delay], metric)
            for delay in delays
        }
        for metric, _, _ in TRAINING_METRICS
    }
    return {"delays": list(delays), "curves": curves}


def plot_training_curves(data: dict[str, Any], ax: Any = None) -> Any:
    """`J` (top) and `||grad J||^2` (bottom) vs step, one column per delay, per method
    (`training_curves_data`).

    `ax`: an array of axes of shape `[2, len(delays)]` (or None for a new figure).
    """
    import matplotlib.pyplot as plt

    delays = data["delays"]
    if ax is None:
        fig, axes = plt.subplots(
            2, len(delays), figsize=(4 * len(delays), 6), squeeze=False, sharex=True
        )
    else:
        axes = np.asarray(ax).reshape(2, len(delays))
        fig = axes[0, 0].figure
    for col, delay in enumerate(delays):
        for row_i, (metric, label, log_y) in enumerate(TRAINING_METRICS):
            plot_curve_set(
                data["curves"][metric][delay],
                ylabel=label,
                title=f"D = {delay}" if row_i == 0 else "",
                log_y=log_y,
                ax=axes[row_i, col],
            )
    axes[0, -1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def results_rows(experiment: ToyExperiment) -> list[dict[str, Any]]:
    """The experiment's `results.csv` rows (each metric with its interval over seeds)."""
    return experiment.rows


def _errorbar(ax: Any, x: list[float], row_list: list[dict[str, Any]], key: str, **kw: Any) -> None:
    y = np.array([r[key] for r in row_list], dtype=float)
    lo = np.array([r[f"{key}_lo"] for r in row_list], dtype=float)
    hi = np.array([r[f"{key}_hi"] for r in row_list], dtype=float)
    ax.errorbar(x, y, yerr=[y - lo, hi - y], capsize=3, marker="o", ms=3, **kw)


def plot_metric_vs_delay(
    rows: list[dict[str, Any]], key: str = "convergence_metric", ax: Any = None
) -> Any:
    """`key` (with its interval) vs `D`, one line per method (`results.csv` rows)."""
    fig, ax = single_axes(ax, (5, 3.5))
    methods = sorted({r["method"] for r in rows}, key=method_rank)
    for method in methods:
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["delay"])
        _errorbar(
            ax,
            [r["delay"] for r in mine],
            mine,
            key,
            color=method_color(method),
            label=method_label(method),
        )
    ax.set_xlabel("delay D")
    ax.set_ylabel(
        r"$\frac{1}{N}\sum_n \Vert\nabla J(\theta_n)\Vert^2$"
        if key == "convergence_metric"
        else key
    )
    ax.legend(fontsize=7)
    return fig


def plot_group_study(
    rows: list[dict[str, Any]], key: str = "mean_objective", ax: Any = None
) -> Any:
    """`key` vs `G` for GMC and TIC (`results.csv` rows of a group-size experiment)."""
    fig, ax = single_axes(ax, (5, 3.5))
    for method in GROUP_METHODS:
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["group_size"])
        if not mine:
            continue
        _errorbar(
            ax,
            [r["group_size"] for r in mine],
            mine,
            key,
            color=method_color(method),
            label=method_label(method),
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size G")
    names = {"mean_objective": "mean J over training", "final_objective": "final J"}
    ax.set_ylabel(names.get(key, key))
    ax.legend(fontsize=7)
    return fig


def plot_vs_delay(rows: list[dict[str, Any]], ax: Any = None) -> Any:
    """The convergence metric (left) and final `J` (right) vs `D` per method (`results.csv`
    rows). `ax`: two axes or None."""
    fig, axes = panel_axes(2, ax, width=5, height=3.8)
    plot_metric_vs_delay(rows, "convergence_metric", ax=axes[0])
    plot_metric_vs_delay(rows, "final_objective", ax=axes[1])
    axes[1].set_ylabel(r"final $J(\theta_N)$")
    fig.tight_layout()
    return fig


def plot_group_sizes(rows: list[dict[str, Any]], ax: Any = None) -> Any:
    """Mean `J` over training (left) and final `J` (right) vs `G`, GMC and TIC (`results.csv`
    rows of a group-size experiment). `ax`: two axes or None."""
    fig, axes = panel_axes(2, ax, width=5, height=3.8)
    plot_group_study(rows, "mean_objective", ax=axes[0])
    plot_group_study(rows, "final_objective", ax=axes[1])
    fig.tight_layout()
    return fig


def length_coupled_data(experiment: ToyExperiment) -> dict[str, dict[str, Any]]:
    """`J` and the realised lag per step and method, mean over seeds with a t-band:
    `{"objective": {method: curve}, "lag": {method: curve}}`."""
    return {
        "objective": _point_curves(experiment, experiment.rows, "policy/objective"),
        "lag": _point_curves(experiment, experiment.rows, "staleness/lag"),
    }


def plot_length_coupled(data: dict[str, dict[str, Any]], ax: Any = None) -> Any:
    """`J` (left) and the realised lag (right) vs step per method (`length_coupled_data`)."""
    fig, axes = panel_axes(2, ax, width=5, height=3.8)
    plot_curve_set(
        data["objective"], ylabel=r"$J(\theta_n)$", title="length-coupled delays", ax=axes[0]
    )
    axes[0].legend(fontsize=7)
    plot_curve_set(data["lag"], ylabel="realised lag", ax=axes[1])
    fig.tight_layout()
    return fig


def eps_star_data(experiment: ToyExperiment) -> dict[str, Any] | None:
    """The eps* fit of the experiment's analysis (`summary["eps_star"]`; None without it)."""
    return experiment.summary.get("eps_star") or None


def plot_eps_star(fit: dict[str, Any], ax: Any = None) -> Any:
    """Convergence metric vs `eps` for each `(N, D)` with `eps*` marked (`summary["eps_star"]`).

    `ax`: two axes (metric vs eps, eps* vs tau4) or None.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    else:
        axes = np.asarray(ax).reshape(-1)
        fig = axes[0].figure
    cmap = plt.get_cmap("viridis")
    table = fit["table"]
    for i, cell in enumerate(table):
        color = cmap(i / max(1, len(table) - 1))
        conv = np.array(cell["convergence_metric"])
        axes[0].plot(
            cell["eps_grid"],
            conv / conv.min(),
            marker="o",
            ms=3,
            color=color,
            label=f"N={cell['total_steps']}, D={cell['delay']}",
        )
        axes[0].axvline(cell["eps_star"], color=color, ls=":", lw=0.8)
    axes[0].set_xscale("log")
    axes[0].set_xlabel(r"$\epsilon$ (cap $1+\epsilon$)")
    axes[0].set_ylabel("conv. metric / its minimum")
    axes[0].legend(fontsize=6)
    usable = [c for c in table if c["tau4"] > 0]
    for i, n in enumerate(sorted({c["total_steps"] for c in usable})):
        color = f"C{i}"
        mine = [c for c in usable if c["total_steps"] == n]
        inner = [c for c in mine if c.get("censored") is None]
        edge = [c for c in mine if c.get("censored") is not None]
        axes[1].scatter(
            [c["tau4"] for c in inner],
            [c["eps_star"] for c in inner],
            color=color,
            label=f"N={n}" if inner else None,
        )
        for c in edge:  # censored: an open marker with an arrow in the censored direction
            up = c["censored"] == "above"
            axes[1].scatter(
                [c["tau4"]],
                [c["eps_star"]],
                facecolors="none",
                edgecolors=color,
                marker="o",
                label=None if inner or c is not edge[0] else f"N={n}",
            )
            axes[1].annotate(
                "",
                xy=(c["tau4"], c["eps_star"] * (1.6 if up else 0.6)),
                xytext=(c["tau4"], c["eps_star"]),
                arrowprops={"arrowstyle": "->", "lw": 0.8, "color": color},
            )
        if "tau4_exponent" in fit:
            t = np.geomspace(min(c["tau4"] for c in usable), max(c["tau4"] for c in usable), 50)
            pred = np.exp(
                fit["intercept"]
                + fit["tau4_exponent"] * np.log(t)
                + fit["n_exponent"] * math.log(n)
            )
            axes[1].plot(t, pred, lw=0.8)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel(r"$\bar\tau_4$ (realised mean of lag$^4$)")
    axes[1].set_ylabel(r"$\epsilon^\star$ (open, arrow: censored at a grid edge)")
    if "tau4_exponent" in fit:
        axes[1].set_title(
            f"fit: a = {fit['tau4_exponent']:.3f} (paper 1/7), "
            f"b = {fit['n_exponent']:.3f} (paper -3/14)",
            fontsize=8,
        )
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    return fig
