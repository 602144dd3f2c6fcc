"""The full-actor learner: per-token log-probs of a causal LM and one optimizer update per minibatch.

Design (the one measured in `bench/gpu_learner_step.py`, which imports these functions):

- **Log-probs.** The transformer body runs once per micro-batch, by default on the micro-batch's
  real tokens packed into one sequence with attention kept inside each trajectory
  (`llm_runs.packing`; `LearnerSettings.packed=False` runs the right-padded batch instead, the
  reference path, same values up to float rounding). The log-softmax over the vocabulary is
  computed on the response positions only, in chunks of `chunk` positions, each chunk under
  activation checkpointing, so the full `[tokens, vocab]` float32 logits never exist at once. The
  same chunk also gives the current policy's token entropy (detached; Figure 4).
- **Micro-batches hold whole groups**: `groups_per_micro` groups each, or as many consecutive
  groups as fit in `micro_batch_tokens` real tokens. Every method's coefficient depends only on
  the group (GMC's `rho_bar`) or on the trajectory/token, so the coefficient computed from a
  micro-batch's own forward pass is the full-batch one. `policy_loss` normalises a micro-batch of
  `b` groups by `1/(T b G)`; scaling it by `b / B` makes the accumulated gradient exactly the
  full-batch gradient under the paper's `1/(T B G)` (tested against the core estimator's hand
  formula), whatever the micro-batches' sizes.
- **One update** (`Learner.step`): advantages (the method's kind, or VCPO's minimum-variance
  baseline, whose per-trajectory score norms come out of each micro-batch's own backward,
  `llm_runs.sample_norms`), accumulated gradient, GAC's projection (in place, parameter by
  parameter), gradient-norm clip, VCPO's ESS-scaled step size, optimizer step, scheduler step.
  Diagnostics are recomputed on the full minibatch from the detached log-probs, so they do not
  depend on the micro-batching.

Shapes: `B` groups, `G` responses per group, `S` padded prompt + response length, `T` padded
response length, `H` hidden size, `V` vocabulary.

`token_logprobs`, `micro_logprobs(..., packed=False)` and `Learner.trajectory_scores` are the
padded and per-trajectory references the fast paths are tested against.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from gmc_grpo import advantages as advantage_lib
from gmc_grpo.hooks import (
    GACState,
    gac_project_parameters,
    vcpo_baseline_advantages,
    vcpo_step_scale,
)
from gmc_grpo.losses import PolicyLossConfig, policy_loss
from llm_runs.packing import (
    micro_batch_ranges,
    pack_micro_batch,
    packed_hidden_states,
    scatter_responses,
)

#: Learner methods, selected by name. Each maps to one core loss (`gmc_grpo.losses`) plus hooks.
METHOD_LOSS: dict[str, str] = {
    "grpo": "grpo",  # token clip, eps = 0.2 (B.1)
    "tic": "tic",  # trajectory clip at 1 + eps_high, eps_high = 0.28 (B.1)
    "gmc": "gmc",  # group-mass cap at 1 + eps_high (B.1)
    "vcpo": "vcpo",  # truncated sequence IS + ESS step size + min-variance baseline (hooks)
    "gac": "grpo",  # GAC projects the gradient of the base GRPO loss (hooks.gac_project)
    "a3po": "a3po",  # decoupled loss with the log-linear proximal policy
}
LEARNER_METHODS: tuple[str, ...] = tuple(METHOD_LOSS)


# --------------------------------------------------------------------------------------------
# Per-token log-probs
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# A batch of groups
# --------------------------------------------------------------------------------------------


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
    behavior_version: learner version (optimizer updates) of the policy that generated it.
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
    behavior_version: int
    pad_id: int = 0

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
            behavior_version=self.behavior_version,
            pad_id=self.pad_id,
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
    """Inverse of `tensors_of`."""
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
    """
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


# --------------------------------------------------------------------------------------------
# Optimizer and schedule
# --------------------------------------------------------------------------------------------


class CosineWithWarmup:
    """Learning-rate factor: linear warm-up over `warmup_steps`, then cosine decay to 0.

    `factor(s) = (s + 1) / warmup` for `s < warmup`, else
    `0.5 (1 + cos(pi (s - warmup) / max(1, total - warmup)))`. Appendix B.1: "a cosine schedule
    with a 3% warmup". A plain object (its `__dict__` is what `LambdaLR.state_dict` stores).
    """

    def __init__(self, total_steps: int, warmup_steps: int) -> None:
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_steps_for(total_steps: int, warmup_ratio: float) -> int:
    """`ceil(warmup_ratio * total_steps)` (3% in B.1)."""
    return int(math.ceil(warmup_ratio * total_steps))


def make_optimizer(
    params: Iterable[torch.nn.Parameter],
    *,
    kind: str,
    lr: float,
    betas: tuple[float, float],
    weight_decay: float,
    device: torch.device,
    notice: Callable[[str], None] = print,
) -> tuple[torch.optim.Optimizer, str]:
    """The optimizer of Appendix B.1 and its name.

    kind: `"auto"` (8-bit AdamW from bitsandbytes on CUDA when importable, else
    `torch.optim.AdamW` with a notice), `"adamw8bit"` (required; raises if unavailable) or
    `"adamw"`.
    """
    params = list(params)
    if kind not in ("auto", "adamw", "adamw8bit"):
        raise ValueError(f"optimizer must be 'auto', 'adamw' or 'adamw8bit', got {kind!r}")
    if kind in ("auto", "adamw8bit") and device.type == "cuda":
        try:
            import bitsandbytes as bnb  # type: ignore[import-not-found]

            opt = bnb.optim.AdamW8bit(params, lr=lr, betas=betas, weight_decay=weight_decay)
            return opt, "bitsandbytes.AdamW8bit"
        except ImportError:
            if kind == "adamw8bit":
                raise ImportError(
                    "optimizer='adamw8bit' needs bitsandbytes: `pip install bitsandbytes`"
                ) from None
    elif kind == "adamw8bit":
        raise ValueError("optimizer='adamw8bit' needs a CUDA device (bitsandbytes)")
    if kind == "auto":
        where = "bitsandbytes is not installed" if device.type == "cuda" else "not on CUDA"
        notice(
            f"notice: using torch.optim.AdamW, not the 8-bit AdamW of Appendix B.1 ({where}); "
            "optimizer states take 4x the memory, the update is the same up to quantisation"
        )
    opt = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    return opt, "torch.optim.AdamW"


# --------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------


@dataclass
class LearnerSettings:
    """What one update needs besides the model and the optimizer (built from `TrainConfig`).

    method: one of `LEARNER_METHODS`.
    loss: the core loss config (method, eps, clips, `max_length = T` of `1/(T B G)`).
    advantage: advantage kind for every method but VCPO (`gmc_grpo.advantages`).
    groups_per_micro: groups per micro-batch (must divide the minibatch's groups).
    logit_chunk: positions per log-softmax chunk.
    grad_clip: gradient-norm clip (1.0, B.1); `inf` disables it.
    behavior_source: `"engine"` or `"learner"` log-probs as `mu` in the ratio.
    vcpo_rho_ref: VCPO's reference ESS (1).
    gac_low, gac_high: GAC's cosine thresholds (0.05, 0.30; B.1).
    packed: pack each micro-batch's real tokens into one sequence (`llm_runs.packing`, the
        default) or run the right-padded batch (the reference path; same gradient).
    micro_batch_tokens: 0 (default): `groups_per_micro` groups per micro-batch; > 0: consecutive
        whole groups up to this many real (prompt + response) tokens each (a larger group alone).
    vcpo_norms: how VCPO gets `||grad log pi(y_i)||^2`: `"in_backward"` (default; per-trajectory
        gradients inside each micro-batch's own backward, `llm_runs.sample_norms`; needs
        `packed`) or `"per_trajectory"` (one extra forward + backward per trajectory, the
        reference).
    """

    method: str
    loss: PolicyLossConfig
    advantage: str
    groups_per_micro: int
    logit_chunk: int
    grad_clip: float
    behavior_source: str = "engine"
    vcpo_rho_ref: float = 1.0
    gac_low: float = 0.05
    gac_high: float = 0.30
    packed: bool = True
    micro_batch_tokens: int = 0
    vcpo_norms: str = "in_backward"


VCPO_NORMS: tuple[str, ...] = ("in_backward", "per_trajectory")


class Learner:
    """Owns the model, the optimizer, the scheduler and the methods' state (GAC).

    `step(batch, version)` performs one optimizer update on a minibatch and returns its metrics
    (`gmc_grpo.records.METRIC_NAMES`).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        settings: LearnerSettings,
    ) -> None:
        if settings.method not in METHOD_LOSS:
            raise ValueError(f"unknown method {settings.method!r}; choose one of {LEARNER_METHODS}")
        if settings.vcpo_norms not in VCPO_NORMS:
            raise ValueError(
                f"LearnerSettings.vcpo_norms must be one of {VCPO_NORMS}, got {settings.vcpo_norms!r}"
            )
        if (
            settings.method == "vcpo"
            and settings.vcpo_norms == "in_backward"
            and not settings.packed
        ):
            raise ValueError(
                "LearnerSettings.vcpo_norms='in_backward' needs packed=True (the per-trajectory "
                "gradients are read off the packed sequence); use vcpo_norms='per_trajectory' "
                "with the padded path"
            )
        if settings.micro_batch_tokens < 0:
            raise ValueError(
                f"LearnerSettings.micro_batch_tokens must be >= 0 (0: fixed groups_per_micro), "
                f"got {settings.micro_batch_tokens}"
            )
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.settings = settings
        self.gac = GACState()
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.device = next(model.parameters()).device
        self.last_logprobs: Tensor | None = None  # [B, G, T] current log-probs of the last step

    # -- gradient ----------------------------------------------------------------------------

    def advantages(
        self, batch: TrajectoryBatch, behavior: Tensor
    ) -> tuple[Tensor, dict[str, float]]:
        """`[B, G]` advantages of the minibatch (VCPO: its minimum-variance baseline)."""
        if self.settings.method != "vcpo":
            return advantage_lib.compute(batch.rewards, self.settings.advantage), {}
        log_ratio, norms = self.trajectory_scores(batch, behavior)
        adv = vcpo_baseline_advantages(batch.rewards, log_ratio, norms)
        return adv, {"vcpo/score_norm_mean": float(norms.sqrt().mean())}

    def trajectory_scores(self, batch: TrajectoryBatch, behavior: Tensor) -> tuple[Tensor, Tensor]:
        """VCPO's inputs: log-ratios `s_i` and `||grad log pi_theta(y_i | x)||^2`, `[B, G]` each.

        Exact, by one forward and one backward per trajectory (`torch.autograd.grad`, the
        parameters' `.grad` untouched): `B G` extra backward passes per update, i.e. about one
        more full forward + backward of the minibatch in FLOPs, run one sequence at a time. The
        reference (`vcpo_norms="per_trajectory"`) of `accumulate_vcpo`'s in-backward norms.
        """
        b, g = batch.rewards.shape
        mask = batch.response_mask()
        log_ratio = torch.zeros(b, g, dtype=torch.float64)
        norms = torch.zeros(b, g, dtype=torch.float64)
        for i in range(b):
            one = batch.groups(i, i + 1)
            for j in range(g):
                lp, _ = token_logprobs(
                    self.model,
                    one.input_ids[0, j : j + 1].long().to(self.device),
                    one.attention_mask()[0, j : j + 1].to(self.device),
                    one.prompt_len[0, j : j + 1].to(self.device),
                    batch.response_width,
                    self.settings.logit_chunk,
                )
                m = mask[i, j].to(self.device)
                seq = (lp[0].float() * m).sum()
                grads = torch.autograd.grad(seq, self.params, allow_unused=True)
                norms[i, j] = sum(float(gr.float().pow(2).sum()) for gr in grads if gr is not None)
                beh = behavior[i, j].to(self.device)
                log_ratio[i, j] = float(((lp[0].detach().float() - beh) * m).sum())
        return log_ratio, norms

    def accumulate(
        self, batch: TrajectoryBatch, adv: Tensor, behavior: Tensor, version_lag: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Accumulate the minibatch gradient into `.grad`, micro-batch by micro-batch.

        Returns the detached current log-probs `[B, G, T]` (float32, CPU) and entropies.
        """
        num_groups = batch.num_groups
        mask = batch.response_mask()
        lps, ents = [], []
        for g0, g1 in self.micro_batches(batch):
            sub = batch.groups(g0, g1)
            lp, ent = micro_logprobs(
                self.model, sub, self.settings.logit_chunk, packed=self.settings.packed
            )
            sl = slice(g0, g1)
            loss, _ = policy_loss(
                lp,
                behavior[sl].to(self.device),
                adv[sl].to(self.device),
                mask[sl].to(self.device),
                self.settings.loss,
                version_lag=version_lag[sl].to(self.device),
            )
            # policy_loss normalises by 1/(T b G); scaled by b/B the sum is the 1/(T B G) one.
            (loss * (sub.num_groups / num_groups)).backward()
            lps.append(lp.detach().float().cpu())
            ents.append(ent.float().cpu())
        return torch.cat(lps), torch.cat(ents)

    def micro_batches(self, batch: TrajectoryBatch) -> list[tuple[int, int]]:
        """The `(start, stop)` group ranges of the micro-batches (`packing.micro_batch_ranges`)."""
        tokens = (batch.prompt_len + batch.response_len).sum(-1).tolist()
        return micro_batch_ranges(
            tokens, self.settings.groups_per_micro, self.settings.micro_batch_tokens
        )

    def accumulate_vcpo(
        self, batch: TrajectoryBatch, behavior: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, dict[str, float]]:
        """VCPO's gradient with its baseline's score norms read off each micro-batch's backward.

        One forward and one backward per micro-batch (`llm_runs.sample_norms.vcpo_micro_batch`)
        instead of `trajectory_scores`' extra forward + backward per trajectory; the same
        gradient. Returns `(current [B, G, T], entropy [B, G, T], advantages [B, G], metrics)`.
        """
        from llm_runs.sample_norms import vcpo_micro_batch

        lps, ents, advs, norms = [], [], [], []
        for g0, g1 in self.micro_batches(batch):
            sub = batch.groups(g0, g1)
            lp, ent, adv, norm = vcpo_micro_batch(
                self.model,
                sub,
                behavior[g0:g1],
                self.settings.loss,
                scale=sub.num_groups / batch.num_groups,
                chunk=self.settings.logit_chunk,
            )
            lps.append(lp.detach().float().cpu())
            ents.append(ent.float().cpu())
            advs.append(adv.cpu())
            norms.append(norm.cpu())
        norm = torch.cat(norms)
        metrics = {"vcpo/score_norm_mean": float(norm.sqrt().mean())}
        return torch.cat(lps), torch.cat(ents), torch.cat(advs), metrics

    def gradient(
        self, batch: TrajectoryBatch, version: int
    ) -> tuple[dict[str, float], Tensor, Tensor]:
        """Zero the gradient and accumulate the minibatch's; return diagnostics and log-probs.

        Returns `(metrics, current_logprobs [B, G, T], behavior_logprobs [B, G, T])`.
        """
        behavior = batch.behavior_logprobs(self.settings.behavior_source).float()
        mask = batch.response_mask()
        lag = torch.full(batch.rewards.shape, version - batch.behavior_version, dtype=torch.long)
        self.optimizer.zero_grad(set_to_none=True)
        settings = self.settings
        if settings.method == "vcpo" and settings.vcpo_norms == "in_backward":
            current, entropy, adv, extra = self.accumulate_vcpo(batch, behavior)
        else:
            adv, extra = self.advantages(batch, behavior)
            current, entropy = self.accumulate(batch, adv, behavior, lag)
        current = torch.where(mask, current, torch.zeros(()))
        with torch.no_grad():
            _, diag = policy_loss(current, behavior, adv, mask, self.settings.loss, version_lag=lag)
        maskf = mask.float()
        tokens = maskf.sum().clamp(min=1)
        metrics = {k: float(v) for k, v in diag.items()}
        metrics.update(extra)
        metrics["policy/entropy"] = float((entropy * maskf).sum() / tokens)
        metrics["advantage/abs_mean"] = float(adv.abs().mean())
        return metrics, current, behavior

    # -- update ------------------------------------------------------------------------------

    def step(self, batch: TrajectoryBatch, version: int) -> dict[str, float]:
        """One optimizer update on `batch` (all its groups) by the learner at `version`."""
        t0 = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        metrics, current, behavior = self.gradient(batch, version)
        self.last_logprobs = current
        log_ratio = ((current - behavior) * batch.response_mask()).sum(-1).double()
        if self.settings.method == "gac":
            metrics.update(self._gac_project())
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.settings.grad_clip)
        metrics["optim/grad_norm"] = float(grad_norm)
        scale = 1.0
        if self.settings.method == "vcpo":
            scale = vcpo_step_scale(log_ratio, self.settings.vcpo_rho_ref)
            metrics["vcpo/step_scale"] = scale
        base = [group["lr"] for group in self.optimizer.param_groups]
        for group in self.optimizer.param_groups:
            group["lr"] = group["lr"] * scale
        metrics["optim/lr"] = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        for group, lr in zip(self.optimizer.param_groups, base, strict=True):
            group["lr"] = lr
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - t0
        metrics["perf/learner_seconds"] = seconds
        metrics["perf/tokens_per_s"] = batch.num_tokens() / max(seconds, 1e-9)
        metrics["perf/peak_memory_gb"] = peak_memory_gib(self.device)
        return metrics

    def _gac_project(self) -> dict[str, float]:
        """GAC's projection of `.grad`, parameter by parameter in place (`gac_project_parameters`:
        the one float32 copy of the previous gradient in `self.gac`, no flattened gradient)."""
        return gac_project_parameters(
            self.params, self.gac, low=self.settings.gac_low, high=self.settings.gac_high
        )


def peak_memory_gib(device: torch.device) -> float:
    """Peak accelerator memory since the last reset (CUDA), else the process's peak RSS, GiB."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB
