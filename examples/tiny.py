"""A tiny random-init Qwen3 and a word-level tokenizer built in code (no download), for the examples'
CPU modes and their tests. Not a model to learn anything with: it shows the plumbing runs."""

from __future__ import annotations

from pathlib import Path

WORDS = ["a", "b", "c", "d", "e", "f", "g", "h"]
PROMPTS = ["a b", "c d", "e f", "g h", "a c", "b d", "e g", "f h"]


def tiny_tokenizer():
    """Word-level tokenizer over `WORDS` with `[PAD]`, `[EOS]`, `[UNK]` (left padding)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[EOS]": 1, "[UNK]": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="[PAD]", eos_token="[EOS]", unk_token="[UNK]"
    )
    tokenizer.padding_side = "left"
    return tokenizer


def tiny_model(tokenizer, seed: int = 0):
    """A 1-layer Qwen3 (hidden 32, 2 heads), random init from `seed`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return Qwen3ForCausalLM(config)


def save_tiny(directory: str | Path, seed: int = 0) -> Path:
    """Write the tiny model and its tokenizer to `directory` (what a hub id would load)."""
    path = Path(directory)
    tokenizer = tiny_tokenizer()
    tiny_model(tokenizer, seed).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def count_a(completions: list[str], **_: object) -> list[float]:
    """Reward: the number of `a` tokens in the completion."""
    return [float(str(c).split().count("a")) for c in completions]
