"""The untracked toy runs of class methods outside the theorems' setting (`outside_rows`), for the
report's bounds table beside the tracked runs (`evidence.render.bounds_markdown` writes both;
`evidence.measured` computes the tracked runs' bounds)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gmc_grpo.json_files import read_json
from gmc_grpo.methods import get_method
from toy_mdps.train.run_records import find_runs, is_tracked_run, setting


def outside_rows(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Untracked toy runs of class methods outside the setting (e.g. Adam): name, measured
    convergence metric (from `summary.json`), why outside."""
    rows = []
    for run_dir in find_runs(paths, tracked=False):
        if is_tracked_run(run_dir):
            continue
        config = read_json(run_dir / "config.json")["config"]
        spec = get_method(config["method"])
        if spec.class_cap is None:
            continue
        why = setting(config) or ["no bound tracking (bound_every = 0)"]
        stat = read_json(run_dir / "summary.json").get("mean", {}).get("convergence_metric")
        if stat is None:
            continue
        rows.append(
            {"name": config.get("name", run_dir.name), "measured": stat, "why": "; ".join(why)}
        )
    return rows
