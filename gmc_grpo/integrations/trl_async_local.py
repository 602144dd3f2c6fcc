"""TRL's asynchronous GRPO trainer on one machine without a GPU: stand-ins for its three CUDA parts.

`trl.experimental.async_grpo.AsyncGRPOTrainer` needs a vLLM server (generation), NCCL (weight
transfer to the server) and the FA3 tree-attention kernel (its packed forward). Its constructor
accepts any `rollout_worker` and `weight_transfer` that follow its protocols, so this module
provides:

- `torch_tree_attention`: the same attention as TRL's `tree_attention` (each packed segment
  attends causally to the K/V of its root-to-segment path) in plain PyTorch
  (`scaled_dot_product_attention` per segment). `GMCAsyncGRPOTrainer` registers it on machines
  without CUDA.
- `LocalRolloutWorker`: samples groups in the trainer's process with a copy of the model held at
  an older policy version (a lag schedule says how old), scores them, and pushes TRL's
  `RolloutSample`s with the generator's log-probs and `model_version`, as TRL's worker does. It
  generates when the trainer asks for a sample, so runs are deterministic.
- `LocalWeightTransfer`: what TRL sends to vLLM after each step is stored as that version's
  parameters in the worker.

These run the real trainer loop, queue reader (staleness drop), packing, loss and optimizer on a
CPU; they are for trying the adapter and for tests, not for speed (generation is a plain loop).
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from trl.experimental.async_grpo.async_rollout_worker import RolloutSample


def torch_varlen_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    scale: float | None = None,
    sliding_window: int | None = None,
) -> Tensor:
    """Variable-length causal attention, flash-attention's `varlen` semantics, in plain PyTorch.

    Args:
        query: `[Nq, H, D]`; key, value: `[Nk, H_kv, D]` (grouped-query heads repeated).
        cu_seqlens_q, cu_seqlens_k: `[S + 1]` boundaries of each segment's queries and keys.
        scale: softmax scale (default `1/sqrt(D)`).
        sliding_window: keys within this many positions (inclusive of the query's), or None.
    Returns:
        `[Nq, H, D]`. Causality is aligned to the end (a segment's queries are the last `nq` of
        its `nk` keys), as flash-attention does when `nq < nk`.
    """
    out = torch.empty_like(query)
    heads, kv_heads = query.shape[1], key.shape[1]
    for s in range(cu_seqlens_q.numel() - 1):
        a, b = int(cu_seqlens_q[s]), int(cu_seqlens_q[s + 1])
        c, d = int(cu_seqlens_k[s]), int(cu_seqlens_k[s + 1])
        if b == a:
            continue
        q = query[a:b].transpose(0, 1)
        k = key[c:d].transpose(0, 1).repeat_interleave(heads // kv_heads, dim=0)
        v = value[c:d].transpose(0, 1).repeat_interleave(heads // kv_heads, dim=0)
        nq, nk = b - a, d - c
        q_pos = torch.arange(nq, device=query.device)[:, None] + (nk - nq)
        k_pos = torch.arange(nk, device=query.device)[None, :]
        allowed = k_pos <= q_pos
        if sliding_window:
            allowed &= k_pos > q_pos - sliding_window
        attended = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=allowed, scale=scale
        )
        out[a:b] = attended.transpose(0, 1)
    return out


def torch_tree_attention(
    module: Any,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Any,
    *,
    tree_kv_index: Tensor,
    tree_cu_seqlens_q: Tensor,
    tree_cu_seqlens_k: Tensor,
    tree_max_seqlen_q: int,
    tree_max_seqlen_k: int,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """TRL's tree attention (`trl.experimental.async_grpo.packing.tree_attention`) without FA3.

    Same arguments as TRL's (transformers' attention interface: `query` `[1, H, N, D]`); each
    segment's keys are gathered along its root-to-segment path (`tree_kv_index`).
    """
    if softcap:
        raise ValueError(
            "torch_tree_attention: attention logit softcapping is not supported (softcap must be "
            "0 or None; use TRL's FA3 kernel for a model that softcaps)"
        )
    q, k, v = (x.transpose(1, 2)[0] for x in (query, key, value))
    out = torch_varlen_attention(
        q,
        k.index_select(0, tree_kv_index),
        v.index_select(0, tree_kv_index),
        tree_cu_seqlens_q,
        tree_cu_seqlens_k,
        scale=scaling,
        sliding_window=sliding_window,
    )
    return out.unsqueeze(0), None


class _OnDemandQueue:
    """The worker's rollout buffer: a FIFO that generates the next group when it runs empty."""

    def __init__(self, refill: Callable[[], None]) -> None:
        self.items: deque[RolloutSample] = deque()
        self.refill = refill

    def get(self, timeout: float | None = None) -> RolloutSample:
        if not self.items:
            self.refill()
        return self.items.popleft()

    def put_nowait(self, item: RolloutSample) -> None:
        self.items.append(item)

    def qsize(self) -> int:
        return len(self.items)


class LocalRolloutWorker:
    """An in-process rollout worker that samples with a lagging copy of the policy (TRL protocol).

    Args:
        model: a causal LM with the trainer's architecture (its parameters are replaced by each
            version the trainer sends; a copy is kept, the trainer's model is not touched).
        tokenizer: the trainer's tokenizer (prompts are tokenized with it, completions decoded).
        prompts: prompt strings, used round-robin; a group is `num_generations` completions of one.
        reward_func: TRL-style `reward_func(prompts=..., completions=..., **kwargs) -> list[float]`.
        num_generations: `G`.
        max_completion_length: tokens per completion at most (ends early at the EOS token).
        lag: version lag of each group, cycled: group `k` is sampled with the parameters of version
            `max(1, current - lag[k % len(lag)])` (version 1 = the initial weights).
        temperature: sampling temperature (the log-probs are those of the tempered distribution,
            as vLLM's).
        seed: sampling seed.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        prompts: Sequence[str],
        reward_func: Callable[..., list[float]],
        num_generations: int,
        max_completion_length: int,
        lag: Sequence[int] = (0,),
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        import copy

        self.engine = copy.deepcopy(model).eval()
        self.tokenizer = tokenizer
        self.prompts = list(prompts)
        self.reward_func = reward_func
        self.num_generations = num_generations
        self.max_completion_length = max_completion_length
        self.lag = [int(x) for x in lag]
        self.temperature = temperature
        self.generator = torch.Generator().manual_seed(seed)
        self.rollout_buffer = _OnDemandQueue(self._push_group)
        self.metrics_queue: queue.Queue = queue.Queue()
        self.versions: dict[int, dict[str, Tensor]] = {}
        self.pending: dict[str, Tensor] | None = None
        self.current_version = 0
        self.loaded_version = -1
        self.groups_pushed = 0
        self.lags_used: list[int] = []

    # -- TRL's RolloutWorkerProtocol ------------------------------------------------------------

    def start(self) -> None:
        """Nothing to start: groups are generated when the trainer reads the queue."""

    def stop(self) -> None:
        """Nothing to stop."""

    def update_model_version(self, model_version: int) -> None:
        """The trainer published `model_version` (the parameters just sent become that version)."""
        if self.pending is not None:
            self.versions[model_version] = self.pending
            self.pending = None
        self.current_version = model_version

    def check_health(self, stale_after_s: float) -> None:
        """Always healthy (in-process)."""

    # -- generation -----------------------------------------------------------------------------

    def _use_version(self, version: int) -> None:
        if version == self.loaded_version or version not in self.versions:
            return
        missing, _ = self.engine.load_state_dict(self.versions[version], strict=False)
        unexpected_missing = [name for name in missing if name not in ("lm_head.weight",)]
        if unexpected_missing:
            raise RuntimeError(f"weights sent by the trainer lack {unexpected_missing[:3]}")
        self.loaded_version = version

    @torch.no_grad()
    def _sample(self, prompt_ids: list[int]) -> tuple[list[int], list[float]]:
        sequence, log_probs = list(prompt_ids), []
        eos = self.tokenizer.eos_token_id
        for _ in range(self.max_completion_length):
            logits = self.engine(input_ids=torch.tensor([sequence])).logits[0, -1].float()
            log_p = torch.log_softmax(logits / self.temperature, dim=-1)
            token = int(torch.multinomial(log_p.exp(), 1, generator=self.generator))
            sequence.append(token)
            log_probs.append(float(log_p[token]))
            if token == eos:
                break
        return sequence[len(prompt_ids) :], log_probs

    def _push_group(self) -> None:
        k = self.groups_pushed
        lag = self.lag[k % len(self.lag)]
        known = sorted(self.versions)
        version = max(1, self.current_version - lag)
        version = max((v for v in known if v <= version), default=known[0] if known else 0)
        self._use_version(version)
        prompt = self.prompts[k % len(self.prompts)]
        prompt_ids = self.tokenizer(prompt)["input_ids"]
        completions = [self._sample(prompt_ids) for _ in range(self.num_generations)]
        texts = [self.tokenizer.decode(ids, skip_special_tokens=True) for ids, _ in completions]
        rewards = np.asarray(
            self.reward_func(prompts=[prompt] * len(texts), completions=texts), dtype=float
        )
        advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-8)  # as TRL's worker
        for (ids, log_probs), text, reward, advantage in zip(
            completions, texts, rewards, advantages, strict=True
        ):
            self.rollout_buffer.put_nowait(
                RolloutSample(
                    prompt=prompt,
                    completion=text,
                    input_ids=np.asarray(prompt_ids + ids, dtype=np.int64),
                    completion_mask=np.asarray(
                        [0] * len(prompt_ids) + [1] * len(ids), dtype=np.int64
                    ),
                    old_log_probs=np.asarray([0.0] * len(prompt_ids) + log_probs, dtype=np.float32),
                    advantage=float(advantage),
                    model_version=version,
                    group_id=k,
                    metrics={"reward": float(reward)},
                )
            )
        self.lags_used.append(self.current_version - version)
        self.groups_pushed += 1


class LocalWeightTransfer:
    """TRL's `WeightTransferProtocol` into a `LocalRolloutWorker` (a copy of each sent tensor)."""

    def __init__(self, worker: LocalRolloutWorker) -> None:
        self.worker = worker

    def init_weight_transfer(self) -> None:
        """Nothing to set up (no NCCL group)."""

    def pause(self) -> None:
        """Nothing to pause."""

    def send_weights(self, iterator: Iterator[tuple[str, Tensor]]) -> None:
        """Keep a copy of every `(name, tensor)`; the next `update_model_version` names them."""
        self.worker.pending = {name: tensor.detach().clone().cpu() for name, tensor in iterator}

    def resume(self) -> None:
        """Nothing to resume."""

    def destroy(self) -> None:
        """Nothing to release."""


__all__ = [
    "LocalRolloutWorker",
    "LocalWeightTransfer",
    "torch_tree_attention",
    "torch_varlen_attention",
]
