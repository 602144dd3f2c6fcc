"""What the claims table's run rows read from run records (JSON and CSV only: no torch).

`collect_evidence(paths)` walks the folders and gathers, once:

* `tracked`: every toy training run with bound tracking (`evidence.measured.run_bounds`), for
  Lemma 1 with measured moments, the explicit theorems beside the measurements (rows 1, 13, 14)
  and the chain's slack (`evidence.slack`);
* `drift`: the tracked plain-SGD runs with a drift record (`drift_max_lag > 0`,
  `evidence.drift_fit.drift_run`), for the drift row;
* `regularity`: the runs of delay-regularity experiments (`kind = "delay_regularity"`, the
  workers stage's `regularity_quick`): both sides of §2.2's condition, pooled over lags, as the
  toy track's analysis stored them in the experiment's `summary.json`;
* `sweep_rows`: the rows of bias sweeps (`results.csv` with the chain's columns), for the
  delay-uniform second moment.

Each row that needs runs says which experiment provides them when they are missing.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evidence.drift_fit import DriftRun, drift_run
from evidence.measured import RunBounds, run_bounds
from gmc_grpo.json_files import read_json, read_json_object
from toy_mdps.train.run_records import find_runs, load_series

SWEEP_COLUMNS = ("method", "staleness", "estimator/second_moment", "chain/second_moment_bound")


@dataclass
class RunEvidence:
    """The run records under `roots` that the claims table's run rows read (module docstring)."""

    roots: list[str]
    tracked: list[RunBounds] = field(default_factory=list)
    drift: list[DriftRun] = field(default_factory=list)
    regularity: list[dict[str, Any]] = field(default_factory=list)
    sweep_rows: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.tracked or self.drift or self.regularity or self.sweep_rows)


def collect_evidence(paths: Iterable[str | Path]) -> RunEvidence:
    """Every run record under `paths` the run rows can use (module docstring)."""
    roots = [Path(p) for p in paths]
    out = RunEvidence([str(p) for p in roots])
    for run_dir in find_runs(roots):
        try:
            series = load_series(run_dir)
            out.tracked.append(run_bounds(run_dir))
            drift = drift_run(run_dir, series)
        except (ValueError, KeyError) as err:
            out.problems.append(f"{run_dir}: {err}")
            continue
        if drift is not None:
            out.drift.append(drift)
    for config in _files(roots, "config.json"):  # a damaged run is left out with one line
        try:
            read_json_object(config)
        except (OSError, ValueError) as err:
            out.problems.append(f"skipped a damaged run: {err}")
    for summary in _files(roots, "summary.json"):
        try:
            data = read_json(summary)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("kind") == "delay_regularity":
            out.regularity += regularity_points(data)
    for table in _files(roots, "results.csv"):
        with table.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if set(SWEEP_COLUMNS) <= set(reader.fieldnames or ()):
                out.sweep_rows += [dict(row, source=str(table)) for row in reader]
    return out


def _files(roots: list[Path], name: str) -> list[Path]:
    found: set[Path] = set()
    for root in roots:
        if (root / name).is_file():
            found.add(root / name)
        found.update(root.rglob(name))
    return sorted(found)


def per_lag_relative(per_lag: dict[str, list[float]]) -> list[dict[str, float]]:
    """Per lag: `{lag, groups, seeds, relative, lo, hi}`, the paired difference of the condition's two
    sides relative to the right side (`toy_mdps.train.workers_analysis`'s per-lag table), with
    its interval over seeds on the same scale (`seeds`: how many seeds it is over; None in
    records written before it was kept)."""
    out = []
    for i, lag in enumerate(per_lag.get("lag", [])):
        rhs = per_lag["rhs"][i]
        if not rhs > 0:
            continue
        out.append(
            {
                "lag": lag,
                "groups": per_lag["groups"][i],
                "seeds": per_lag["seeds"][i] if "seeds" in per_lag else None,
                "relative": per_lag["difference"][i] / rhs,
                "lo": per_lag["difference_lo"][i] / rhs,
                "hi": per_lag["difference_hi"][i] / rhs,
            }
        )
    return out


def regularity_points(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per run of a delay-regularity experiment's summary: name, method, generation
    time, mean lag, corr(lag, length), the pooled ratio of the condition's two sides and the
    per-lag relative differences (`per_lag_relative`)."""
    points = []
    analysis = summary.get("delay_regularity", {})
    for name, entry in sorted(analysis.get("points", {}).items()):
        reg = entry.get("regularity") or {}
        pooled = reg.get("pooled")
        if not pooled:
            continue
        points.append(
            {
                "experiment": summary.get("name"),
                "run": name,
                "method": entry.get("method"),
                "generation_time": entry.get("generation_time"),
                "lag_mean": entry.get("lag_mean"),
                "corr_lag_length": reg.get("corr_lag_length"),
                "ratio": pooled["ratio"],
                "per_lag": per_lag_relative(reg.get("per_lag") or {}),
            }
        )
    return points
