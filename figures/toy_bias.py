"""Figures of the toy-MDP estimator sweeps (`gmc-grpo toy sweep`), from the results table only.

Every plotting function takes the table's rows (a list of dicts, `load_results`), an optional
`ax`, and returns the figure; nothing here computes a statistic beyond selecting rows.

- `plot_bias_vs_staleness`: relative squared bias `||E g - grad J/T||^2 / ||grad J/T||^2` per
  method against the delay (or target KL), with its interval.
- `plot_second_moment_vs_staleness`: `E ||g||^2` per method, with Prop. 1's bound.
- `plot_bias_vs_group_size`: GMC and TIC squared bias against `G` (log-log) with fitted slopes.
- `plot_removed_mass_vs_bound`: removed mass against `KL / log(1+2 eps)` (GMC), `KL / c_eps` (TIC).

On log axes a squared bias whose estimate is `<= 0` (indistinguishable from zero) is drawn as an
open marker at the upper end of its interval (a visible upper bound), and an error bar whose lower
end is `<= 0` is drawn down to a tenth of the point (log axes cannot show zero).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from figures.common import save_figure, single_axes
from figures.style import method_color, method_label, method_order

Rows = list[dict[str, Any]]


def load_results(path: str | Path) -> Rows:
    """Rows of a sweep: a run directory (its `metrics.jsonl`) or a `metrics.jsonl` file."""
    from gmc_grpo.records import read_jsonl

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


def plot_bias_vs_staleness(
    rows: Rows, *, eps: float | None = None, group_size: int | None = None, ax=None
):
    """Relative squared bias per method against staleness at one `(eps, G)` (defaults: the
    paper's eps 0.28 if swept else the smallest, and `G = 8` if swept else the smallest)."""
    fig, ax = single_axes(ax)
    eps = eps if eps is not None else _default(rows, "eps", 0.28)
    g = group_size if group_size is not None else _default(rows, "group_size", 8.0)
    norm = {float(r["staleness"]): float(r["estimator/target_norm_sq"]) for r in rows}
    scale = max(norm.values()) if norm else 1.0
    for method in method_order():
        series = _series(rows, method, "staleness", "estimator/bias_sq", eps=eps, group_size=g)
        if series:
            _draw(ax, series, method, scale)
    ax.set_yscale("log")
    ax.set_xlabel(_staleness_label(rows))
    ax.set_ylabel("||E g - grad J/T||^2 / max ||grad J/T||^2")
    ax.set_title(f"squared bias (G={int(g) if g else '?'}, eps={eps})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_second_moment_vs_staleness(
    rows: Rows, *, eps: float | None = None, group_size: int | None = None, ax=None
):
    """`E ||g||^2` per method against staleness, with Prop. 1's bound (dashed)."""
    fig, ax = single_axes(ax)
    eps = eps if eps is not None else _default(rows, "eps", 0.28)
    g = group_size if group_size is not None else _default(rows, "group_size", 8.0)
    for method in method_order():
        series = _series(
            rows, method, "staleness", "estimator/second_moment", eps=eps, group_size=g
        )
        if series:
            _draw(ax, series, method)
    bounds = [
        float(r["chain/second_moment_bound"])
        for r in rows
        if r["method"] in ("tic", "gmc") and _eps_match(r, eps)
    ]
    if bounds:
        ax.axhline(bounds[0], color="k", ls="--", lw=1, label="Prop. 1 bound")
    ax.set_yscale("log")
    ax.set_xlabel(_staleness_label(rows))
    ax.set_ylabel("E ||g||^2")
    ax.set_title(f"second moment (G={int(g) if g else '?'}, eps={eps})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_bias_vs_group_size(
    rows: Rows,
    *,
    slopes: list[dict[str, Any]] | None = None,
    staleness: float | None = None,
    eps: float | None = None,
    ax=None,
):
    """GMC and TIC squared bias against `G` (log-log) at one staleness (default: the largest),
    with the fitted lines of `slopes` (`toy_mdps.sweep.analysis.group_size_slopes`) when given."""
    fig, ax = single_axes(ax)
    eps = eps if eps is not None else _default(rows, "eps", 0.28)
    values = sorted({float(r["staleness"]) for r in rows})
    st = staleness if staleness is not None else (values[-1] if values else None)
    for method in ("tic", "gmc"):
        series = _series(rows, method, "group_size", "estimator/bias_sq", eps=eps, staleness=st)
        if not series:
            continue
        _draw(ax, series, method)
        for fit in slopes or []:
            if fit["method"] != method or fit.get("slope") is None:
                continue
            if float(fit["staleness"]) != st or not math.isclose(float(fit["eps"]), eps):
                continue
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
    ax.set_xlabel("group size G")
    ax.set_ylabel("||E g - grad J/T||^2")
    ax.set_title(f"bias vs G (staleness {st:g}, eps={eps})" if st is not None else "bias vs G")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_removed_mass_vs_bound(rows: Rows, *, ax=None):
    """Measured removed mass (with interval) against its KL bound, GMC and TIC, all grid points."""
    fig, ax = single_axes(ax)
    lo_all, hi_all = math.inf, 0.0
    for method in ("tic", "gmc"):
        pts = [
            r
            for r in rows
            if r["method"] == method
            and r.get("chain/removed_mass_bound")
            and float(r["chain/removed_mass_bound"]) > 0
            and r.get("ratio/removed_mass") is not None
            and float(r["ratio/removed_mass"]) > 0
        ]
        if not pts:
            continue
        xs = [float(r["chain/removed_mass_bound"]) for r in pts]
        ys = [float(r["ratio/removed_mass"]) for r in pts]
        ax.scatter(xs, ys, s=12, color=method_color(method), label=method_label(method), alpha=0.8)
        lo_all = min(lo_all, *xs, *ys)
        hi_all = max(hi_all, *xs, *ys)
    if hi_all > 0:
        ax.plot([lo_all, hi_all], [lo_all, hi_all], "k--", lw=1, label="removed = bound")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("KL / log(1+2 eps) (GMC),  KL / c_eps (TIC)")
    ax.set_ylabel("removed importance mass")
    ax.set_title("removed mass vs its KL bound")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def write_toy_figures(
    rows: Rows, out_dir: str | Path, *, slopes: list[dict[str, Any]] | None = None
) -> list[Path]:
    """All four figures of a sweep into `out_dir` (PNG and PDF)."""
    out_dir = Path(out_dir)
    paths: list[Path] = []
    paths += save_figure(plot_bias_vs_staleness(rows), out_dir / "bias_vs_staleness")
    paths += save_figure(
        plot_second_moment_vs_staleness(rows), out_dir / "second_moment_vs_staleness"
    )
    if len({int(r["group_size"]) for r in rows}) > 1:
        paths += save_figure(
            plot_bias_vs_group_size(rows, slopes=slopes), out_dir / "bias_vs_group_size"
        )
    paths += save_figure(plot_removed_mass_vs_bound(rows), out_dir / "removed_mass_vs_bound")
    return paths


def draw_sweep(run_dir: str | Path) -> list[Path]:
    """The figures of a finished sweep, from its saved records (`metrics.jsonl` and the slopes
    of `summary.json`), into `run_dir/figures/`; returns the paths."""
    from gmc_grpo.records import read_json

    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    summary = read_json(summary_path) if summary_path.exists() else {}
    slopes = summary.get("group_size_slopes")
    return write_toy_figures(load_results(run_dir), run_dir / "figures", slopes=slopes)
