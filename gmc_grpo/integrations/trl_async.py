"""GMC-GRPO (and TIC-GRPO, VCPO's truncated IS, plain IS) inside TRL's asynchronous GRPO trainer.

Targets `trl.experimental.async_grpo` of TRL 1.16.0 (`AsyncGRPOTrainer`, `AsyncGRPOConfig`). There
a vLLM server generates while the trainer trains; rollout workers score whole groups and push
their samples, each tagged with the policy version that generated it (`model_version`), into a
queue. TRL's answer to staleness is to drop every sample more than `max_staleness` versions old
and to clip tokens against the generator's log-probs. GMC exists to keep stale samples: this
subclass keeps them (raise `max_staleness`), caps their group's mass, and logs the lag each
sample had.

What TRL does (read from its source, 1.16.0) and what `GMCAsyncGRPOTrainer` changes:

1. Batching. TRL's planner (`FixedCountBatcher` / `TokenBudgetBatcher`) fills micro-batches
   sample by sample; a group can straddle two micro-batches or two rows. `GroupBatcher` waits for
   whole groups (the worker pushes a group's `G` samples one after another) and places whole
   groups into the `num_processes` rows (costliest first into the least-loaded row, as TRL does),
   `per_device_train_batch_size / G` groups per row. Rows are packed by TRL's own `TreeRow` (the
   prefix trie), so a group's shared prompt is still forwarded once.
2. The packed batch. TRL's collator gives each row its loss terms: `token_index`, the generator's
   `old_log_probs`, `advantages` and `segment_id` (which sample of the row a term belongs to).
   `GroupCollator` adds, per sample of the row, its group (`gmc_segment_group`), its reward
   (`gmc_segment_reward`, the worker's `metrics["reward"]`), its lag (`gmc_segment_lag`) and the
   micro-batch's number of samples (`gmc_global_n_samples`).
3. The loss. `compute_loss` runs TRL's forward (tree attention over the packed row), then
   `packed_policy_loss`: the loss terms are laid out as `[B, G, T]` per group size and handed to
   the core surrogate (`gmc_grpo.losses.policy_loss`); the trajectory log-ratio is
   `s_i = sum_t (log pi_theta - log mu)` with `mu` the generator's log-probs (the rollout
   worker's, stale or not), recomputed at every call. The advantage is the method's kind
   (leave-one-out for GMC, TIC and IS; Appendix B.1) from the rewards, or TRL's own
   (`advantage="trl"`: the worker's `(r - mean) / (std + 1e-8)`).
4. Staleness. Samples older than `max_staleness` are still dropped by TRL's queue reader (set it
   to what your pipeline can produce; GMC caps what is kept). The lag of every kept sample is in
   the metrics (`gmc/lag_mean`, `gmc/lag_max`, `gmc/stale_frac`: lag above TRL's default 4) and,
   one line per sample, in `output_dir/gmc_samples.jsonl` (step, group, lag, `s_i`, `c_i`); both
   describe the samples trained at that step (`step` is TRL's logged step, counted from 1).

Normalisation: with the paper's aggregation (`1/(T B G)`, eq. 2 and 9; `T` =
`max_completion_length`) each rank divides its sum by `T * (samples of the micro-batch) /
num_processes`, so DDP's average gives the micro-batch's `1/(T B G)`, as TRL does with tokens.

Not supported (refused at start-up, the error names the setting): `token_budget > 0` (token-
budgeted rows could not keep groups whole), multi-turn conversations that fork into several rows
(one trajectory must be one row), `per_device_train_batch_size % num_generations != 0`. On a
machine without CUDA the trainer's FLOPs lookup (a CUDA query) is skipped and TRL's FA3 tree
attention is replaced by `gmc_grpo.integrations.trl_async_local.torch_tree_attention`, so the whole
trainer runs on a CPU with the local rollout worker of that module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
import warnings
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import torch
from torch import Tensor

from gmc_grpo.advantages import compute as compute_advantages
from gmc_grpo.estimators import log_coefficients
from gmc_grpo.integrations.grouping import group_rows, groups_by_size
from gmc_grpo.losses import PolicyLossConfig, policy_loss
from gmc_grpo.methods import get_method, trajectory_method_names

try:
    import trl
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    from trl.experimental.async_grpo import async_grpo_trainer as _trl_async
    from trl.experimental.async_grpo.async_grpo_trainer import (
        DataCollatorForRollout,
        RolloutQueueDataset,
    )
    from trl.experimental.async_grpo.packing import TREE_ATTENTION, TreeRow
except ImportError as exc:  # pragma: no cover - exercised where trl is missing
    raise ImportError(
        "gmc_grpo.integrations.trl_async needs TRL's asynchronous GRPO trainer (tested with "
        "trl==1.16.0): pip install -e '.[trl]' in a gmc-grpo clone"
    ) from exc

TARGET_TRL_VERSION = "1.16.0"
TRL_DEFAULT_MAX_STALENESS = 4  # AsyncGRPOConfig's default: what TRL would have dropped
SAMPLE_LOG = "gmc_samples.jsonl"
EXTRA_KEYS = ("gmc_segment_group", "gmc_segment_reward", "gmc_segment_lag", "gmc_global_n_samples")

AdvantageChoice = Literal["paper", "trl", "centered", "loo", "std"]


@dataclass(frozen=True)
class GMCAsyncConfig:
    """Settings of the asynchronous adapter (everything `AsyncGRPOConfig` does not express).

    loss: the core `PolicyLossConfig`; `method` a trajectory method (`gmc`, `tic`, `vcpo`, `is` or
        a registered one). Default: GMC, `eps = 0.28` (Appendix B.1), the paper's `1/(T B G)`
        with `T = max_completion_length` when `max_length` is None. TRL's `epsilon*` are unused.
    advantage: `paper` (the method's kind: leave-one-out for GMC/TIC/IS, std for VCPO), `trl`
        (the rollout worker's `(r - mean) / (std + 1e-8)`), or a kind `centered` / `loo` / `std`
        computed from the rewards.
    sample_log: file name under `output_dir` for one JSON line per trained sample (step, group,
        lag, log-ratio, coefficient); None to write none. With several processes each writes
        `<stem>.rank<k>.jsonl`.
    """

    loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    advantage: AdvantageChoice = "paper"
    sample_log: str | None = SAMPLE_LOG

    def __post_init__(self) -> None:
        if not self.loss.trajectory_level:
            allowed = list(trajectory_method_names())
            raise ValueError(
                f"GMCAsyncConfig.loss.method must be a trajectory method {allowed}, "
                f"got {self.loss.method!r} (TRL's own AsyncGRPOTrainer is token-level PPO)"
            )
        if self.advantage not in get_args(AdvantageChoice):
            raise ValueError(
                f"GMCAsyncConfig.advantage must be one of {get_args(AdvantageChoice)}, "
                f"got {self.advantage!r}"
            )

    @property
    def advantage_kind(self) -> str:
        """The advantage kind actually used (`paper` resolved), or `trl`."""
        return get_method(self.loss.method).advantage_kind(self.advantage)


def check_async_config(args: AsyncGRPOConfig) -> None:
    """Refuse `AsyncGRPOConfig` settings the adapter cannot honour (before the model loads)."""
    group = args.num_generations
    if group is None or group < 2:
        raise ValueError(f"AsyncGRPOConfig.num_generations (G) must be >= 2, got {group}")
    per_device = args.per_device_train_batch_size
    if per_device % group != 0:
        raise ValueError(
            f"AsyncGRPOConfig.per_device_train_batch_size={per_device} must be a multiple of "
            f"num_generations={group}: every row holds whole groups (try {group * max(1, per_device // group)})"
        )
    if args.token_budget is not None and args.token_budget > 0:
        raise ValueError(
            f"AsyncGRPOConfig.token_budget={args.token_budget}: token-budgeted rows cannot keep groups "
            "whole; set token_budget=0 (rows of per_device_train_batch_size samples)"
        )
    if args.max_tool_calling_iterations not in (None, 0):
        warnings.warn(
            "max_tool_calling_iterations is set: a conversation that forks into several training rows "
            "stops the GMC loss with an error (one trajectory must be one row)",
            stacklevel=2,
        )


# ----------------------------------------------------------------------------------------------
# Batching: whole groups per row, and what the loss needs per sample.
# ----------------------------------------------------------------------------------------------


class _RecordingQueue:
    """A view of the rollout queue that remembers the last sample handed out (for its version)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last: Any = None

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.last = self.inner.get(*args, **kwargs)
        return self.last

    def qsize(self) -> int:
        return self.inner.qsize()


def lag_tagged(dataset: RolloutQueueDataset, version_fn: Any) -> Iterator[dict[str, Any]]:
    """TRL's queue reader (its staleness drop and metrics), each sample with its `lag` added.

    `lag = current version - sample.model_version`, read when the sample is taken from the queue,
    as TRL measures staleness.
    """
    recorder = _RecordingQueue(dataset.queue)
    dataset.queue = recorder
    for item in dataset:
        item = dict(item)
        item["model_version"] = int(recorder.last.model_version)
        item["lag"] = int(version_fn()) - item["model_version"]
        yield item


class GroupBatcher(torch.utils.data.IterableDataset):
    """Micro-batches of whole groups: `num_processes` rows of `groups_per_row` groups each.

    A group is complete when it holds `group_size` samples (the worker pushes them one after
    another). A group cut short (a sample dropped between its siblings) is kept with its own size
    when it has two samples or more, otherwise discarded (`gmc/partial_groups_dropped_total`).
    """

    def __init__(
        self,
        samples: Any,
        num_processes: int,
        groups_per_row: int,
        group_size: int,
        metrics: dict[str, list],
    ) -> None:
        self.samples = samples
        self.num_processes = num_processes
        self.groups_per_row = groups_per_row
        self.group_size = group_size
        self.metrics = metrics

    def _close(self, group: list[dict[str, Any]], complete: list[list[dict[str, Any]]]) -> None:
        if len(group) >= 2:
            complete.append(group)
        elif group:
            self.metrics["gmc/partial_groups_dropped_total"].append(1.0)

    def __iter__(self) -> Iterator[list[TreeRow]]:
        needed = self.num_processes * self.groups_per_row
        complete: list[list[dict[str, Any]]] = []
        current: list[dict[str, Any]] = []
        finished: deque[Any] = deque(maxlen=1024)  # recent complete groups: a later row is a fork
        for sample in iter(self.samples):
            if sample["group_id"] in finished:
                raise RuntimeError(
                    f"group {sample['group_id']} has more than num_generations={self.group_size} rows: "
                    "a multi-turn conversation forked into several rows, which the GMC loss cannot "
                    "weight as one trajectory"
                )
            if current and sample["group_id"] != current[0]["group_id"]:
                self._close(current, complete)
                current = []
            current.append(sample)
            if len(current) == self.group_size:
                finished.append(sample["group_id"])
                complete.append(current)
                current = []
            if len(complete) >= needed:
                yield self._rows(complete[:needed])
                complete = complete[needed:]

    def _rows(self, groups: list[list[dict[str, Any]]]) -> list[TreeRow]:
        priced = []
        for group in groups:
            tree = TreeRow()
            for sample in group:
                tree.add(sample)
            priced.append((tree.load, group))
        rows = [TreeRow() for _ in range(self.num_processes)]
        counts = [0] * self.num_processes
        for _, group in sorted(priced, key=lambda item: item[0], reverse=True):
            open_rows = [i for i in range(self.num_processes) if counts[i] < self.groups_per_row]
            target = min(open_rows, key=lambda i: rows[i].load)
            for sample in group:
                rows[target].add(sample)
            counts[target] += 1
        return rows


@dataclass
class GroupCollator(DataCollatorForRollout):
    """TRL's padding-free collator plus, per sample of each row, its group id, reward and lag
    (`[num_processes, samples]`, padded with -1 / NaN / -1), and the micro-batch's sample count."""

    def torch_call(self, examples: list[Any]) -> dict[str, Any]:
        (rows,) = examples
        batch = super().torch_call(examples)
        width = max(len(row.samples) for row in rows)
        groups = torch.full((len(rows), width), -1, dtype=torch.long)
        rewards = torch.full((len(rows), width), float("nan"), dtype=torch.float32)
        lags = torch.full((len(rows), width), -1, dtype=torch.long)
        for r, row in enumerate(rows):
            for i, sample in enumerate(row.samples):
                groups[r, i] = int(sample["group_id"])
                rewards[r, i] = float(sample["metrics"].get("reward", float("nan")))
                lags[r, i] = int(sample.get("lag", 0))
        total = sum(len(row.samples) for row in rows)
        batch["gmc_segment_group"] = groups
        batch["gmc_segment_reward"] = rewards
        batch["gmc_segment_lag"] = lags
        batch["gmc_global_n_samples"] = torch.full((len(rows),), float(total))
        return batch


# ----------------------------------------------------------------------------------------------
# The loss on TRL's packed loss terms (pure tensors).
# ----------------------------------------------------------------------------------------------


def group_advantages(rewards: Tensor, kind: str) -> Tensor:
    """`[B, G] -> [B, G]` advantages of one group size; a NaN reward (unscorable sample) gets 0 and
    the others are computed over the scored samples of their group (as TRL's worker does)."""
    bad = torch.isnan(rewards)
    if not bool(bad.any()):
        return compute_advantages(rewards, kind)
    out = torch.zeros_like(rewards)
    for b in range(rewards.shape[0]):
        scored = ~bad[b]
        if int(scored.sum()) >= 2:
            out[b, scored] = compute_advantages(rewards[b, scored].unsqueeze(0), kind).squeeze(0)
    return out


@dataclass
class PackedLoss:
    """What `packed_policy_loss` returns: the loss and what is logged.

    loss: scalar, the row's sum over its samples divided by the aggregation's normaliser of the
        row alone (`T * samples` for the paper's); rescale for the whole micro-batch.
    diagnostics: the core's scalar diagnostics, sample-weighted over group sizes (`ratio/log_max`:
        the maximum).
    log_ratio, log_coefficient: `[S]` per sample of the row (detached), `s_i` and `log c_i`.
    """

    loss: Tensor
    diagnostics: dict[str, Tensor]
    log_ratio: Tensor
    log_coefficient: Tensor


def dense_segments(values: Tensor, segment_id: Tensor, num_segments: int) -> tuple[Tensor, Tensor]:
    """Loss terms `[M]` of a packed row laid out per sample: `([S, T], mask [S, T])`.

    A sample's terms are consecutive and in token order in TRL's packing (`TreeRow.pack`); `T` is
    the longest sample's number of terms. Gradients flow through the layout.
    """
    if segment_id.numel() and bool((segment_id[1:] < segment_id[:-1]).any()):
        raise RuntimeError(
            "segment_id must be non-decreasing (TRL packs a sample's terms together)"
        )
    counts = torch.bincount(segment_id, minlength=num_segments)
    starts = torch.cumsum(counts, 0) - counts
    position = torch.arange(segment_id.numel(), device=segment_id.device) - starts[segment_id]
    length = int(counts.max()) if counts.numel() else 0
    dense = values.new_zeros((num_segments, length)).index_put((segment_id, position), values)
    mask = torch.zeros((num_segments, length), dtype=torch.bool, device=values.device)
    mask[segment_id, position] = True
    return dense, mask


def packed_policy_loss(
    log_probs: Tensor,
    old_log_probs: Tensor,
    segment_id: Tensor,
    segment_group: Tensor,
    segment_reward: Tensor,
    trl_advantages: Tensor,
    config: PolicyLossConfig,
    advantage_kind: str,
) -> PackedLoss:
    """The core surrogate on one packed row's loss terms.

    Args:
        log_probs: `[M]` log pi_theta of each loss term (with grad).
        old_log_probs: `[M]` the generator's log-probs (the behavior policy `mu`).
        segment_id: `[M]` which sample of the row each term belongs to (`0..S-1`).
        segment_group: `[S]` group of each sample (any ids; whole groups).
        segment_reward: `[S]` reward of each sample (NaN: unscorable).
        trl_advantages: `[M]` TRL's advantage of each term (used when `advantage_kind == "trl"`).
        config: core config, `max_length` resolved (`T` of the paper's `1/(T B G)`).
        advantage_kind: `centered`, `loo`, `std` or `trl`.
    """
    num_segments = int(segment_group.numel())
    current, mask = dense_segments(log_probs, segment_id, num_segments)
    behavior, _ = dense_segments(
        old_log_probs.detach().to(log_probs.dtype), segment_id, num_segments
    )
    if config.aggregation == "paper" and config.max_length is not None:
        if current.shape[1] > config.max_length:
            raise RuntimeError(
                f"a sample has {current.shape[1]} trained tokens > max_length={config.max_length} "
                "(max_completion_length): a multi-turn row? the GMC loss needs one completion per row"
            )
        pad = config.max_length - current.shape[1]
        current = torch.nn.functional.pad(current, (0, pad))
        behavior = torch.nn.functional.pad(behavior, (0, pad))
        mask = torch.nn.functional.pad(mask, (0, pad))
    first_term = torch.zeros(num_segments, dtype=torch.long, device=segment_id.device)
    first_term.scatter_reduce_(
        0,
        segment_id,
        torch.arange(segment_id.numel(), device=segment_id.device),
        "amin",
        include_self=False,
    )
    sample_trl_advantage = trl_advantages.detach()[first_term]

    loss = current.new_zeros(())
    diagnostics: dict[str, Tensor] = {}
    log_ratio = torch.zeros(num_segments, dtype=torch.float64, device=log_probs.device)
    log_coef = torch.zeros_like(log_ratio)
    tokens = mask.sum().clamp(min=1)
    for index in groups_by_size(group_rows(segment_group.tolist())).values():
        index = index.to(log_probs.device)
        if advantage_kind == "trl":
            adv = sample_trl_advantage[index]
        else:
            adv = group_advantages(segment_reward[index].float(), advantage_kind)
        part, diag = policy_loss(
            current[index], behavior[index], adv.to(current.dtype), mask[index], config
        )
        share = (
            float(mask[index].sum() / tokens)
            if config.aggregation == "token_mean"
            else index.numel() / num_segments
        )
        loss = loss + part * share
        for key, value in diag.items():
            if key == "ratio/log_max":
                diagnostics[key] = torch.maximum(diagnostics.get(key, value), value)
            else:
                diagnostics[key] = (
                    diagnostics.get(key, 0.0) + value.double() * index.numel() / num_segments
                )
        s = ((current[index].detach() - behavior[index]) * mask[index]).sum(-1).double()
        log_ratio[index.reshape(-1)] = s.reshape(-1)
        spec = get_method(config.method)
        lc = log_coefficients(
            spec.loss, s, config.eps, truncation=config.truncation, rule=spec.coefficient_rule
        )
        log_coef[index.reshape(-1)] = lc.reshape(-1).double()
    return PackedLoss(
        loss=loss, diagnostics=diagnostics, log_ratio=log_ratio, log_coefficient=log_coef
    )


# ----------------------------------------------------------------------------------------------
# The trainer.
# ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _without_cuda_flops_lookup() -> Iterator[None]:
    """TRL queries the CUDA device name for its MFU metric at start-up; on a CPU skip it (no MFU)."""
    if torch.cuda.is_available():
        yield
        return
    original = _trl_async.get_peak_flops_per_device
    _trl_async.get_peak_flops_per_device = lambda *args, **kwargs: None
    try:
        yield
    finally:
        _trl_async.get_peak_flops_per_device = original


class GMCAsyncGRPOTrainer(AsyncGRPOTrainer):
    """TRL's `AsyncGRPOTrainer` with whole groups per row and the core trajectory-level loss.

    Use it like `AsyncGRPOTrainer`, with one extra keyword `gmc_config` (`GMCAsyncConfig`); raise
    `AsyncGRPOConfig.max_staleness` to keep the stale samples GMC is built for. See the module
    docstring for what changes and what is refused.
    """

    def __init__(self, *args: Any, gmc_config: GMCAsyncConfig | None = None, **kwargs: Any) -> None:
        self.gmc_config = gmc_config if gmc_config is not None else GMCAsyncConfig()
        config = kwargs.get("args", args[2] if len(args) > 2 else None)
        if not isinstance(config, AsyncGRPOConfig):
            raise ValueError("GMCAsyncGRPOTrainer needs args=AsyncGRPOConfig(...)")
        check_async_config(config)
        if config.token_budget is None:
            config.token_budget = 0  # fixed rows (TRL would ask the vLLM server for a budget)
        if trl.__version__ != TARGET_TRL_VERSION:
            warnings.warn(
                f"gmc_grpo.integrations.trl_async was tested with trl=={TARGET_TRL_VERSION}, found "
                f"trl=={trl.__version__}: check the results",
                stacklevel=2,
            )
        with _without_cuda_flops_lookup():
            super().__init__(*args, **kwargs)
        if not torch.cuda.is_available():
            from transformers import AttentionInterface

            from gmc_grpo.integrations.trl_async_local import torch_tree_attention

            AttentionInterface.register(TREE_ATTENTION, torch_tree_attention)
        self._gmc_log_path = self._sample_log_path()

    def _sample_log_path(self) -> str | None:
        name = self.gmc_config.sample_log
        if name is None:
            return None
        if self.accelerator.num_processes > 1:
            stem, ext = os.path.splitext(name)
            name = f"{stem}.rank{self.accelerator.process_index}{ext or '.jsonl'}"
        os.makedirs(self.args.output_dir, exist_ok=True)
        return os.path.join(self.args.output_dir, name)

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        self._signature_columns = [*self._signature_columns, *EXTRA_KEYS]

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        num_processes = self.accelerator.num_processes
        if self.accelerator.is_main_process:
            reader = RolloutQueueDataset(
                rollout_queue=self.rollout_queue,
                model_version_fn=lambda: self.model_version,
                check_health_fn=self.rollout_worker.check_health,
                stale_after_s=self.args.heartbeat_stale_after_s,
                metrics=self._metrics["train"],
                max_staleness=self.args.max_staleness,
                report_to=self.args.report_to,
            )
            self._rollout_dataset = reader  # TRL flushes its queue-wait time from here
            samples = _Tagged(reader, lambda: self.model_version)
            dataset: Any = GroupBatcher(
                samples,
                num_processes,
                self.args.per_device_train_batch_size // self.args.num_generations,
                self.args.num_generations,
                self._metrics["train"],
            )
        else:
            dataset = _trl_async._EmptyIterableDataset()
        return self.accelerator.prepare(
            torch.utils.data.DataLoader(
                dataset,
                batch_size=1,
                collate_fn=GroupCollator(
                    self.processing_class.pad_token_id,
                    num_processes,
                    groups_trained=self._trained_groups,
                    metrics=self._metrics["train"],
                    token_budget=0,
                ),
                num_workers=0,
            )
        )

    def _core_config(self) -> PolicyLossConfig:
        config = self.gmc_config.loss
        if config.aggregation == "paper" and config.max_length is None:
            return dataclasses.replace(config, max_length=self.args.max_completion_length)
        return config

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # TRL's forward over the packed row (padding between ranks stripped), as in its own loss
        mask_bool = inputs["attention_mask"].bool()
        selected = inputs["token_index"] >= 0
        token_index = inputs["token_index"][selected]
        tree_kwargs = {
            key: inputs[key][inputs[key] >= 0]
            for key in ("tree_kv_index", "tree_cu_seqlens_q", "tree_cu_seqlens_k")
        }
        tree_kwargs["tree_max_seqlen_q"], tree_kwargs["tree_max_seqlen_k"] = inputs[
            "tree_max_seqlens"
        ][0].tolist()
        forward_start = time.time()
        router_kwargs = {"output_router_logits": True} if self.aux_loss_enabled else {}
        outputs = model(
            input_ids=inputs["input_ids"][mask_bool].unsqueeze(0),
            position_ids=inputs["position_ids"][mask_bool].unsqueeze(0),
            shift_labels=inputs["shift_labels"][mask_bool].unsqueeze(0),
            fused_lm_head=True,
            **router_kwargs,
            **tree_kwargs,
        )
        log_probs = outputs.log_probs.flatten()[token_index]
        self._last_forward_time_s = time.time() - forward_start

        groups = inputs["gmc_segment_group"][0]
        valid = groups >= 0
        packed = packed_policy_loss(
            log_probs,
            inputs["old_log_probs"][selected],
            inputs["segment_id"][selected],
            groups[valid],
            inputs["gmc_segment_reward"][0][valid],
            inputs["advantages"][selected],
            self._core_config(),
            self.gmc_config.advantage_kind,
        )
        local = int(valid.sum())
        world = self.accelerator.num_processes
        global_samples = float(inputs["gmc_global_n_samples"][0])
        # the row's own normalisation -> the micro-batch's, after DDP's average over ranks
        loss = packed.loss * (local * world / max(global_samples, 1.0))
        loss = loss / self.current_gradient_accumulation_steps
        if self.aux_loss_enabled:
            loss = (
                loss
                + self.router_aux_loss_coef
                * outputs.aux_loss
                / self.current_gradient_accumulation_steps
            )
        self._log_packed(packed, inputs["gmc_segment_lag"][0][valid], groups[valid])
        self._count_step(inputs)
        return loss

    def _log_packed(self, packed: PackedLoss, lags: Tensor, groups: Tensor) -> None:
        metrics = self._metrics["train"]
        device = self.accelerator.device
        for key, value in packed.diagnostics.items():
            gathered = self.accelerator.gather(value.detach().float().reshape(1).to(device))
            metrics[f"gmc/{key}"].append(float(gathered.mean()))
        coef = packed.log_coefficient.exp()
        stale = lags > TRL_DEFAULT_MAX_STALENESS
        # the lags of the samples this loss trains (not of the batch the loader prefetches next):
        # [sum, max, stale count, count] per rank, gathered
        lag_stats = torch.tensor(
            [[float(lags.sum()), float(lags.max()), float(stale.sum()), float(lags.numel())]],
            device=device,
        )
        everyone = self.accelerator.gather(lag_stats).reshape(-1, 4)
        count = float(everyone[:, 3].sum())
        metrics["gmc/lag_mean"].append(float(everyone[:, 0].sum()) / count)
        metrics["gmc/lag_max"].append(float(everyone[:, 1].max()))
        metrics["gmc/stale_frac"].append((float(everyone[:, 2].sum()), count))
        if bool(stale.any()):
            metrics["gmc/stale_coef_mean"].append(float(coef[stale].mean()))
        if self._gmc_log_path is None:
            return
        step = int(self.state.global_step) + 1  # the step being trained, as TRL's logged row
        with open(self._gmc_log_path, "a", encoding="utf-8") as handle:
            for i in range(int(groups.numel())):
                record = {
                    "step": step,
                    "group": int(groups[i]),
                    "lag": int(lags[i]),
                    "log_ratio": float(packed.log_ratio[i]),
                    "coefficient": float(coef[i]),
                }
                handle.write(json.dumps(record) + "\n")

    def _count_step(self, inputs: dict[str, Any]) -> None:
        """TRL's per-step accounting (its `_log_step_metrics` reads these)."""
        n_forward = float(inputs["global_n_forward_tokens"][0])
        mean_len = float(inputs["mean_seq_len"][0])
        self._step_forward_tokens += n_forward
        self._step_trained_tokens += float(inputs["global_n_tokens"][0])
        self._step_seq_len_weighted += mean_len * n_forward
        self._step_samples += n_forward / mean_len if mean_len else 0.0
        self._step_forward_s += self._last_forward_time_s


class _Tagged(torch.utils.data.IterableDataset):
    """`lag_tagged` as an iterable dataset (a fresh pass each time it is iterated)."""

    def __init__(self, reader: RolloutQueueDataset, version_fn: Any) -> None:
        self.reader = reader
        self.version_fn = version_fn

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return lag_tagged(self.reader, self.version_fn)


def read_sample_log(path: str) -> list[dict[str, Any]]:
    """The per-sample records of `GMCAsyncConfig.sample_log` (one dict per trained sample)."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


__all__ = [
    "GMCAsyncConfig",
    "GMCAsyncGRPOTrainer",
    "GroupBatcher",
    "GroupCollator",
    "PackedLoss",
    "TARGET_TRL_VERSION",
    "check_async_config",
    "dense_segments",
    "group_advantages",
    "lag_tagged",
    "packed_policy_loss",
    "read_sample_log",
]
