"""Tiny random-init Qwen3 models for tests, and per-token log-probs by a plain forward pass.

`build_tiny_qwen3` writes a `Qwen3ForCausalLM` (random init from a `Qwen3Config`, nothing
downloaded) and a character-level tokenizer built in code into one directory that
`AutoModelForCausalLM.from_pretrained`, `AutoTokenizer.from_pretrained` and `vllm.LLM` all load.
The tokenizer (`build_tokenizer`) has one token per character of `ALPHABET` (tab, newline,
printable ASCII and common math symbols: digits, letters, `\\boxed{}`, braces, punctuation and
spaces round-trip exactly), a few multi-character tokens (`MULTI_CHAR_TOKENS`, which let tests
exercise stop strings that begin inside a token) and the special tokens `<|endoftext|>` (EOS and
padding), `<|im_start|>`, `<|im_end|>` and `<unk>`. The model's vocabulary is exactly the
tokenizer's, so every sampled id decodes, and to valid text.

`sequence_logprobs` is the reference for the behaviour log-probs the rollout engines record and
the function the learner uses to compute current-policy log-probs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from gmc_grpo.filemodes import give_plain_mode
from gmc_grpo.seeding import stream_seed
from llm_runs.model_files import PICKLED_WEIGHT_SUFFIXES, check_model_dir  # noqa: F401 (re-exported)

EOS_TOKEN = "<|endoftext|>"
UNK_TOKEN = "<unk>"
SPECIAL_TOKENS = (EOS_TOKEN, "<|im_start|>", "<|im_end|>", UNK_TOKEN)
#: Characters of the tiny tokenizer: tab, newline, printable ASCII and common math symbols.
ALPHABET = (
    "\t\n" + "".join(chr(c) for c in range(32, 127)) + "πθαβγδλμσφωΔΣ∞≤≥≠≈±×÷√∑∫°·−→∈∪∩…’“”–—é"
)
MULTI_CHAR_TOKENS = ("\n\n", ".\n\n", "\\boxed{", "Problem", "Answer", "The answer is")


def build_tokenizer(multi_char_tokens: Sequence[str] = MULTI_CHAR_TOKENS):
    """A character-level BPE tokenizer built in code, as a `PreTrainedTokenizerFast`.

    Vocabulary (ids in this order): the characters of `ALPHABET`, then every left-to-right prefix
    of each multi-character token (built by BPE merges, so `"\\boxed{"` is one token), then
    `SPECIAL_TOKENS`. There is no pre-tokenizer (merges may span spaces) and the decoder
    concatenates the token strings, so `decode(encode(text)) == text` for any text made of
    `ALPHABET`; any other character encodes to `<unk>` (a special token, dropped by
    `decode(..., skip_special_tokens=True)`). Every id decodes to valid text on its own.
    """
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {ch: i for i, ch in enumerate(ALPHABET)}
    merges: list[tuple[str, str]] = []
    for token in multi_char_tokens:
        if len(token) < 2 or any(ch not in vocab for ch in token):
            raise ValueError(
                f"multi-character token {token!r} must have >= 2 characters, all in ALPHABET"
            )
        left = token[0]
        for right in token[1:]:
            merged = left + right
            if merged not in vocab:
                merges.append((left, right))
                vocab[merged] = len(vocab)
            left = merged
    vocab[UNK_TOKEN] = len(vocab)  # the BPE model looks `<unk>` up in its own vocabulary
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=UNK_TOKEN))
    tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        clean_up_tokenization_spaces=False,
        model_max_length=1 << 20,
    )


def build_tiny_qwen3(
    directory: str | Path,
    *,
    seed: int = 0,
    num_layers: int = 2,
    hidden_size: int = 128,
    intermediate_size: int = 256,
    num_heads: int = 2,
    num_kv_heads: int = 1,
    head_dim: int = 64,
    max_position_embeddings: int = 2048,
    init_std: float = 0.2,
    tie_word_embeddings: bool = False,
    multi_char_tokens: Sequence[str] = MULTI_CHAR_TOKENS,
) -> Path:
    """Write a random-init `Qwen3ForCausalLM` and its tokenizer into `directory`; return the path.

    The same arguments give the same weights: every matrix is drawn from `N(0, init_std^2)` after
    `torch.manual_seed` with stream `llm_model_init` of `seed` (`gmc_grpo.seeding`; the global
    RNG state is restored afterwards); norm gains are 1.
    Keep `head_dim=64` for vLLM on a CPU: its attention kernel refuses 16 (64 is known to work). `init_std` is larger than Qwen3's 0.02 so that the random
    policy is far from uniform (its log-probs vary across tokens), which makes log-prob checks
    meaningful. The vocabulary size is the tokenizer's (`len(tokenizer)`).

    Files: `config.json`, `generation_config.json`, `model.safetensors` (float32),
    `tokenizer.json`, `tokenizer_config.json` (and whatever else `save_pretrained` writes).
    """
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads={num_heads} must be a multiple of num_kv_heads={num_kv_heads}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(multi_char_tokens)
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        initializer_range=init_std,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        architectures=["Qwen3ForCausalLM"],
        dtype="float32",
    )
    rng_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(stream_seed(seed, "llm_model_init"))
        model = Qwen3ForCausalLM(config).to(torch.float32)
        with torch.no_grad():
            # Norm gains stay at 1 (the init); every matrix gets N(0, init_std^2) from this seed.
            for _name, param in sorted(model.named_parameters()):
                if param.ndim >= 2:
                    param.normal_(0.0, init_std)
    finally:
        torch.random.set_rng_state(rng_state)
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = eos_id
    model.generation_config.bos_token_id = eos_id
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    (directory / "tiny_qwen3.json").write_text(
        json.dumps({"seed": seed, "builder": "llm_runs.tiny.build_tiny_qwen3"}, indent=2) + "\n"
    )
    give_plain_mode(directory)  # save_pretrained writes model.safetensors as 0600
    return directory


def sequence_logprobs(
    model: torch.nn.Module,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    batch_size: int = 8,
    pad_id: int = 0,
) -> list[torch.Tensor]:
    """Per-token log-probs of completions under `model`, by one plain forward pass per batch.

    prompt_ids: `B` prompts, each a list of `P_b >= 1` token ids.
    completion_ids: `B` completions, each a list of `L_b` token ids (may be empty).
    temperature: the log-probs are of `softmax(logits / temperature)` (1.0: the model's own).
    batch_size: sequences per forward pass (right-padded with `pad_id`, masked out).
    Returns `B` float32 tensors, the `b`-th of shape `[L_b]`:
    `log p(completion[t] | prompt, completion[:t])`. Gradients flow when called outside
    `torch.no_grad()` (the learner uses that); the log-softmax is computed in float32.
    """
    if len(prompt_ids) != len(completion_ids):
        raise ValueError(
            f"{len(prompt_ids)} prompts but {len(completion_ids)} completions: give one of each"
        )
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for log-probs, got {temperature}")
    device = next(model.parameters()).device
    out: list[torch.Tensor] = []
    for start in range(0, len(prompt_ids), batch_size):
        prompts = prompt_ids[start : start + batch_size]
        completions = completion_ids[start : start + batch_size]
        seqs = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        width = max(len(s) for s in seqs)
        input_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long, device=device)
        mask = torch.zeros((len(seqs), width), dtype=torch.long, device=device)
        for b, s in enumerate(seqs):
            input_ids[b, : len(s)] = torch.tensor(s, dtype=torch.long, device=device)
            mask[b, : len(s)] = 1
        logits = model(input_ids=input_ids, attention_mask=mask, use_cache=False).logits
        logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)  # [b, width, V]
        for b, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            n_p, n_c = len(p), len(c)
            if n_c == 0:
                out.append(logprobs.new_zeros(0))
                continue
            rows = logprobs[b, n_p - 1 : n_p - 1 + n_c]  # [L_b, V]: position t predicts token t+1
            targets = torch.tensor(list(c), dtype=torch.long, device=device)
            out.append(rows.gather(-1, targets[:, None]).squeeze(-1))
    return out


def forced_token_state_dict(model: torch.nn.Module, token_id: int) -> dict[str, torch.Tensor]:
    """A copy of `model.state_dict()` under which the model emits `token_id` after any input.

    Every attention output and MLP down projection is zeroed, so the residual stream is the
    current token's embedding. Every embedding row is set to the unit vector `e_k` (`k` the
    coordinate of the largest final-norm gain `|g_k|`), so the final hidden state is
    `h = g_k sqrt(H) e_k` whatever the input (RMSNorm is scale-free). The output rows are `e_k`
    too, except row `token_id`, `(1 + 50 / (g_k sqrt(H))) e_k`: its logit exceeds all others by
    50 (up to RMSNorm's epsilon), so its log-prob is about `-(V - 1) e^-50`, i.e. 0 in float32. Works with tied
    embeddings (the output matrix is then the embedding, whose row `token_id` is only ever an
    input after the model has stopped). Tests use it to make a policy that stops at once.
    """
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    for name, tensor in state.items():
        if name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
            tensor.zero_()
    gain = state["model.norm.weight"].float()
    k = int(gain.abs().argmax())
    scale = float(gain[k]) * gain.numel() ** 0.5
    if abs(scale) < 1e-3:
        raise ValueError("the final norm's gains are all about 0: no token can be forced")
    rows = torch.zeros_like(state["model.embed_tokens.weight"])
    rows[:, k] = 1.0
    rows[token_id, k] = 1.0 + 50.0 / scale
    state["model.embed_tokens.weight"] = rows
    if "lm_head.weight" in state:
        state["lm_head.weight"] = rows.clone()
    return state
