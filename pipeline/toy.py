"""`gmc-grpo toy`: the toy track's command line plus the figure step.

The toy track imports no `figures` (`tests/test_layering.py`); this module, one layer above,
runs `toy_mdps.cli` and hands it `draw_figures`, which draws a finished sweep or experiment from
its saved records (the registry's `"sweep"` / `"experiment"` entries, `figures.registry`, through
`figures.writers`; and
`figures.bound_tracking` for runs that tracked their bound quantities, up to `MAX_BOUND_FIGURES`
per experiment) and lists the figures in the run's `summary.json` (`"figures"`, paths relative to
the run directory).
"""

from __future__ import annotations

import sys
from pathlib import Path

from gmc_grpo.json_files import atomic_write_json, read_json
from gmc_grpo.runlock import run_lock

# an experiment with more tracked runs than this gets no bound-tracking figures (its table is in
# `gmc-grpo theory --runs`; `figures.bound_tracking.plot_bound_tracking` draws any run on demand)
MAX_BOUND_FIGURES = 12


def draw_figures(kind: str, run_dir: str | Path) -> list[Path]:
    """Draw the figures of a finished sweep (`kind="sweep"`) or experiment (`"experiment"`)
    into `run_dir/figures/`, record them in its `summary.json` and return their paths. Holds
    `run_dir`'s lock (`gmc_grpo.runlock`; re-entrant: the toy commands hold it already)."""
    with run_lock(run_dir):
        return _draw_figures(kind, Path(run_dir))


def _draw_figures(kind: str, run_dir: Path) -> list[Path]:
    if kind == "sweep":
        from figures.toy_bias import load_sweep
        from figures.writers import write_sweep_figures

        paths = write_sweep_figures(load_sweep(run_dir), run_dir / "figures")
    elif kind == "experiment":
        from evidence.measured import all_run_bounds
        from figures.toy_training import load_experiment
        from figures.writers import write_experiment_figures
        from pipeline.bounds_stage import draw_bound_figures

        paths = write_experiment_figures(load_experiment(run_dir))
        tracked, _ = all_run_bounds([run_dir])  # runs with bound_every > 0: bound tracking
        if len(tracked) <= MAX_BOUND_FIGURES:  # a large grid (eps_quick: 36 runs) gets none
            paths += draw_bound_figures(tracked, run_dir, run_dir)
    else:
        raise ValueError(f"draw_figures: kind must be 'sweep' or 'experiment', got {kind!r}")
    summary = read_json(run_dir / "summary.json")
    summary["figures"] = [str(p.relative_to(run_dir)) for p in paths]
    atomic_write_json(run_dir / "summary.json", summary)
    return paths


def main(argv: list[str] | None = None) -> int:
    """`gmc-grpo toy ...` with figures."""
    from toy_mdps import cli

    return cli.main(argv, draw_figures=draw_figures)


if __name__ == "__main__":
    sys.exit(main())
