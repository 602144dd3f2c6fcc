"""Bound tracking: per run, each term of the bound beside its measured counterpart over the steps.

`plot_bound_tracking(series, ax=None, title="")` draws the arrays `evidence.measured.run_bounds`
computes from a tracked toy run (`RunBounds.series`), one panel per group:

- `theorem`: the running convergence metric `(1/n) sum_{k<n} ||grad J(theta_k)||^2` and each term
  of Theorem 1/2 (optimisation, variance, delay) after `n` steps, measured (solid, with the 95%
  band over seeds) and bound (dashed);
- `bias`: the per-step bias norm `||b_n||` and the chain of its bounds (removed mass, KL, drift,
  `eta^2 tau^2 M`);
- `second_moment`: `E[||g_n||^2 | F_n^-]` and Proposition 1's `M` (constants 8 and 2);
- `drift`: `||theta_n - theta_{n-tau}||^2`, its pathwise bound and `eta^2 tau^2 M`;
- `kl`: the exact KL to the behavior policy and `(T L / 2) ||theta_n - theta_{n-tau}||^2`.

A series is `{"steps": [...], "<label>": {"mean": [...], "lo": [...], "hi": [...]}, ...}`; labels
starting with `measured` are drawn solid with their band, the others dashed (bounds). The y axes
are logarithmic: the bounds sit orders of magnitude above the measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from figures.common import panel_axes, pyplot

PANELS: dict[str, str] = {
    "theorem": "Theorem 1/2 terms after n steps",
    "bias": "bias ||b_n|| and its chain",
    "second_moment": "second moment vs Prop. 1",
    "drift": "drift ||theta_n - theta_{n-tau}||^2",
    "kl": "KL vs (TL/2) drift",
}
COLORS = ("#000000", "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#999999")


def _positive(values: list[float]) -> list[float]:
    return [v if v is not None and math.isfinite(v) and v > 0 else math.nan for v in values]


def plot_bound_tracking(
    series: Mapping[str, Mapping[str, Any]], ax: Any = None, title: str = ""
) -> Any:
    """Draw the panels present in `series` (module docstring); returns the figure.

    `ax`: None (a new figure, panels in rows of three) or a sequence of at least as many axes as
    panels.
    """
    names = [name for name in PANELS if name in series]
    if not names:
        raise ValueError(f"no panel to draw: series has {sorted(series)}, expected {list(PANELS)}")
    if ax is None:  # two rows of three: five panels stay readable
        plt = pyplot()
        rows = 1 if len(names) <= 3 else 2
        fig, grid = plt.subplots(rows, 3, figsize=(13.0, 3.6 * rows), squeeze=False)
        axes = list(grid.ravel())
        for spare in axes[len(names) :]:
            spare.set_visible(False)
    else:
        fig, axes = panel_axes(len(names), ax)
    for axis, name in zip(axes, names, strict=False):
        panel = series[name]
        steps = list(panel["steps"])
        curves = [(k, v) for k, v in panel.items() if k != "steps"]
        for i, (label, curve) in enumerate(curves):
            color = COLORS[i % len(COLORS)]
            measured = label.startswith("measured")
            y = _positive(list(curve["mean"]))
            axis.plot(
                steps[: len(y)],
                y,
                color=color,
                lw=1.5 if measured else 1.1,
                ls="-" if measured else "--",
                marker="." if measured and len(y) < 40 else None,
                label=label,
            )
            if measured and "lo" in curve:
                axis.fill_between(
                    steps[: len(y)],
                    _positive(list(curve["lo"])),
                    _positive(list(curve["hi"])),
                    color=color,
                    alpha=0.2,
                )
        axis.set_yscale("log")
        axis.set_title(PANELS[name], fontsize=9)
        axis.set_xlabel("learner step n")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=5.5, loc="best")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
