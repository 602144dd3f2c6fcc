"""`gmc-grpo toy train`: asynchronous learners on the token MDPs.

- `toy_mdps.train.config`: `ToyTrainConfig` (one run, all its seeds at once), `ExperimentConfig`
  (a grid of runs), the shipped experiments.
- `toy_mdps.train.learner`: `AsyncLearner`, the seed-batched learner with exact metrics.
- `toy_mdps.train.run`: `train` (one resumable run) and `run_experiment` (a grid + its table).
- `toy_mdps.train.analysis`: the paper's orderings, paired over seeds, and the eps* fit.
- `toy_mdps.train.drift_control`: the delay-regularity test's negative control (a drift-gated
  worker schedule; `python -m toy_mdps.train.drift_control`).
- `toy_mdps.train.cli`: the command line.

The names below are imported lazily (PEP 562), so `gmc-grpo toy --help` does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gmc_grpo.lazy import lazy_attributes

if TYPE_CHECKING:
    from toy_mdps.train.config import (
        QUICK_EXPERIMENTS,
        ExperimentConfig,
        ToyTrainConfig,
        shipped_experiment,
    )
    from toy_mdps.train.learner import AsyncLearner
    from toy_mdps.train.run import run_experiment, train

__all__ = [
    "QUICK_EXPERIMENTS",
    "AsyncLearner",
    "ExperimentConfig",
    "ToyTrainConfig",
    "run_experiment",
    "shipped_experiment",
    "train",
]

_LAZY = {
    "QUICK_EXPERIMENTS": "toy_mdps.train.config",
    "ExperimentConfig": "toy_mdps.train.config",
    "ToyTrainConfig": "toy_mdps.train.config",
    "shipped_experiment": "toy_mdps.train.config",
    "AsyncLearner": "toy_mdps.train.learner",
    "run_experiment": "toy_mdps.train.run",
    "train": "toy_mdps.train.run",
}


__getattr__ = lazy_attributes("toy_mdps.train", _LAZY)
