"""figures.toy_bias draws every figure from the results table (rows only)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from figures.style import METHOD_COLORS, method_color
from figures.toy_bias import (
    load_results,
    plot_bias_vs_group_size,
    plot_bias_vs_staleness,
    plot_removed_mass_vs_bound,
    plot_second_moment_vs_staleness,
    write_toy_figures,
)
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
        plot_bias_vs_staleness(rows, ax=axes[0, 0]),
        plot_second_moment_vs_staleness(rows, ax=axes[0, 1]),
        plot_bias_vs_group_size(rows, slopes=slopes, ax=axes[1, 0]),
        plot_removed_mass_vs_bound(rows, ax=axes[1, 1]),
    ]
    assert all(f is fig for f in got)
    assert axes[0, 0].get_lines() or axes[0, 0].collections
    paths = write_toy_figures(rows, tmp_path / "figs", slopes=slopes)
    assert len(paths) == 8
    plt.close(fig)


def test_load_results_errors_clearly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="toy sweep"):
        load_results(tmp_path)


def test_style_has_a_colour_per_method() -> None:
    assert set(METHOD_COLORS) == {"is", "grpo", "tic", "gmc", "vcpo", "gac", "a3po"}
    assert len(set(METHOD_COLORS.values())) == len(METHOD_COLORS)
    assert method_color("unknown").startswith("#")
