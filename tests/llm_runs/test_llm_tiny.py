"""The tiny Qwen3 builder, its tokenizer, and `sequence_logprobs` against a token-by-token loop."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_runs.tiny import (  # noqa: E402
    ALPHABET,
    EOS_TOKEN,
    MULTI_CHAR_TOKENS,
    build_tiny_qwen3,
    build_tokenizer,
    check_model_dir,
    forced_token_state_dict,
    sequence_logprobs,
)

MATH = "Problem: If $x^2 = 16$ and x > 0, find x.\n\nAnswer: \\boxed{4}. (π ≈ 3.14, {a|b}; 10% & #1 @ ~!)"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="module")
def loaded(tiny_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    return model, AutoTokenizer.from_pretrained(tiny_dir)


def test_tokenizer_round_trips_math_text(loaded):
    _, tok = loaded
    ids = tok(MATH)["input_ids"]
    assert tok.decode(ids) == MATH
    assert tok.convert_tokens_to_ids("\\boxed{") in ids  # the multi-character token is used
    for ch in "0123456789azAZ{}\\ \n$^=().,%&#@~!π≈":
        assert tok.decode(tok(ch)["input_ids"]) == ch


def test_tokenizer_special_tokens_and_unknown_characters(loaded):
    _, tok = loaded
    eos = tok.convert_tokens_to_ids(EOS_TOKEN)
    assert tok.eos_token == EOS_TOKEN and tok.eos_token_id == eos and tok.pad_token_id == eos
    assert tok.decode([*tok("ab")["input_ids"], eos], skip_special_tokens=True) == "ab"
    unk = tok("日")["input_ids"]
    assert unk == [tok.unk_token_id]
    assert tok.decode(tok("a日b")["input_ids"], skip_special_tokens=True) == "ab"
    # every id of the vocabulary decodes on its own
    assert all(isinstance(tok.decode([i]), str) for i in range(len(tok)))


def test_vocabulary_layout():
    tok = build_tokenizer()
    n_prefixes = len({t[:k] for t in MULTI_CHAR_TOKENS for k in range(2, len(t) + 1)})
    assert len(tok) == len(ALPHABET) + n_prefixes + 4  # + EOS, im_start, im_end, unk
    assert [tok.convert_tokens_to_ids(c) for c in ALPHABET[:5]] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="multi-character token"):
        build_tokenizer(("日本",))


def test_model_config_and_loading(tiny_dir, loaded):
    model, tok = loaded
    cfg = model.config
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim) == (
        2,
        128,
        2,
        64,
    )
    assert cfg.vocab_size == len(tok)
    assert cfg.eos_token_id == tok.eos_token_id
    assert model.dtype == torch.float32
    assert (tiny_dir / "model.safetensors").is_file() and (tiny_dir / "tokenizer.json").is_file()


def test_builder_is_deterministic_in_the_seed(tmp_path):
    from transformers import AutoModelForCausalLM

    a = AutoModelForCausalLM.from_pretrained(build_tiny_qwen3(tmp_path / "a", seed=3)).state_dict()
    b = AutoModelForCausalLM.from_pretrained(build_tiny_qwen3(tmp_path / "b", seed=3)).state_dict()
    c = AutoModelForCausalLM.from_pretrained(build_tiny_qwen3(tmp_path / "c", seed=4)).state_dict()
    assert a.keys() == b.keys() == c.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["lm_head.weight"], c["lm_head.weight"])


def test_random_policy_is_far_from_uniform(loaded):
    model, tok = loaded
    ids = torch.tensor([tok("What is 2+2?")["input_ids"]])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, -1], dim=-1)
    entropy = float(-(logp.exp() * logp).sum())
    assert entropy < 0.8 * float(torch.log(torch.tensor(float(len(tok)))))


def _loop_logprobs(model, prompt, completion):
    """Brute force: one forward pass per completion token, on the exact prefix."""
    out = []
    for t, token in enumerate(completion):
        ids = torch.tensor([prompt + completion[:t]])
        out.append(float(torch.log_softmax(model(ids).logits[0, -1].float(), dim=-1)[token]))
    return torch.tensor(out)


def test_sequence_logprobs_matches_token_by_token_loop(loaded):
    model, tok = loaded
    prompts = [tok("Q: 1+1?")["input_ids"], tok("Problem: long prompt here")["input_ids"], [5]]
    completions = [tok(" 2.\n\n")["input_ids"], tok("x")["input_ids"], tok("abc def")["input_ids"]]
    with torch.no_grad():
        batched = sequence_logprobs(model, prompts, completions, batch_size=8)
        single = [
            sequence_logprobs(model, [p], [c])[0] for p, c in zip(prompts, completions, strict=True)
        ]
        loops = [_loop_logprobs(model, p, c) for p, c in zip(prompts, completions, strict=True)]
    for b, s, ref, c in zip(batched, single, loops, completions, strict=True):
        assert b.shape == (len(c),) and b.dtype == torch.float32
        torch.testing.assert_close(b, ref, atol=1e-5, rtol=0)
        torch.testing.assert_close(s, ref, atol=1e-5, rtol=0)
        assert (b <= 0).all()


def test_sequence_logprobs_temperature_empty_and_gradients(loaded):
    model, tok = loaded
    p, c = tok("Q:")["input_ids"], tok("ab")["input_ids"]
    with torch.no_grad():
        ids = torch.tensor([p + c])
        logits = model(ids).logits[0].float()
    hot = sequence_logprobs(model, [p], [c], temperature=0.5)[0].detach()
    expect = torch.log_softmax(logits / 0.5, dim=-1)[len(p) - 1 : len(p) - 1 + len(c)]
    torch.testing.assert_close(hot, expect.gather(-1, torch.tensor(c)[:, None]).squeeze(-1))
    assert sequence_logprobs(model, [p], [[]])[0].shape == (0,)
    lp = sequence_logprobs(model, [p], [c])[0]
    lp.sum().backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    with pytest.raises(ValueError, match="2 prompts but 1 completions"):
        sequence_logprobs(model, [p, p], [c])
    with pytest.raises(ValueError, match="temperature"):
        sequence_logprobs(model, [p], [c], temperature=0.0)


@pytest.mark.parametrize("tied", [False, True])
def test_forced_token_state_dict_makes_the_token_certain(tmp_path, tied):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    d = build_tiny_qwen3(tmp_path / "m", seed=1, tie_word_embeddings=tied)
    model = AutoModelForCausalLM.from_pretrained(d).eval()
    assert model.config.tie_word_embeddings == tied
    eos = AutoTokenizer.from_pretrained(d).eos_token_id
    model.load_state_dict(forced_token_state_dict(model, eos))
    with torch.no_grad():
        logits = model(torch.tensor([[3, 40, 7, 9, eos]])).logits[0]
    logp = torch.log_softmax(logits, dim=-1)
    assert (logp.argmax(-1) == eos).all() and logp[:, eos].min() > -1e-6
    others = torch.cat([logits[:, :eos], logits[:, eos + 1 :]], dim=1)
    margin = logits[:, eos] - others.max(-1).values  # 50 up to RMSNorm's eps
    torch.testing.assert_close(margin, torch.full((5,), 50.0), atol=0.01, rtol=0)


def test_check_model_dir_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist.*build_tiny_qwen3"):
        check_model_dir(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        check_model_dir(tmp_path)
