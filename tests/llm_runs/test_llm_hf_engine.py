"""`HFEngine` on the tiny Qwen3 model: interface, log-probs vs a forward pass, stops, seeds."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

import llm_engine_checks as checks  # noqa: E402

from llm_runs.engines.base import SamplingConfig  # noqa: E402
from llm_runs.engines.hf import HFEngine  # noqa: E402
from llm_runs.tiny import build_tiny_qwen3, forced_token_state_dict  # noqa: E402


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_engine")
    return build_tiny_qwen3(root / "m0", seed=0), build_tiny_qwen3(root / "m1", seed=1)


@pytest.fixture(scope="module")
def reference(tiny_dirs):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_dirs[0]).eval()
    return model, AutoTokenizer.from_pretrained(tiny_dirs[0])


@pytest.fixture()
def engine(tiny_dirs):
    eng = HFEngine(tiny_dirs[0])
    yield eng
    eng.close()


def test_interface_and_shapes(engine, reference):
    checks.check_interface_and_shapes(engine, reference[1])


def test_logprobs_match_forward(engine, reference):
    diff = checks.check_logprobs_match_forward(engine, reference[0])
    print(f"HFEngine max |logprob - forward| = {diff:.2e}")


def test_tempered_top_p_logprobs(engine, reference):
    checks.check_tempered_top_p_logprobs(engine, reference[0])


def test_greedy(engine, reference):
    checks.check_greedy(engine, reference[0])


def test_token_id_prompts(engine, reference):
    checks.check_token_id_prompts(engine, reference[1])


def test_seed_reproducibility(engine):
    checks.check_seed_reproducibility(engine)


def test_samples_do_not_depend_on_the_rest_of_the_batch(engine):
    """Sample `(p, j)` has seed `seed + p * n + j`, whatever else is generated with it."""
    both = engine.generate(checks.PROMPTS[:2], SamplingConfig(n=3, max_tokens=10, seed=4))
    alone = engine.generate(checks.PROMPTS[1:2], SamplingConfig(n=3, max_tokens=10, seed=7))
    assert [s.token_ids for s in both[1]] == [s.token_ids for s in alone[0]]


def test_stop_strings(engine, reference):
    checks.check_stop_strings(engine, reference[1])


def test_update_weights(engine, reference, tiny_dirs):
    from transformers import AutoModelForCausalLM

    model, tok = reference
    new_model = AutoModelForCausalLM.from_pretrained(tiny_dirs[1]).eval()
    forced = forced_token_state_dict(model, tok.eos_token_id)
    diff = checks.check_update_weights(engine, model, new_model, forced, tok.eos_token_id)
    print(f"HFEngine after update_weights: max |logprob - forward| = {diff:.2e}")


def test_update_weights_rejects_bad_state_dicts(engine, reference):
    state = reference[0].state_dict()
    with pytest.raises(KeyError, match="not in the model"):
        engine.update_weights({**state, "bogus.weight": torch.zeros(1)})
    partial = dict(state)
    del partial["model.norm.weight"]
    with pytest.raises(KeyError, match="not given"):
        engine.update_weights(partial)
    with pytest.raises(ValueError, match="shape"):
        engine.update_weights({**state, "model.norm.weight": torch.zeros(3)})


def test_from_model_shares_the_learners_model(reference):
    model, tok = reference
    engine = HFEngine.from_model(model, tok)
    out = engine.generate(["hi"], SamplingConfig(n=2, max_tokens=5))
    assert len(out[0]) == 2 and engine.model is model


def test_errors(engine, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        HFEngine(tmp_path / "missing")
    with pytest.raises(TypeError, match="sequence of strings"):
        engine.generate("one prompt", SamplingConfig(n=1, max_tokens=2))
    engine.close()
    with pytest.raises(RuntimeError, match="after close"):
        engine.generate(["x"], SamplingConfig(n=1, max_tokens=2))


def test_update_weights_with_tied_embeddings(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dirs = [build_tiny_qwen3(tmp_path / f"m{s}", seed=s, tie_word_embeddings=True) for s in (0, 1)]
    model, new_model = (AutoModelForCausalLM.from_pretrained(d).eval() for d in dirs)
    eos = AutoTokenizer.from_pretrained(dirs[0]).eos_token_id
    engine = HFEngine(dirs[0])
    forced = forced_token_state_dict(model, eos)
    checks.check_update_weights(engine, model, new_model, forced, eos)
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    engine.update_weights(state)  # the tied output weight may be left out
    samples = checks.flat(engine.generate(checks.PROMPTS, SamplingConfig(n=2, max_tokens=16)))
    assert checks.max_logprob_diff(model, samples) < checks.LOGPROB_ATOL


def test_prompt_batches_group_equal_lengths_within_the_token_budget():
    from llm_runs.engines.hf import prompt_batches

    encoded = [[1, 2], [3], [4, 5], [6], [7, 8]]
    # n=2, max_tokens=2: a prompt of 2 tokens takes 2 * (2 + 2) = 8 KV tokens, of 1 token 6
    assert prompt_batches(encoded, 2, 2, 1_000) == [[0, 2, 4], [1, 3]]
    assert prompt_batches(encoded, 2, 2, 16) == [[0, 2], [4], [1, 3]]
    assert prompt_batches(encoded, 2, 2, 1) == [[0], [2], [4], [1], [3]]  # one at a time


def test_batched_prompts_sample_as_one_prompt_at_a_time(tiny_dirs, reference):
    """Rows of one batch keep their own generators and see only their own prompt, so they draw
    the same random numbers from the same distributions as one prompt at a time. The logits may
    differ in the last bits (the matrix kernels of a 1-row and a 40-row product round
    differently), so a token can differ where a draw falls within rounding of a boundary: we
    require >= 90% identical samples, log-probs equal to 1e-5 on those, and log-probs of every
    batched sample equal to a plain forward pass (the distribution sampled is the policy's)."""
    prompts = [f"What is {a}+{b}?" for a, b in ((2, 2), (3, 5), (7, 1), (4, 4), (9, 0))]
    prompts += checks.PROMPTS
    sampling = SamplingConfig(n=8, max_tokens=14, seed=3)
    one = HFEngine(tiny_dirs[0], batch_tokens=1).generate(prompts, sampling)
    batched = HFEngine(tiny_dirs[0]).generate(prompts, sampling)
    pairs = [
        (a, b) for ra, rb in zip(one, batched, strict=True) for a, b in zip(ra, rb, strict=True)
    ]
    same = [(a, b) for a, b in pairs if a.token_ids == b.token_ids]
    assert len(same) >= 0.9 * len(pairs), f"{len(same)} of {len(pairs)} samples identical"
    for a, b in same:
        assert a.text == b.text and a.finish_reason == b.finish_reason
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-5
    assert checks.max_logprob_diff(reference[0], checks.flat(batched)) < checks.LOGPROB_ATOL
    with pytest.raises(ValueError, match="batch_tokens"):
        HFEngine(tiny_dirs[0], batch_tokens=0)
