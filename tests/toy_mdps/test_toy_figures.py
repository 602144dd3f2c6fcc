"""figures.toy_bias: each figure's numbers from the results table (rows only), then drawn."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from figures.style import METHOD_COLORS, method_color, method_label
from figures.toy_bias import (
    bias_vs_group_size_data,
    bias_vs_staleness_data,
    load_results,
    load_sweep,
    plot_bias_vs_group_size,
    plot_bias_vs_staleness,
    plot_removed_mass_vs_bound,
    plot_second_moment_vs_staleness,
    removed_mass_vs_bound_data,
    second_moment_vs_staleness_data,
)
from figures.writers import write_sweep_figures
from gmc_grpo.json_files import read_json
from pipeline.toy import draw_figures
from toy_mdps.sweep import run_sweep
from toy_mdps.sweep.analysis import group_size_slopes
from toy_mdps.sweep.config import SweepConfig

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SweepConfig]:
    config = SweepConfig.from_dict(
        {
            "num_prompts": 2,
            "vocab_size": 3,
            "max_length": 3,
            "trajectory_steps": 8,
            "delays": [0, 4, 8],
            "group_sizes": [2, 4, 8],
            "num_minibatches": 40,
            "figures": True,
        }
    )
    out = tmp_path_factory.mktemp("toy") / "run"
    run_sweep(config, out, progress=False)
    draw_figures("sweep", out)  # the figure step of `gmc-grpo toy sweep`
    return out, config


def _errorbar_points(axis) -> dict[str, list[tuple[float, float]]]:
    """Label -> the (x, y) points of each errorbar curve drawn on `axis`."""
    return {
        c.get_label(): [tuple(p) for p in c.lines[0].get_xydata()]
        for c in axis.containers
        if c.lines[0] is not None
    }


def _expected_points(curves, scale: float = 1.0) -> dict[str, list[tuple[float, float]]]:
    """What `_draw` plots of `curves`: each method's points with a positive mean, scaled."""
    return {
        method_label(method): [(x, mean / scale) for x, mean, _, _ in points if mean > 0]
        for method, points in curves.series.items()
        if any(mean > 0 for _, mean, _, _ in points)
    }


def _assert_same_points(drawn: dict, expected: dict) -> None:
    """Two `label -> [(x, y)]` maps hold the same labels and (to float precision) points (and
    there is something to compare)."""
    assert expected and all(expected.values())
    assert set(drawn) == set(expected), (sorted(drawn), sorted(expected))
    for label, points in expected.items():
        assert np.allclose(drawn[label], points, rtol=1e-12, atol=0), label


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", data[16:24])


def test_sweep_figures_draw_the_sweeps_numbers(run: tuple[Path, SweepConfig]) -> None:
    """The sweep's figure step writes the registry's four figures as PNG and PDF, listed in
    `summary.json`; each PNG has the size of its figure at `PNG_DPI`; and each figure draws the
    numbers its data function computes from the rows (the curves' points, Prop. 1's bound, the
    removed-mass scatter), checked here on the figure objects."""
    import matplotlib.pyplot as plt

    from figures.common import PNG_DPI
    from figures.registry import folder_figures

    out, config = run
    stems = ["bias_vs_staleness", "second_moment_vs_staleness", "bias_vs_group_size",
             "removed_mass_vs_bound"]  # fmt: skip
    listed = read_json(out / "summary.json")["figures"]
    assert sorted(listed) == sorted(f"figures/{s}.{e}" for s in stems for e in ("png", "pdf"))
    records = load_sweep(out)
    figures = folder_figures("sweep", records)
    assert list(figures) == stems
    for stem, fig in figures.items():
        width, height = fig.get_size_inches()
        size = _png_size(out / "figures" / f"{stem}.png")
        assert size == (round(width * PNG_DPI), round(height * PNG_DPI)), stem
        assert (out / "figures" / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"

    bias = bias_vs_staleness_data(records)
    (axis,) = figures["bias_vs_staleness"].axes
    drawn = _errorbar_points(axis)
    expected = _expected_points(bias, bias.scale)
    _assert_same_points(drawn, expected)
    assert len(expected) == len(config.methods)  # every measured method has a point

    moment = second_moment_vs_staleness_data(records)
    (axis,) = figures["second_moment_vs_staleness"].axes
    _assert_same_points(_errorbar_points(axis), _expected_points(moment))
    bound = [line for line in axis.get_lines() if line.get_label() == "Prop. 1 bound"]
    assert moment.bound is not None and len(bound) == 1
    assert list(bound[0].get_ydata()) == pytest.approx([moment.bound, moment.bound])
    tic = [r for r in records.rows if r["method"] == "tic" and r["eps"] == moment.eps]
    assert moment.bound == pytest.approx(float(tic[0]["chain/second_moment_bound"]))

    slopes = bias_vs_group_size_data(records)
    (axis,) = figures["bias_vs_group_size"].axes
    _assert_same_points(_errorbar_points(axis), _expected_points(slopes))
    assert sorted(slopes.series) == ["gmc", "tic"] and slopes.staleness == max(config.delays)

    removed = removed_mass_vs_bound_data(records)
    (axis,) = figures["removed_mass_vs_bound"].axes
    scatter = {c.get_label(): c.get_offsets().tolist() for c in axis.collections}
    expected = {method_label(m): list(zip(*pair, strict=True)) for m, pair in removed.items()}
    _assert_same_points(scatter, expected)  # every (bound, removed mass) grid point, in order
    for fig in figures.values():
        plt.close(fig)


def test_plot_functions_accept_an_axis(run: tuple[Path, SweepConfig], tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    out, config = run
    rows = load_results(out)
    slopes = group_size_slopes(rows, config)
    fig, axes = plt.subplots(2, 2)
    bias = bias_vs_staleness_data(rows)
    moment = second_moment_vs_staleness_data(rows)
    by_g = bias_vs_group_size_data(rows, slopes=slopes)
    got = [
        plot_bias_vs_staleness(bias, ax=axes[0, 0]),
        plot_second_moment_vs_staleness(moment, ax=axes[0, 1]),
        plot_bias_vs_group_size(by_g, ax=axes[1, 0]),
        plot_removed_mass_vs_bound(removed_mass_vs_bound_data(rows), ax=axes[1, 1]),
    ]
    assert all(f is fig for f in got)
    # each plot drew into the axis it was given: the curves of its own data, nothing else
    _assert_same_points(_errorbar_points(axes[0, 0]), _expected_points(bias, bias.scale))
    _assert_same_points(_errorbar_points(axes[0, 1]), _expected_points(moment))
    _assert_same_points(_errorbar_points(axes[1, 0]), _expected_points(by_g))
    fitted = [line.get_label() for line in axes[1, 0].get_lines() if "slope" in line.get_label()]
    assert len(fitted) == sum(len(f) for f in by_g.fits.values()) >= 1
    assert {c.get_label() for c in axes[1, 1].collections} == {"TIC-GRPO", "GMC-GRPO"}
    paths = write_sweep_figures(load_sweep(out), tmp_path / "figs")
    assert sorted(p.name for p in paths) == sorted(
        f"{stem}.{ext}"
        for stem in ("bias_vs_staleness", "second_moment_vs_staleness", "bias_vs_group_size",
                     "removed_mass_vs_bound")
        for ext in ("png", "pdf")
    )  # fmt: skip
    plt.close(fig)


def test_figure_numbers_are_the_rows_averaged_over_seeds(run: tuple[Path, SweepConfig]) -> None:
    """Each curve point is the mean over the sweep's seeds of the rows at that grid point; the
    plot draws exactly those numbers (scaled by the largest ||grad J / T||^2)."""
    out, _ = run
    records = load_sweep(out)
    curves = bias_vs_staleness_data(records)
    assert curves.eps == 0.28 and curves.group_size == 8
    for method, points in curves.series.items():
        for x, mean, lo, hi in points:
            cell = [
                r
                for r in records.rows
                if r["method"] == method
                and float(r["staleness"]) == x
                and int(r["group_size"]) == 8
                and (r.get("eps") is None or r["eps"] == 0.28)
            ]
            n = len(cell)
            assert mean == pytest.approx(sum(r["estimator/bias_sq"] for r in cell) / n)
            assert lo == pytest.approx(sum(r["estimator/bias_sq_lo"] for r in cell) / n)
            assert hi == pytest.approx(sum(r["estimator/bias_sq_hi"] for r in cell) / n)
    removed = removed_mass_vs_bound_data(records)
    assert set(removed) == {"tic", "gmc"}  # the methods whose spec claims a removed-mass bound
    tic_rows = [r for r in records.rows if r["method"] == "tic"]
    assert len(removed["tic"][0]) == sum(
        float(r["chain/removed_mass_bound"]) > 0 and float(r["ratio/removed_mass"]) > 0
        for r in tic_rows
    )
    assert bias_vs_group_size_data([r for r in records.rows if r["group_size"] == 2]) is None


def test_load_results_errors_clearly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="toy sweep"):
        load_results(tmp_path)


def test_style_has_a_colour_per_method() -> None:
    assert set(METHOD_COLORS) == {"is", "grpo", "tic", "gmc", "vcpo", "gac", "a3po"}
    assert len(set(METHOD_COLORS.values())) == len(METHOD_COLORS)
    assert method_color("unknown").startswith("#")


def test_experiment_figures_are_the_registry_entries_of_its_kind(tmp_path: Path) -> None:
    """A delay sweep gets the registry's delay-sweep figures; each curve point is the mean over
    seeds of the run's rows at that step, with its t-band (computed by hand here)."""
    import json
    import math

    from figures.registry import entries
    from figures.toy_training import load_experiment, training_curves_data
    from gmc_grpo.stats import t_quantile
    from toy_mdps.train.config import ExperimentConfig
    from toy_mdps.train.run import run_experiment

    config = ExperimentConfig.from_dict(
        {
            "name": "tiny_delay",
            "kind": "delay_sweep",
            "base": {"num_prompts": 2, "vocab_size": 3, "max_length": 3, "num_groups": 2,
                     "group_size": 4, "total_steps": 6, "seeds": [0, 1, 2]},
            "grid": {"method": ["tic", "gmc"], "delay": [0, 2]},
        }
    )  # fmt: skip
    run_experiment(config, tmp_path, progress=False)
    paths = draw_figures("experiment", tmp_path)
    kinds = [e.name for e in entries("experiment") if "delay_sweep" in e.kinds]
    assert [p.name for p in paths] == [f"tiny_delay_{name}.png" for name in kinds]
    assert kinds == ["curves", "vs_delay"]
    data = training_curves_data(load_experiment(tmp_path))
    assert data["delays"] == [0, 2]
    curve = data["curves"]["policy/objective"][2]["gmc"]
    rows = [json.loads(line) for line in (tmp_path / "method=gmc_delay=2" / "metrics.jsonl").open()]
    at_3 = [r["policy/objective"] for r in rows if r["step"] == 3]
    mean = sum(at_3) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in at_3) / 2)
    assert curve["mean"][3] == pytest.approx(mean)
    assert curve["hi"][3] - curve["mean"][3] == pytest.approx(t_quantile(2) * sd / math.sqrt(3))
