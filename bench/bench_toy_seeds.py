"""Toy learner: `S` seeds together (one `AsyncLearner`) vs the same seeds one by one, in one run.

Both arms run the same `ToyTrainConfig` (GMC, Adam; fixed delay D = 16 unless `--schedule`) for
`--steps` learner steps, learner construction included (what running the seeds costs), and end
in the same parameters: seed `s` of the vectorised run equals the one-seed run of `s` bit for bit
(checked every round). The arms alternate over `--rounds` rounds, so a change of load on a
shared machine hits both; the script prints, per MDP, the median over rounds of the CPU time of
this process (`time.process_time`, which other processes' load does not inflate) and of the
wall-clock time, and the ratio one-by-one / together of each (with its range over rounds).

    .venv/bin/python bench/bench_toy_seeds.py [--seeds 20] [--steps 60] [--rounds 3]
        [--schedule fixed_delay|length_coupled|workers] [--json bench/results/toy_seeds_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.learner import AsyncLearner

MDPS = {
    "K=4 V=4 T=5": {"num_prompts": 4, "vocab_size": 4, "max_length": 5},
    "K=8 V=4 T=6": {"num_prompts": 8, "vocab_size": 4, "max_length": 6},
}
SCHEDULES = {
    "fixed_delay": {"schedule": "fixed_delay", "delay": 16},
    "length_coupled": {"schedule": "length_coupled", "lam": 4.0},
    "workers": {"schedule": "workers", "num_workers": 64, "generation_time": "exponential"},
}


def _run(config: ToyTrainConfig, steps: int) -> tuple[float, float, torch.Tensor]:
    """`(cpu seconds, wall seconds, final theta)` of one learner built and run for `steps`."""
    cpu, wall = time.process_time(), time.perf_counter()
    learner = AsyncLearner(config)
    for _ in range(steps):
        learner.train_step()
    return time.process_time() - cpu, time.perf_counter() - wall, learner.theta


def _round(base: dict[str, Any], seeds: list[int], steps: int) -> dict[str, float]:
    cpu_vec, wall_vec, theta = _run(ToyTrainConfig(**base, seeds=seeds), steps)
    cpu_loop = wall_loop = 0.0
    for i, s in enumerate(seeds):
        cpu, wall, single = _run(ToyTrainConfig(**base, seeds=[s]), steps)
        cpu_loop, wall_loop = cpu_loop + cpu, wall_loop + wall
        if not torch.equal(single[0], theta[i]):
            raise AssertionError(f"seed {s}: the vectorised and the one-seed runs differ")
    return {"cpu_vec": cpu_vec, "cpu_loop": cpu_loop, "wall_vec": wall_vec, "wall_loop": wall_loop}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=20, help="number of seeds S")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (median)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--schedule", choices=tuple(SCHEDULES), default="fixed_delay")
    parser.add_argument("--method", default="gmc")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seeds = list(range(args.seeds))
    print(
        f"S={args.seeds} seeds, {args.steps} steps, {args.rounds} rounds, threads={args.threads}, "
        f"method {args.method}, schedule {SCHEDULES[args.schedule]}"
    )
    header = (
        f"{'MDP':>12} {'together cpu s':>15} {'one by one cpu s':>17} {'ratio cpu':>10} "
        f"{'ratio wall':>11} {'ratio cpu range':>16}"
    )
    print(header)
    table = []
    for label, mdp in MDPS.items():
        base = dict(mdp, method=args.method, total_steps=args.steps, **SCHEDULES[args.schedule])
        _run(ToyTrainConfig(**base, seeds=seeds[:2]), 2)  # warm-up (imports, allocator)
        rounds = [_round(base, seeds, args.steps) for _ in range(args.rounds)]
        median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        cpu_ratios = [r["cpu_loop"] / r["cpu_vec"] for r in rounds]
        row = {
            "mdp": label,
            "seeds": args.seeds,
            "steps": args.steps,
            "schedule": args.schedule,
            "method": args.method,
            "rounds": rounds,
            "median": median,
            "ratio_cpu": median["cpu_loop"] / median["cpu_vec"],
            "ratio_wall": median["wall_loop"] / median["wall_vec"],
            "ratio_cpu_range": [min(cpu_ratios), max(cpu_ratios)],
        }
        table.append(row)
        print(
            f"{label:>12} {median['cpu_vec']:>15.3f} {median['cpu_loop']:>17.3f} "
            f"{row['ratio_cpu']:>9.1f}x {row['ratio_wall']:>10.1f}x "
            f"{min(cpu_ratios):>7.1f}-{max(cpu_ratios):.1f}x"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    main()
