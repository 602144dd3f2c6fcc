"""One tiny training run, an older version of the code against this one, side by side.

The run is the issue's profile run: `gmc-grpo llm train --recipe tiny_delay --run gmc --steps 40
--set eval_every=0` (GMC, fixed delay 16, 40 updates, no evaluation), each in a fresh process
with one torch thread (`OMP_NUM_THREADS=1`), its CPU and wall seconds split by phase
(`bench/tiny_run_phases.py`: imports, warm-up, rollouts, learner, ...). Per round and version:

- a **cold** run: a fresh process, a fresh cache folder: what one `llm train` costs alone;
- a **warm** run: the same run again on that cache folder, which now holds the warmed-up initial
  policy and the FIFO fill (what a run inside a suite pays; `llm_runs.cache`).

Rounds alternate which version goes first. The older version is a commit of this repository
extracted with `git archive` (default: the base commit of the change, `--old-ref`), or a folder
of its code (`--old-code`); each version runs its own recipe file as shipped. The report gives
per phase the median over rounds, the speed-up (old / new) of the whole process and of the
per-run cost in a suite (the warm run), and whether the two versions' records are equal:
every field of every `metrics.jsonl` row except the `perf/` timings, with the largest relative
difference where they differ.

    python bench/bench_tiny_run.py                       # writes bench/results/tiny_run_cpu.json
    python bench/bench_tiny_run.py --rounds 1 --old-code /path/to/old/checkout
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_packing import cpu_name  # noqa: E402

PHASES_SCRIPT = Path(__file__).resolve().parent / "tiny_run_phases.py"
DEFAULT_OLD_REF = "3b89e2d"
RESULT = REPO / "bench" / "results" / "tiny_run_cpu.json"


def extract_commit(ref: str, into: Path) -> Path:
    """The files of commit `ref` of this repository, extracted into `into` (`git archive`)."""
    archive = into / "old.tar"
    with archive.open("wb") as handle:
        subprocess.run(["git", "-C", str(REPO), "archive", ref], stdout=handle, check=True)
    code = into / "old"
    with tarfile.open(archive) as tar:
        tar.extractall(code, filter="data")
    archive.unlink()
    return code


def train_args(out: Path, cache: Path, steps: int) -> list[str]:
    return [
        "llm",
        "train",
        "--recipe",
        "tiny_delay",
        "--run",
        "gmc",
        "--steps",
        str(steps),
        "--set",
        "eval_every=0",
        "--set",
        f"cache_dir={cache}",
        "--no-progress",
        "--out",
        str(out),
    ]


def timed_run(code: Path, out: Path, cache: Path, steps: int, result: Path) -> dict[str, Any]:
    """One run of the code in `code`, in its own process; its phases (`tiny_run_phases`)."""
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [
        sys.executable,
        str(PHASES_SCRIPT),
        str(result),
        "--",
        *train_args(out, cache, steps),
    ]
    load = os.getloadavg()[0]
    done = subprocess.run(command, cwd=code, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the run of {code} failed:\n{done.stderr[-3000:]}")
    phases = json.loads(result.read_text())
    phases["load_before"] = load
    phases["load_after"] = os.getloadavg()[0]
    return phases


def compare_records(a: Path, b: Path) -> dict[str, Any]:
    """`metrics.jsonl` of two runs, field by field (`perf/` timings left out)."""
    rows_a = [json.loads(line) for line in (a / "metrics.jsonl").read_text().splitlines()]
    rows_b = [json.loads(line) for line in (b / "metrics.jsonl").read_text().splitlines()]
    differing, largest, fields = 0, 0.0, set()
    rewards_equal = len(rows_a) == len(rows_b)
    for ra, rb in zip(rows_a, rows_b, strict=False):
        keys = {k for k in ra.keys() | rb.keys() if not k.startswith("perf/")}
        diff = [k for k in keys if ra.get(k) != rb.get(k)]
        differing += bool(diff)
        fields.update(diff)
        rewards_equal &= ra.get("reward/mean") == rb.get("reward/mean")
        for k in diff:
            x, y = ra.get(k), rb.get(k)
            if isinstance(x, int | float) and isinstance(y, int | float):
                scale = max(abs(x), abs(y), 1e-30)
                largest = max(largest, abs(x - y) / scale)
            else:
                largest = math.inf
    return {
        "rows": [len(rows_a), len(rows_b)],
        "rows_differing": differing,
        "identical": differing == 0 and len(rows_a) == len(rows_b),
        "rewards_identical": rewards_equal,
        "largest_relative_difference": largest,
        "fields_differing": sorted(fields),
    }


def loop_seconds(phases: dict[str, Any], kind: str) -> float:
    """Seconds of the run without its imports and warm-up (what a suite's run pays again)."""
    return phases["total"][kind] - sum(phases["phases"][p][kind] for p in ("imports", "warmup"))


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per (version, kind) and the old / new ratios of each round and their median."""
    out: dict[str, Any] = {"median": {}, "ratios": {}}
    by = {(r["version"], r["kind"]): [] for r in runs}
    for r in runs:
        by[(r["version"], r["kind"])].append(r)
    for (version, kind), rows in by.items():
        names = list(rows[0]["phases"]["phases"])
        out["median"][f"{version}/{kind}"] = {
            "total_cpu": statistics.median(r["phases"]["total"]["cpu"] for r in rows),
            "total_wall": statistics.median(r["phases"]["total"]["wall"] for r in rows),
            "loop_cpu": statistics.median(loop_seconds(r["phases"], "cpu") for r in rows),
            "phases_cpu": {
                p: statistics.median(r["phases"]["phases"][p]["cpu"] for r in rows) for p in names
            },
        }
    for kind in ("cold", "warm"):
        old = [r for r in runs if r["version"] == "old" and r["kind"] == kind]
        new = [r for r in runs if r["version"] == "new" and r["kind"] == kind]
        for measure, get in (
            ("total_cpu", lambda p: p["total"]["cpu"]),
            ("total_wall", lambda p: p["total"]["wall"]),
            ("loop_cpu", lambda p: loop_seconds(p, "cpu")),
        ):
            ratios = [get(a["phases"]) / get(b["phases"]) for a, b in zip(old, new, strict=True)]
            out["ratios"][f"{kind}/{measure}"] = {
                "median": statistics.median(ratios),
                "per_round": ratios,
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-ref", default=DEFAULT_OLD_REF, help="commit of the old version")
    parser.add_argument("--old-code", type=Path, help="a folder with the old version's code")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench_tiny_run_"))
    try:
        old_code = args.old_code or extract_commit(args.old_ref, work)
        versions = {"old": old_code.resolve(), "new": REPO}
        runs, records = [], {}
        for round_index in range(args.rounds):
            order = ["old", "new"] if round_index % 2 == 0 else ["new", "old"]
            for version in order:
                cache = work / f"cache_{version}_{round_index}"
                for kind in ("cold", "warm"):
                    out = work / f"run_{version}_{kind}_{round_index}"
                    result = work / f"phases_{version}_{kind}_{round_index}.json"
                    phases = timed_run(versions[version], out, cache, args.steps, result)
                    runs.append(
                        {"round": round_index, "version": version, "kind": kind, "phases": phases}
                    )
                    print(
                        f"round {round_index} {version:3s} {kind}: "
                        f"cpu {phases['total']['cpu']:.1f} s, wall {phases['total']['wall']:.1f} s, "
                        f"load {phases['load_before']:.1f}",
                        flush=True,
                    )
                    records.setdefault(f"{version}/{kind}", out)
        comparison = {
            "old vs new (cold)": compare_records(records["old/cold"], records["new/cold"]),
            "new cold vs warm (the cache)": compare_records(
                records["new/cold"], records["new/warm"]
            ),
        }
        report = {
            "run": "gmc-grpo " + " ".join(train_args(Path("OUT"), Path("CACHE"), args.steps)),
            "old": args.old_ref if args.old_code is None else str(args.old_code),
            "machine": {
                "cpu": cpu_name(),
                "cores": os.cpu_count(),
                "python": platform.python_version(),
                "threads_per_run": 1,
                "note": "shared with other jobs: see load_before/load_after of each run",
            },
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "summary": summarise(runs),
            "records": comparison,
            "runs": runs,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        ratios = report["summary"]["ratios"]
        print(json.dumps({k: round(v["median"], 2) for k, v in ratios.items()}, indent=1))
        print(json.dumps(comparison, indent=1))
        print(f"wrote {args.out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
