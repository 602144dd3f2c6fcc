"""Every registered figure of the run records, drawn on small records in the figures' one style
(`figures.style`): no empty axes (a panel only for what was recorded), no text outside the
canvas, the bands over seeds within the quantity's range, one legend for the figure."""

from __future__ import annotations

from pathlib import Path

import pytest
from fig_records import write_toy_train_run, write_train_run

from figures.common import pyplot
from figures.discover import discover
from figures.registry import entries
from figures.style import clip_band, grid_shape, spans_decades

RUN_FIGURES = [e for e in entries("runs") if e.output == "figure"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("style")
    for delay in (0, 64, 128):
        for method in ("grpo", "tic", "gmc"):
            for seed in range(3):  # seed spreads that push a Pass@1 band below 0 at D = 128
                write_train_run(
                    root / "fixed", f"{method}-d{delay}-s{seed}", method=method, delay=delay,
                    steps=20, eval_every=5, seed=seed, shift=0.2 * (seed - 1) * (delay / 64),
                )  # fmt: skip
    for group_size in (4, 32):
        for method in ("tic", "gmc"):
            write_train_run(
                root / "groups", f"{method}-g{group_size}", method=method, delay=128,
                group_size=group_size, steps=20, eval_every=0,
            )  # fmt: skip
    for method in ("a3po", "gmc"):
        write_train_run(
            root / "sim", f"{method}-sim", method=method, schedule="length_coupled", steps=20,
            eval_every=5,
        )  # fmt: skip
    # a delay with a run but no evaluations: Figure 2 has no curve for it, so no panel
    write_train_run(root / "fixed", "gmc-d16", method="gmc", delay=16, steps=20, eval_every=0)
    write_toy_train_run(root / "toy", "toy", delays=(0, 2, 8), steps=12)
    return discover([root])


def _visible_axes(fig):
    return [a for a in fig.axes if a.get_visible() and a.axison]


def _has_data(axis) -> bool:
    lines = [line for line in axis.get_lines() if len(line.get_xdata()) > 0]
    return bool(lines or axis.collections or axis.patches)


def test_style_helpers_hand_values() -> None:
    assert [grid_shape(n) for n in (1, 2, 3, 4, 5, 7)] == [
        (1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 3)
    ]  # fmt: skip
    assert grid_shape(8, max_columns=4) == (2, 4)
    assert clip_band([-5.0, 10.0], [50.0, 120.0], (0.0, 100.0)) == ([0.0, 10.0], [50.0, 100.0])
    assert clip_band([-1.0], [2.0], None) == ([-1.0], [2.0])
    assert clip_band([-1.0], [2.0], (0.0, None)) == ([0.0], [2.0])
    assert spans_decades([0.01, 0.5]) and not spans_decades([0.1, 0.9])
    assert not spans_decades([0.0, 5.0])  # one positive value: nothing to span


@pytest.mark.parametrize("entry", RUN_FIGURES, ids=[e.name for e in RUN_FIGURES])
def test_each_registered_figure_reads_clean(entry, runs) -> None:
    numbers = entry.numbers(runs)
    assert numbers.has_data, f"{entry.name}: the small records should draw it"
    fig = entry.figure(numbers)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        axes = _visible_axes(fig)
        assert axes
        empty = [a.get_title() for a in axes if not _has_data(a)]
        assert not empty, f"{entry.name}: empty axes {empty}"
        # everything drawn (titles, labels, drawn tick labels, legend, notes) inside the canvas
        drawn = fig.get_tightbbox(renderer)  # inches
        canvas = fig.bbox_inches
        assert (
            drawn.x0 >= canvas.x0 - 0.01
            and drawn.y0 >= canvas.y0 - 0.01
            and drawn.x1 <= canvas.x1 + 0.01
            and drawn.y1 <= canvas.y1 + 0.01
        ), f"{entry.name}: drawn {drawn} beyond the canvas {canvas}"
        assert len(fig.legends) <= 1 and all(not a.get_legend() for a in axes)  # one legend
        value_range = getattr(numbers, "value_range", None)
        if value_range is not None:
            low, high = value_range
            for axis in axes:
                for band in axis.collections:
                    for path in band.get_paths():
                        ys = path.vertices[:, 1]
                        assert low is None or ys.min() >= low - 1e-9, entry.name
                        assert high is None or ys.max() <= high + 1e-9, entry.name
    finally:
        pyplot().close(fig)


def test_figure2_draws_a_panel_per_delay_with_evaluations_only(runs) -> None:
    entry = next(e for e in RUN_FIGURES if e.name == "figure2")
    numbers = entry.numbers(runs)
    keys = [p.key for p in numbers.panels if p.series]
    assert keys == [0, 64, 128]
    fig = entry.figure(numbers)
    try:
        titles = [a.get_title() for a in _visible_axes(fig)]
        assert titles == ["D = 0", "D = 64", "D = 128"]
        note = fig.legends[0].get_title().get_text()
        assert note.startswith("not drawn, no curve: D = 16")  # said, not drawn
        # the D = 128 band reaches below 0% before clipping: the test above would catch it
        gmc = next(s for p in numbers.panels if p.key == 128 for s in p.series if s.method == "gmc")
        assert min(gmc.lo) < 0
    finally:
        pyplot().close(fig)


def test_runs_vs_theory_draws_only_recorded_panels_and_no_twin_axes(tmp_path: Path) -> None:
    from figures.bounds_vs_runs import fixed_delay_data, plot_bounds_vs_runs, recorded_panels

    for delay in (0, 4, 8):  # runs longer than their delay: steady-state rows to measure
        for method in ("tic", "gmc"):
            for seed in range(3):
                write_train_run(
                    tmp_path, f"{method}-d{delay}-s{seed}", method=method, delay=delay,
                    steps=30, eval_every=10, seed=seed, shift=0.01 * (seed - 1),
                )  # fmt: skip
    data = fixed_delay_data(discover([tmp_path]))
    names = recorded_panels(data)
    assert "drift" not in names and "mismatch" not in names  # not recorded by these runs
    fig = plot_bounds_vs_runs(data)
    try:
        assert len(_visible_axes(fig)) == len(names)  # no twin axes, no "not recorded" panels
        removed = fig.axes[0]
        assert removed.get_yscale() == "symlog"  # bound 10-100x above the measurement
        # the intervals over seeds of non-negative quantities stop at 0 (the removed mass's
        # reaches below it before clipping, with these seeds)
        assert any((p.get("removed_mass_lo") or 0) < 0 for p in data.points)
        for axis in fig.axes[:3]:
            for bars in axis.collections:
                for segment in bars.get_segments():
                    assert segment[:, 1].min() >= -1e-12, axis.get_title()
    finally:
        pyplot().close(fig)


def test_notes_go_under_the_panels_not_over_the_data() -> None:
    """Two identical curves (TIC and GMC at D = 0 share their runs), a method missing in a panel
    and a panel without a curve: all three said in the legend's title, no text in the axes."""
    from figures.common import FigureData, Panel, Series, plot_panels

    same = {"steps": [0.0, 1.0, 2.0], "values": [10.0, 20.0, 30.0]}
    panels = [
        Panel("D = 0", 0, [Series("tic", "t", **same), Series("gmc", "g", **same)]),
        Panel("D = 64", 64, [Series("gmc", "g64", **same)], missing=["TIC-GRPO (no run)"]),
        Panel("D = 16", 16, [], missing=["GMC-GRPO (no evaluations)"]),
    ]
    data = FigureData("f", "a title", "step", "Pass@1 (%)", panels, value_range=(0.0, 100.0))
    fig = plot_panels(data)
    try:
        assert [a.get_title() for a in _visible_axes(fig)] == ["D = 0", "D = 64"]
        assert all(not a.texts for a in fig.axes)
        note = fig.legends[0].get_title().get_text().replace("\n", " ")
        assert "D = 0: GMC-GRPO hides TIC-GRPO (identical curves)" in note
        assert "D = 64: missing TIC-GRPO (no run)" in note
        assert "not drawn, no curve: D = 16 (GMC-GRPO (no evaluations))" in note
    finally:
        pyplot().close(fig)
