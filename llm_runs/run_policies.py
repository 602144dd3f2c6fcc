"""A finished training run's stored policies: its config, the model folder at a step, its
checkpoint steps. `gmc-grpo llm bias` (`llm_runs.lm_bias`) loads the current and the behavior
policy of each measured checkpoint through these."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any


def run_config(run_dir: str | Path) -> Any:
    """The `LLMTrainConfig` a run was trained with (its `config.json`)."""
    from gmc_grpo.config_reading import resolve_aliases
    from gmc_grpo.records import read_run_config
    from llm_runs.config import LLMTrainConfig
    from llm_runs.recipes import config_from_values

    payload = read_run_config(Path(run_dir))
    if payload is None:
        raise FileNotFoundError(
            f"{run_dir} holds no training run (no config.json): pass --run a folder written by "
            "`gmc-grpo llm train`, or --recipe to train one first"
        )
    stored = payload.get("config", payload)
    if not isinstance(stored, dict) or "inner_steps" not in stored:  # a toy run, an eval, ...
        raise ValueError(
            f"{run_dir} holds another kind of run (its config.json is not an `llm train` "
            "config): pass --run a folder written by `gmc-grpo llm train`, or --recipe"
        )
    names = {f.name for f in dataclasses.fields(LLMTrainConfig)}
    stored = resolve_aliases(LLMTrainConfig, stored)  # runs written before a field's rename
    return config_from_values({k: v for k, v in stored.items() if k in names})


def policy_dir(run_dir: str | Path, step: int) -> Path:
    """The model folder of the policy at `step` of a run: its checkpoint, or for step 0 the
    initial policy the run built (`initial_model/`, `base_model/`) or was given (`model`)."""
    from llm_runs.checkpoint import list_checkpoints

    run = Path(run_dir)
    if step > 0:
        found = list_checkpoints(run)
        if step not in found:
            raise FileNotFoundError(
                f"{run} has no checkpoint of step {step}; checkpoints: {sorted(found)}"
            )
        return found[step] / "model"
    for name in ("initial_model", "base_model"):
        if (run / name / "config.json").is_file():
            return run / name
    config = run_config(run)
    if config.model is not None and not config.sft_steps:
        return Path(config.model)
    raise FileNotFoundError(
        f"{run} keeps no initial policy (it was built in a cache folder): measure at checkpoints "
        "n with n - lag > 0, or train the run without cache_dir"
    )


def checkpoint_steps(run_dir: str | Path) -> list[int]:
    """The steps of a run's complete checkpoints, increasing."""
    from llm_runs.checkpoint import list_checkpoints

    return sorted(list_checkpoints(Path(run_dir)))
