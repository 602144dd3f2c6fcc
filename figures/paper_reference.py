"""The paper's own numbers (Tables 1, 3, 4, 5 and values stated about Figures 2, 5, 6), as data.

The files in `figures/paper_data/` are transcriptions of the paper's tables; each names the table,
the paper section and, per field, the column it comes from. Values are percentages as printed
(run records store fractions; `figures.llm` multiplies by 100 before comparing).

- `load(name)`: a whole file (`"table1"`, `"table3"`, `"table4"`, `"table5"`, `"figure_notes"`).
- `table1_cell(model, method, benchmark)`, `table5_cell(...)`: `(greedy, avg@n)` or None.
- `table1_avg_delay(model, method)`: the "Avg. Delay" column.
- `table3_row(delay, method)`: `{"greedy": ..., "pass_at_k": {"1": ..., ..., "16": ...}}`.
- `table4_cell(checkpoint, group_size, method)`: `(greedy, sampled Pass@1)`.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "paper_data"
TABLES: tuple[str, ...] = ("table1", "table3", "table4", "table5")
# Benchmark keys as in `llm_runs.data.BENCHMARKS`, in the tables' column order, then the macro.
BENCHMARK_ORDER: tuple[str, ...] = (
    "math500",
    "gsm8k",
    "gaokao2023en",
    "olympiadbench",
    "minerva",
    "amc23",
)
BENCHMARK_LABELS: dict[str, str] = {
    "math500": "MATH500",
    "gsm8k": "GSM8K",
    "gaokao2023en": "Gaokao",
    "olympiadbench": "Olympiad",
    "minerva": "Minerva",
    "amc23": "AMC23",
    "macro": "Avg. perf.",
}
PAPER_MODELS: tuple[str, ...] = ("Qwen3-1.7B", "Qwen3-4B", "Qwen3-8B")
TABLE1_METHODS: tuple[str, ...] = ("grpo", "gac", "vcpo", "tic", "gmc")
TABLE3_DELAYS: tuple[int, ...] = (0, 32, 64, 128, 256, 512)
TABLE3_METHODS: tuple[str, ...] = ("gmc", "tic", "grpo")
TABLE4_CHECKPOINTS: tuple[int, ...] = (200, 300, 400, 800)
TABLE4_GROUP_SIZES: tuple[int, ...] = (4, 8, 32)
PASS_AT_K: tuple[str, ...] = ("1", "2", "4", "8", "16")


@cache
def load(name: str) -> dict[str, Any]:
    """One data file of `paper_data/` (without `.json`), parsed; raises naming the choices."""
    path = DATA_DIR / f"{name}.json"
    if not path.exists():
        choices = sorted(p.stem for p in DATA_DIR.glob("*.json"))
        raise KeyError(f"no paper data file {name!r}; choose from {choices}")
    return json.loads(path.read_text(encoding="utf-8"))


def _simulated_row(table: str, model: str, method: str) -> dict[str, Any] | None:
    for row in load(table)["rows"]:
        if row["model"] == model and row["method"] == method:
            return row
    return None


def _pair(value: list[float] | None) -> tuple[float, float] | None:
    return None if value is None else (float(value[0]), float(value[1]))


def table1_cell(model: str, method: str, benchmark: str) -> tuple[float, float] | None:
    """Table 1's `(greedy, avg@n)` in percent for a benchmark key or `"macro"`; None if absent."""
    row = _simulated_row("table1", model, method)
    return None if row is None else _pair(row.get(benchmark))


def table1_avg_delay(model: str, method: str) -> float | None:
    """Table 1's "Avg. Delay" (learner updates)."""
    row = _simulated_row("table1", model, method)
    return None if row is None else row["avg_delay"]


def table5_cell(model: str, method: str, benchmark: str) -> tuple[float, float] | None:
    """Table 5's `(greedy, avg@n)`; None where absent or where the paper reports a collapse."""
    row = _simulated_row("table5", model, method)
    return None if row is None else _pair(row.get(benchmark))


def table5_row(model: str, method: str) -> dict[str, Any] | None:
    """Table 5's whole row (with `avg_delay` and `collapsed`)."""
    return _simulated_row("table5", model, method)


def table3_row(delay: int | None, method: str) -> dict[str, Any] | None:
    """Table 3's row for `delay` (None with method "base": the base model) and `method`."""
    for row in load("table3")["rows"]:
        if row["delay"] == delay and row["method"] == method:
            return row
    return None


def table3_delays() -> list[int]:
    """The fixed delays Table 3 reports (its base-model row aside)."""
    return sorted({int(row["delay"]) for row in load("table3")["rows"] if row["delay"] is not None})


def table4_cell(checkpoint: int, group_size: int, method: str) -> tuple[float, float] | None:
    """Table 4's `(greedy, sampled Pass@1)` for method "gmc" or "tic"."""
    for row in load("table4")["rows"]:
        if row["checkpoint"] == checkpoint and row["group_size"] == group_size:
            return _pair(row.get(method))
    return None


def table4_delta(checkpoint: int, group_size: int) -> float | None:
    """Table 4's printed "Delta Pass@1 (pp)" (GMC minus TIC)."""
    for row in load("table4")["rows"]:
        if row["checkpoint"] == checkpoint and row["group_size"] == group_size:
            return float(row["delta_pass1_pp"])
    return None


def source(name: str) -> str:
    """Where a data file comes from, e.g. "..., Appendix B.2.2, Table 4"."""
    return str(load(name)["source"])
