"""Each method's loss (forward + backward over the same log-probs) relative to GRPO's token loss.

Paper shapes (Appendix B.1: B = 8 groups x G = 8 responses) with the response length scaled to a
CPU (T = 1024 instead of 4,096), float32. Methods are timed side by side in one run, interleaved
round-robin so that machine noise hits every method alike; the ratio is each method's median time
over the median time of `grpo` (the plain token-level clipped loss). Target (issue 2): GMC within
2% of GRPO, i.e. a ratio <= 1.02.

    python bench/bench_losses.py [--length 1024] [--rounds 30] [--out bench/results/losses.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from gmc_grpo.estimators import METHODS as LOSS_METHODS
from gmc_grpo.losses import PolicyLossConfig, policy_loss


def make_inputs(batch: int, group: int, length: int, seed: int = 0):
    """Log-probs `[B, G, T]` of a plausible stale batch, its mask, advantages and lags."""
    gen = torch.Generator().manual_seed(seed)
    logprobs = -torch.rand(batch, group, length, generator=gen) * 3
    behavior = logprobs + 0.05 * torch.randn(batch, group, length, generator=gen)
    lengths = torch.randint(length // 4, length + 1, (batch, group), generator=gen)
    mask = torch.arange(length) < lengths.unsqueeze(-1)
    adv = torch.randn(batch, group, generator=gen)
    lag = torch.full((batch, group), 128)
    return logprobs, behavior, mask, adv, lag


def time_once(method: str, inputs, inner: int) -> float:
    logprobs, behavior, mask, adv, lag = inputs
    config = PolicyLossConfig(method=method)
    start = time.perf_counter()
    for _ in range(inner):
        lp = logprobs.clone().requires_grad_(True)
        loss, _ = policy_loss(lp, behavior, adv, mask, config, version_lag=lag)
        loss.backward()
    return (time.perf_counter() - start) / inner


def run(length: int = 1024, rounds: int = 30, inner: int = 5) -> dict:
    inputs = make_inputs(8, 8, length)
    for method in LOSS_METHODS:  # warm-up
        time_once(method, inputs, 2)
    samples: dict[str, list[float]] = {m: [] for m in LOSS_METHODS}
    for _ in range(rounds):
        for method in LOSS_METHODS:
            samples[method].append(time_once(method, inputs, inner))
    medians = {m: statistics.median(v) for m, v in samples.items()}
    return {
        "shape": {"B": 8, "G": 8, "T": length, "dtype": "float32"},
        "threads": torch.get_num_threads(),
        "rounds": rounds,
        "inner": inner,
        "median_seconds": medians,
        "ratio_to_grpo": {m: medians[m] / medians["grpo"] for m in LOSS_METHODS},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--inner", type=int, default=5)
    parser.add_argument("--out", default="bench/results/losses_cpu.json")
    args = parser.parse_args()
    result = run(args.length, args.rounds, args.inner)
    print(f"{'method':8s} {'median ms':>10s} {'ratio to grpo':>14s}")
    for method in LOSS_METHODS:
        print(
            f"{method:8s} {1e3 * result['median_seconds'][method]:10.3f} {result['ratio_to_grpo'][method]:14.3f}"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
