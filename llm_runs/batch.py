"""A batch of groups (`TrajectoryBatch`) and its current-policy log-probs, packed or padded.

`TrajectoryBatch` stores `B` groups of `G` trajectories compactly (only tensors, so it
checkpoints safely); `micro_logprobs` and `batch_logprobs` compute the current policy's
per-token log-probs of a batch, by default on its real tokens packed into one sequence
(`llm_runs.packing`), or right-padded (the reference path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor

from llm_runs.logprobs import chunked_token_logprobs_entropy, output_embedding, token_logprobs
from llm_runs.packing import pack_micro_batch, packed_hidden_states, scatter_responses
from llm_runs.precision import compute_autocast


@dataclass
class TrajectoryBatch:
    """`B` groups of `G` trajectories, stored compactly (only tensors, so it checkpoints safely).

    input_ids: `[B, G, S]` int32, prompt + response, right-padded with `pad_id`.
    prompt_len: `[B, G]` int64, prompt tokens `P` (the response starts at index `P`).
    response_len: `[B, G]` int64, response tokens `L <= T`.
    engine_logprobs: `[B, G, T]` float32, the rollout engine's sampling log-probs recorded at
        generation time (temperature 1, top-p 1: the behavior policy's own log-probs).
    learner_logprobs: `[B, G, T]` float32 or None, the learner's log-probs at the behavior
        version (computed at generation time when asked for).
    rewards: `[B, G]` float32 verifier rewards.
    truncated: `[B, G]` bool, the response hit the completion budget.
    prompt_index: `[B]` int64, index of each group's problem in the training pool.
    behavior_version: `[B]` int64, learner version (optimizer updates) of the policy snapshot that
        generated each group, whose engine log-probs `engine_logprobs[b]` are. One value for a
        batch of the fixed-delay or length-coupled schedules; groups of the worker schedule each
        carry their own (`TrajectoryBatch.concat`). An int is accepted and broadcast to `[B]`.
    pad_id: padding token id.
    """

    input_ids: Tensor
    prompt_len: Tensor
    response_len: Tensor
    engine_logprobs: Tensor
    learner_logprobs: Tensor | None
    rewards: Tensor
    truncated: Tensor
    prompt_index: Tensor
    behavior_version: Tensor
    pad_id: int = 0

    def __post_init__(self) -> None:
        b = self.rewards.shape[0]
        version = torch.as_tensor(self.behavior_version, dtype=torch.long)
        if version.ndim == 0:
            version = version.expand(b).clone()
        if version.shape != (b,):
            raise ValueError(
                f"TrajectoryBatch.behavior_version has shape {tuple(version.shape)}; it must be "
                f"[B] = [{b}] (one snapshot version per group) or one int for all groups"
            )
        self.behavior_version = version

    def version_lag(self, version: int) -> Tensor:
        """`[B, G]` int64 lag `version - behavior_version[b]` of each trajectory."""
        lag = version - self.behavior_version.to(self.rewards.device)
        return lag.unsqueeze(-1).expand(self.rewards.shape).contiguous()

    @property
    def num_groups(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def group_size(self) -> int:
        return int(self.rewards.shape[1])

    @property
    def response_width(self) -> int:
        """`T`, the padded response length."""
        return int(self.engine_logprobs.shape[-1])

    def response_mask(self) -> Tensor:
        """`[B, G, T]` bool, True on response tokens."""
        t = torch.arange(self.response_width, device=self.response_len.device)
        return t < self.response_len.unsqueeze(-1)

    def attention_mask(self) -> Tensor:
        """`[B, G, S]` long, 1 on prompt and response tokens."""
        s = torch.arange(self.input_ids.shape[-1], device=self.input_ids.device)
        return (s < (self.prompt_len + self.response_len).unsqueeze(-1)).long()

    def behavior_logprobs(self, source: str) -> Tensor:
        """The log-probs the ratio uses: `"engine"` (default) or `"learner"`."""
        if source == "engine":
            return self.engine_logprobs
        if source == "learner":
            if self.learner_logprobs is None:
                raise ValueError(
                    "behavior_logprobs='learner' needs the learner's log-probs recorded at "
                    "generation time; this batch has none"
                )
            return self.learner_logprobs
        raise ValueError(f"behavior log-prob source must be 'engine' or 'learner', got {source!r}")

    def groups(self, start: int, stop: int) -> TrajectoryBatch:
        """The sub-batch of groups `start:stop` (views, no copy)."""
        sl = slice(start, stop)
        return TrajectoryBatch(
            input_ids=self.input_ids[sl],
            prompt_len=self.prompt_len[sl],
            response_len=self.response_len[sl],
            engine_logprobs=self.engine_logprobs[sl],
            learner_logprobs=None if self.learner_logprobs is None else self.learner_logprobs[sl],
            rewards=self.rewards[sl],
            truncated=self.truncated[sl],
            prompt_index=self.prompt_index[sl],
            behavior_version=self.behavior_version[sl],
            pad_id=self.pad_id,
        )

    def trimmed(self) -> TrajectoryBatch:
        """The same groups with no padding beyond the longest sequence and response (`S`, `T`
        shrunk to what the groups use; `T >= 1`)."""
        width = max(1, int((self.prompt_len + self.response_len).max()))
        t = max(1, int(self.response_len.max()))
        out = self.groups(0, self.num_groups)
        out.input_ids = self.input_ids[..., :width]
        out.engine_logprobs = self.engine_logprobs[..., :t]
        if self.learner_logprobs is not None:
            out.learner_logprobs = self.learner_logprobs[..., :t]
        return out

    @staticmethod
    def concat(batches: Sequence[TrajectoryBatch]) -> TrajectoryBatch:
        """One batch of the groups of `batches`, in order, each keeping its behavior version.

        Token ids are right-padded (with the first batch's `pad_id`) to the longest `S`, log-probs
        with zeros to the longest `T`; the batches must share `G` and `pad_id`, and either all or
        none carry `learner_logprobs`.
        """
        if not batches:
            raise ValueError("TrajectoryBatch.concat needs at least one batch")
        first = batches[0]
        if any(b.group_size != first.group_size or b.pad_id != first.pad_id for b in batches):
            raise ValueError(
                "TrajectoryBatch.concat: every batch must have the same group size G and pad_id, "
                f"got G={[b.group_size for b in batches]}, pad_id={[b.pad_id for b in batches]}"
            )
        learner = [b.learner_logprobs for b in batches]
        if any(x is None for x in learner) and not all(x is None for x in learner):
            raise ValueError("TrajectoryBatch.concat: learner_logprobs must be set in all or none")
        width = max(int(b.input_ids.shape[-1]) for b in batches)
        t = max(b.response_width for b in batches)

        def pad(x: Tensor, size: int, value: float) -> Tensor:
            return torch.nn.functional.pad(x, (0, size - x.shape[-1]), value=value)

        return TrajectoryBatch(
            input_ids=torch.cat([pad(b.input_ids, width, first.pad_id) for b in batches]),
            prompt_len=torch.cat([b.prompt_len for b in batches]),
            response_len=torch.cat([b.response_len for b in batches]),
            engine_logprobs=torch.cat([pad(b.engine_logprobs, t, 0.0) for b in batches]),
            learner_logprobs=None
            if learner[0] is None
            else torch.cat([pad(x, t, 0.0) for x in learner]),  # type: ignore[arg-type]
            rewards=torch.cat([b.rewards for b in batches]),
            truncated=torch.cat([b.truncated for b in batches]),
            prompt_index=torch.cat([b.prompt_index for b in batches]),
            behavior_version=torch.cat([b.behavior_version for b in batches]),
            pad_id=first.pad_id,
        )

    def to(self, device: torch.device | str) -> TrajectoryBatch:
        values = {}
        for f in fields(self):
            value = getattr(self, f.name)
            values[f.name] = value.to(device) if isinstance(value, Tensor) else value
        return TrajectoryBatch(**values)

    def num_tokens(self) -> int:
        """Prompt + response tokens of the batch (what the learner processes)."""
        return int((self.prompt_len + self.response_len).sum())


def tensors_of(batch: Mapping[str, Any] | TrajectoryBatch) -> tuple[dict[str, Tensor], dict]:
    """Split a batch (object or `asdict` form) into its tensors and its JSON-able rest."""
    items = (
        {f.name: getattr(batch, f.name) for f in fields(batch)}
        if isinstance(batch, TrajectoryBatch)
        else dict(batch)
    )
    tensors = {k: v.contiguous() for k, v in items.items() if isinstance(v, Tensor)}
    meta = {k: v for k, v in items.items() if not isinstance(v, Tensor)}
    return tensors, meta


def batch_from(tensors: Mapping[str, Tensor], meta: Mapping[str, Any]) -> TrajectoryBatch:
    """Inverse of `tensors_of`.

    A batch stored before per-group versions (older checkpoints kept `behavior_version` as one
    int in the JSON part) is read with that version for every group.
    """
    names = {f.name for f in fields(TrajectoryBatch)}
    values = {**{k: v for k, v in meta.items() if k in names}, **dict(tensors)}
    values.setdefault("learner_logprobs", None)
    missing = names - set(values) - {"pad_id"}
    if missing:
        raise ValueError(f"stored batch lacks fields {sorted(missing)}")
    return TrajectoryBatch(**values)


def packed_micro_logprobs(
    model: torch.nn.Module, batch: TrajectoryBatch, chunk: int
) -> tuple[Tensor, Tensor]:
    """As `micro_logprobs`, on the packed real tokens (`llm_runs.packing`): `[B, G, T]` each.

    The chunked log-softmax runs on the `R` response positions only; zeros past each response.
    """
    device = next(model.parameters()).device
    packed = pack_micro_batch(
        batch.input_ids, batch.prompt_len, batch.response_len, batch.response_width, device
    )
    hidden = packed_hidden_states(model, packed)  # [N, H]
    lp, ent = chunked_token_logprobs_entropy(
        hidden.index_select(0, packed.response_hidden_index),
        output_embedding(model),
        packed.response_targets,
        chunk,
    )
    return scatter_responses(lp, packed), scatter_responses(ent, packed)


def micro_logprobs(
    model: torch.nn.Module, batch: TrajectoryBatch, chunk: int, *, packed: bool = True
) -> tuple[Tensor, Tensor]:
    """Current-policy log-probs and entropies of every trajectory: `[B, G, T]` each.

    packed: pack the real tokens (`packed_micro_logprobs`, the default) or run the right-padded
        `[B G, S]` batch (`token_logprobs`, the reference). Equal on response tokens up to float
        rounding; past a response's end the packed path holds 0, the padded one finite values.
    The forward runs in the model's compute dtype (`llm_runs.precision.compute_autocast`: bfloat16
    autocast under the mixed default); a backward of the result runs outside that context.
    """
    with compute_autocast(model):
        return _micro_logprobs(model, batch, chunk, packed)


def _micro_logprobs(
    model: torch.nn.Module, batch: TrajectoryBatch, chunk: int, packed: bool
) -> tuple[Tensor, Tensor]:
    if packed:
        return packed_micro_logprobs(model, batch, chunk)
    b, g, s = batch.input_ids.shape
    t = batch.response_width
    device = next(model.parameters()).device
    lp, ent = token_logprobs(
        model,
        batch.input_ids.reshape(b * g, s).long().to(device),
        batch.attention_mask().reshape(b * g, s).to(device),
        batch.prompt_len.reshape(b * g).to(device),
        t,
        chunk,
    )
    return lp.view(b, g, t), ent.view(b, g, t)


@torch.no_grad()
def batch_logprobs(
    model: torch.nn.Module,
    batch: TrajectoryBatch,
    chunk: int,
    groups_per_micro: int,
    *,
    packed: bool = True,
) -> Tensor:
    """The learner's log-probs of a batch without gradient: `[B, G, T]` float32 on CPU."""
    out = []
    for g0 in range(0, batch.num_groups, groups_per_micro):
        sub = batch.groups(g0, g0 + groups_per_micro)
        lp, _ = micro_logprobs(model, sub, chunk, packed=packed)
        out.append(lp.float().cpu())
    mask = batch.response_mask()
    return torch.where(mask, torch.cat(out), torch.zeros((), dtype=torch.float32))
