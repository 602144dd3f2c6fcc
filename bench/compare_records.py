"""Run the CPU reference jobs with fixed seeds and save or compare their run records.

A refactor that keeps every behaviour must leave the records of these jobs unchanged:

| part        | command                                                                     |
|-------------|-----------------------------------------------------------------------------|
| `toy_sweep` | `gmc-grpo toy sweep --quick` (every estimator, 4 delays, 4 group sizes)      |
| `toy_train` | `gmc-grpo toy train --quick` (the four quick experiments: every method, both  |
|             | schedules, three group sizes, the eps grid)                                  |
| `llm_tiny`  | `gmc-grpo llm train --recipe tiny` (GMC, D = 0, 150 updates, evaluations)    |
| `llm_delay` | `gmc-grpo llm train --recipe tiny_delay --run M --steps 20` for every method |
| `toy_workers` | `gmc-grpo toy train --experiment mixed_quick`, `regularity_quick` (worker  |
|             | schedule: exponential and length-proportional times, the drift record)      |
| `toy_bounds` | `gmc-grpo toy train --experiment bounds_quick` (the bound statistics)      |
| `llm_schedules` | `gmc-grpo llm train --recipe tiny --steps 16` under the worker and the  |
|             | length-coupled schedules                                                    |

Usage:

    python bench/compare_records.py save /work/baselines/records      # before the change
    python bench/compare_records.py compare /work/baselines/records   # after: run, then compare
    python bench/compare_records.py diff BASE CURRENT                 # two saved folders

`compare` and `diff` check every field of every row of `metrics.jsonl`, `evals.jsonl`,
`summary.json` and `results.csv` of every run directory, except wall-clock and version fields
(`IGNORED`), and print each difference. Declared renames (`--rename-key OLD=NEW`,
`--rename-value KEY:OLD=NEW`) are applied to the baseline before comparing, so a change of
vocabulary is told apart from a change of numbers; the report counts them. A declared tolerance
(`--rtol 1e-12`) lets two floats that differ by at most that relative amount pass (a change that
only reorders floating-point additions); the report lists every field where it was used, how
often and the largest relative difference, so such a change is explained field by field. Exit
status 0 when the records are identical (up to the declared tolerance), 1 otherwise.

Every job runs in its own process on the CPU with one thread (`OMP_NUM_THREADS=1`), so the
numbers do not depend on the thread count; the command-line router is `pipeline.cli` when it
exists, else the older `gmc_grpo.cli`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LLM_METHODS = ("grpo", "tic", "gmc", "vcpo", "gac", "a3po")
DELAY_STEPS = 20  # a few updates past the FIFO's fill (D = 16) for every method
SCHEDULE_STEPS = 16  # enough updates for the simulated lags of `llm_schedules` to vary
# `llm_schedules`: the tiny recipe under the two simulated schedules. One unit of `L` is one token
# (the tiny recipe's answers are a few tokens long), so the lags reach a few updates.
LLM_SCHEDULE_RUNS = {
    "workers": ["--schedule", "workers", "--workers", "12", "--generation-time",
                "length_proportional", "--set", "length_unit_tokens=1"],
    "length_coupled": ["--schedule", "length_coupled", "--set", "lam=1.0",
                       "--set", "length_unit_tokens=1"],
}  # fmt: skip


def jobs(out: Path) -> dict[str, list[list[str]]]:
    """`part -> [gmc-grpo argv, ...]` writing under `out`."""
    delay_runs = [
        [
            "llm",
            "train",
            "--recipe",
            "tiny_delay",
            "--run",
            method,
            "--steps",
            str(DELAY_STEPS),
            "--set",
            "eval_every=10",
            "--out",
            str(out / "llm_delay" / method),
            "--no-progress",
        ]
        for method in LLM_METHODS
    ]
    return {
        "toy_sweep": [
            ["toy", "sweep", "--quick", "--out", str(out / "toy_sweep"), "--no-progress"]
        ],
        "toy_train": [
            ["toy", "train", "--quick", "--out", str(out / "toy_train"), "--no-progress"]
        ],
        "llm_tiny": [
            [
                "llm",
                "train",
                "--recipe",
                "tiny",
                "--out",
                str(out / "llm_tiny"),
                "--no-progress",
            ]
        ],
        "llm_delay": delay_runs,
        "toy_workers": [
            ["toy", "train", "--experiment", name, "--out", str(out / "toy_workers"),
             "--no-progress"]
            for name in ("mixed_quick", "regularity_quick")
        ],
        "toy_bounds": [
            ["toy", "train", "--experiment", "bounds_quick", "--out", str(out / "toy_bounds"),
             "--no-progress"]
        ],
        "llm_schedules": [
            ["llm", "train", "--recipe", "tiny", "--steps", str(SCHEDULE_STEPS), "--set",
             "eval_every=8", *flags, "--out", str(out / "llm_schedules" / name), "--no-progress"]
            for name, flags in LLM_SCHEDULE_RUNS.items()
        ],
    }  # fmt: skip


ROUTER = """
import sys
try:
    from pipeline.cli import main
except ImportError:
    from gmc_grpo.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_jobs(out: Path, parts: list[str]) -> dict[str, float]:
    """Run the jobs of `parts` into `out` (fresh); return the seconds each part took."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONHASHSEED": "0",
        "TOKENIZERS_PARALLELISM": "false",
    }
    seconds = {}
    for part, commands in jobs(out).items():
        if part not in parts:
            continue
        shutil.rmtree(out / part, ignore_errors=True)
        start = time.perf_counter()
        for argv in commands:
            print(f"[compare_records] gmc-grpo {' '.join(argv)}", flush=True)
            done = subprocess.run([sys.executable, "-c", ROUTER, *argv], env=env)
            if done.returncode != 0:
                raise SystemExit(f"gmc-grpo {' '.join(argv)} exited with {done.returncode}")
        seconds[part] = time.perf_counter() - start
        print(f"[compare_records] {part}: {seconds[part]:.1f} s", flush=True)
    return seconds


# ----------------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------------

# Fields whose values legitimately change from run to run: wall-clock times, throughput, memory,
# and the package version / commit. Matched against the last path component of a field.
IGNORED = re.compile(
    r"(seconds|time_s|wall_s|^perf/|tokens_per_s|peak_memory|git_commit|version|^environment$)"
)
RECORD_FILES = ("metrics.jsonl", "evals.jsonl", "summary.json", "results.csv")


def _read(path: Path) -> Any:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if path.suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    return json.loads(path.read_text())


class Renames:
    """Declared renames applied to the baseline: keys (`num_steps` -> `total_steps`) and values
    of one key (`schedule`: `fixed` -> `fixed_delay`). Counts what it changed."""

    def __init__(self, keys: dict[str, str], values: dict[tuple[str, str], str]) -> None:
        self.keys, self.values = keys, values
        self.applied: dict[str, int] = {}

    def _count(self, what: str) -> None:
        self.applied[what] = self.applied.get(what, 0) + 1

    def apply(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                new = self.keys.get(k, k)
                if new != k:
                    self._count(f"key {k} -> {new}")
                out[new] = self.apply(v, new)
            return out
        if isinstance(value, list):
            return [self.apply(v, key) for v in value]
        if isinstance(value, str):
            if key is not None and (key, value) in self.values:
                self._count(f"value {key}: {value} -> {self.values[(key, value)]}")
                return self.values[(key, value)]
            return self.path(value)
        return value

    def path(self, text: str) -> str:
        """Point names and paths that spell `key=value` with a renamed key (a grid point's name
        joins them with `_`: `num_steps=50_learning_rate=20_delay=4`)."""
        for old, new in self.keys.items():
            text = re.sub(rf"(^|[/_]){re.escape(old)}=", rf"\g<1>{new}=", text)
        return text


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b if isinstance(a, (int, float)) else a == b


class Tolerance:
    """A declared relative tolerance for floats (`--rtol`); tallies where it was used.

    `used[field] = [count, largest relative difference]`, `field` the last path component with
    row indices dropped (e.g. `policy/grad_norm_sq`).
    """

    def __init__(self, rtol: float = 0.0) -> None:
        self.rtol = rtol
        self.used: dict[str, list[float]] = {}

    def close(self, a: Any, b: Any, where: str) -> bool:
        if self.rtol <= 0 or not (isinstance(a, float) and isinstance(b, float)):
            return False
        scale = max(abs(a), abs(b))
        if not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > self.rtol * scale:
            return False
        field = re.sub(r"\[\d+\]", "[]", where.split("/", 1)[-1] if "jsonl" in where else where)
        field = re.sub(r"^.*?(metrics\.jsonl|summary\.json|results\.csv)", r"\1", field)
        field = re.sub(r"\.\d+\.", ".#.", field)
        tally = self.used.setdefault(field, [0, 0.0])
        tally[0] += 1
        tally[1] = max(tally[1], abs(a - b) / scale)
        return True


NO_TOLERANCE = Tolerance()


def _csv_float(value: Any) -> Any:
    """CSV cells are strings: compare numeric ones as floats under a tolerance."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _walk(
    base: Any, current: Any, where: str, out: list[str], tolerance: Tolerance = NO_TOLERANCE
) -> None:
    if isinstance(base, dict) and isinstance(current, dict):
        for key in sorted(set(base) | set(current), key=str):
            if IGNORED.search(str(key)):
                continue
            if key not in current:
                out.append(f"{where}.{key}: only in the baseline ({base[key]!r})")
            elif key not in base:
                out.append(f"{where}.{key}: only in the current records ({current[key]!r})")
            else:
                _walk(base[key], current[key], f"{where}.{key}", out, tolerance)
        return
    if isinstance(base, list) and isinstance(current, list):
        if len(base) != len(current):
            out.append(f"{where}: {len(base)} rows in the baseline, {len(current)} now")
        for i, (b, c) in enumerate(zip(base, current, strict=False)):
            _walk(b, c, f"{where}[{i}]", out, tolerance)
        return
    if _equal(base, current):
        return
    if where.endswith(tuple(f".{k}" for k in ("csv",))) or ".csv[" in where:
        if tolerance.close(_csv_float(base), _csv_float(current), where):
            return
    elif tolerance.close(base, current, where):
        return
    out.append(f"{where}: {base!r} -> {current!r}")


def _normalise_paths(value: Any, root: Path) -> Any:
    """Replace the absolute run root inside strings by `<root>` (summaries hold paths)."""
    if isinstance(value, dict):
        return {k: _normalise_paths(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise_paths(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(str(root.resolve()), "<root>").replace(str(root), "<root>")
    return value


def record_files(root: Path) -> list[Path]:
    """Every record file below `root` (relative paths), sorted."""
    found = []
    for path in root.rglob("*"):
        if path.name in RECORD_FILES and path.is_file():
            rel = path.relative_to(root)
            if any(part in ("checkpoints", "outputs", "base_model") for part in rel.parts):
                continue
            found.append(rel)
    return sorted(found)


def compare(
    base_root: Path,
    current_root: Path,
    renames: Renames,
    limit: int = 20,
    parts: list[str] | None = None,
    tolerance: Tolerance = NO_TOLERANCE,
) -> int:
    """Print every difference between two record folders; return the number of differences.

    `parts`: compare only the records of these jobs (top-level folders); default all.
    `tolerance`: the declared `--rtol` (floats closer than it are not differences; reported).
    """

    def wanted(rel: Path) -> bool:
        return parts is None or rel.parts[0] in parts

    base_files = {Path(renames.path(str(p))): p for p in record_files(base_root) if wanted(p)}
    current_files = {p for p in record_files(current_root) if wanted(p)}
    total = 0
    for rel in sorted(set(base_files) | current_files):
        if rel not in current_files:
            print(f"MISSING now: {rel}")
            total += 1
            continue
        if rel not in base_files:
            print(f"NEW file (not in the baseline): {rel}")
            total += 1
            continue
        base = renames.apply(_normalise_paths(_read(base_root / base_files[rel]), base_root))
        current = _normalise_paths(_read(current_root / rel), current_root)
        diffs: list[str] = []
        _walk(base, current, str(rel), diffs, tolerance)
        rows = len(current) if isinstance(current, list) else 1
        status = "identical" if not diffs else f"{len(diffs)} differences"
        print(f"{rel}: {rows} rows, {status}")
        for line in diffs[:limit]:
            print(f"    {line}")
        if len(diffs) > limit:
            print(f"    ... {len(diffs) - limit} more")
        total += len(diffs)
    for what, count in sorted(renames.applied.items()):
        print(f"declared rename applied {count} times: {what}")
    for field, (count, largest) in sorted(tolerance.used.items()):
        print(
            f"declared tolerance rtol={tolerance.rtol:g} used {int(count)} times: {field} "
            f"(largest relative difference {largest:.2e})"
        )
    print(f"total differences: {total}")
    return total


def _pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--rename-{what} expects OLD=NEW, got {item!r}")
        old, new = item.split("=", 1)
        out.append((old, new))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="parts: " + ", ".join(jobs(Path("."))),
    )
    parser.add_argument("mode", choices=("save", "compare", "diff"))
    parser.add_argument("baseline", type=Path, help="folder of saved records")
    parser.add_argument("current", type=Path, nargs="?", help="diff: the second folder")
    parser.add_argument("--parts", nargs="+", default=list(jobs(Path("."))), help="jobs to run")
    parser.add_argument("--keep", type=Path, help="compare: write the new records here")
    parser.add_argument("--rename-key", action="append", default=[], metavar="OLD=NEW")
    parser.add_argument("--rename-value", action="append", default=[], metavar="KEY:OLD=NEW")
    parser.add_argument("--limit", type=int, default=20, help="differences printed per file")
    parser.add_argument(
        "--rtol",
        type=float,
        default=0.0,
        help="declared relative tolerance for floats (default 0: bit for bit); every field "
        "where it is used is listed with its largest relative difference",
    )
    args = parser.parse_args(argv)
    tolerance = Tolerance(args.rtol)
    values = {}
    for key_old, new in _pairs(args.rename_value, "value"):
        key, _, old = key_old.partition(":")
        values[(key, old)] = new
    renames = Renames(dict(_pairs(args.rename_key, "key")), values)
    if args.mode == "save":
        args.baseline.mkdir(parents=True, exist_ok=True)
        seconds = run_jobs(args.baseline, args.parts)
        (args.baseline / "seconds.json").write_text(json.dumps(seconds, indent=1))
        print(f"saved the records of {', '.join(args.parts)} in {args.baseline}")
        return 0
    if args.mode == "diff":
        if args.current is None:
            parser.error("diff needs two folders")
        found = compare(args.baseline, args.current, renames, args.limit, args.parts, tolerance)
        return int(found > 0)
    current = args.keep or Path(tempfile.mkdtemp(prefix="records_"))
    current.mkdir(parents=True, exist_ok=True)
    run_jobs(current, args.parts)
    print(f"new records in {current}")
    return int(compare(args.baseline, current, renames, args.limit, args.parts, tolerance) > 0)


if __name__ == "__main__":
    sys.exit(main())
