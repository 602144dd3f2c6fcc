"""A hand-made suite analysis for the comparison tests (`llm_runs.comparisons` and its Markdown
in `pipeline.llm_report`): GRPO, TIC and GMC at D = 0 and 16, seeds 0-3, two measures."""

from __future__ import annotations

from typing import Any

from llm_runs.suite import analyse_records

SEEDS = (0, 1, 2, 3)


def hand_made_analysis() -> Any:
    """At D = 16: GMC - TIC = 0.1, 0.2, 0.3, 0.4 (mean 0.25, p = 0.0305 by hand); TIC - GRPO =
    0.01 * (seed - 1.5): no difference; at D = 0 all methods equal + noise. Both measures
    (`consumed_reward_final`, `mean_reward`) carry the same values."""
    measures = {}
    for seed in SEEDS:
        for delay in (0, 16):
            grpo = 0.3 + 0.01 * seed
            tic = grpo + (0.01 * (seed - 1.5) if delay else 0.002 * seed)
            gmc = tic + (0.1 * (seed + 1) if delay else -0.001 * seed)
            for method, value in (("grpo", grpo), ("tic", tic), ("gmc", gmc)):
                measures[(delay, method, seed)] = {
                    "consumed_reward_final": value,
                    "mean_reward": value,
                }
    return analyse_records(measures)
