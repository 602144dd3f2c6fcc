"""Recipes: the shipped JSON configs of `llm_runs/configs/` and how they become a `LLMTrainConfig`.

A recipe file holds `config` (base values), optionally `runs` (name -> values that override the
base; a suite such as `fixed_delay_qwen3_1p7b` is one file with one run per cell) and `sources`
(field -> where the value comes from: documentation only).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gmc_grpo.config_reading import dataclass_from_dict, read_json_config
from llm_runs.config import LLMTrainConfig

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def recipe_path(recipe: str) -> Path:
    """A recipe name in `llm_runs/configs/` (without `.json`) or a path to a JSON file."""
    path = Path(recipe)
    if path.suffix == ".json" and path.is_file():
        return path
    shipped = CONFIG_DIR / f"{recipe}.json"
    if shipped.is_file():
        return shipped
    names = sorted(p.stem for p in CONFIG_DIR.glob("*.json"))
    raise FileNotFoundError(
        f"recipe {recipe!r} is neither a JSON file nor a shipped recipe; shipped: {', '.join(names)}"
    )


def load_recipe(recipe: str, run: str | None = None, *, base_only: bool = False) -> dict[str, Any]:
    """The config values of a recipe (and of one of its runs).

    base_only: without `run`, return the base values of a suite recipe instead of refusing it (a
    suite over seeds and methods sets the method itself).
    """
    path = recipe_path(recipe)
    data = read_json_config(path, "recipe")
    values = data.get("config", {})
    runs = data.get("runs", {})
    if not isinstance(values, dict) or not isinstance(runs, dict):
        raise ValueError(
            f"recipe {path}: 'config' and 'runs' must be JSON objects (field -> value, run name "
            "-> values)"
        )
    values = dict(values)
    if run is not None:
        if run not in runs:
            raise ValueError(
                f"recipe {path.stem!r} has no run {run!r}; runs: {', '.join(runs) or '(none)'}"
            )
        if not isinstance(runs[run], dict):
            raise ValueError(f"recipe {path}: run {run!r} must be a JSON object of values")
        values.update(runs[run])
    elif runs and base_only:
        pass
    elif runs and data.get("default_run") is not None:
        values.update(runs[data["default_run"]])
    elif runs:
        raise ValueError(
            f"recipe {path.stem!r} is a suite: choose one of its runs with --run "
            f"({', '.join(runs)})"
        )
    return values


def config_from_values(values: Mapping[str, Any]) -> LLMTrainConfig:
    """`LLMTrainConfig(**values)`; an unknown key is an error, a renamed one names its new name, a
    value of the wrong type names the field and the type it needs."""
    return dataclass_from_dict(LLMTrainConfig, {k: v for k, v in values.items()})
