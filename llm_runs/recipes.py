"""Recipes: the shipped JSON configs of `llm_runs/configs/` and how they become a `TrainConfig`.

A recipe file holds `config` (base values), optionally `runs` (name -> values that override the
base; a suite such as `fixed_delay_qwen3_1p7b` is one file with one run per cell) and `sources`
(field -> where the value comes from: documentation only).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gmc_grpo.configs import check_field_names
from llm_runs.config import TrainConfig

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
    data = json.loads(path.read_text())
    values = dict(data.get("config", {}))
    runs = data.get("runs", {})
    if run is not None:
        if run not in runs:
            raise ValueError(
                f"recipe {path.stem!r} has no run {run!r}; runs: {', '.join(runs) or '(none)'}"
            )
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


def config_from_values(values: Mapping[str, Any]) -> TrainConfig:
    """`TrainConfig(**values)`; an unknown key is an error, a renamed one names its new name."""
    check_field_names(TrainConfig, list(values))
    return TrainConfig(**values)
