"""Vectorised toy-MDP estimator statistics vs a per-group autograd loop, same config, one run.

The vectorised path (`toy_mdps.statistics.gradient_estimates`: `psi` from
`gmc_grpo.estimators.token_gradient_weights` + one scatter-add of the exact softmax scores for
all minibatches) and the reference path (`toy_mdps.reference.loop_gradient_estimates`: one
`gmc_grpo.losses.policy_loss` + `backward()` per group) compute the same `[M, P]` estimates from
the same samples; the script checks they agree and prints the wall-clock speed-up per method.

    .venv/bin/python bench/bench_toy_statistics.py [--minibatches 100] [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch

from gmc_grpo.losses import PolicyLossConfig
from toy_mdps.exact import log_policy_table, response_token_logprobs
from toy_mdps.mdp import TokenMDP
from toy_mdps.reference import loop_gradient_estimates
from toy_mdps.statistics import gradient_estimates, sample_groups


def _best_of(repeats: int, fn) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minibatches", type=int, default=100, help="M")
    parser.add_argument("--groups", type=int, default=8, help="B (paper: 8)")
    parser.add_argument("--group-size", type=int, default=8, help="G (paper: 8)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--methods", default="is,tic,gmc,vcpo,grpo,a3po")
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
        f"M={args.minibatches} B={args.groups} G={args.group_size}, threads={args.threads}"
    )
    print(f"{'method':>6} {'vectorised s':>13} {'loop s':>9} {'speed-up':>9} {'max rel err':>12}")
    speedups = []
    for method in args.methods.split(","):
        cfg = PolicyLossConfig(method=method, max_length=mdp.max_length)  # type: ignore[arg-type]
        t_fast, fast = _best_of(
            3,
            lambda cfg=cfg: (
                gradient_estimates(
                    mdp, responses, log_table, behavior_table, cfg, version_lag=4
                ).gradients
            ),
        )
        t_slow, slow = _best_of(
            1,
            lambda cfg=cfg: loop_gradient_estimates(
                mdp, responses, theta, behavior, cfg, version_lag=4
            ),
        )
        err = float((fast - slow).abs().max() / slow.abs().max())  # type: ignore[operator]
        speedups.append(t_slow / t_fast)
        print(f"{method:>6} {t_fast:13.4f} {t_slow:9.3f} {t_slow / t_fast:8.1f}x {err:12.2e}")
    geo = torch.tensor(speedups).log().mean().exp().item()
    print(f"geometric-mean speed-up: {geo:.1f}x (target >= 50x)")


if __name__ == "__main__":
    main()
