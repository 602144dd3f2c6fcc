"""Shared plot style: one fixed colour and label per method, used by every figure.

Colours are the Okabe-Ito palette (colour-blind safe), fixed so a method looks the same in every
figure of the toy and LLM tracks. Labels and the drawing order come from the method registry
(`gmc_grpo.methods`), so a user's registered method is drawn like the paper's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gmc_grpo.methods import MethodSpec, get_method, method_names

# Colours of the paper's methods; a method registered by a user gets the palette's sky blue.
METHOD_COLORS: dict[str, str] = {
    "is": "#000000",
    "grpo": "#999999",
    "tic": "#E69F00",
    "gmc": "#0072B2",
    "vcpo": "#009E73",
    "gac": "#CC79A7",
    "a3po": "#D55E00",
}
OTHER_COLOR = "#56B4E9"


def method_color(method: str) -> str:
    """The fixed colour of `method` (a neutral sky blue for methods outside the paper)."""
    return METHOD_COLORS.get(method, OTHER_COLOR)


def method_spec(method: str | None) -> MethodSpec | None:
    """The registry's spec of `method` (None when it is not registered): what a figure asks
    about a method (its label, its removed-mass bound, whether `eps` caps it)."""
    if method is None:
        return None
    try:
        return get_method(method)
    except ValueError:
        return None


def method_label(method: str) -> str:
    """The display name of `method` (its registry label; the name itself when unknown)."""
    spec = method_spec(method)
    return method if spec is None else spec.label


def method_order() -> tuple[str, ...]:
    """Every registered method in the order the figures draw them (the registry's order)."""
    return method_names()


def method_rank(method: str) -> int:
    """Position of `method` in `method_order()`; unknown names come last."""
    order = method_order()
    return order.index(method) if method in order else len(order)


def use_agg() -> None:
    """Select the non-interactive Agg backend (call before importing pyplot), unless the
    environment chose a backend: `MPLBACKEND` is set (Jupyter kernels set it to their inline
    backend, so figures drawn from a notebook are shown)."""
    import os

    if os.environ.get("MPLBACKEND"):
        return
    import matplotlib

    matplotlib.use("Agg")


# ------------------------------------------------------------------------------------------
# One look for every figure: sizes, fonts, grids, legends, scales, bands
# ------------------------------------------------------------------------------------------

#: matplotlib settings of every figure: fonts readable when a figure is shown at the docs' and
#: the report's width (about 7 inches for a row of panels), light grid, no top/right spines
RC: dict[str, object] = {
    "font.size": 8.5,
    "axes.titlesize": 9.0,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "legend.fontsize": 8.0,
    "figure.titlesize": 10.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
    "mathtext.fontset": "dejavusans",
}
PANEL_WIDTH = 2.7
"""inches per panel column (a row of three panels is about the width of a page's text)"""
PANEL_HEIGHT = 2.2
"""inches per panel row"""
MAX_COLUMNS = 3
"""panels per row; more panels wrap onto further rows"""
TAU4_LABEL = r"$\bar\tau_4^{1/4}$ (realised lags)"
"""the x axis of the runs-vs-theory figures: the realised `tau4^(1/4)` (a FIFO's fill included)"""


def grid_shape(count: int, max_columns: int = MAX_COLUMNS) -> tuple[int, int]:
    """`(rows, columns)` of a compact grid for `count >= 1` panels, at most `max_columns` wide:
    1 -> (1, 1), 3 -> (1, 3), 4 -> (2, 2), 5 -> (2, 3), 7 -> (3, 3)."""
    if count < 1:
        raise ValueError(f"grid_shape: count must be >= 1, got {count}")
    columns = min(count, max_columns)
    rows = -(-count // columns)
    if rows > 1:  # as square as the rows allow: 4 panels in 2 x 2, not 3 + 1
        columns = -(-count // rows)
    return rows, columns


def clip_band(
    lo: list[float], hi: list[float], value_range: tuple[float | None, float | None] | None
) -> tuple[list[float], list[float]]:
    """A 95% band `(lo, hi)` clipped to the quantity's range (`(0, 100)` for a percentage, `(0,
    None)` for a non-negative quantity; None: unclipped). An interval over a handful of seeds can
    reach past a bound the quantity cannot cross; the band shows only the possible part."""
    if value_range is None:
        return list(lo), list(hi)
    low, high = value_range

    def clip(v: float) -> float:
        if low is not None:
            v = max(low, v)
        if high is not None:
            v = min(high, v)
        return v

    return [clip(v) for v in lo], [clip(v) for v in hi]


def spans_decades(values: list[float], decades: float = 1.0) -> bool:
    """Whether the positive `values` span more than `decades` powers of ten (then the axis is
    drawn on a log scale; a linear one would flatten the smaller ones into a line at 0)."""
    import math

    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if len(positive) < 2:
        return False
    return math.log10(max(positive) / min(positive)) > decades


def figure_legend(fig, axes, note: str = "") -> None:
    """One legend for the whole figure, below the panels (outside the data), from the labelled
    artists of `axes` (each label once; labels starting with `_` are skipped). `note` (what the
    figure leaves out) is the legend's title, wrapped to the figure's width, so the layout keeps
    it inside the canvas."""
    import textwrap

    width = max(40, int(fig.get_figwidth() * 14))  # characters of 7.5-point text per line
    title = "\n".join(textwrap.fill(line, width) for line in note.splitlines()) or None
    seen: dict[str, object] = {}
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            if not label.startswith("_"):
                seen.setdefault(label, handle)
    if not seen:
        return
    renderer = fig.canvas.get_renderer()
    for columns in range(min(len(seen), 4), 0, -1):  # as many columns as the width holds
        legend = fig.legend(
            list(seen.values()),
            list(seen.keys()),
            loc="outside lower center",
            ncol=columns,
            title=title,
            title_fontsize=7.5,
        )
        if columns == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width * 0.98:
            return
        legend.remove()


@contextmanager
def figure_style() -> Iterator[None]:
    """`RC` in force for the block; afterwards those keys (and only those) get their previous
    values back. (matplotlib's `rc_context` restores every setting, the backend's too, which
    stops a Jupyter kernel's inline backend from showing later figures.)"""
    import matplotlib as mpl

    before = {key: mpl.rcParams[key] for key in RC}
    mpl.rcParams.update(RC)
    try:
        yield
    finally:
        mpl.rcParams.update(before)
