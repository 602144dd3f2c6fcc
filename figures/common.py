"""Shared pieces of the figure modules: data containers, record look-ups, drawing, saving.

Data and drawing are kept apart: the `*_data` functions of `figures.llm` and
`figures.bounds_vs_runs` return a `FigureData` (or a `BoundsData`); `plot_panels` draws a
`FigureData`. Tables (`figures.tables`) are numbers too, rendered by `figures.tables`.
"""

from __future__ import annotations

import math
import os
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from figures.discover import Run
from figures.style import (
    MAX_COLUMNS,
    PANEL_HEIGHT,
    PANEL_WIDTH,
    clip_band,
    figure_legend,
    figure_style,
    grid_shape,
    method_color,
    method_label,
    method_rank,
    use_agg,
)

# ------------------------------------------------------------------------------------------
# Containers
# ------------------------------------------------------------------------------------------


@dataclass
class Series:
    """One curve: `values[i]` at `steps[i]`, exactly as read from the run's records.

    `smoothed` (same length) is a centred moving average for display only.
    """

    method: str
    run: str
    steps: list[float]
    values: list[float]
    smoothed: list[float] | None = None
    lo: list[float] | None = None
    """lower end of the 95% interval over seeds at each step (None: one seed)"""
    hi: list[float] | None = None
    """upper end of that interval"""
    seeds: int = 1
    """how many seeds `values` is the mean of"""


@dataclass
class Reference:
    """A value the paper reports, drawn as a labelled marker (`y`) or vertical span (`x`, `x2`)."""

    label: str
    method: str | None = None
    x: float | None = None
    y: float | None = None
    x2: float | None = None


@dataclass
class Panel:
    """One axes of a figure: its curves, what is missing (and why), the paper's references."""

    title: str
    key: Any
    series: list[Series] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)


@dataclass
class FigureData:
    """Everything a figure shows; `plot_panels` draws it."""

    name: str
    title: str
    xlabel: str
    ylabel: str
    panels: list[Panel]
    notes: list[str] = field(default_factory=list)
    caption: str = ""
    value_range: tuple[float | None, float | None] | None = None
    """the range the quantity can take (`(0, 100)` for a percentage, `(0, None)` for a
    non-negative one): the bands over seeds are clipped to it (None: unclipped)"""

    @property
    def has_data(self) -> bool:
        return any(p.series for p in self.panels)

    @property
    def why_empty(self) -> str:
        """What `gmc-grpo figures` says when no panel has a curve: the missing runs (or that no
        run matched at all, when there is no panel)."""
        missing = sorted({m for p in self.panels for m in p.missing})
        return "missing: " + ", ".join(missing) if missing else "no matching run was found"

    @property
    def has_references(self) -> bool:
        """Some panel draws a value or span of the paper (`Panel.references`)."""
        return any(p.references for p in self.panels)

    @property
    def has_bands(self) -> bool:
        """Some curve is a mean of seeds drawn with its 95% band."""
        return any(s.lo is not None and s.hi is not None for p in self.panels for s in p.series)

    def series(self, key: Any, method: str) -> Series | None:
        """The curve of `method` in the panel keyed `key` (None when missing)."""
        for panel in self.panels:
            if panel.key == key:
                for s in panel.series:
                    if s.method == method:
                        return s
        return None


# ------------------------------------------------------------------------------------------
# Record look-ups
# ------------------------------------------------------------------------------------------


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def metric_curve(run: Run, key: str) -> tuple[list[float], list[float]]:
    """`(steps, values)` of metric `key` over the run's metrics rows (non-finite rows skipped)."""
    steps, values = [], []
    for row in run.metrics:
        value = row.get(key)
        if finite(value) and row.get("step") is not None:
            steps.append(float(row["step"]))
            values.append(float(value))
    return steps, values


def eval_score(row: dict[str, Any], decoding: str) -> float | None:
    """Percent score of an evals row: greedy accuracy, or sampled Pass@1 (avg@n)."""
    if decoding == "greedy":
        value = row.get("accuracy")
    else:
        value = (row.get("pass_at_k") or {}).get("1", row.get("avg_at_n"))
        if value is None:
            value = row.get("avg_at_n")
    return 100.0 * float(value) if finite(value) else None


def eval_curve(run: Run, benchmark: str, decoding: str) -> tuple[list[float], list[float]]:
    """`(steps, percent scores)` of one benchmark and decoding, sorted by step."""
    points = []
    for row in run.evals:
        if row.get("benchmark") != benchmark or row.get("decoding") != decoding:
            continue
        score = eval_score(row, decoding)
        if score is not None and row.get("step") is not None:
            points.append((float(row["step"]), score))
    points.sort()
    return [p[0] for p in points], [p[1] for p in points]


def eval_row(run: Run, step: int | None, benchmark: str, decoding: str) -> dict[str, Any] | None:
    """The evals row of `(step, benchmark, decoding)`; `step=None` matches a row without step."""
    for row in run.evals:
        if (
            row.get("benchmark") == benchmark
            and row.get("decoding") == decoding
            and row.get("step") == step
        ):
            return row
    return None


def final_eval_step(run: Run, benchmarks: Sequence[str]) -> int | None:
    """The largest step with an evaluation of any of `benchmarks` (None when there is none)."""
    steps = [
        int(r["step"])
        for r in run.evals
        if r.get("benchmark") in benchmarks and r.get("step") is not None
    ]
    return max(steps) if steps else None


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def pick_run(candidates: Sequence[Run], notes: list[str], cell: str) -> Run | None:
    """One run per cell: the one with the most metrics rows (then evals); others noted."""
    if not candidates:
        return None
    ranked = sorted(candidates, key=lambda r: (len(r.metrics), len(r.evals), str(r.path)))
    chosen = ranked[-1]
    if len(ranked) > 1:
        others = ", ".join(r.name for r in ranked[:-1])
        notes.append(f"{cell}: {len(ranked)} runs match; using {chosen.name} (not: {others})")
    return chosen


#: Config fields that differ between the seeds of one setting (or say nothing about it).
# an LLM run's seed is `run_seed` (`seed` in runs written before the rename)
SEED_FIELDS = frozenset({"run_seed", "seed", "out", "cache_dir", "progress", "resume"})


def setting_key(run: Run) -> str:
    """The run's config without `SEED_FIELDS`, as sorted JSON: equal for the seeds of one
    setting (a suite's runs of one method and delay)."""
    import json

    config = {k: v for k, v in run.config.items() if k not in SEED_FIELDS}
    return json.dumps(config, sort_keys=True, default=str)


def llm_run_seed(run: Run) -> Any:
    """An LLM run's seed: its config's `run_seed`, or `seed` in runs written before the rename
    (`gmc_grpo.configs.FIELD_ALIASES`); None when it has neither."""
    return run.config.get("run_seed", run.config.get("seed"))


def pick_seed_runs(candidates: Sequence[Run], notes: list[str], cell: str) -> list[Run]:
    """The runs of one cell: the seeds of one setting (runs with the same config but for the
    seed), one run per seed (the longest), sorted by seed. With several settings, the one with the
    most seeds (then the most metrics rows) is used and the others are noted."""
    groups: dict[str, dict[Any, list[Run]]] = {}
    for run in candidates:
        groups.setdefault(setting_key(run), {}).setdefault(llm_run_seed(run), []).append(run)
    if not groups:
        return []
    chosen = []
    for by_seed in groups.values():
        per_seed = []
        for seed in sorted(by_seed, key=str):
            runs = by_seed[seed]
            per_seed.append(pick_run(runs, notes, f"{cell} seed {seed}"))
        chosen.append(per_seed)
    chosen.sort(key=lambda rs: (len(rs), sum(len(r.metrics) for r in rs), str(rs[0].path)))
    best = chosen[-1]
    if len(chosen) > 1:
        others = "; ".join(", ".join(r.name for r in rs) for rs in chosen[:-1])
        notes.append(
            f"{cell}: {len(chosen)} settings match; using {len(best)} seed(s) of "
            f"{best[0].name} (not: {others})"
        )
    return best


def seed_mean_series(
    method: str, runs: Sequence[Run], curves: Sequence[tuple[list[float], list[float]]]
) -> Series | None:
    """One `Series` from the curves of the seeds of one setting: the mean at every step all seeds
    have, with a 95% Student-t interval over seeds (`lo`, `hi`) when there are two or more."""
    from gmc_grpo.stats import t_interval

    curves = [(steps, values) for steps, values in curves if steps]
    if not curves:
        return None
    if len(curves) == 1:
        (steps, values), run = curves[0], runs[0]
        return Series(method=method, run=run.name, steps=list(steps), values=list(values))
    maps = [dict(zip(steps, values, strict=True)) for steps, values in curves]
    common = sorted(set.intersection(*(set(m) for m in maps)))
    intervals = [t_interval([m[step] for m in maps]) for step in common]
    names = ", ".join(r.name for r in runs)
    return Series(
        method=method,
        run=f"mean of {len(curves)} seeds ({names})",
        steps=common,
        values=[i["mean"] for i in intervals],
        lo=[i["lo"] for i in intervals],
        hi=[i["hi"] for i in intervals],
        seeds=len(curves),
    )


# ------------------------------------------------------------------------------------------
# Drawing
# ------------------------------------------------------------------------------------------


def pyplot():
    """`matplotlib.pyplot`, on the Agg backend unless a backend was already chosen (pyplot
    imported, or `MPLBACKEND` set, as Jupyter kernels do), so notebooks keep showing figures."""
    if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
        use_agg()
    import matplotlib.pyplot as plt

    return plt


def single_axes(ax: Any = None, figsize: tuple[float, float] = (5.0, 3.6)):
    """`(figure, axes)`: a new figure with one axes, or the given axes and its figure."""
    if ax is None:
        fig, ax = pyplot().subplots(figsize=figsize)
        return fig, ax
    return ax.figure, ax


def panel_axes(
    count: int,
    ax: Any = None,
    width: float = PANEL_WIDTH,
    height: float = PANEL_HEIGHT,
    *,
    max_columns: int = MAX_COLUMNS,
    sharey: bool = False,
):
    """`(figure, [axes])` for `count` panels: a new compact grid (`figures.style.grid_shape`,
    constrained layout, `width` x `height` inches per panel, a shared y axis when `sharey`; the
    cells the grid has beyond `count` are removed), or the given Axes / sequence of Axes."""
    plt = pyplot()
    if ax is None:
        rows, columns = grid_shape(max(count, 1), max_columns)
        fig, axes = plt.subplots(
            rows,
            columns,
            figsize=(max(width * columns, 4.5), height * rows + 0.6),
            squeeze=False,
            sharey=sharey,
            layout="constrained",
        )
        cells = list(axes.ravel())
        for extra in cells[count:]:
            extra.remove()
        return fig, cells[: max(count, 1)]
    axes = list(ax) if isinstance(ax, (list, tuple)) else [ax]
    if hasattr(ax, "ravel"):
        axes = list(ax.ravel())
    if len(axes) < count:
        raise ValueError(f"this figure has {count} panels; {len(axes)} axes were given")
    return axes[0].figure, axes[:count]


def coinciding(series: Sequence[Series]) -> list[tuple[str, str]]:
    """Pairs of methods whose curves are identical (same steps, values equal to 1e-9): drawn in
    order, the later one hides the earlier; the figure says so."""
    pairs = []
    for i, a in enumerate(series):
        for b in series[i + 1 :]:
            if a.steps == b.steps and all(
                abs(x - y) <= 1e-9 * max(1.0, abs(x))
                for x, y in zip(a.values, b.values, strict=True)
            ):
                pairs.append((a.method, b.method))
    return pairs


def plot_panels(data: FigureData, ax: Any = None, raw_alpha: float = 0.25):
    """Draw a `FigureData` in the figures' one style (`figures.style.RC`): one panel per panel
    that has a curve (a panel with no run is not drawn; the figure's footnote names it), in a
    compact grid with a shared y axis; per panel each method's curve in its fixed colour (faint
    raw points and a solid smoothed line when `smoothed` is set; a shaded band for the 95%
    interval over seeds, clipped to `data.value_range`), the paper's references as open markers
    or grey spans; one legend below the panels, titled with the notes (a panel's missing runs,
    two methods' curves that coincide, the panels not drawn). Returns the figure."""
    with figure_style():
        drawn = [p for p in data.panels if p.series] or data.panels[:1]
        fig, axes = panel_axes(len(drawn), ax, sharey=True)
        notes = []
        for axis, panel in zip(axes, drawn, strict=False):
            _draw_panel(axis, panel, data, raw_alpha)
            # said below the panels, not over the data: curves drawn over others, what is missing
            series = sorted(panel.series, key=lambda s: method_rank(s.method))
            notes += [
                f"{panel.title}: {method_label(b)} hides {method_label(a)} (identical curves)"
                for a, b in coinciding(series)
            ]
            if panel.missing and panel.series:
                notes.append(f"{panel.title}: missing " + "; ".join(panel.missing))
        for axis in axes:
            axis.set_xlabel(data.xlabel)
        axes[0].set_ylabel(data.ylabel)
        for axis in axes[1:]:
            if axis.get_subplotspec().colspan.start == 0:
                axis.set_ylabel(data.ylabel)
        absent = [p for p in data.panels if not p.series and p not in drawn]
        footnotes = [
            f"not drawn, no curve: {p.title} ({'; '.join(p.missing) or 'no curve'})" for p in absent
        ]
        figure_legend(fig, axes, note="\n".join(notes + footnotes))
        if data.title:
            # about 13 characters of 10-point text per inch: a narrow figure wraps its title
            width = max(30, int(fig.get_figwidth() * 13))
            fig.suptitle("\n".join(textwrap.wrap(data.title, width)))
    return fig


def _draw_panel(axis: Any, panel: Panel, data: FigureData, raw_alpha: float) -> None:
    series = sorted(panel.series, key=lambda s: method_rank(s.method))
    for s in series:
        color = method_color(s.method)
        label = method_label(s.method) + (f" (mean of {s.seeds} seeds)" if s.seeds > 1 else "")
        if s.lo is not None and s.hi is not None:  # the 95% interval over seeds
            lo, hi = clip_band(s.lo, s.hi, data.value_range)
            axis.fill_between(s.steps, lo, hi, color=color, alpha=0.18, lw=0)
        if s.smoothed is not None:
            axis.plot(s.steps, s.values, color=color, alpha=raw_alpha, lw=0.8)
            axis.plot(s.steps, s.smoothed, color=color, lw=1.6, label=label)
        else:
            axis.plot(s.steps, s.values, color=color, lw=1.4, marker=".", ms=4, label=label)
    for ref in panel.references:
        color = method_color(ref.method) if ref.method else "0.3"
        if ref.y is not None:
            axis.plot(
                [ref.x], [ref.y], ls="none", marker="D", mfc="none", mec=color, ms=6, mew=1.3,
                label=ref.label,
            )  # fmt: skip
        elif ref.x is not None and ref.x2 is not None:
            axis.axvspan(ref.x, ref.x2, color="0.5", alpha=0.2, label=ref.label)
        elif ref.x is not None:
            axis.axvline(ref.x, color=color, ls=":", lw=1.2, label=ref.label)
    axis.set_title(panel.title)


PNG_DPI = 150
"""resolution of the PNG figures (sharp in a report at full width; the PDF is vector)"""


def save_figure(fig: Any, stem: str | Path, formats: Sequence[str] = ("png", "pdf")) -> list[Path]:
    """Write `stem.<format>` for each format (PNG at `PNG_DPI`); close the figure; return paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in formats:
        path = stem.with_suffix(f".{ext}")
        fig.savefig(path, dpi=PNG_DPI if ext == "png" else None)
        paths.append(path)
    pyplot().close(fig)
    return paths
