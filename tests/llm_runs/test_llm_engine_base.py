"""The engine interface's helpers: stop-string search, token trimming, seeds, validation."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_runs.engines.base import (  # noqa: E402
    Sample,
    SamplingConfig,
    find_stop,
    sample_seed,
    trim_to_text,
)
from llm_runs.tiny import build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def _decoder(tok):
    return lambda ids: tok.decode(ids, skip_special_tokens=True)


def _ids(tok, *pieces):
    return [tok.convert_tokens_to_ids(p) for p in pieces]


def test_find_stop_earliest_occurrence():
    assert find_stop("abc\n\nProblem", ("Problem", "\n\n")) == 3
    assert find_stop("abc", ("x", "y")) is None
    assert find_stop("abc", ()) is None
    assert find_stop("abc", ("",)) is None


def test_trim_at_token_boundary(tok):
    ids = _ids(tok, "a", "b", "\n\n", "c")
    text = "ab"  # cut before stop "\n\n"
    kept, lps = trim_to_text(ids, [-1.0, -2.0, -3.0, -4.0], text, _decoder(tok))
    assert kept == ids[:2] and lps == [-1.0, -2.0]
    assert tok.decode(kept) == text


def test_trim_when_stop_begins_inside_a_token(tok):
    # ".\n\n" is one token; the stop "\n" begins inside it: the token is dropped whole and the
    # text keeps the "." that precedes the stop string.
    ids = _ids(tok, "a", "b", ".\n\n", "c")
    assert tok.decode(ids) == "ab.\n\nc"
    kept, lps = trim_to_text(ids, [-1.0, -2.0, -3.0, -4.0], "ab.", _decoder(tok))
    assert kept == ids[:2] and lps == [-1.0, -2.0]
    assert "ab.".startswith(tok.decode(kept))


def test_trim_keeps_special_tokens_before_the_stop(tok):
    ids = [*_ids(tok, "a"), tok.unk_token_id, *_ids(tok, "b", "X")]
    kept, _ = trim_to_text(ids, [0.0] * 4, "ab", _decoder(tok))
    assert kept == ids[:3]
    assert trim_to_text([], [], "", _decoder(tok)) == ([], [])
    with pytest.raises(ValueError, match="log-probs"):
        trim_to_text(ids, [0.0], "ab", _decoder(tok))


def test_sample_seeds_are_distinct_within_a_call():
    seeds = {sample_seed(7, p, 4, j) for p in range(3) for j in range(4)}
    assert seeds == set(range(7, 7 + 12))


def test_sample_and_config_validation():
    with pytest.raises(ValueError, match="2 token ids but 1 log-probs"):
        Sample(token_ids=[1, 2], logprobs=[0.0], text="", finish_reason="stop")
    for bad in ({"n": 0}, {"temperature": -1.0}, {"top_p": 0.0}, {"max_tokens": 0}):
        with pytest.raises(ValueError, match="SamplingConfig"):
            SamplingConfig(**bad)
    cfg = SamplingConfig()
    assert (cfg.n, cfg.temperature, cfg.top_p, cfg.max_tokens) == (8, 1.0, 1.0, 4096)
