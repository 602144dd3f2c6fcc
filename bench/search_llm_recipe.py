"""The small search behind the CPU delay recipe (`tiny_delay_sweep`): where does RL learn, and
where does delay hurt?

Every run is the full pipeline (`gmc-grpo llm train`: tiny Qwen3, supervised warm-up, HF
engine, FIFO schedule, learner) on the project's arithmetic task, 200 updates, one torch thread,
the runs sharing their warm-ups through one cache folder. Stages:

- **A1, A2: learnability at D = 0** (GRPO, the baseline, so that no setting is picked for GMC's
  sake), `G = 8`: every combination of `GRIDS[stage]` (warm-up steps and the fraction of its
  targets that are the right sum, learning rate, task size). A setting passes when the training
  reward starts low (first 10% of updates <= 0.2) and ends high (last 10% >= 0.5). A1 warms up
  on the right sums (the tiny recipe's warm-up); A2 on a weak warm-up (`sft_answer_fraction`).
- **A3: group size**: the settings that pass, at `G = 16`.
- **B: delay sensitivity**: the passing settings (or those named with `--settings`) with GRPO
  at 8% and 16% of the updates (the paper's 64 and 128 of 800); the recipe needs GRPO's final reward to fall as `D` grows.

A setting is never tuned per method: the one chosen is used for every method of the suite.
Results go to `OUT/results.jsonl` (one row per run: settings, the reward curve by tenths of
training, first and final rewards, seconds, the machine's load) and `OUT/search.md` (the table
of `docs/llm-cpu.md`); finished runs are read back, so the search resumes.

    nice python bench/search_llm_recipe.py --out runs/recipe_search --stage A1
    nice python bench/search_llm_recipe.py --out runs/recipe_search --stage A2
    nice python bench/search_llm_recipe.py --out runs/recipe_search --stage B
    python bench/search_llm_recipe.py --out runs/recipe_search --report
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for folder in (REPO, REPO / "bench"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench_packing import cpu_name  # noqa: E402

#: The base of every run: the tiny recipe (D = 0, no evaluation), 200 updates.
BASE_RECIPE = "tiny"
BASE_OVERRIDES: dict[str, Any] = {
    "total_steps": 200,
    "eval_every": 0,
    "checkpoint_every": 0,
    "method": "grpo",
    "delay": 0,
    "run_seed": 0,
}
#: Stages A1 and A2: each key a `LLMTrainConfig` field (or `arithmetic.<field>`), each value the
#: levels tried (group size 8).
GRIDS: dict[str, dict[str, list[Any]]] = {
    "A1": {
        "sft_steps": [50, 100, 200],
        "lr": [1e-3, 3e-3],
        "group_size": [8],
        "arithmetic.max_operand": [4, 9],
    },
    "A2": {
        "sft_answer_fraction": [0.1, 0.3],
        "sft_steps": [200, 400],
        "lr": [1e-3, 2e-3],
        "group_size": [8],
        "arithmetic.max_operand": [4, 9],
    },
    # A1-A2 showed entropy collapse and Adam-driven collapses at lr >= 1e-3 within 200 updates:
    # a lower rate for longer, larger groups, and a task between 4 and 9
    "A4": {
        "sft_answer_fraction": [0.2],
        "sft_steps": [400],
        "lr": [5e-4, 1e-3],
        "group_size": [8, 16],
        "total_steps": [300],
        "arithmetic.max_operand": [4, 6],
    },
}
#: Stages C*: the search again under the seeding of `gmc_grpo.seeding` (every stream spawned from
#: a `SeedSequence`: it changed the tiny recipes' problems, model init and rollouts, and so the
#: rewards of every row above). Each entry is `(setting, delays, seeds)`, GRPO only, every
#: listed delay and seed run. C1: where does GRPO learn at D = 0 now (from the tiny recipe, whose
#: reward now starts at 0.37, and from the earlier closest setting, which now barely learns)?
PLANS: dict[str, list[tuple[dict[str, Any], tuple[int, ...], tuple[int, ...]]]] = {
    "C1": [
        ({"sft_steps": 200, "lr": 1e-3, "total_steps": 150}, (0,), (0,)),
        ({"sft_steps": 100, "lr": 1e-3, "total_steps": 150}, (0,), (0,)),
        ({"sft_steps": 50, "lr": 1e-3, "total_steps": 150}, (0,), (0,)),
        (
            {"sft_steps": 200, "sft_answer_fraction": 0.5, "lr": 1e-3, "total_steps": 150},
            (0,),
            (0,),
        ),
        (
            {"sft_steps": 200, "sft_answer_fraction": 0.3, "lr": 1e-3, "total_steps": 150},
            (0,),
            (0,),
        ),
        ({"sft_steps": 100, "lr": 5e-4, "total_steps": 150}, (0,), (0,)),
    ],
    # C1: 200 warm-up steps start too high (0.37), 100 start at 0.15 and reach 0.29; lr 1e-3
    # no longer collapses. C2: between the two, longer, and GRPO's fall with the delay at 150
    # updates (the 16-core observation: delays of 16-64 at 150 updates)
    "C2": [
        ({"sft_steps": 150, "lr": 1e-3, "total_steps": 150}, (0, 32, 64), (0,)),
        ({"sft_steps": 200, "lr": 1e-3, "total_steps": 150}, (32, 64), (0,)),
        ({"sft_steps": 100, "lr": 1e-3, "total_steps": 150}, (32, 64), (0,)),
        ({"sft_steps": 100, "lr": 1e-3, "total_steps": 300}, (0,), (0,)),
    ],
    # C2: the initial policy's reward (the FIFO fill) is 0.28 / 0.37 / 0.43 after 100 / 150 /
    # 200 warm-up steps, and the first updates at lr 1e-3 lower it; GRPO falls with D after 100
    # and 150 warm-up steps (seed 0). C3: a second seed, and slower rates for longer
    "C3": [
        ({"sft_steps": 200, "lr": 1e-3, "total_steps": 150}, (0, 32, 64), (1,)),
        ({"sft_steps": 150, "lr": 1e-3, "total_steps": 150}, (0, 64), (1,)),
        ({"sft_steps": 120, "lr": 1e-3, "total_steps": 150}, (0, 64), (0,)),
        ({"sft_steps": 100, "lr": 7e-4, "total_steps": 200}, (0,), (0,)),
        ({"sft_steps": 100, "lr": 5e-4, "total_steps": 300}, (0,), (0,)),
    ],
    # C3: the seed moves the warm-up (stream `llm_warmup` of the run's seed) and with it the
    # start: 200 warm-up steps begin at 0.37 on seed 0 and 0.20 on seed 1. The paper's runs all
    # start from one base model: C4 pins the warm-up's seed (`sft_seed = 0`, seed 0's initial
    # policy for every seed), so that the seeds vary the prompt order and the samples only
    "C4": [
        ({"sft_steps": 200, "lr": 1e-3, "total_steps": 150, "sft_seed": 0}, (0, 64), (1, 2)),
        ({"sft_steps": 100, "lr": 5e-4, "total_steps": 300, "sft_seed": 0}, (0,), (1, 2)),
        ({"sft_steps": 100, "lr": 5e-4, "total_steps": 300, "sft_seed": 0}, (64, 128), (0,)),
    ],
    # C4: with the base pinned, 200 warm-up steps at lr 1e-3 rise from 0.39-0.45 to 0.64-0.65 on
    # seeds 0-2 and GRPO falls at D = 64 (0.17-0.49); from a start near 0.2 (100 steps) the
    # reward stays below 0.5 even in 300 updates at lr 5e-4. C5: faster learning from a low
    # start: a larger rate, larger groups, a smaller task
    "C5": [
        ({"sft_steps": 100, "lr": 2e-3, "total_steps": 150, "sft_seed": 0}, (0,), (0,)),
        (
            {"sft_steps": 100, "lr": 1e-3, "total_steps": 150, "sft_seed": 0, "group_size": 16},
            (0,),
            (0,),
        ),
        (
            {
                "sft_steps": 100,
                "lr": 1e-3,
                "total_steps": 150,
                "sft_seed": 0,
                "arithmetic.max_operand": 6,
            },
            (0,),
            (0,),
        ),
        (
            {
                "sft_steps": 50,
                "lr": 1e-3,
                "total_steps": 150,
                "sft_seed": 0,
                "arithmetic.max_operand": 6,
            },
            (0,),
            (0,),
        ),
    ],
    # C5: lr 2e-3 collapses; G = 16 reaches 0.42 from 0.22; operands 0-6 (39 training sums)
    # rise from 0.40 to 0.79 after 100 warm-up steps, from 0.12 to 0.29 after 50. C6: between
    "C6": [
        (
            {
                "sft_steps": 70,
                "lr": 1e-3,
                "total_steps": 150,
                "sft_seed": 0,
                "arithmetic.max_operand": 6,
            },
            (0,),
            (0, 1),
        ),
        (
            {
                "sft_steps": 80,
                "lr": 1e-3,
                "total_steps": 150,
                "sft_seed": 0,
                "arithmetic.max_operand": 6,
            },
            (0,),
            (0, 1),
        ),
    ],
    # C6: 70 warm-up steps: 0.14-0.16 to 0.39-0.43; 80: 0.22-0.25 to 0.45-0.52. C7: GRPO under
    # delay for 80 and 100 warm-up steps (operands 0-6)
    "C7": [
        (
            {
                "sft_steps": 80,
                "lr": 1e-3,
                "total_steps": 150,
                "sft_seed": 0,
                "arithmetic.max_operand": 6,
            },
            (32, 64),
            (0, 1),
        ),
        (
            {
                "sft_steps": 100,
                "lr": 1e-3,
                "total_steps": 150,
                "sft_seed": 0,
                "arithmetic.max_operand": 6,
            },
            (0, 32, 64),
            (1,),
        ),
        (
            {
                "sft_steps": 100,
                "lr": 1e-3,
                "total_steps": 150,
                "sft_seed": 0,
                "arithmetic.max_operand": 6,
            },
            (32, 64),
            (0,),
        ),
    ],
}
for _plan in PLANS.values():
    for _setting, _, _ in _plan:
        _setting.setdefault("group_size", 8)
        _setting.setdefault("arithmetic.max_operand", 9)

#: Stage B: GRPO at these fractions of a setting's updates (the paper's 64 and 128 of 800), each
#: delay rounded to a multiple of 8.
DELAY_FRACTIONS_B = (0.08, 0.16)


def delays_b(setting: dict[str, Any]) -> tuple[int, ...]:
    """Stage B's delays for a setting: `DELAY_FRACTIONS_B` of its updates, multiples of 8."""
    steps = setting.get("total_steps", BASE_OVERRIDES["total_steps"])
    return tuple(max(8, 8 * round(f * steps / 8)) for f in DELAY_FRACTIONS_B)


START_MAX, FINAL_MIN = 0.2, 0.5


def setting_name(setting: dict[str, Any]) -> str:
    short = {
        "sft_steps": "sft",
        "lr": "lr",
        "group_size": "G",
        "arithmetic.max_operand": "max",
        "arithmetic.num_train": "ntrain",
        "total_steps": "N",
        "num_groups": "B",
        "sft_answer_fraction": "q",
        "sft_seed": "sftseed",
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
    values.update(method=method, delay=delay, run_seed=seed, progress=False)
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


def grid_jobs(stage: str, out: Path, seed: int) -> list[tuple[dict, dict]]:
    grid = GRIDS[stage]
    keys = list(grid)
    jobs = []
    for levels in itertools.product(*(grid[k] for k in keys)):
        setting = dict(zip(keys, levels, strict=True))
        row = {"stage": stage, "setting": setting, "method": "grpo", "delay": 0, "seed": seed}
        jobs.append((row, run_values(setting, "grpo", 0, seed, out)))
    # the smaller task first, then fewer warm-up steps
    jobs.sort(
        key=lambda job: (
            job[0]["setting"]["arithmetic.max_operand"],
            job[0]["setting"]["sft_steps"],
        )
    )
    return jobs


def plan_jobs(stage: str, out: Path) -> list[tuple[dict, dict]]:
    """The runs of a `PLANS` stage, shortest first."""
    from gmc_grpo.seeding import SEEDING

    jobs = []
    for setting, delays, seeds in PLANS[stage]:
        for delay in delays:
            for seed in seeds:
                row = {
                    "stage": stage,
                    "setting": setting,
                    "method": "grpo",
                    "delay": delay,
                    "seed": seed,
                    "seeding": SEEDING,
                }
                jobs.append((row, run_values(setting, "grpo", delay, seed, out)))
    jobs.sort(key=lambda job: job[0]["setting"].get("total_steps", 200))
    return jobs


def group_size_jobs(out: Path, settings: list[dict], seed: int) -> list[tuple[dict, dict]]:
    jobs = []
    for setting in settings:
        bigger = {**setting, "group_size": 16}
        row = {"stage": "A3", "setting": bigger, "method": "grpo", "delay": 0, "seed": seed}
        jobs.append((row, run_values(bigger, "grpo", 0, seed, out)))
    return jobs


def passing(rows: list[dict]) -> list[dict]:
    return [
        r
        for r in rows
        if r["stage"].startswith("A") and r["first"] <= START_MAX and r["final"] >= FINAL_MIN
    ]


def stage_b_jobs(out: Path, settings: list[dict], seed: int) -> list[tuple[dict, dict]]:
    jobs = []
    for setting in settings:
        for delay in delays_b(setting):
            row = {"stage": "B", "setting": setting, "method": "grpo", "delay": delay, "seed": seed}
            jobs.append((row, run_values(setting, "grpo", delay, seed, out)))
    return jobs


def read_rows(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


#: Columns of the learnability table (a setting without a key has the base recipe's value).
COLUMNS = (
    "sft_answer_fraction",
    "sft_steps",
    "lr",
    "group_size",
    "total_steps",
    "arithmetic.max_operand",
)
DEFAULTS = {"sft_answer_fraction": 1.0, "total_steps": BASE_OVERRIDES["total_steps"]}


def _cell(setting: dict[str, Any], key: str) -> str:
    value = setting.get(key, DEFAULTS.get(key))
    return "-" if value is None else f"{value:g}"


def report(out: Path) -> str:
    rows = read_rows(out)
    seeds = sorted({r["seed"] for r in rows if r["stage"].startswith("A")})
    lines = [
        f"Stages A (GRPO, D = 0, seed {', '.join(map(str, seeds))}, "
        f"{BASE_OVERRIDES['total_steps']} updates unless said): mean training reward of the first and last "
        "10% of updates and of each tenth of training; **passes**: first <= "
        f"{START_MAX} and final >= {FINAL_MIN}. `q`: fraction of warm-up targets that are the "
        "right sum.",
        "",
        "| stage | q | warm-up steps | lr | G | updates | max operand | first | final "
        "| reward by tenths | entropy (end) | s | |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |",
    ]
    learn = sorted(
        (r for r in rows if r["stage"].startswith("A")),
        key=lambda r: (r["stage"], [_cell(r["setting"], k) for k in COLUMNS]),
    )
    if not learn:
        lines = []
    ok = {json.dumps(r["setting"], sort_keys=True) for r in passing(rows)}
    for r in learn:
        tenths = " ".join(f"{v:.2f}" for v in r["tenths"])
        flag = "**passes**" if json.dumps(r["setting"], sort_keys=True) in ok else ""
        cells = " | ".join(_cell(r["setting"], k) for k in COLUMNS)
        lines.append(
            f"| {r['stage']} | {cells} | {r['first']:.3f} | {r['final']:.3f} | {tenths} "
            f"| {r['entropy_final']:.2f} | {r['wall_seconds']:.0f} | {flag} |"
        )
    stage_b = [r for r in rows if r["stage"] == "B"]
    if stage_b:
        lines += [
            "",
            "Stage B (GRPO, final reward at D = 0 (stage A) and at 8% and 16% of the updates):",
            "",
            "| setting | seed | D = 0 | D = 8% | D = 16% | delays | falls with D |",
            "| --- | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        cells_b = sorted({(json.dumps(r["setting"], sort_keys=True), r["seed"]) for r in stage_b})
        for setting_key, seed in cells_b:
            setting = json.loads(setting_key)
            by_delay = {
                r["delay"]: r["final"]
                for r in rows
                if json.dumps(r["setting"], sort_keys=True) == setting_key and r["seed"] == seed
            }
            delays = delays_b(setting)
            finals = [by_delay.get(d) for d in (0, *delays)]
            falls = all(
                a is not None and b is not None and a > b
                for a, b in zip(finals, finals[1:], strict=False)
            )
            cells = " | ".join("-" if v is None else f"{v:.3f}" for v in finals)
            lines.append(
                f"| {setting_name(setting)} | {seed} | {cells} | {', '.join(map(str, delays))} "
                f"| {'yes' if falls else 'no'} |"
            )
    lines += plan_table(rows)
    loads = [r["load"] for r in rows]
    if loads:
        lines += [
            "",
            f"Machine: {cpu_name()}, {os.cpu_count()} cores, shared with other jobs (1-minute load "
            f"{min(loads):.1f}-{max(loads):.1f} as runs finished); seconds are wall-clock per run, "
            "one or two runs at a time.",
        ]
    return "\n".join(lines) + "\n"


#: the columns of the stage C table: a setting's fields beyond the tiny recipe's
PLAN_COLUMNS = (
    "arithmetic.max_operand",
    "sft_steps",
    "sft_seed",
    "sft_answer_fraction",
    "lr",
    "group_size",
    "total_steps",
)


def plan_table(rows: list[dict]) -> list[str]:
    """Stages C* (the seeding of `gmc_grpo.seeding`): one line per (stage, setting, seed), GRPO's
    first and final reward at D = 0 and its final reward at every delay run."""
    plan = [r for r in rows if r["stage"].startswith("C")]
    if not plan:
        return []
    delays = sorted({r["delay"] for r in plan if r["delay"] > 0})
    lines = [
        "",
        "Stages C (GRPO, the seeding of `gmc_grpo.seeding`; `sft seed`: the warm-up's seed, "
        "'-' = the run's seed): the first and final reward at D = 0 (mean of the first and last "
        "10% of updates), the final reward at each delay, the D = 0 reward by tenths.",
        "",
        "| stage | max operand | warm-up steps | sft seed | q | lr | G | updates | seed | first "
        "| final, D = 0 | " + " | ".join(f"D = {d}" for d in delays) + " | D = 0 by tenths |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
        + " | ".join("---:" for _ in delays)
        + " | --- |",
    ]
    cells: dict[tuple[str, str, int], dict[int, dict]] = {}
    for r in plan:
        key = (r["stage"], json.dumps(r["setting"], sort_keys=True), r["seed"])
        cells.setdefault(key, {})[r["delay"]] = r
    for (stage, setting_key, seed), by_delay in cells.items():
        setting = json.loads(setting_key)
        defaults = {"sft_answer_fraction": 1.0, "group_size": 8}
        fields = " | ".join(
            "-"
            if setting.get(k, defaults.get(k)) is None
            else f"{setting.get(k, defaults.get(k)):g}"
            for k in PLAN_COLUMNS
        )
        zero = by_delay.get(0)
        first = f"{zero['first']:.3f}" if zero else "-"
        final = f"{zero['final']:.3f}" if zero else "-"
        tenths = " ".join(f"{v:.2f}" for v in zero["tenths"]) if zero else ""
        at = " | ".join(f"{by_delay[d]['final']:.3f}" if d in by_delay else "" for d in delays)
        lines.append(f"| {stage} | {fields} | {seed} | {first} | {final} | {at} | {tenths} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--stage", choices=["A1", "A2", "A4", "A3", "B", *PLANS], help="run this stage"
    )
    parser.add_argument("--settings", help="A3, B: JSON list of settings (default: the passing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--report", action="store_true", help="write OUT/search.md and print it")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = read_rows(args.out)
    chosen = json.loads(args.settings) if args.settings else [r["setting"] for r in passing(rows)]
    if args.stage in GRIDS:
        run_jobs(grid_jobs(args.stage, args.out, args.seed), args.out, args.processes)
    elif args.stage in PLANS:
        run_jobs(plan_jobs(args.stage, args.out), args.out, args.processes)
    elif args.stage == "A3":
        run_jobs(group_size_jobs(args.out, chosen, args.seed), args.out, args.processes)
    elif args.stage == "B":
        run_jobs(stage_b_jobs(args.out, chosen, args.seed), args.out, args.processes)
    text = report(args.out)
    (args.out / "search.md").write_text(text)
    if args.report or args.stage is None:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
