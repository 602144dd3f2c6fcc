"""No wasted rollouts (issue 24, item 4): the FIFO's fill is one engine call, a run of `N` updates
generates exactly `N` batches, and the consumed batches hold what they held when every batch had
an engine call of its own (each sample has its own seed: the HF engine's per-row generators; the
log-probs of the same tokens equal to float32 rounding, `assert_same_rollouts`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import (  # noqa: E402, F401
    assert_same_rollouts,
    even_first_char,
    one_thread,
    quiet,
    strip,
    tiny_config,
)

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from llm_runs.engines.hf import HFEngine  # noqa: E402
from llm_runs.train import train  # noqa: E402


class Counting(HFEngine):
    """Records the prompts of every engine call."""

    calls: list[int]

    def generate(self, prompts, sampling):
        self.calls.append(len(prompts))
        return super().generate(prompts, sampling)


class OnePromptPerCall(Counting):
    """Generates each prompt in an engine call of its own (its samples keep their seeds)."""

    def generate(self, prompts, sampling):
        out = []
        for p, prompt in enumerate(prompts):
            seed = sampling.seed + p * sampling.n  # `base.sample_seed` of prompt p
            out += super().generate([prompt], replace(sampling, seed=seed))
        return out


def run(out, engine_class, **overrides):
    calls: list[int] = []

    def factory(model_dir):
        engine = engine_class(model_dir)
        engine.calls = calls
        return engine

    config = tiny_config(out, method="gmc", lr=1e-2, **overrides)
    train(config, engine_factory=factory, reward_fn=even_first_char, notice=quiet)
    return calls, strip(read_jsonl(out / "metrics.jsonl"))


@pytest.mark.parametrize("delay, steps", [(3, 8), (1, 4)])
def test_the_fill_is_one_call_and_n_updates_generate_n_batches(tmp_path, delay, steps):
    """D = 3, N = 8: one call of D + 1 = 4 batches, then one batch per update until the last D
    updates, which launch nothing: 8 batches in 5 calls (before: 11 batches in 11 calls)."""
    b = 4  # tiny_config's num_groups
    calls, rows = run(tmp_path / "batched", Counting, delay=delay, total_steps=steps)
    assert calls == [(delay + 1) * b] + [b] * (steps - delay - 1)
    assert sum(calls) == steps * b  # exactly N batches
    assert [r["staleness/lag"] for r in rows] == [min(n, delay) for n in range(steps)]
    single, same = run(tmp_path / "single", OnePromptPerCall, delay=delay, total_steps=steps)
    assert single == [1] * steps * b
    assert_same_rollouts(same, rows)  # every consumed batch as if generated alone


def test_inner_steps_count_batches_not_updates(tmp_path):
    """With inner_steps = 2 a batch feeds two updates: D = 2 updates is a FIFO of one batch;
    N = 6 updates consume 3 batches, all of them generated, none more."""
    calls, rows = run(
        tmp_path / "run", Counting, delay=2, inner_steps=2, groups_per_micro=1, total_steps=6
    )
    assert calls == [2 * 4, 4]
    assert [r["staleness/lag"] for r in rows] == [0, 1, 2, 3, 2, 3]
