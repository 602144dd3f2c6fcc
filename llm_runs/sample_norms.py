"""Per-trajectory gradients inside one backward pass: VCPO's score norms without extra backwards.

VCPO's baseline (`gmc_grpo.hooks.vcpo_group_baseline`, the registry's `Baseline.group_baseline`) needs, for every trajectory `k`,
`n_k = ||grad_theta log pi_theta(y_k | x)||^2`: the squared norm of the full parameter gradient of
the sequence log-prob (every trainable parameter; a tied embedding / output matrix is one
parameter). The reference (`Learner.trajectory_scores`) runs one more forward + backward per
trajectory. Here the norms come out of the micro-batch's ordinary backward, exactly:

- The micro-batch is packed (`llm_runs.packing`): trajectory `k` is the contiguous token segment
  `[s_k, e_k)` and nothing mixes segments (attention stays inside one). The backward of
  `sum_{response tokens} log pi` therefore carries, at every layer and token, the output gradient
  of that token's own trajectory's log-prob.
- A parameter's gradient is a sum over tokens of a term built from the layer's input and output
  gradient at that token, so trajectory `k`'s gradient is the same sum over its segment (the
  per-sample gradients of differential-privacy libraries):
  linear `y = x W^T + b`: `G_k^W = g_k^T x_k` (one matrix product per segment), `G_k^b = sum g_t`;
  RMSNorm `y = w * xhat`: `G_k^w = sum_t g_t * xhat_t` (also summed over heads for Qwen3's
  per-head q/k norms); embedding: `G_k^E[v] = sum_{t: id_t = v} g_t` (the `padding_idx` row
  excluded, as `nn.Embedding` does); output layer (our chunked log-softmax):
  `G_k^O = sum_{t in response(k)} (onehot(y_t) - softmax_t)^T h_t`, one `[V, H]` float32 buffer
  per trajectory, filled chunk by chunk. Tied output and embedding:
  `||G^E + G^O||^2 = ||G^E||^2 + ||G^O||^2 + 2 <G^O[rows], G^E[rows]>` over the rows of the
  trajectory's own tokens (the output layer's backward runs first and keeps those rows).
- The module forwards of the transformer body are swapped, for the micro-batch only
  (`per_sample_gradients`), for autograd functions that save their inputs and, in their
  backward, compute the above and return no weight gradient to autograd (so the summed weight
  gradient is not computed a second time). Under activation checkpointing the forward runs again
  during the backward; it has no side effect, and the backward of each call runs once.
- The same per-trajectory gradients give any linear combination. VCPO's gradient is
  `sum_k u_k A_k G_k` with `A_k = (R_k - b_g) / sigma_g` and `u_k = dL / d log pi(y_{k,t})` at
  `A = 1` (the loss is linear in `A` and constant over a trajectory's tokens:
  `-min(rho_k, 8) / (T b G)` in the paper's aggregation, times the micro-batch's `b / B`). `u_k`
  and `sigma_g` are known after the forward; `b_g` only once the group's norms are, after the
  backward. So the backward adds `sum_k u_k R_k / sigma_g G_k` to `.grad` and keeps
  `Q_g = sum_{k in g} u_k / sigma_g G_k` in a parameter-sized buffer per group; at the end
  `.grad -= b_g Q_g`. Memory: one buffer (parameter dtype) per group of the micro-batch, plus
  float32 temporaries the size of one weight matrix (three for the `[V, H]` output layer).
- Cost: the weight-gradient matrix products of autograd, split by segment, plus per trajectory
  and parameter a squared norm and two scaled additions (memory-bound passes over the weight);
  the output layer's logits are recomputed in the backward, as the checkpointed chunks of the
  other methods do.

Mixed precision: the micro-batch's forward runs under the model's autocast
(`llm_runs.precision.compute_autocast`); the autograd functions record the autocast state of
their forward and re-enter it in their backward (as `torch.amp.custom_fwd/custom_bwd` would, for
any device), so their matrix products run in the forward's dtype and the per-trajectory
gradients accumulate in float32.

Supported: `nn.Linear`, `nn.Embedding` (without `max_norm`), the Qwen2/Qwen3/Llama RMSNorm
(`weight * (x / rms(x))`) and the output matrix through the chunked log-softmax; any other
trainable parameter raises (use `score_norms="per_trajectory"`).

Shapes: `b` groups of `G` in the micro-batch, `K = b G` trajectories, `N` packed tokens, `R`
response tokens, `H` hidden size, `V` vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial

import torch
from torch import Tensor, nn

from gmc_grpo.losses import PolicyLossConfig, policy_loss
from llm_runs.batch import TrajectoryBatch
from llm_runs.logprobs import _logprob_entropy_piece, output_embedding
from llm_runs.packing import (
    PackedMicroBatch,
    pack_micro_batch,
    packed_hidden_states,
    scatter_responses,
)
from llm_runs.precision import autocast_state, compute_autocast, reenter_autocast

#: RMSNorm classes computing `weight * (x / sqrt(mean(x^2) + eps)).to(input dtype)`.
RMS_NORM_CLASSES: tuple[str, ...] = ("Qwen3RMSNorm", "Qwen2RMSNorm", "LlamaRMSNorm")
#: `gmc_grpo.hooks.vcpo_baseline_advantages`' default: groups whose reward std is below this get advantage 0.
STD_FLOOR = 1e-6


class SampleGradients:
    """Per-trajectory gradient bookkeeping of one packed micro-batch's backward pass.

    Accumulates `norms [K]` (float64, `||G_k||^2` over every parameter), adds
    `sum_k main_weight_k G_k` to each `.grad`, and keeps `Q_g = sum_{k in g} extra_weight_k G_k`
    per group until `finish(baseline)` subtracts `sum_g baseline_g Q_g`.
    """

    def __init__(
        self,
        packed: PackedMicroBatch,
        *,
        group_size: int,
        vocab_size: int,
        padding_idx: int | None,
        tied: bool,
    ) -> None:
        self.bounds = packed.segments.bounds
        self.response_bounds = packed.response_bounds
        self.group_size = group_size
        self.num_groups = len(self.bounds) // group_size
        device = packed.input_ids.device
        self.device = device
        self.norms = torch.zeros(len(self.bounds), dtype=torch.float64, device=device)
        lengths = torch.tensor([stop - start for start, stop in self.bounds], device=device)
        self.token_trajectory = torch.repeat_interleave(
            torch.arange(len(self.bounds), device=device), lengths
        )  # [N]
        self.num_tokens = packed.num_tokens
        self.tied = tied
        # the (trajectory, token id) rows the embedding's per-trajectory gradient touches
        ids = packed.input_ids[0]
        keep = torch.ones_like(ids, dtype=torch.bool) if padding_idx is None else ids != padding_idx
        keys = self.token_trajectory * vocab_size + ids
        self.row_keys, self.row_inverse = torch.unique(keys[keep], return_inverse=True)  # [U]
        self.row_keep = keep
        self.row_trajectory = self.row_keys // vocab_size
        self.row_token = self.row_keys % vocab_size
        counts = torch.bincount(self.row_trajectory, minlength=len(self.bounds)).tolist()
        starts = [0]
        for c in counts:
            starts.append(starts[-1] + c)
        self.row_bounds = list(zip(starts[:-1], starts[1:], strict=True))
        self.output_rows: Tensor | None = None  # [U, H] G_k^O at those rows (tied models)
        self.main_weight: list[float] = [0.0] * len(self.bounds)
        self.extra_weight: list[float] = [0.0] * len(self.bounds)
        self._extra: dict[int, tuple[nn.Parameter, Tensor]] = {}

    def set_weights(self, main_weight: Sequence[float], extra_weight: Sequence[float]) -> None:
        """`[K]` coefficients of the two combinations (known after the forward pass)."""
        self.main_weight = [float(w) for w in main_weight]
        self.extra_weight = [float(w) for w in extra_weight]
        self._main_t = torch.tensor(self.main_weight, device=self.device)
        self._extra_t = torch.tensor(self.extra_weight, device=self.device)

    # -- accumulation ------------------------------------------------------------------------

    def _buffer(self, param: nn.Parameter) -> Tensor:
        """`[b, *param.shape]` buffer of the per-group combination `Q_g` (parameter dtype)."""
        key = id(param)
        if key not in self._extra:
            shape = (self.num_groups, *param.shape)
            self._extra[key] = (param, torch.zeros(shape, dtype=param.dtype, device=param.device))
        return self._extra[key][1]

    @staticmethod
    def _add_grad(param: nn.Parameter, value: Tensor) -> None:
        if param.grad is None:
            param.grad = value.to(param.dtype, copy=True)
        else:
            param.grad.add_(value)

    def dense(self, param: nn.Parameter) -> _DenseSink:
        """A sink for per-trajectory gradients of `param` given one trajectory at a time."""
        return _DenseSink(self, param)

    def stacked(self, param: nn.Parameter, grads: Tensor) -> None:
        """All trajectories' gradients at once: `grads [K, *param.shape]` (small parameters)."""
        flat = grads.float().reshape(len(self.bounds), -1)
        self.norms += flat.double().pow(2).sum(-1)
        main = (self._main_t.unsqueeze(-1) * flat).sum(0).view(param.shape)
        self._add_grad(param, main)
        extra = (self._extra_t.unsqueeze(-1) * flat).view(self.num_groups, self.group_size, -1)
        self._buffer(param).add_(extra.sum(1).view(self.num_groups, *param.shape))

    def embedding(self, param: nn.Parameter, token_grads: Tensor) -> None:
        """The embedding's per-trajectory gradients from the output gradients `[N, H]`."""
        rows = torch.zeros(
            len(self.row_keys), token_grads.shape[-1], dtype=torch.float32, device=self.device
        )
        rows.index_add_(0, self.row_inverse, token_grads[self.row_keep].float())  # [U, H]
        square = rows.double().pow(2).sum(-1)
        if self.tied:
            if self.output_rows is None:
                raise RuntimeError("tied weights: the output layer's backward did not run first")
            square = square + 2 * (rows.double() * self.output_rows.double()).sum(-1)
        self.norms.index_add_(0, self.row_trajectory, square)
        main = rows * self._main_t[self.row_trajectory].unsqueeze(-1)
        grad = torch.zeros_like(param) if param.grad is None else param.grad
        grad.index_add_(0, self.row_token, main.to(grad.dtype))
        param.grad = grad
        extra = rows * self._extra_t[self.row_trajectory].unsqueeze(-1)
        group = self.row_trajectory // self.group_size
        buffer = self._buffer(param)
        flat = buffer.view(-1, buffer.shape[-1])
        flat.index_add_(0, group * param.shape[0] + self.row_token, extra.to(buffer.dtype))

    def finish(self, baseline: Sequence[float]) -> None:
        """`.grad -= sum_g baseline_g Q_g` for every parameter; frees the buffers."""
        for param, buffer in self._extra.values():
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            total = param.grad.float()
            for g, value in enumerate(baseline):
                if value != 0.0:
                    total.add_(buffer[g], alpha=-float(value))
            if total is not param.grad:
                param.grad.copy_(total)
        self._extra.clear()


class _DenseSink:
    """Per-trajectory gradients of one weight matrix, fed trajectory by trajectory in order."""

    def __init__(self, state: SampleGradients, param: nn.Parameter) -> None:
        self.state, self.param = state, param
        self.main = torch.zeros(param.shape, dtype=torch.float32, device=param.device)
        self.extra = torch.zeros(param.shape, dtype=torch.float32, device=param.device)
        self.group = 0
        self.norms: list[Tensor] = []
        self.index: list[int] = []

    def add(self, k: int, grad: Tensor) -> None:
        state = self.state
        group = k // state.group_size
        if group != self.group:
            self._flush_group()
            self.group = group
        self.norms.append(torch.linalg.vector_norm(grad, dtype=torch.float32))
        self.index.append(k)
        if state.main_weight[k] != 0.0:
            self.main.add_(grad, alpha=state.main_weight[k])
        if state.extra_weight[k] != 0.0:
            self.extra.add_(grad, alpha=state.extra_weight[k])

    def _flush_group(self) -> None:
        self.state._buffer(self.param)[self.group].add_(self.extra)
        self.extra.zero_()

    def close(self) -> None:
        self._flush_group()
        state = self.state
        if self.index:
            index = torch.tensor(self.index, device=state.device)
            state.norms.index_add_(0, index, torch.stack(self.norms).double().pow(2))
        SampleGradients._add_grad(self.param, self.main)


# --------------------------------------------------------------------------------------------
# Autograd functions that compute per-trajectory weight gradients in their backward
# --------------------------------------------------------------------------------------------


class _SampleLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, state):  # noqa: D102
        ctx.save_for_backward(x)
        ctx.weight, ctx.bias, ctx.state = weight, bias, state
        ctx.autocast = autocast_state(x.device.type)
        return nn.functional.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        with reenter_autocast(grad_out.device.type, ctx.autocast):
            return _SampleLinear._backward(ctx, grad_out)

    @staticmethod
    def _backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        state: SampleGradients = ctx.state
        weight, bias = ctx.weight, ctx.bias
        grad_x = grad_out @ weight
        x2 = x.reshape(-1, x.shape[-1])
        g2 = grad_out.reshape(-1, grad_out.shape[-1])
        if x2.shape[0] != state.num_tokens:
            raise RuntimeError(f"a linear layer saw {x2.shape[0]} rows, not the packed tokens")
        sink = state.dense(weight)
        for k, (start, stop) in enumerate(state.bounds):
            sink.add(k, g2[start:stop].T @ x2[start:stop])
        sink.close()
        if bias is not None and bias.requires_grad:
            sums = torch.zeros(len(state.bounds), g2.shape[-1], device=g2.device)
            state.stacked(bias, sums.index_add_(0, state.token_trajectory, g2.float()))
        return grad_x, None, None, None


class _SampleScale(torch.autograd.Function):
    """`weight * xhat` of an RMSNorm, with per-trajectory gradients of `weight`."""

    @staticmethod
    def forward(ctx, xhat, weight, state):  # noqa: D102
        ctx.save_for_backward(xhat)
        ctx.weight, ctx.state = weight, state
        return weight * xhat

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        (xhat,) = ctx.saved_tensors
        state: SampleGradients = ctx.state
        weight = ctx.weight
        if xhat.shape[0] != 1 or xhat.shape[1] != state.num_tokens:
            raise RuntimeError(f"an RMSNorm saw shape {tuple(xhat.shape)}, not [1, N, ...]")
        per_token = (grad_out.float() * xhat.float()).reshape(state.num_tokens, -1, weight.shape[0])
        sums = torch.zeros(len(state.bounds), weight.shape[0], device=xhat.device)
        sums.index_add_(0, state.token_trajectory, per_token.sum(1))
        state.stacked(weight, sums)
        return grad_out * weight, None, None


class _SampleEmbedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids, weight, padding_idx, state):  # noqa: D102
        ctx.weight, ctx.state = weight, state
        return nn.functional.embedding(ids, weight, padding_idx)

    @staticmethod
    def backward(ctx, grad_out):  # noqa: D102
        state: SampleGradients = ctx.state
        state.embedding(ctx.weight, grad_out.reshape(-1, grad_out.shape[-1]))
        return None, None, None, None


class _SampleOutput(torch.autograd.Function):
    """Chunked log-softmax of the response positions with per-trajectory output gradients.

    Forward: `(hidden [R, H], weight [V, H], targets [R]) -> (logprobs [R], entropy [R])` (no
    `[R, V]` logits kept); backward: recomputes each chunk's logits, trajectory by trajectory.
    """

    @staticmethod
    def forward(ctx, hidden, weight, targets, state, chunk):  # noqa: D102
        lps, ents = [hidden.new_zeros(0, dtype=torch.float32)], [hidden.new_zeros(0).float()]
        for start in range(0, hidden.shape[0], chunk):
            lp, ent = _logprob_entropy_piece(
                hidden[start : start + chunk], targets[start : start + chunk], weight
            )
            lps.append(lp)
            ents.append(ent)
        ctx.save_for_backward(hidden, targets)
        ctx.weight, ctx.state, ctx.chunk = weight, state, chunk
        ctx.autocast = autocast_state(hidden.device.type)
        entropy = torch.cat(ents)
        ctx.mark_non_differentiable(entropy)
        return torch.cat(lps), entropy

    @staticmethod
    def backward(ctx, grad_lp, _grad_entropy):  # noqa: D102
        with reenter_autocast(grad_lp.device.type, ctx.autocast):
            return _SampleOutput._backward(ctx, grad_lp)

    @staticmethod
    def _backward(ctx, grad_lp):
        hidden, targets = ctx.saved_tensors
        state: SampleGradients = ctx.state
        weight = ctx.weight
        grad_hidden = torch.zeros_like(hidden)
        per_trajectory = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        sink = state.dense(weight)
        rows = []
        for k, (start, stop) in enumerate(state.response_bounds):
            per_trajectory.zero_()
            for a in range(start, stop, ctx.chunk):
                b = min(stop, a + ctx.chunk)
                h, g = hidden[a:b], grad_lp[a:b].float()
                logits = (h @ weight.T).float()
                dlogits = -torch.softmax(logits, -1) * g.unsqueeze(-1)
                dlogits[torch.arange(b - a, device=h.device), targets[a:b]] += g
                d = dlogits.to(weight.dtype)
                grad_hidden[a:b] = d @ weight
                per_trajectory += d.T @ h
            sink.add(k, per_trajectory)
            if state.tied:
                r0, r1 = state.row_bounds[k]
                rows.append(per_trajectory[state.row_token[r0:r1]])
        sink.close()
        if state.tied:
            state.output_rows = torch.cat(rows) if rows else per_trajectory.new_zeros(0, 1)
        return grad_hidden, None, None, None, None


# --------------------------------------------------------------------------------------------
# Swapping the body's module forwards for the micro-batch
# --------------------------------------------------------------------------------------------


def _linear_forward(module: nn.Linear, state: SampleGradients, x: Tensor) -> Tensor:
    if not module.weight.requires_grad:
        return nn.functional.linear(x, module.weight, module.bias)
    return _SampleLinear.apply(x, module.weight, module.bias, state)


def _rms_norm_forward(module: nn.Module, state: SampleGradients, x: Tensor) -> Tensor:
    input_dtype = x.dtype
    x32 = x.to(torch.float32)
    xhat = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + module.variance_epsilon)
    if not module.weight.requires_grad:
        return module.weight * xhat.to(input_dtype)
    return _SampleScale.apply(xhat.to(input_dtype), module.weight, state)


def _embedding_forward(module: nn.Embedding, state: SampleGradients, ids: Tensor) -> Tensor:
    if not module.weight.requires_grad:
        return nn.functional.embedding(ids, module.weight, module.padding_idx)
    return _SampleEmbedding.apply(ids, module.weight, module.padding_idx, state)


@contextmanager
def per_sample_gradients(model: nn.Module, state: SampleGradients) -> Iterator[None]:
    """Swap the transformer body's Linear, Embedding and RMSNorm forwards for ones whose backward
    feeds `state` (and leaves `.grad` of those weights to it); restored on exit.

    Raises `ValueError` naming the parameter if a trainable parameter is neither in a supported
    module of `model.model` nor the output matrix.
    """
    covered = {id(output_embedding(model))}
    swapped: list[tuple[nn.Module, object]] = []
    for module in model.model.modules():
        if isinstance(module, nn.Linear):
            forward = partial(_linear_forward, module, state)
        elif isinstance(module, nn.Embedding):
            if module.max_norm is not None:
                continue  # renormalising embeddings: left uncovered (raises below)
            forward = partial(_embedding_forward, module, state)
        elif type(module).__name__ in RMS_NORM_CLASSES:
            forward = partial(_rms_norm_forward, module, state)
        else:
            continue
        covered.update(id(p) for p in module.parameters(recurse=False))
        swapped.append((module, module.__dict__.get("forward")))
        module.forward = forward
    try:
        missing = [
            name for name, p in model.named_parameters() if p.requires_grad and id(p) not in covered
        ]
        if missing:
            raise ValueError(
                f"in-backward VCPO score norms do not support parameters {missing[:3]} (modules "
                "other than Linear, Embedding, RMSNorm): set score_norms='per_trajectory'"
            )
        yield
    finally:
        for module, previous in swapped:
            if previous is None:
                del module.forward
            else:
                module.forward = previous


# --------------------------------------------------------------------------------------------
# VCPO's micro-batch
# --------------------------------------------------------------------------------------------


def trajectory_loss_weights(
    logprobs: Tensor, behavior: Tensor, mask: Tensor, config: PolicyLossConfig
) -> Tensor:
    """`u_k = dL / d log pi(y_{k,t})` of a trajectory-level loss at advantage 1: `[b, G]`.

    The loss is `-sum_k w_k A_k sum_t log pi(y_{k,t}) / norm`, linear in `A` with a weight that
    is the same for all of a trajectory's tokens; checked (raises otherwise).

    Args:
        logprobs, behavior, mask: `[b, G, T]` (log-probs detached).
    """
    leaf = logprobs.detach().clone().requires_grad_(True)
    ones = torch.ones(logprobs.shape[:2], dtype=logprobs.dtype, device=logprobs.device)
    loss, _ = policy_loss(leaf, behavior, ones, mask, config)
    (grad,) = torch.autograd.grad(loss, leaf)
    maskf = mask.to(torch.float64)
    weight = (grad.double() * maskf).sum(-1) / maskf.sum(-1).clamp(min=1)
    spread = ((grad.double() - weight.unsqueeze(-1)) * maskf).abs().max()
    if float(spread) > 1e-5 * float(weight.abs().max()) + 1e-30:
        raise ValueError(
            f"method {config.method!r} weights a trajectory's tokens unequally: the in-backward "
            "score norms need a trajectory-level loss (such as vcpo)"
        )
    return weight


def baseline_micro_batch(
    model: nn.Module,
    batch: TrajectoryBatch,
    behavior: Tensor,
    loss_config: PolicyLossConfig,
    group_baseline: Callable[[Tensor, Tensor, Tensor], Tensor],
    *,
    scale: float,
    chunk: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One micro-batch's gradient under a group baseline that needs score norms, in one backward.

    The advantage is `A_k = (R_k - b_g) / sigma_g` with `sigma_g` the group's reward std (0 where
    `sigma_g < STD_FLOOR`) and `b_g = group_baseline(rewards, log_ratio, score_norm_sq)` (VCPO's
    minimum-variance baseline, `gmc_grpo.methods`). Adds `scale * sum_k u_k A_k grad log pi(y_k)`
    (the gradient of `scale * policy_loss` with those advantages) to the parameters' `.grad`.

    Args:
        batch: `b` groups of `G`; behavior: `[b, G, T]` behavior log-probs.
        loss_config: a trajectory-level loss config (VCPO's: truncation `c`, aggregation, `T`).
        group_baseline: `(rewards [b, G], log_ratio [b, G], score_norm_sq [b, G]) -> [b]`.
        scale: the micro-batch's share `b / B` of the minibatch.
        chunk: positions per log-softmax chunk.
    Returns:
        `(logprobs [b, G, T] detached, entropy [b, G, T], advantages [b, G],
        score_norm_sq [b, G] float64)` (log-probs and entropies 0 past a response's end).
    """
    device = next(model.parameters()).device
    packed = pack_micro_batch(
        batch.input_ids, batch.prompt_len, batch.response_len, batch.response_width, device
    )
    b, g, _ = packed.shape
    mask = batch.response_mask().to(device)
    behavior = behavior.to(device)
    weight = output_embedding(model)
    embedding = model.get_input_embeddings()
    state = SampleGradients(
        packed,
        group_size=g,
        vocab_size=embedding.weight.shape[0],
        padding_idx=embedding.padding_idx,
        tied=weight is embedding.weight,
    )
    rewards = batch.rewards.double()
    sigma = rewards.std(dim=-1, unbiased=True, keepdim=True)  # [b, 1]
    inv_sigma = torch.where(sigma >= STD_FLOOR, 1.0 / sigma.clamp(min=STD_FLOOR), 0.0)
    with per_sample_gradients(model, state):
        with compute_autocast(model):  # the forward in the model's compute dtype
            hidden = packed_hidden_states(model, packed)
            lp_r, ent_r = _SampleOutput.apply(
                hidden.index_select(0, packed.response_hidden_index),
                weight,
                packed.response_targets,
                state,
                chunk,
            )
        lp = scatter_responses(lp_r.detach(), packed)
        u = trajectory_loss_weights(lp, behavior, mask, loss_config).cpu() * scale  # [b, G]
        state.set_weights(
            (u * rewards * inv_sigma).reshape(-1).tolist(), (u * inv_sigma).reshape(-1).tolist()
        )
        lp_r.sum().backward()
    norms = state.norms.view(b, g).cpu()
    log_ratio = ((lp - behavior) * mask).sum(-1).double().cpu()
    baseline = group_baseline(rewards, log_ratio, norms).double().reshape(b)
    state.finish(baseline.tolist())
    centered = (rewards - baseline.unsqueeze(-1)) / sigma.clamp(min=STD_FLOOR)
    advantages = torch.where(sigma < STD_FLOOR, torch.zeros_like(centered), centered).float()
    return lp, scatter_responses(ent_r, packed), advantages, norms
