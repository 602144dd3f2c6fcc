"""Toy learner: `S` seeds vectorised (one `AsyncLearner`) vs the same seeds run one by one.

Both paths run the same `TrainConfig` (fixed delay, GMC, Adam) for `--steps` learner steps and
end in the same parameters (checked: seed `s` of the vectorised run equals the one-seed run of
`s`); the script prints the wall-clock time of each and the speed-up, for two MDP sizes.

    .venv/bin/python bench/bench_toy_seeds.py [--steps 60] [--seeds 1,5,20] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from toy_mdps.train.config import TrainConfig
from toy_mdps.train.learner import AsyncLearner

MDPS = {
    "K=4 V=4 T=5": {"num_prompts": 4, "vocab_size": 4, "max_length": 5},
    "K=8 V=4 T=6": {"num_prompts": 8, "vocab_size": 4, "max_length": 6},
}


def _run(config: TrainConfig, steps: int) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    learner = AsyncLearner(config)
    for _ in range(steps):
        learner.train_step()
    return time.perf_counter() - start, learner.theta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seeds", default="1,5,20", help="comma-separated numbers of seeds S")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    counts = [int(x) for x in args.seeds.split(",")]
    print(f"steps={args.steps}, threads={args.threads}, method gmc, fixed delay D=16")
    print(f"{'MDP':>12} {'S':>4} {'vectorised s':>13} {'one by one s':>13} {'speed-up':>9}")
    table = []
    for label, mdp in MDPS.items():
        for count in counts:
            base = dict(mdp, method="gmc", delay=16, total_steps=args.steps)
            seeds = list(range(count))
            vec_s, theta = _run(TrainConfig(**base, seeds=seeds), args.steps)
            loop_s = 0.0
            for s in seeds:
                elapsed, single = _run(TrainConfig(**base, seeds=[s]), args.steps)
                loop_s += elapsed
                if not torch.allclose(single[0], theta[s], atol=1e-9):
                    raise AssertionError(f"seed {s}: vectorised and single runs differ")
            table.append(
                {
                    "mdp": label,
                    "seeds": count,
                    "vectorised_s": vec_s,
                    "loop_s": loop_s,
                    "speedup": loop_s / vec_s,
                }
            )
            print(f"{label:>12} {count:>4} {vec_s:>13.3f} {loop_s:>13.3f} {loop_s / vec_s:>8.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    main()
