"""The small search behind the CPU delay recipe (`tiny_delay_sweep`): where does RL learn, and
where does delay hurt?

Two stages, every run the full pipeline (`gmc-grpo llm train`: tiny Qwen3, supervised warm-up,
HF engine, FIFO schedule, learner) on the project's arithmetic task, one torch thread each, runs
sharing their warm-ups through one cache folder:

- **A: learnability at D = 0** (GRPO, the baseline, so that no setting is picked for GMC's
  sake): every combination of `GRID_A` (warm-up steps, learning rate, group size, task size).
  A setting passes when the training reward starts low (first 10% of updates <= 0.2) and ends
  high (last 10% >= 0.5).
- **B: delay sensitivity**: the passing settings (or those named with `--settings`) with GRPO at
  the delays of `DELAYS_B`; the recipe needs GRPO's final reward to fall as `D` grows.

Each setting's methods are never tuned: one setting is then used for every method of the
suite. Results go to `OUT/results.jsonl` (one row per run: settings, the reward curve by tenths
of training, final and first rewards, seconds) and `OUT/search.md` (the table in
`docs/llm-cpu.md`); finished runs are read back, so the search resumes.

    nice python bench/search_llm_recipe.py --out runs/recipe_search --stage A
    nice python bench/search_llm_recipe.py --out runs/recipe_search --stage B
    python bench/search_llm_recipe.py --out runs/recipe_search --report
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

#: The base of every run: the tiny recipe (D = 0, no evaluation), 200 updates.
BASE_RECIPE = "tiny"
BASE_OVERRIDES: dict[str, Any] = {
    "total_steps": 200,
    "eval_every": 0,
    "checkpoint_every": 0,
    "method": "grpo",
    "delay": 0,
    "seed": 0,
}
#: Stage A: each key a `TrainConfig` field (or `arithmetic.<field>`), each value the levels tried.
GRID_A: dict[str, list[Any]] = {
    "sft_steps": [50, 100, 200],
    "lr": [1e-3, 3e-3],
    "group_size": [8, 16],
    "arithmetic.max_operand": [4, 9],
}
#: Stage B: GRPO at these delays (updates; 8% and 16% of the 200 updates, the paper's 64 and 128
#: of 800).
DELAYS_B = (16, 32)
START_MAX, FINAL_MIN = 0.2, 0.5


def setting_name(setting: dict[str, Any]) -> str:
    short = {
        "sft_steps": "sft",
        "lr": "lr",
        "group_size": "G",
        "arithmetic.max_operand": "max",
        "arithmetic.num_train": "ntrain",
        "total_steps": "N",
        "rollout_prompts": "B",
    }
    return "_".join(
        f"{short.get(k, k)}{v:g}" if isinstance(v, float) else f"{short.get(k, k)}{v}"
        for k, v in sorted(setting.items())
    )


def run_values(setting: dict[str, Any], method: str, delay: int, seed: int, out: Path) -> dict:
    from llm_runs.recipes import load_recipe

    values = {**load_recipe(BASE_RECIPE), **BASE_OVERRIDES}
    arithmetic = dict(values.get("arithmetic", {}))
    pool = None
    for key, value in setting.items():
        if key.startswith("arithmetic."):
            arithmetic[key.split(".", 1)[1]] = value
        else:
            values[key] = value
    side = arithmetic.get("max_operand", 9) + 1
    pool = side * side
    # 80% of the distinct pairs train, 20% are held out (the tiny recipe's 80 / 20 of 100)
    arithmetic.setdefault("num_train", 80)
    if arithmetic["num_train"] + arithmetic.get("num_eval", 20) > pool:
        arithmetic["num_train"] = int(0.8 * pool)
        arithmetic["num_eval"] = pool - arithmetic["num_train"]
    values["arithmetic"] = arithmetic
    values.update(method=method, delay=delay, seed=seed, progress=False)
    name = f"{setting_name(setting)}__{method}_d{delay}_seed{seed}"
    values["out"] = str(out / "runs" / name)
    values["cache_dir"] = str(out / "cache")
    return values


def curve_summary(run_dir: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["reward/mean"] for r in rows]
    n = len(rewards)
    k = max(1, math.ceil(0.1 * n))
    tenths = [
        sum(rewards[i * n // 10 : (i + 1) * n // 10]) / max(1, (i + 1) * n // 10 - i * n // 10)
        for i in range(10)
    ]
    return {
        "updates": n,
        "first": sum(rewards[:k]) / k,
        "final": sum(rewards[-k:]) / k,
        "tenths": tenths,
        "entropy_final": sum(r["policy/entropy"] for r in rows[-k:]) / k,
        "length_final": sum(r["response/length_mean"] for r in rows[-k:]) / k,
    }


def _job(values: dict[str, Any]) -> dict[str, Any]:
    from llm_runs.suite import _run_one

    started = time.process_time(), time.perf_counter()
    summary = _run_one(values)
    return {
        "summary_seconds": summary.get("seconds_this_session"),
        "cpu_seconds": time.process_time() - started[0],
        "wall_seconds": time.perf_counter() - started[1],
    }


def run_jobs(jobs: list[tuple[dict, dict]], out: Path, processes: int) -> None:
    """Run `(row_fields, values)` jobs not yet in `results.jsonl`; append their rows."""
    import multiprocessing

    results = out / "results.jsonl"
    done = (
        {json.loads(line)["run"] for line in results.read_text().splitlines()}
        if results.is_file()
        else set()
    )
    todo = [(row, values) for row, values in jobs if Path(values["out"]).name not in done]
    print(f"{len(todo)} runs to do ({len(jobs) - len(todo)} done)", flush=True)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
        futures = {pool.submit(_job, values): (row, values) for row, values in todo}
        for future in as_completed(futures):
            row, values = futures[future]
            timing = future.result()
            run_dir = Path(values["out"])
            record = {
                "run": run_dir.name,
                **row,
                **curve_summary(run_dir),
                **timing,
                "load": os.getloadavg()[0],
            }
            with results.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            print(
                f"{run_dir.name}: first {record['first']:.3f} final {record['final']:.3f} "
                f"({timing['wall_seconds']:.0f} s, load {record['load']:.1f})",
                flush=True,
            )


def stage_a_jobs(out: Path, seed: int) -> list[tuple[dict, dict]]:
    keys = list(GRID_A)
    jobs = []
    for levels in itertools.product(*(GRID_A[k] for k in keys)):
        setting = dict(zip(keys, levels, strict=True))
        row = {"stage": "A", "setting": setting, "method": "grpo", "delay": 0, "seed": seed}
        jobs.append((row, run_values(setting, "grpo", 0, seed, out)))
    # cheapest first: fewer warm-up steps, smaller groups
    jobs.sort(key=lambda job: (job[0]["setting"]["group_size"], job[0]["setting"]["sft_steps"]))
    return jobs


def passing(rows: list[dict]) -> list[dict]:
    return [
        r for r in rows if r["stage"] == "A" and r["first"] <= START_MAX and r["final"] >= FINAL_MIN
    ]


def stage_b_jobs(out: Path, settings: list[dict], seed: int) -> list[tuple[dict, dict]]:
    jobs = []
    for setting in settings:
        for delay in DELAYS_B:
            row = {"stage": "B", "setting": setting, "method": "grpo", "delay": delay, "seed": seed}
            jobs.append((row, run_values(setting, "grpo", delay, seed, out)))
    return jobs


def read_rows(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def report(out: Path) -> str:
    rows = read_rows(out)
    keys = list(GRID_A)
    lines = [
        f"Stage A (GRPO, D = 0, seed {sorted({r['seed'] for r in rows if r['stage'] == 'A'})}, "
        f"{BASE_OVERRIDES['total_steps']} updates): mean training reward of the first and last "
        "10% of updates and at each tenth of training; **passes**: first <= "
        f"{START_MAX}, final >= {FINAL_MIN}.",
        "",
        "| " + " | ".join(keys) + " | first | final | reward by tenths | entropy | s | |",
        "| " + " | ".join("---:" for _ in keys) + " | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    stage_a = sorted(
        (r for r in rows if r["stage"] == "A"), key=lambda r: [r["setting"][k] for k in keys]
    )
    ok = {json.dumps(r["setting"], sort_keys=True) for r in passing(rows)}
    for r in stage_a:
        tenths = " ".join(f"{v:.2f}" for v in r["tenths"])
        flag = "**passes**" if json.dumps(r["setting"], sort_keys=True) in ok else ""
        lines.append(
            "| "
            + " | ".join(f"{r['setting'][k]:g}" for k in keys)
            + f" | {r['first']:.3f} | {r['final']:.3f} | {tenths} | {r['entropy_final']:.2f} "
            f"| {r['wall_seconds']:.0f} | {flag} |"
        )
    stage_b = [r for r in rows if r["stage"] == "B"]
    if stage_b:
        lines += [
            "",
            "Stage B (GRPO, final reward by delay; D = 0 from stage A):",
            "",
            "| setting | D = 0 | " + " | ".join(f"D = {d}" for d in DELAYS_B) + " | falls with D |",
            "| --- | ---: | " + " | ".join("---:" for _ in DELAYS_B) + " | --- |",
        ]
        for setting_key in sorted({json.dumps(r["setting"], sort_keys=True) for r in stage_b}):
            setting = json.loads(setting_key)
            by_delay = {
                r["delay"]: r["final"]
                for r in rows
                if json.dumps(r["setting"], sort_keys=True) == setting_key
            }
            finals = [by_delay.get(d) for d in (0, *DELAYS_B)]
            falls = all(
                a is not None and b is not None and a > b for a, b in zip(finals, finals[1:], strict=False)
            )
            cells = " | ".join("-" if v is None else f"{v:.3f}" for v in finals)
            lines.append(f"| {setting_name(setting)} | {cells} | {'yes' if falls else 'no'} |")
    loads = [r["load"] for r in rows]
    if loads:
        lines += [
            "",
            f"Machine: {cpu_name()}, {os.cpu_count()} cores, shared with other jobs (1-minute load "
            f"{min(loads):.1f}-{max(loads):.1f} as runs finished); seconds are wall-clock per run.",
        ]
    return "\n".join(lines) + "\n"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stage", choices=["A", "B"], help="run this stage")
    parser.add_argument("--settings", help="stage B: JSON list of settings (default: A's passing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--report", action="store_true", help="write OUT/search.md and print it")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.stage == "A":
        run_jobs(stage_a_jobs(args.out, args.seed), args.out, args.processes)
    elif args.stage == "B":
        settings = (
            json.loads(args.settings)
            if args.settings
            else [r["setting"] for r in passing(read_rows(args.out))]
        )
        run_jobs(stage_b_jobs(args.out, settings, args.seed), args.out, args.processes)
    text = report(args.out)
    (args.out / "search.md").write_text(text)
    if args.report or args.stage is None:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
