"""Extra metric sinks of a training run: TensorBoard and W&B (`LLMTrainConfig.log_to`).

The run record (`metrics.jsonl`, `gmc_grpo.records`) is always written; these mirror each row's
numbers. A sink that is asked for but not installed stops the run at start-up, before compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm_runs.config import SinkSettings


class MetricSinks:
    """TensorBoard / W&B logging when `settings.log_to` asks for it."""

    def __init__(self, settings: SinkSettings) -> None:
        self.tb = None
        self.wandb = None
        if "tensorboard" in settings.log_to:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as err:
                raise RuntimeError(
                    "log_to contains 'tensorboard' but tensorboard is not installed: "
                    "`pip install tensorboard`, or drop it from log_to"
                ) from err
            self.tb = SummaryWriter(str(Path(settings.out) / "tensorboard"))
        if "wandb" in settings.log_to:
            try:
                import wandb  # type: ignore[import-not-found]
            except ImportError as err:
                raise RuntimeError(
                    "log_to contains 'wandb' but wandb is not installed: `pip install wandb`"
                ) from err
            self.wandb = wandb.init(
                project=settings.wandb_project,
                name=Path(settings.out).name,
                config=dict(settings.record),
            )

    def log(self, row: Mapping[str, Any]) -> None:
        """Mirror one metrics row's numbers (the `step` is the x-axis)."""
        step = int(row["step"])
        scalars = {k: v for k, v in row.items() if isinstance(v, (int, float)) and k != "step"}
        if self.tb is not None:
            for key, value in scalars.items():
                self.tb.add_scalar(key, value, step)
        if self.wandb is not None:
            self.wandb.log(scalars, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()
