"""Rollout engine over a Hugging Face `transformers` causal LM, with its own sampling loop.

The loop (prefill, then one token per step with the KV cache) is written here rather than calling
`model.generate`, so that the log-prob recorded for each token is computed from exactly the logits
the token was sampled from, every sample has its own seeded random stream, and stop strings are
handled the same way as in `VLLMEngine` (`base.trim_to_text`).

Per step and per sample row, with float32 logits `z` `[V]` for the next token:
- temperature 0: the token is `argmax z`, its log-prob `log_softmax(z)[token]`;
- otherwise `z / T`, restricted to the top-p set (tokens in decreasing probability order whose
  preceding mass is `< top_p`; vLLM's rule), renormalised: `q = softmax`, the token is drawn by
  `torch.multinomial(q, 1, generator=g)` and its log-prob is `log q[token]`.

Each sample `(p, j)` has its own `torch.Generator` seeded `base.sample_seed(seed, p, n, j)`, so
the same seed gives the same samples whatever the batch, on the same machine and device.

**Batching.** Prompts of the same token length are sampled together, all `n` samples of each as
rows of one batch (no padding anywhere: every row's logits are computed from its own prompt and
tokens only), up to `batch_tokens` KV-cache tokens per batch (rows x (prompt + `max_tokens`);
at least one prompt). A row draws from its own generator, once per step while it is active, in
either case, so batching changes neither the random numbers a sample uses nor the distribution
it draws from; the logits of a row come from matrix products whose other rows are other
samples, which on this project's CPUs gives the same bits as one prompt at a time (a test
compares the two: `batch_tokens=1` is the one-prompt-at-a-time path). A library whose matrix
kernels depend on the batch size could change the last bits of the logits, and so (rarely) a
sampled token; the distribution sampled from stays the same.

A completion ends at an EOS token (included in `token_ids`, finish reason "stop"), when the decoded
text contains a stop string ("stop"; text cut before it, tokens trimmed by `trim_to_text`), or after
`max_tokens` tokens ("length"). A stop string completed by the last allowed token gives "stop".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from llm_runs.engines.base import (
    FinishReason,
    Prompt,
    Sample,
    SamplingConfig,
    find_stop,
    prompt_ids,
    sample_seed,
    trim_to_text,
)
from llm_runs.tiny import check_model_dir


def eos_token_ids(tokenizer, model) -> set[int]:
    """Token ids that end a completion: the tokenizer's EOS and the generation config's."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen = getattr(model, "generation_config", None)
    gen_eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif gen_eos is not None:
        ids.update(int(i) for i in gen_eos)
    if not ids:
        raise ValueError("the tokenizer and the generation config define no EOS token id")
    return ids


def _next_tokens(
    logits: torch.Tensor, sampling: SamplingConfig, generators: Sequence[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Choose one token per row and its log-prob under the distribution sampled from.

    logits: `[R, V]` (any float dtype; cast to float32). generators: `R` generators, one per row.
    Returns token ids `[R]` (long) and log-probs `[R]` (float32).
    """
    z = logits.float()
    if sampling.temperature == 0:
        tokens = z.argmax(dim=-1)
        logq = torch.log_softmax(z, dim=-1)
        return tokens, logq.gather(-1, tokens[:, None]).squeeze(-1)
    z = z / sampling.temperature
    if sampling.top_p < 1.0:
        probs = torch.softmax(z, dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        preceding = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass before each token
        drop_sorted = preceding >= sampling.top_p
        drop_sorted[:, 0] = False  # the most probable token always stays
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        z = z.masked_fill(drop, float("-inf"))
    logq = torch.log_softmax(z, dim=-1)
    q = logq.exp()
    tokens = torch.stack(
        [torch.multinomial(q[r], 1, generator=generators[r]).squeeze(0) for r in range(len(q))]
    )
    return tokens, logq.gather(-1, tokens[:, None]).squeeze(-1)


#: KV-cache tokens per sampling batch, rows x (prompt + max_tokens): one prompt of 8 samples of
#: the paper's 1,024 + 4,096 tokens (what one batch held before prompts were batched), or all 64
#: rows of the tiny recipe's batch.
DEFAULT_BATCH_TOKENS = 65_536


def prompt_batches(
    encoded: Sequence[Sequence[int]], n: int, max_tokens: int, batch_tokens: int
) -> list[list[int]]:
    """Group prompt indices into sampling batches: prompts of one token length together (no
    padding), in order of first appearance, each batch holding at most `batch_tokens` KV-cache
    tokens `n * (prompt length + max_tokens)` per prompt, and at least one prompt.

    encoded: the prompts' token ids. Returns lists of prompt indices, every index once.
    """
    by_length: dict[int, list[int]] = {}
    for p, ids in enumerate(encoded):
        by_length.setdefault(len(ids), []).append(p)
    batches: list[list[int]] = []
    for length, members in by_length.items():
        per_batch = max(1, batch_tokens // (n * (length + max_tokens)))
        batches += [members[k : k + per_batch] for k in range(0, len(members), per_batch)]
    return batches


class HFEngine:
    """`RolloutEngine` over `AutoModelForCausalLM` with a sampling loop of its own.

    model_dir: a local Hugging Face model directory (config, weights, tokenizer).
    device: where the model runs ("cpu", "cuda", "cuda:1", ...).
    dtype: the model's parameter dtype (float32 for exact log-prob checks; bfloat16 on a GPU).
        Log-softmax and sampling always run in float32.
    batch_tokens: KV-cache tokens per sampling batch (module docstring, "Batching"); 1 samples
        one prompt at a time.
    """

    def __init__(
        self,
        model_dir: str | Path,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = check_model_dir(model_dir)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, use_safetensors=True)
        self._setup(model.to(device), tokenizer, batch_tokens)

    @classmethod
    def from_model(
        cls, model: torch.nn.Module, tokenizer, *, batch_tokens: int = DEFAULT_BATCH_TOKENS
    ) -> HFEngine:
        """Wrap an already loaded model (e.g. the learner's own, so no weight copy is needed)."""
        engine = cls.__new__(cls)
        engine._setup(model, tokenizer, batch_tokens)
        return engine

    def _setup(self, model: torch.nn.Module, tokenizer, batch_tokens: int) -> None:
        if batch_tokens < 1:
            raise ValueError(f"HFEngine batch_tokens must be >= 1, got {batch_tokens}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.eos_ids = eos_token_ids(tokenizer, model)
        self.batch_tokens = batch_tokens
        self._closed = False

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids `[P]` as fed to the model (the tokenizer's special tokens added)."""
        return list(self.tokenizer(prompt)["input_ids"])

    @torch.no_grad()
    def generate(self, prompts: Sequence[Prompt], sampling: SamplingConfig) -> list[list[Sample]]:
        """Sample `sampling.n` completions per prompt (a text, or token ids fed as they are):
        result `[len(prompts)][n]`."""
        if self._closed:
            raise RuntimeError("HFEngine.generate called after close()")
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of strings, not one string")
        encoded = [prompt_ids(prompt, self.encode) for prompt in prompts]  # text or token ids
        for p, (prompt, ids) in enumerate(zip(prompts, encoded, strict=True)):
            if not ids:
                raise ValueError(f"prompt {p} encodes to no tokens: {prompt!r}")
        results: list[list[Sample]] = [[] for _ in prompts]
        for batch in prompt_batches(encoded, sampling.n, sampling.max_tokens, self.batch_tokens):
            for p, samples in zip(
                batch, self._generate_rows(batch, encoded, sampling), strict=True
            ):
                results[p] = samples
        return results

    def _generate_rows(
        self, batch: Sequence[int], encoded: Sequence[list[int]], sampling: SamplingConfig
    ) -> list[list[Sample]]:
        """The `n` samples of each prompt in `batch` (indices into `encoded`, all of one token
        length), as the rows `(p, j)` of one sampling loop: `[len(batch)][n]`."""
        n = sampling.n
        rows = [(p, j) for p in batch for j in range(n)]
        generators = [
            torch.Generator(device=self.device).manual_seed(sample_seed(sampling.seed, p, n, j))
            for p, j in rows
        ]
        tokens: list[list[int]] = [[] for _ in rows]
        logprobs: list[list[float]] = [[] for _ in rows]
        texts: list[str | None] = [None] * len(rows)
        reasons: list[FinishReason] = ["length"] * len(rows)
        active = list(range(len(rows)))  # rows still generating, in cache order

        input_ids = torch.tensor(
            [encoded[p] for p, _ in rows], dtype=torch.long, device=self.device
        )
        out = self.model(input_ids=input_ids, use_cache=True)
        cache = out.past_key_values
        logits = out.logits[:, -1]  # [rows, V]
        for _ in range(sampling.max_tokens):
            chosen, chosen_lp = _next_tokens(logits, sampling, [generators[r] for r in active])
            still: list[int] = []
            keep_rows: list[int] = []
            for i, (r, tok, lp) in enumerate(
                zip(active, chosen.tolist(), chosen_lp.tolist(), strict=True)
            ):
                tokens[r].append(tok)
                logprobs[r].append(lp)
                if tok in self.eos_ids:
                    reasons[r] = "stop"
                    continue
                if sampling.stop:
                    full = self._decode(tokens[r])
                    cut = find_stop(full, sampling.stop)
                    if cut is not None:
                        texts[r] = full[:cut]
                        tokens[r], logprobs[r] = trim_to_text(
                            tokens[r], logprobs[r], texts[r], self._decode
                        )
                        reasons[r] = "stop"
                        continue
                still.append(r)
                keep_rows.append(i)
            if not still or len(tokens[still[0]]) >= sampling.max_tokens:
                break
            if len(still) < len(active):
                cache.batch_select_indices(torch.tensor(keep_rows, device=self.device))
                chosen = chosen[keep_rows]
            active = still
            out = self.model(input_ids=chosen[:, None], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[:, -1]
        samples = [
            Sample(
                token_ids=tokens[r],
                logprobs=logprobs[r],
                text=texts[r] if texts[r] is not None else self._decode(tokens[r]),
                finish_reason=reasons[r],
                prompt_token_ids=list(encoded[p]),
            )
            for r, (p, _) in enumerate(rows)
        ]
        return [samples[k * n : (k + 1) * n] for k in range(len(batch))]

    @torch.no_grad()
    def update_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Copy new weights into the model in place (names as in `model.state_dict()`).

        Every parameter must be given (a tied output embedding may be left out); an unknown name
        or a shape mismatch raises. Values are cast to the engine's dtype and device.
        """
        own = self.model.state_dict()
        unknown = sorted(set(state_dict) - set(own))
        if unknown:
            raise KeyError(f"update_weights: names not in the model: {unknown[:5]}")
        ptrs = {}
        for name, tensor in own.items():
            ptrs.setdefault(tensor.data_ptr(), []).append(name)
        missing = [
            name
            for name in own
            if name not in state_dict
            and not any(a in state_dict for a in ptrs[own[name].data_ptr()])
        ]
        if missing:
            raise KeyError(f"update_weights: parameters not given: {missing[:5]}")
        for name, value in state_dict.items():
            if own[name].shape != value.shape:
                raise ValueError(
                    f"update_weights: {name} has shape {tuple(value.shape)}, "
                    f"the model's is {tuple(own[name].shape)}"
                )
            own[name].copy_(value)

    def close(self) -> None:
        """Drop the model (frees its memory once nothing else refers to it)."""
        self._closed = True
        self.model = None  # type: ignore[assignment]
