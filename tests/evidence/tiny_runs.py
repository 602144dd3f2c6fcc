"""A tiny tracked toy run (plain SGD, constant step, GMC at delay 2, three seeds) for the
evidence tests: the smallest run whose records carry every bound quantity."""

from __future__ import annotations

from pathlib import Path

from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.run import train


def tiny_tracked_run(
    path: Path, *, lr: float, total_steps: int, bound_every: int, name: str
) -> Path:
    """Train the tiny run into `path` (2 prompts, vocabulary 3, length 3, 2 groups of 4, seeds
    0-2, bound quantities every `bound_every` steps from 20 minibatches); returns `path`."""
    config = ToyTrainConfig(
        num_prompts=2,
        vocab_size=3,
        max_length=3,
        num_groups=2,
        group_size=4,
        method="gmc",
        optimizer="sgd",
        lr=lr,
        lr_schedule="constant",
        grad_clip=None,
        advantage="loo",
        delay=2,
        total_steps=total_steps,
        seeds=[0, 1, 2],
        bound_every=bound_every,
        bound_minibatches=20,
        name=name,
    )
    train(config, path)
    return path
