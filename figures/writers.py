"""The figures of one record folder, from the registry: a toy sweep or a toy experiment.

`gmc-grpo toy sweep` / `toy train` (through `pipeline.toy.draw_figures`) and the `toy_sweeps`
item of `gmc-grpo figures` draw every entry of `figures.registry` that reads one sweep
(`reads="sweep"`) or one experiment of its kind (`reads="experiment"`), from the folder's records
read once (`figures.toy_bias.load_sweep`, `figures.toy_training.load_experiment`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from figures.common import pyplot, save_figure
from figures.registry import folder_figures
from figures.toy_bias import SweepRecords
from figures.toy_training import ToyExperiment

EXPERIMENT_DPI = 110
"""resolution of an experiment's figures (PNG only: they sit in its report section)"""


def write_sweep_figures(
    sweep: SweepRecords, out_dir: str | Path, formats: Sequence[str] = ("png", "pdf")
) -> list[Path]:
    """Every sweep figure of the registry into `out_dir` (`<name>.<format>`); returns the
    paths."""
    paths: list[Path] = []
    for name, fig in folder_figures("sweep", sweep).items():
        paths += save_figure(fig, Path(out_dir) / name, formats)
    return paths


def write_experiment_figures(experiment: ToyExperiment) -> list[Path]:
    """The figures of one experiment (the registry's entries for its kind) into its
    `figures/` folder, as `<experiment name>_<figure>.png`; returns the paths."""
    plt = pyplot()
    out = experiment.path / "figures"
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in folder_figures("experiment", experiment, experiment.kind).items():
        path = out / f"{experiment.name}_{name}.png"
        fig.savefig(path, dpi=EXPERIMENT_DPI)
        plt.close(fig)
        paths.append(path)
    return paths
