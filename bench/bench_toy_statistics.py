"""Vectorised toy-MDP estimator statistics vs two autograd baselines, same samples, one run.

Three paths compute the same `[M, P]` per-minibatch estimates from the same samples:

- vectorised (`toy_mdps.statistics.gradient_estimates`): `psi` from
  `gmc_grpo.estimators.token_gradient_weights` and one scatter-add of the exact softmax scores for
  all minibatches at once;
- batched autograd, the competent baseline (`toy_mdps.reference.minibatch_gradient_estimates`):
  one `gmc_grpo.losses.policy_loss` over a minibatch's `B` groups and one backward per minibatch;
- per-group autograd, the brute-force reference (`toy_mdps.reference.loop_gradient_estimates`):
  one loss and one backward per group.

The script checks that all three agree and prints, per method, the CPU time of each path
(`time.process_time`, best of `--repeats` for the fast path, one run for the autograd ones) and
the two speed-ups, then their geometric means; the headline is the speed-up over the batched
autograd baseline.

    .venv/bin/python bench/bench_toy_statistics.py [--minibatches 100] [--threads 1]
        [--json bench/results/toy_statistics_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gmc_grpo.losses import PolicyLossConfig
from toy_mdps.enumeration import log_policy_table, response_token_logprobs
from toy_mdps.mdp import TokenMDP
from toy_mdps.reference import loop_gradient_estimates, minibatch_gradient_estimates
from toy_mdps.statistics import gradient_estimates, sample_groups


def _best_of(repeats: int, fn: Callable[[], torch.Tensor]) -> tuple[float, torch.Tensor]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    assert out is not None
    return best, out


def _geomean(values: list[float]) -> float:
    return torch.tensor(values).log().mean().exp().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minibatches", type=int, default=100, help="M")
    parser.add_argument("--groups", type=int, default=8, help="B (paper: 8)")
    parser.add_argument("--group-size", type=int, default=8, help="G (paper: 8)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="best of, vectorised path")
    parser.add_argument("--methods", default="is,tic,gmc,vcpo,grpo,a3po")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    mdp = TokenMDP()  # K = 8, V = 4, T = 6: 2,912 states, 11,648 parameters
    theta = mdp.random_parameters(0)
    behavior = theta + 0.3 * mdp.random_parameters(1)
    log_table, behavior_table = log_policy_table(mdp, theta), log_policy_table(mdp, behavior)
    behavior_lp = response_token_logprobs(mdp, behavior_table).sum(-1)
    gen = torch.Generator().manual_seed(0)
    _, responses = sample_groups(
        mdp, behavior_lp, args.minibatches, args.groups, args.group_size, gen
    )
    print(
        f"TokenMDP K={mdp.num_prompts} V={mdp.vocab_size} T={mdp.max_length}: "
        f"{mdp.num_states} states, {mdp.num_responses} responses; "
        f"M={args.minibatches} B={args.groups} G={args.group_size}, threads={args.threads}; "
        "CPU seconds"
    )
    print(
        f"{'method':>6} {'vectorised':>11} {'batched ag':>11} {'per group':>10} "
        f"{'vs batched':>11} {'vs per group':>13} {'max rel err':>12}"
    )
    rows: list[dict[str, Any]] = []
    for method in args.methods.split(","):
        cfg = PolicyLossConfig(method=method, max_length=mdp.max_length)  # type: ignore[arg-type]
        t_fast, fast = _best_of(
            args.repeats,
            lambda cfg=cfg: (
                gradient_estimates(
                    mdp, responses, log_table, behavior_table, cfg, version_lag=4
                ).gradients
            ),
        )
        t_batched, batched = _best_of(
            1,
            lambda cfg=cfg: minibatch_gradient_estimates(
                mdp, responses, theta, behavior, cfg, version_lag=4
            ),
        )
        t_loop, loop = _best_of(
            1,
            lambda cfg=cfg: loop_gradient_estimates(
                mdp, responses, theta, behavior, cfg, version_lag=4
            ),
        )
        scale = loop.abs().max()
        err = max(
            float((fast - loop).abs().max() / scale), float((batched - loop).abs().max() / scale)
        )
        row = {
            "method": method,
            "vectorised_s": t_fast,
            "batched_autograd_s": t_batched,
            "per_group_autograd_s": t_loop,
            "speedup_vs_batched": t_batched / t_fast,
            "speedup_vs_per_group": t_loop / t_fast,
            "max_rel_err": err,
        }
        rows.append(row)
        print(
            f"{method:>6} {t_fast:11.4f} {t_batched:11.3f} {t_loop:10.3f} "
            f"{row['speedup_vs_batched']:10.1f}x {row['speedup_vs_per_group']:12.1f}x {err:12.2e}"
        )
    geo_batched = _geomean([r["speedup_vs_batched"] for r in rows])
    geo_loop = _geomean([r["speedup_vs_per_group"] for r in rows])
    print(
        f"geometric-mean speed-up: {geo_batched:.1f}x over batched autograd (one backward per "
        f"minibatch), {geo_loop:.1f}x over per-group autograd"
    )
    if args.json is not None:
        table = {
            "minibatches": args.minibatches,
            "groups": args.groups,
            "group_size": args.group_size,
            "threads": args.threads,
            "rows": rows,
            "geomean_vs_batched": geo_batched,
            "geomean_vs_per_group": geo_loop,
        }
        args.json.write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    main()
