"""`gmc-grpo toy sweep`: the bias and second moment of every estimator against the exact gradient.

- `toy_mdps.sweep.config`: `SweepConfig` and the shipped grids.
- `toy_mdps.sweep.run`: `run_sweep` (resumable grid, `results.csv`, `TABLE_COLUMNS`).
- `toy_mdps.sweep.analysis`: the group-size slopes and the paper's checks (`summary.json`).
- `toy_mdps.sweep.cli`: the command line.

The names below are imported lazily (PEP 562), so `gmc-grpo toy --help` does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gmc_grpo.lazy import lazy_attributes

if TYPE_CHECKING:
    from toy_mdps.sweep.config import SweepConfig, shipped_config
    from toy_mdps.sweep.run import TABLE_COLUMNS, grid_points, row_key, run_sweep

__all__ = ["TABLE_COLUMNS", "SweepConfig", "grid_points", "row_key", "run_sweep", "shipped_config"]

_LAZY = {
    "SweepConfig": "toy_mdps.sweep.config",
    "shipped_config": "toy_mdps.sweep.config",
    "TABLE_COLUMNS": "toy_mdps.sweep.run",
    "grid_points": "toy_mdps.sweep.run",
    "row_key": "toy_mdps.sweep.run",
    "run_sweep": "toy_mdps.sweep.run",
}


__getattr__ = lazy_attributes("toy_mdps.sweep", _LAZY)
