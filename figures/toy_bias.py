"""Figures of the toy-MDP estimator sweeps (`gmc-grpo toy sweep`), from the results table only.

A sweep's records are read once (`load_sweep`: its rows and fitted slopes, a `SweepRecords`);
each figure's numbers come from a `*_data` function (rows in, `Curves` out: per method the mean
over seeds with its interval at each grid point), and each plot takes those numbers, an optional
`ax`, and returns the figure. The figures are entries of `figures.registry` (`reads="sweep"`):

- `bias_vs_staleness`: relative squared bias `||E g - grad J/T||^2 / ||grad J/T||^2` per
  method against the delay (or target KL), with its interval.
- `second_moment_vs_staleness`: `E ||g||^2` per method, with Prop. 1's bound.
- `bias_vs_group_size`: GMC and TIC squared bias against `G` (log-log) with fitted slopes.
- `removed_mass_vs_bound`: removed mass against its bound, `KL / log(1+2 eps)` (GMC) or
  `KL / c_eps` (TIC), for every method whose spec claims one (`MethodSpec.removed_mass_bound`).

On log axes a squared bias whose estimate is `<= 0` (indistinguishable from zero) is drawn as an
open marker at the upper end of its interval (a visible upper bound), and an error bar whose lower
end is `<= 0` is drawn down to a tenth of the point (log axes cannot show zero).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidence.runs_vs_theory import removed_mass_kind
from figures.common import single_axes
from figures.discover import Run
from figures.style import (
    method_color,
    method_label,
    method_order,
    method_rank,
    method_spec,
)
from gmc_grpo.defaults import PAPER_EPS

Rows = list[dict[str, Any]]
PAPER_GROUP_SIZE = 8.0
"""the paper's group size (Appendix B.1): the default slice of the staleness figures"""
SLOPE_METHODS = ("tic", "gmc")
"""the methods whose bias-vs-G slopes the sweep fits (`toy_mdps.sweep.analysis`): the paper's
claim is GMC's bias shrinks with G and TIC's does not"""


def load_results(path: str | Path) -> Rows:
    """Rows of a sweep: a run directory (its `metrics.jsonl`) or a `metrics.jsonl` file."""
    from gmc_grpo.json_files import read_jsonl

    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist (run `gmc-grpo toy sweep` first)")
    return read_jsonl(path)


def _eps_match(row: dict[str, Any], eps: float | None) -> bool:
    if row.get("eps") is None:
        return True  # methods without eps appear once per cell
    return eps is None or math.isclose(float(row["eps"]), eps)


def _default(rows: Rows, key: str, prefer: float | None = None) -> float | None:
    values = sorted({float(r[key]) for r in rows if r.get(key) is not None})
    if not values:
        return None
    if prefer is not None and prefer in values:
        return prefer
    return values[0]


def _series(rows: Rows, method: str, x_key: str, y_key: str, **match: float | None) -> list[tuple]:
    """`[(x, y, lo, hi)]` averaged over seeds, sorted by x."""
    groups: dict[float, list[tuple[float, float, float]]] = {}
    for r in rows:
        if r["method"] != method or not _eps_match(r, match.get("eps")):
            continue
        if any(k != "eps" and v is not None and float(r[k]) != v for k, v in match.items()):
            continue
        y = r.get(y_key)
        if y is None:
            continue
        lo = r.get(f"{y_key}_lo", y)
        hi = r.get(f"{y_key}_hi", y)
        groups.setdefault(float(r[x_key]), []).append((float(y), float(lo), float(hi)))
    out = []
    for x in sorted(groups):
        vals = groups[x]
        n = len(vals)
        out.append(
            (
                x,
                sum(v[0] for v in vals) / n,
                sum(v[1] for v in vals) / n,
                sum(v[2] for v in vals) / n,
            )
        )
    return out


def _draw(ax, series: list[tuple], method: str, scale: float = 1.0) -> None:
    color = method_color(method)
    xs = [s[0] for s in series]
    ys = [s[1] / scale for s in series]
    pos = [
        (x, y, lo / scale, hi / scale)
        for (x, _, lo, hi), y in zip(series, ys, strict=True)
        if y > 0
    ]
    if pos:
        ax.errorbar(
            [p[0] for p in pos],
            [p[1] for p in pos],
            yerr=[[p[1] - max(p[2], p[1] / 10) for p in pos], [p[3] - p[1] for p in pos]],
            color=color,
            marker="o",
            ms=4,
            capsize=2,
            label=method_label(method),
        )
    zero = [
        (x, hi / scale) for (x, y, _, hi), x2 in zip(series, xs, strict=True) if y <= 0 and hi > 0
    ]
    if zero:
        ax.plot(
            [z[0] for z in zero],
            [z[1] for z in zero],
            ls="none",
            marker="o",
            mfc="none",
            color=color,
            ms=5,
        )


def _staleness_label(rows: Rows) -> str:
    mode = rows[0].get("behavior", "trajectory") if rows else "trajectory"
    return "delay tau (learner steps)" if mode == "trajectory" else "target KL(pi || mu)"


# ------------------------------------------------------------------------------------------
# Numbers: the records of one sweep, and each figure's curves
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepRecords:
    """One finished sweep, read once (`load_sweep`): its rows and its group-size slopes."""

    name: str
    """the run directory's name"""
    rows: Rows
    """`metrics.jsonl`: one row per grid point and seed"""
    slopes: list[dict[str, Any]] | None = None
    """`summary.json`'s `group_size_slopes` (`toy_mdps.sweep.analysis.group_size_slopes`)"""


def load_sweep(run_dir: str | Path) -> SweepRecords:
    """The records of a sweep directory (`metrics.jsonl` and the slopes of `summary.json`)."""
    from gmc_grpo.json_files import read_json

    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    summary = read_json(summary_path) if summary_path.exists() else {}
    rows = load_results(run_dir)
    return SweepRecords(name=run_dir.name, rows=rows, slopes=summary.get("group_size_slopes"))


def sweeps_found(runs: Sequence[Run]) -> list[SweepRecords]:
    """The sweeps among the runs `figures.discover` found (the registry's `toy_sweeps`)."""
    return [
        SweepRecords(
            name=run.name,
            rows=list(run.record.metrics),  # read once by `discover`; none: "has no rows"
            slopes=(run.record.summary or {}).get("group_size_slopes"),
        )
        for run in runs
        if run.kind == "toy_sweep"
    ]


@dataclass(frozen=True)
class Curves:
    """One figure's curves: per method `[(x, mean, lo, hi)]` (seeds averaged), sorted by `x`,
    at one grid slice; `scale` divides every `y` for display, `bound` is a horizontal line."""

    series: dict[str, list[tuple[float, float, float, float]]]
    xlabel: str
    eps: float | None = None
    group_size: float | None = None
    staleness: float | None = None
    scale: float = 1.0
    bound: float | None = None
    fits: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """per method, the fitted lines drawn over its points (`bias_vs_group_size`)"""


def _grid_slice(rows: Rows, eps: float | None, group_size: int | None) -> tuple[Any, Any]:
    eps = eps if eps is not None else _default(rows, "eps", PAPER_EPS)
    g = group_size if group_size is not None else _default(rows, "group_size", PAPER_GROUP_SIZE)
    return eps, g


def bias_vs_staleness_data(
    records: SweepRecords | Rows, *, eps: float | None = None, group_size: int | None = None
) -> Curves:
    """Squared bias per method against staleness at one `(eps, G)` (defaults: the paper's eps
    0.28 if swept else the smallest, and `G = 8` if swept else the smallest), scaled by the
    largest `||grad J / T||^2` of the sweep."""
    rows = _rows(records)
    eps, g = _grid_slice(rows, eps, group_size)
    norm = {float(r["staleness"]): float(r["estimator/target_norm_sq"]) for r in rows}
    series = {}
    for method in method_order():
        points = _series(rows, method, "staleness", "estimator/bias_sq", eps=eps, group_size=g)
        if points:
            series[method] = points
    return Curves(
        series=series,
        xlabel=_staleness_label(rows),
        eps=eps,
        group_size=g,
        scale=max(norm.values()) if norm else 1.0,
    )


def second_moment_vs_staleness_data(
    records: SweepRecords | Rows, *, eps: float | None = None, group_size: int | None = None
) -> Curves:
    """`E ||g||^2` per method against staleness at one `(eps, G)`, with Prop. 1's bound (the
    bound of the methods whose spec puts them in the weighted class with the cap `1 + eps`)."""
    rows = _rows(records)
    eps, g = _grid_slice(rows, eps, group_size)
    series = {}
    for method in method_order():
        points = _series(
            rows, method, "staleness", "estimator/second_moment", eps=eps, group_size=g
        )
        if points:
            series[method] = points
    bounds = [
        float(r["chain/second_moment_bound"])
        for r in rows
        if _capped_by_eps(r["method"]) and _eps_match(r, eps)
    ]
    return Curves(
        series=series,
        xlabel=_staleness_label(rows),
        eps=eps,
        group_size=g,
        bound=bounds[0] if bounds else None,
    )


def bias_vs_group_size_data(
    records: SweepRecords | Rows,
    *,
    slopes: list[dict[str, Any]] | None = None,
    staleness: float | None = None,
    eps: float | None = None,
) -> Curves | None:
    """GMC's and TIC's squared bias against `G` at one staleness (default: the largest) with
    their fitted slopes (`slopes`, default the sweep's); None for a sweep of one `G`."""
    rows = _rows(records)
    if len({int(r["group_size"]) for r in rows}) < 2:
        return None
    if slopes is None and isinstance(records, SweepRecords):
        slopes = records.slopes
    eps = eps if eps is not None else _default(rows, "eps", PAPER_EPS)
    values = sorted({float(r["staleness"]) for r in rows})
    st = staleness if staleness is not None else (values[-1] if values else None)
    series, fits = {}, {}
    for method in SLOPE_METHODS:
        points = _series(rows, method, "group_size", "estimator/bias_sq", eps=eps, staleness=st)
        if not points:
            continue
        series[method] = points
        fits[method] = [
            fit
            for fit in slopes or []
            if fit["method"] == method
            and fit.get("slope") is not None
            and float(fit["staleness"]) == st
            and math.isclose(float(fit["eps"]), eps)
        ]
    return Curves(series=series, xlabel="group size G", eps=eps, staleness=st, fits=fits)


def removed_mass_vs_bound_data(records: SweepRecords | Rows) -> dict[str, tuple[list, list]]:
    """Per method whose spec claims a removed-mass bound: `(bounds, removed masses)` of every
    grid point where both are positive (log axes)."""
    rows = _rows(records)
    out = {}
    for method in method_order():
        if removed_mass_kind(method) is None:
            continue
        pts = [
            r
            for r in rows
            if r["method"] == method
            and r.get("chain/removed_mass_bound")
            and float(r["chain/removed_mass_bound"]) > 0
            and r.get("ratio/removed_mass") is not None
            and float(r["ratio/removed_mass"]) > 0
        ]
        if pts:
            out[method] = (
                [float(r["chain/removed_mass_bound"]) for r in pts],
                [float(r["ratio/removed_mass"]) for r in pts],
            )
    return out


def _rows(records: SweepRecords | Rows) -> Rows:
    return records.rows if isinstance(records, SweepRecords) else records


def _capped_by_eps(method: str) -> bool:
    """The method's spec puts it in the weighted class with the cap `1 + eps` (TIC, GMC, a
    user's capped method): Prop. 1's bound at that `eps` applies to it."""
    spec = method_spec(method)
    return spec is not None and spec.uses_eps and spec.class_cap is not None


# ------------------------------------------------------------------------------------------
# Plots: finished numbers in, the figure out
# ------------------------------------------------------------------------------------------


def _g_text(g: float | None) -> str:
    return str(int(g)) if g else "?"


def plot_bias_vs_staleness(curves: Curves, *, ax=None):
    """Relative squared bias per method against staleness (`bias_vs_staleness_data`)."""
    ylabel = r"$\Vert \mathbb{E}\,g - \nabla J/T\Vert^2 \,/\, \max \Vert\nabla J/T\Vert^2$"
    return _plot_vs_staleness(curves, ylabel, "squared bias", ax)


def plot_second_moment_vs_staleness(curves: Curves, *, ax=None):
    """`E ||g||^2` per method against staleness, with Prop. 1's bound dashed
    (`second_moment_vs_staleness_data`)."""
    return _plot_vs_staleness(curves, "E ||g||^2", "second moment", ax)


def _plot_vs_staleness(curves: Curves, ylabel: str, what: str, ax: Any):
    """Per method its curve against staleness on a log scale (divided by `curves.scale`), and
    `curves.bound` as a dashed line when there is one."""
    fig, ax = single_axes(ax)
    for method, series in curves.series.items():
        _draw(ax, series, method, curves.scale)
    if curves.bound is not None:
        ax.axhline(curves.bound, color="k", ls="--", lw=1, label="Prop. 1 bound")
    ax.set_yscale("log")
    ax.set_xlabel(curves.xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{what} (G={_g_text(curves.group_size)}, eps={curves.eps})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_bias_vs_group_size(curves: Curves, *, ax=None):
    """Squared bias against `G` (log-log) with the fitted lines (`bias_vs_group_size_data`)."""
    fig, ax = single_axes(ax)
    for method, series in curves.series.items():
        _draw(ax, series, method)
        for fit in curves.fits.get(method, []):
            gs = fit["group_sizes_used"]
            xs = [min(gs), max(gs)]
            ys = [math.exp(fit["intercept"] + fit["slope"] * math.log(x)) for x in xs]
            ax.plot(
                xs,
                ys,
                color=method_color(method),
                ls=":",
                label=f"{method_label(method)} slope {fit['slope']:.2f} "
                f"[{fit['slope_lo']:.2f}, {fit['slope_hi']:.2f}], {fit['n_points']} points",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(curves.xlabel)
    ax.set_ylabel(r"$\Vert \mathbb{E}\,g - \nabla J/T\Vert^2$")
    st, eps = curves.staleness, curves.eps
    ax.set_title(f"bias vs G (staleness {st:g}, eps={eps})" if st is not None else "bias vs G")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_removed_mass_vs_bound(points: dict[str, tuple[list, list]], *, ax=None):
    """Measured removed mass against its KL bound per method, all grid points
    (`removed_mass_vs_bound_data`), with the line removed = bound."""
    fig, ax = single_axes(ax)
    lo_all, hi_all = math.inf, 0.0
    for method in sorted(points, key=_draw_rank):
        xs, ys = points[method]
        ax.scatter(xs, ys, s=12, color=method_color(method), label=method_label(method), alpha=0.8)
        lo_all = min(lo_all, *xs, *ys)
        hi_all = max(hi_all, *xs, *ys)
    if hi_all > 0:
        ax.plot([lo_all, hi_all], [lo_all, hi_all], "k--", lw=1, label="removed = bound")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"$\mathrm{KL}/\log(1+2\epsilon)$ (GMC),  $\mathrm{KL}/c_\epsilon$ (TIC)")
    ax.set_ylabel("removed importance mass")
    ax.set_title("removed mass vs its KL bound")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _draw_rank(method: str) -> tuple[int, int]:
    """TIC before GMC (as the paper's figures), then any other method in the registry's order."""
    order = ("tic", "gmc")
    return (order.index(method), 0) if method in order else (len(order), method_rank(method))
