"""Per-token log-probs of a causal LM: the chunked log-softmax over the vocabulary.

The transformer body runs once; the log-softmax is computed in chunks of `chunk` positions, each
chunk under activation checkpointing, so the full `[tokens, vocab]` float32 logits never exist
at once. The same chunk also gives the current policy's token entropy (detached; Figure 4).
`llm_runs.learner` runs it on packed micro-batches (`llm_runs.packing`) and, as the reference,
on right-padded ones (`token_logprobs`). `bench/gpu_learner_step.py` imports these functions.

Shapes: `N` positions, `S` padded prompt + response length, `T` padded response length, `H`
hidden size, `V` vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint


def _logprob_piece(h: Tensor, t: Tensor, weight: Tensor) -> Tensor:
    logits = (h @ weight.T).float()
    return logits.gather(-1, t.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)


def _logprob_entropy_piece(h: Tensor, t: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
    logits = (h @ weight.T).float()
    logz = torch.logsumexp(logits, -1)
    lp = logits.gather(-1, t.unsqueeze(-1)).squeeze(-1) - logz
    with torch.no_grad():
        logq = logits.detach() - logz.detach().unsqueeze(-1)
        entropy = -(logq.exp() * logq).sum(-1)
    return lp, entropy


def chunked_token_logprobs(hidden: Tensor, weight: Tensor, targets: Tensor, chunk: int) -> Tensor:
    """log softmax(hidden @ weight.T)[targets] in chunks of `chunk` positions: `[N, H] -> [N]`.

    Each chunk runs under activation checkpointing when `hidden` requires grad, so at most one
    chunk's `[chunk, V]` float32 logits are alive at a time (forward and backward).
    """
    out = [hidden.new_zeros(0, dtype=torch.float32)]
    for start in range(0, hidden.shape[0], chunk):
        h, t = hidden[start : start + chunk], targets[start : start + chunk]
        if h.requires_grad:
            out.append(checkpoint(_logprob_piece, h, t, weight, use_reentrant=False))
        else:
            out.append(_logprob_piece(h, t, weight))
    return torch.cat(out)


def chunked_token_logprobs_entropy(
    hidden: Tensor, weight: Tensor, targets: Tensor, chunk: int
) -> tuple[Tensor, Tensor]:
    """As `chunked_token_logprobs`, plus the (detached) entropy of each position: `[N], [N]`."""
    empty = hidden.new_zeros(0, dtype=torch.float32)
    lps, ents = [empty], [empty]
    for start in range(0, hidden.shape[0], chunk):
        h, t = hidden[start : start + chunk], targets[start : start + chunk]
        if h.requires_grad:
            lp, ent = checkpoint(_logprob_entropy_piece, h, t, weight, use_reentrant=False)
        else:
            lp, ent = _logprob_entropy_piece(h, t, weight)
        lps.append(lp)
        ents.append(ent.detach())
    return torch.cat(lps), torch.cat(ents)


def output_embedding(model: torch.nn.Module) -> Tensor:
    """The output projection `[V, H]` of a causal LM (`lm_head.weight`, tied or not)."""
    head = model.get_output_embeddings()
    if head is None or getattr(head, "bias", None) is not None:
        raise ValueError(
            "the learner needs a causal LM whose output layer is a bias-free linear map"
        )
    return head.weight


def response_logprobs(
    model: torch.nn.Module, input_ids: Tensor, prompt_len: int, chunk: int
) -> Tensor:
    """Per-token log-probs of the response part, all prompts of length `prompt_len`.

    `[n, P + T] -> [n, T]` (the benchmark's equal-length case of `token_logprobs`).
    """
    hidden = model.model(input_ids=input_ids).last_hidden_state  # [n, P+T, H]
    h = hidden[:, prompt_len - 1 : -1]  # positions predicting the response tokens
    targets = input_ids[:, prompt_len:]
    n, t, d = h.shape
    lp = chunked_token_logprobs(
        h.reshape(n * t, d), output_embedding(model), targets.reshape(-1), chunk
    )
    return lp.view(n, t)


def token_logprobs(
    model: torch.nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    response_start: Tensor,
    response_len: int,
    chunk: int,
) -> tuple[Tensor, Tensor]:
    """Per-token log-probs and entropies of right-padded prompt + response sequences.

    Args:
        input_ids: `[N, S]` token ids, prompt then response, right-padded.
        attention_mask: `[N, S]` (1 on real tokens).
        response_start: `[N]` index of the first response token (the prompt length `P_n >= 1`).
        response_len: `T`, the number of response positions returned.
        chunk: positions per log-softmax chunk.
    Returns:
        `(logprobs [N, T], entropy [N, T])`: `log p(y_t | prompt, y_<t)` (grad flows) and the
        entropy of that next-token distribution (detached). Positions past a response's end hold
        finite values that the response mask removes.
    """
    n, s = input_ids.shape
    hidden = model.model(
        input_ids=input_ids, attention_mask=attention_mask, use_cache=False
    ).last_hidden_state  # [N, S, H]
    offsets = torch.arange(response_len, device=input_ids.device)
    target_pos = (response_start.unsqueeze(-1) + offsets).clamp(max=s - 1)  # [N, T]
    h = hidden.gather(1, (target_pos - 1).unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
    targets = input_ids.gather(1, target_pos)
    lp, ent = chunked_token_logprobs_entropy(
        h.reshape(n * response_len, -1), output_embedding(model), targets.reshape(-1), chunk
    )
    return lp.view(n, response_len), ent.view(n, response_len)
