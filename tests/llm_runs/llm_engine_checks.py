"""Checks every `RolloutEngine` must pass, shared by the HF and the vLLM engine tests.

Each check takes an engine built on the tiny model (`llm_runs.tiny.build_tiny_qwen3`, float32)
and, where log-probs are compared, the same weights loaded in `transformers` (`model`), whose
plain forward pass (`sequence_logprobs`) is the reference. Checks return the largest
|engine log-prob - forward log-prob| they saw, so the test modules can report it.
"""

from __future__ import annotations

import torch

from llm_runs.engines.base import RolloutEngine, Sample, SamplingConfig
from llm_runs.tiny import sequence_logprobs

PROMPTS = ["What is 2+2?", "Problem: Solve x^2 = 9.\n\nAnswer:", "\\boxed{"]
#: 200 one-character tokens: longer than one KV block of vLLM on a CPU (128 tokens).
LONG_PROMPT = "".join(f"{i % 10}+" for i in range(100))
#: Engine vs forward pass, float32, per token. Measured: about 1e-5 (HF), 1e-5 (vLLM CPU).
LOGPROB_ATOL = 1e-4
#: Frequent characters: a completion of the random tiny model almost surely contains one.
FREQUENT = tuple("aeiou0123456789 ")


def reference_logprobs(
    model: torch.nn.Module, samples: list[Sample], temperature: float = 1.0
) -> list[torch.Tensor]:
    with torch.no_grad():
        return sequence_logprobs(
            model,
            [s.prompt_token_ids for s in samples],
            [s.token_ids for s in samples],
            temperature=temperature,
        )


def max_logprob_diff(model: torch.nn.Module, samples: list[Sample], temperature=1.0) -> float:
    refs = reference_logprobs(model, samples, temperature)
    diffs = [
        float((torch.tensor(s.logprobs, dtype=torch.float32) - r).abs().max())
        for s, r in zip(samples, refs, strict=True)
        if s.token_ids
    ]
    return max(diffs)


def flat(result: list[list[Sample]]) -> list[Sample]:
    return [s for row in result for s in row]


def check_interface_and_shapes(engine, tok) -> None:
    assert isinstance(engine, RolloutEngine)
    cfg = SamplingConfig(n=3, max_tokens=12, seed=1)
    result = engine.generate(PROMPTS, cfg)
    assert len(result) == len(PROMPTS) and all(len(row) == 3 for row in result)
    for prompt, row in zip(PROMPTS, result, strict=True):
        for s in row:
            assert s.prompt_token_ids == tok(prompt)["input_ids"]
            assert len(s.token_ids) == len(s.logprobs) >= 1
            assert all(isinstance(t, int) and 0 <= t < len(tok) for t in s.token_ids)
            assert all(lp <= 0.0 and lp == lp for lp in s.logprobs)
            assert s.finish_reason in ("stop", "length")
            if s.finish_reason == "length":
                assert len(s.token_ids) == 12
            else:  # no stop strings: only EOS stops, and it is kept as the last token
                assert s.token_ids[-1] == tok.eos_token_id
            assert s.text == tok.decode(s.token_ids, skip_special_tokens=True)
    assert engine.generate([], cfg) == []


def check_logprobs_match_forward(engine, model) -> float:
    result = engine.generate(PROMPTS, SamplingConfig(n=4, max_tokens=24, seed=5))
    diff = max_logprob_diff(model, flat(result))
    assert diff < LOGPROB_ATOL, diff
    return diff


def check_tempered_top_p_logprobs(engine, model) -> float:
    """At T = 0.7, top-p = 0.8: log-probs of softmax(z / T) restricted to the top-p set."""
    temperature, top_p = 0.7, 0.8
    samples = flat(
        engine.generate(
            PROMPTS, SamplingConfig(n=3, temperature=temperature, top_p=top_p, max_tokens=16)
        )
    )
    worst = 0.0
    for s in samples:
        with torch.no_grad():
            ids = torch.tensor([s.prompt_token_ids + s.token_ids])
            z = model(ids).logits[0].float() / temperature
        start = len(s.prompt_token_ids) - 1
        for t, (token, lp) in enumerate(zip(s.token_ids, s.logprobs, strict=True)):
            probs = torch.softmax(z[start + t], dim=-1)
            sorted_probs, order = probs.sort(descending=True)
            kept = order[(sorted_probs.cumsum(0) - sorted_probs) < top_p]
            assert token in kept.tolist(), "a token outside the top-p set was sampled"
            expected = float(torch.log(probs[token] / probs[kept].sum()))
            worst = max(worst, abs(expected - lp))
    assert worst < LOGPROB_ATOL, worst
    return worst


def check_greedy(engine, model) -> None:
    result = engine.generate(PROMPTS, SamplingConfig(n=2, temperature=0.0, max_tokens=12))
    for row in result:
        a, b = row
        assert a.token_ids == b.token_ids
        with torch.no_grad():
            logits = model(torch.tensor([a.prompt_token_ids + a.token_ids])).logits[0].float()
        start = len(a.prompt_token_ids) - 1
        argmax = logits[start : start + len(a.token_ids)].argmax(-1).tolist()
        assert a.token_ids == argmax
        expected = torch.log_softmax(logits, -1)[start : start + len(a.token_ids)]
        expected = expected.gather(-1, torch.tensor(a.token_ids)[:, None]).squeeze(-1)
        torch.testing.assert_close(torch.tensor(a.logprobs), expected, atol=LOGPROB_ATOL, rtol=0)


def check_seed_reproducibility(engine) -> None:
    cfg = SamplingConfig(n=4, max_tokens=16, seed=11)
    first = flat(engine.generate(PROMPTS, cfg))
    again = flat(engine.generate(PROMPTS, cfg))
    assert [s.token_ids for s in first] == [s.token_ids for s in again]
    assert [s.logprobs for s in first] == [s.logprobs for s in again]
    other = flat(engine.generate(PROMPTS, SamplingConfig(n=4, max_tokens=16, seed=12)))
    assert [s.token_ids for s in first] != [s.token_ids for s in other]
    # the samples of one prompt differ from each other (each has its own random stream)
    assert len({tuple(s.token_ids) for s in first[:4]}) > 1


def check_stop_strings(engine, tok) -> int:
    """With stop strings, each sample is its stop-free twin (same seed) cut at the first stop.

    Returns how many samples a stop string ended.
    """
    free_cfg = SamplingConfig(n=4, max_tokens=24, seed=21)
    stop_cfg = SamplingConfig(n=4, max_tokens=24, seed=21, stop=FREQUENT)
    free = flat(engine.generate(PROMPTS, free_cfg))
    stopped = flat(engine.generate(PROMPTS, stop_cfg))
    n_stopped = 0
    for f, s in zip(free, stopped, strict=True):
        full = tok.decode(f.token_ids, skip_special_tokens=True)
        cuts = [i for i in (full.find(x) for x in FREQUENT) if i >= 0]
        if not cuts:
            assert (s.token_ids, s.text, s.finish_reason) == (f.token_ids, f.text, f.finish_reason)
            continue
        cut = min(cuts)
        n_stopped += 1
        assert s.finish_reason == "stop"
        assert s.text == full[:cut]
        assert not any(x in s.text for x in FREQUENT)
        # tokens: the longest prefix of the stop-free twin whose text is a prefix of s.text
        k = len(s.token_ids)
        assert s.token_ids == f.token_ids[:k]
        assert s.logprobs == f.logprobs[:k] or all(
            abs(a - b) < LOGPROB_ATOL for a, b in zip(s.logprobs, f.logprobs[:k], strict=True)
        )
        assert s.text.startswith(tok.decode(s.token_ids, skip_special_tokens=True))
        assert not s.text.startswith(tok.decode(f.token_ids[: k + 1], skip_special_tokens=True))
    assert n_stopped >= len(stopped) // 2, "too few stop strings hit to test anything"
    return n_stopped


def check_update_weights(engine, model, new_model, forced_state, eos_id: int) -> float:
    """Forced-EOS weights make every sample `[EOS]`; other weights give their own log-probs.

    A prompt longer than vLLM's CPU KV block (128 tokens) is generated first, so a prefix cache
    not reset after an update would serve KV entries of the old weights. Leaves the engine on
    `new_model`'s weights. Returns the max log-prob diff under them.
    """
    prompts = [*PROMPTS, LONG_PROMPT]
    engine.generate([LONG_PROMPT], SamplingConfig(n=2, max_tokens=8, seed=1))
    engine.update_weights(forced_state)
    for s in flat(engine.generate(prompts, SamplingConfig(n=3, max_tokens=8, seed=2))):
        assert s.token_ids == [eos_id] and s.finish_reason == "stop" and s.text == ""
        assert abs(s.logprobs[0]) < 1e-5
    engine.update_weights(new_model.state_dict())
    samples = flat(engine.generate(prompts, SamplingConfig(n=4, max_tokens=24, seed=5)))
    diff = max_logprob_diff(new_model, samples)
    assert diff < LOGPROB_ATOL, diff
    assert max_logprob_diff(model, samples) > 0.1  # and they are not the old policy's
    return diff


def check_token_id_prompts(engine: RolloutEngine, tokenizer) -> None:
    """A prompt given as token ids is fed as it is: the same samples as its text, and a prompt
    cut at the token level (`llm_runs.prompts.truncate_prompt`) keeps exactly its ids."""
    from llm_runs.prompts import truncate_prompt

    cfg = SamplingConfig(n=2, temperature=1.0, max_tokens=6, seed=3)
    ids = [list(tokenizer(p)["input_ids"]) for p in PROMPTS]
    as_text = engine.generate(PROMPTS, cfg)
    as_ids = engine.generate(ids, cfg)
    assert [[s.token_ids for s in r] for r in as_ids] == [[s.token_ids for s in r] for r in as_text]
    assert [r[0].prompt_token_ids for r in as_ids] == ids
    cut, truncated = truncate_prompt(LONG_PROMPT, tokenizer, 50)
    assert truncated and len(cut) == 50
    (out,) = engine.generate([cut], cfg)
    assert all(s.prompt_token_ids == cut for s in out)
