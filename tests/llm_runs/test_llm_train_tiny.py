"""The CPU demonstration: the tiny recipe's reward rises over its run (fixed seed 0).

Measured on the project's 2-core machine: the 60-update variant goes from a mean reward of
0.241 (first 20 updates) to 0.299 (last 20); the full 150-update recipe from 0.25 (first 15) to
about 0.34 (last 15). The margins below leave room for other CPUs' rounding.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import one_thread  # noqa: E402, F401

from gmc_grpo.records import read_jsonl  # noqa: E402
from llm_runs.recipes import config_from_values, load_recipe  # noqa: E402
from llm_runs.train import train  # noqa: E402


def run_tiny(out, **overrides) -> list[float]:
    values = {**load_recipe("tiny"), "out": str(out), "progress": False, **overrides}
    train(config_from_values(values), notice=lambda _text: None)
    return [r["reward/mean"] for r in read_jsonl(out / "metrics.jsonl")]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_tiny_recipe_reward_rises_short(tmp_path):
    """60 updates (the recipe otherwise unchanged): last 20 beat the first 20 by >= 0.03."""
    rewards = run_tiny(tmp_path / "run", total_steps=60, eval_every=0)
    assert len(rewards) == 60
    assert mean(rewards[-20:]) - mean(rewards[:20]) >= 0.03, rewards


@pytest.mark.slow
def test_tiny_recipe_reward_rises_full(tmp_path):
    """The whole recipe (150 updates, evaluations every 50): last 15 beat the first 15 by >= 0.05."""
    rewards = run_tiny(tmp_path / "run")
    assert len(rewards) == 150
    assert mean(rewards[-15:]) - mean(rewards[:15]) >= 0.05, rewards
    evals = read_jsonl(tmp_path / "run" / "evals.jsonl")
    assert {r["step"] for r in evals} == {0, 50, 100, 150}
