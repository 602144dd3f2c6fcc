"""figures.toy_bias: each figure's numbers from the results table (rows only), then drawn."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from figures.style import METHOD_COLORS, method_color
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
from gmc_grpo.records import read_json
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


def test_sweep_writes_png_and_pdf(run: tuple[Path, SweepConfig]) -> None:
    out, _ = run
    listed = read_json(out / "summary.json")["figures"]
    assert len(listed) == 8 and all((out / name).exists() for name in listed)
    for stem in (
        "bias_vs_staleness",
        "second_moment_vs_staleness",
        "bias_vs_group_size",
        "removed_mass_vs_bound",
    ):
        for ext in (".png", ".pdf"):
            path = out / "figures" / f"{stem}{ext}"
            assert path.exists() and path.stat().st_size > 1000


def test_plot_functions_accept_an_axis(run: tuple[Path, SweepConfig], tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    out, config = run
    rows = load_results(out)
    slopes = group_size_slopes(rows, config)
    fig, axes = plt.subplots(2, 2)
    got = [
        plot_bias_vs_staleness(bias_vs_staleness_data(rows), ax=axes[0, 0]),
        plot_second_moment_vs_staleness(second_moment_vs_staleness_data(rows), ax=axes[0, 1]),
        plot_bias_vs_group_size(bias_vs_group_size_data(rows, slopes=slopes), ax=axes[1, 0]),
        plot_removed_mass_vs_bound(removed_mass_vs_bound_data(rows), ax=axes[1, 1]),
    ]
    assert all(f is fig for f in got)
    assert axes[0, 0].get_lines() or axes[0, 0].collections
    paths = write_sweep_figures(load_sweep(out), tmp_path / "figs")
    assert len(paths) == 8
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
