"""Packed micro-batches: every trajectory's real tokens in one sequence, no padding.

A micro-batch of `b` groups of `G` trajectories (prompt `P_k` + response `L_k` tokens each) is
laid out as ONE sequence of `N = sum_k (P_k + L_k)` tokens, trajectory after trajectory, with
position ids restarting at 0 for each trajectory. Attention never crosses a trajectory boundary,
so every hidden state equals the one of that trajectory run alone (up to float rounding), and the
log-probs of its response tokens are those of the padded path (`llm_runs.learner.token_logprobs`).
The chunked log-softmax then runs only on the `R = sum_k L_k` response positions, and the result is
scattered back to `[b, G, T]` (zeros past each response's end). Groups are never split, so GMC's
group coefficient is the one of the full batch.

**Attention: one causal SDPA call per trajectory** (`packed_attention`). Why this and not the
alternatives, checked on transformers 5.19 (CPU) and written for the GPU path (torch 2.11,
transformers 5.17, no flash-attn package):

- transformers' own packed-sequence support (pass `position_ids` that restart, no attention mask)
  is exact, but for SDPA it builds a dense `[1, 1, N, N]` block-diagonal boolean mask
  (`masking_utils.find_packed_sequence_indices` + `sdpa_mask`; verified on this machine: the
  mask of a 12-token pack is `[1, 1, 12, 12]`). At paper shapes (`N` about 25-37k tokens per
  group) that is 0.6-1.4 GB per micro-batch, SDPA cannot use its FlashAttention kernel with an
  explicit mask, and it computes all `N^2` scores where the trajectories need `sum_k n_k^2`
  (about 1/8 of them for 8 trajectories).
- flex attention with a block mask skips the masked blocks, but is only fast compiled (triton,
  a recompile per new packed length) and its numerics differ from the padded SDPA path.
- `torch.nn.attention.varlen.varlen_attn` is one CUDA kernel for all segments, but CUDA-only and
  its signature changed between torch 2.10 and 2.13.
- One `scaled_dot_product_attention(q_k, k_k, v_k, is_causal=True)` per trajectory: exact (the
  same causal attention as the padded path, restricted to the trajectory's own tokens, which is
  what the padding mask does), no `N x N` mask, no wasted scores, and on CUDA in bf16 SDPA
  dispatches it to its built-in FlashAttention-2 kernel (no extra install). The price is a Python
  loop of kernel calls per layer, microseconds against the layer's matrix products at paper
  shapes; trajectories of equal length share one call (stacked as its batch, which SDPA treats
  row by row: the same values, forward and backward), so a tiny model on a CPU, whose layers
  take microseconds too, makes one call per distinct length rather than `b G`.

The segments reach the attention through the model's own mask argument: `Qwen3Model.forward`
uses an attention mask given as a dict `{layer_type: mask}` as is, so we pass a `PackedSegments`
object there and `packed_attention` (registered as an attention implementation that wraps the
model's original one) runs the per-trajectory loop when it sees one, and the original
implementation otherwise (generation, the padded path). Any other attention function would fail
loudly on that object rather than silently attend across trajectories, and under activation
checkpointing the recomputation receives the same object.

**A group's prompt once** (`pack_micro_batch(..., share_prompts=True)`, what the learner uses):
the `G` responses of a group share one prompt, which the layout above processes `G` times (81%
of the tiny recipe's learner tokens were prompt copies). Shared, a group is laid out as its
prompt (positions `0 .. P - 1`) followed by its responses one after the other, each with
positions `P .. P + L - 1`; a response's tokens attend to the whole prompt and causally to their
own earlier tokens (`PackedSegments.prefixes`: the prompt's range, seen in full before the
segment), exactly the keys and values they see in the unshared layout, and its first token is
predicted from the prompt's last hidden state. So log-probs equal the unshared ones up to float
rounding; the gradient reaching the prompt's tokens is the sum over the `G` responses, which
the unshared layout also sums (over `G` copies), in another order. A group whose rows' prompts
differ is laid out unshared.

Shapes: `K = b G` trajectories of the micro-batch, `N` packed tokens, `R` response tokens, `T`
the batch's padded response width, `H` hidden size.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

#: Prefix of the attention implementation name `enable_packed_attention` registers.
PACKED_ATTENTION_PREFIX = "gmc_packed_"
#: Calls of the per-trajectory attention so far (`packed_hidden_states` checks that it ran).
_SEGMENT_CALLS = [0]


@dataclass(frozen=True)
class PackedSegments:
    """The packed sequence's trajectories, as the attention mask of a packed forward pass.

    bounds: `(start, stop)` token range of each segment in the packed sequence, in order (the
        segments cover the sequence once: a trajectory, or a shared prompt, or a response).
    prefixes: per segment, the `(start, stop)` range of tokens it attends to in full before its
        own (a response's shared prompt); empty: none for every segment.
    """

    bounds: tuple[tuple[int, int], ...]
    prefixes: tuple[tuple[int, int], ...] = ()


@dataclass
class PackedMicroBatch:
    """One micro-batch laid out as a single packed sequence (everything on the model's device).

    input_ids: `[1, N]` int64, the trajectories' real tokens (prompt then response), in order.
    position_ids: `[1, N]` int64, restarting at 0 at each trajectory.
    segments: the trajectories' token ranges (`PackedSegments`), `K` of them.
    response_hidden_index: `[R]` packed index of the hidden state that predicts each response
        token (the token's own index minus one).
    response_targets: `[R]` the response tokens.
    response_flat_index: `[R]` index of each response token in the flattened `[K * T]` output.
    response_bounds: `(start, stop)` range of each trajectory's response tokens in `[R]`.
    shape: `(b, G, T)` of the padded log-prob tensor the packed one is scattered into.
    """

    input_ids: Tensor
    position_ids: Tensor
    segments: PackedSegments
    response_hidden_index: Tensor
    response_targets: Tensor
    response_flat_index: Tensor
    response_bounds: tuple[tuple[int, int], ...]
    shape: tuple[int, int, int]

    @property
    def num_tokens(self) -> int:
        """`N`, the real tokens the model processes."""
        return int(self.input_ids.shape[1])


def pack_micro_batch(
    input_ids: Tensor,
    prompt_len: Tensor,
    response_len: Tensor,
    response_width: int,
    device: torch.device | str,
    share_prompts: bool = False,
) -> PackedMicroBatch:
    """Pack right-padded trajectories into one sequence of their real tokens.

    Args:
        input_ids: `[b, G, S]` prompt + response ids, right-padded.
        prompt_len: `[b, G]` prompt tokens `P_k >= 1`.
        response_len: `[b, G]` response tokens `0 <= L_k <= T`.
        response_width: `T`.
        device: where the packed tensors go.
        share_prompts: lay out each group's prompt once when its `G` rows have the same prompt
            (`_pack_shared`); else every trajectory whole.
    """
    b, g, s = input_ids.shape
    k = b * g
    prompts = prompt_len.reshape(k).long().cpu()
    responses = response_len.reshape(k).long().cpu()
    if bool((prompts < 1).any()):
        raise ValueError("every trajectory needs a prompt of at least one token (prompt_len >= 1)")
    if bool((responses > response_width).any()) or bool((responses < 0).any()):
        raise ValueError(f"response lengths must lie in [0, T = {response_width}]")
    lengths = prompts + responses
    if bool((lengths > s).any()):
        raise ValueError(f"prompt_len + response_len exceeds the stored width S = {s}")
    if share_prompts:
        return _pack_shared(input_ids, prompts, responses, response_width, device)
    starts = torch.cumsum(lengths, 0) - lengths  # [K] exclusive prefix sum
    columns = torch.arange(s)
    real = columns < lengths.unsqueeze(-1)  # [K, S]
    ids = input_ids.reshape(k, s).long().cpu()[real]  # row-major: trajectory after trajectory
    positions = columns.expand(k, s)[real]
    t = torch.arange(response_width)
    in_response = t < responses.unsqueeze(-1)  # [K, T]
    token_index = (starts + prompts).unsqueeze(-1) + t  # packed index of response token t
    response_token_index = token_index[in_response]  # [R], trajectory after trajectory
    flat = (torch.arange(k).unsqueeze(-1) * response_width + t)[in_response]
    response_starts = torch.cumsum(responses, 0) - responses
    bounds = tuple(
        (int(a), int(a + n)) for a, n in zip(starts.tolist(), lengths.tolist(), strict=True)
    )
    response_bounds = tuple(
        (int(a), int(a + n))
        for a, n in zip(response_starts.tolist(), responses.tolist(), strict=True)
    )
    return PackedMicroBatch(
        input_ids=ids.unsqueeze(0).to(device),
        position_ids=positions.unsqueeze(0).to(device),
        segments=PackedSegments(bounds),
        response_hidden_index=(response_token_index - 1).to(device),
        response_targets=ids[response_token_index].to(device),
        response_flat_index=flat.to(device),
        response_bounds=response_bounds,
        shape=(b, g, response_width),
    )


def _pack_shared(
    input_ids: Tensor, prompts: Tensor, responses: Tensor, response_width: int, device
) -> PackedMicroBatch:
    """`pack_micro_batch` with each group's prompt once (the module's docstring).

    prompts, responses: `[K]` lengths (validated by the caller).
    """
    b, g, s = input_ids.shape
    ids = input_ids.reshape(b * g, s).long().cpu()
    pieces: list[Tensor] = []
    positions: list[Tensor] = []
    bounds: list[tuple[int, int]] = []
    prefixes: list[tuple[int, int]] = []
    hidden_index: list[Tensor] = []  # [L_k] per trajectory, in trajectory order
    token_index: list[Tensor] = []
    cursor = 0

    def append(tokens: Tensor, first_position: int, prefix: tuple[int, int]) -> int:
        nonlocal cursor
        start = cursor
        pieces.append(tokens)
        positions.append(torch.arange(first_position, first_position + len(tokens)))
        bounds.append((start, start + len(tokens)))
        prefixes.append(prefix)
        cursor += len(tokens)
        return start

    for group in range(b):
        rows = range(group * g, (group + 1) * g)
        p = int(prompts[group * g])
        shared = all(int(prompts[k]) == p for k in rows) and all(
            torch.equal(ids[k, :p], ids[group * g, :p]) for k in rows
        )
        if shared:
            prompt_start = append(ids[group * g, :p], 0, (cursor, cursor))
        for k in rows:
            n, pk = int(responses[k]), int(prompts[k])
            if shared:
                if n == 0:
                    hidden_index.append(torch.zeros(0, dtype=torch.long))
                    token_index.append(torch.zeros(0, dtype=torch.long))
                    continue
                start = append(ids[k, p : p + n], p, (prompt_start, prompt_start + p))
                own = start + torch.arange(n)
                hidden_index.append(torch.cat([torch.tensor([prompt_start + p - 1]), own[:-1]]))
            else:
                start = append(ids[k, : pk + n], 0, (cursor, cursor)) + pk
                own = start + torch.arange(n)
                hidden_index.append(own - 1)
            token_index.append(own)
    packed_ids = torch.cat(pieces)
    t = torch.arange(response_width)
    flat = (torch.arange(b * g).unsqueeze(-1) * response_width + t)[t < responses.unsqueeze(-1)]
    response_starts = torch.cumsum(responses, 0) - responses
    return PackedMicroBatch(
        input_ids=packed_ids.unsqueeze(0).to(device),
        position_ids=torch.cat(positions).unsqueeze(0).to(device),
        segments=PackedSegments(tuple(bounds), tuple(prefixes)),
        response_hidden_index=torch.cat(hidden_index).to(device),
        response_targets=packed_ids[torch.cat(token_index)].to(device),
        response_flat_index=flat.to(device),
        response_bounds=tuple(
            (int(a), int(a + n))
            for a, n in zip(response_starts.tolist(), responses.tolist(), strict=True)
        ),
        shape=(b, g, response_width),
    )


def scatter_responses(values: Tensor, packed: PackedMicroBatch) -> Tensor:
    """`[R] -> [b, G, T]`: per-response-token values into the padded layout (zeros elsewhere).

    Differentiable in `values`.
    """
    b, g, t = packed.shape
    out = values.new_zeros(b * g * t)
    return out.index_copy(0, packed.response_flat_index, values).view(b, g, t)


# --------------------------------------------------------------------------------------------
# Attention that does not cross trajectories
# --------------------------------------------------------------------------------------------


def _segment_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    segments: PackedSegments,
    dropout: float,
    scaling: float | None,
) -> Tensor:
    """Causal attention within each segment, after its prefix (`PackedSegments.prefixes`) seen
    in full: `[1, Hq, N, d], [1, Hkv, N, d] -> [1, N, Hq, d]`."""
    _SEGMENT_CALLS[0] += 1
    heads, kv_heads = query.shape[1], key.shape[1]
    if heads != kv_heads:
        # grouped heads expanded, not SDPA's `enable_gqa` (honoured by its flash kernel only),
        # so that every SDPA backend stays eligible; the copy is small next to the layer
        key = key.repeat_interleave(heads // kv_heads, dim=1)
        value = value.repeat_interleave(heads // kv_heads, dim=1)
    groups, inverse = _length_groups(segments.bounds, segments.prefixes)
    device = query.device
    outs = []
    for count, length, index, prefix, key_index in groups:
        # the segments of one length as the batch of one call (SDPA treats batch rows
        # independently: the same bits as one call per segment, forward and backward; tested)
        index, key_index = index.to(device), key_index.to(device)

        q = _gather(query, index, count, length)
        k, v = (_gather(x, key_index, count, prefix + length) for x in (key, value))
        # with a prefix: every query sees the prefix, then its own tokens causally
        mask = (
            None
            if prefix == 0
            else torch.ones(length, prefix + length, dtype=torch.bool, device=device).tril(prefix)
        )
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout, scale=scaling, is_causal=mask is None
        )  # [count, Hq, length, d]
        outs.append(out.transpose(0, 1).reshape(1, heads, count * length, -1))
    packed = torch.cat(outs, dim=2).index_select(2, inverse.to(device))  # back in packed order
    return packed.transpose(1, 2).contiguous()


def _gather(x: Tensor, where: Tensor, count: int, length: int) -> Tensor:
    """`[1, H, N, d]` -> `[count, H, length, d]`: the packed positions `where` (`[count *
    length]`, segment after segment) as a batch of segments."""
    heads = x.shape[1]
    return x.index_select(2, where).view(heads, count, length, -1).transpose(0, 1).contiguous()


@functools.lru_cache(maxsize=32)
def _length_groups(
    bounds: tuple[tuple[int, int], ...],
    prefixes: tuple[tuple[int, int], ...] = (),
) -> tuple[tuple[tuple[int, int, Tensor, int, Tensor], ...], Tensor]:
    """The segments grouped by (prefix length, length), in order of first appearance: per group
    `(count, length, index, prefix, key_index)` with `index` `[count * length]` the packed
    positions of its segments, one after the other, `prefix` the prefix length and `key_index`
    `[count * (prefix + length)]` each segment's prefix then its own positions; and `inverse`
    `[N]`, where each packed position lies in the concatenation of the groups' positions."""
    prefixes = prefixes or tuple((a, a) for a, _ in bounds)
    by_shape: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for (start, stop), (p0, p1) in zip(bounds, prefixes, strict=True):
        by_shape.setdefault((p1 - p0, stop - start), []).append((start, p0))
    groups = []
    for (prefix, length), starts in by_shape.items():
        own = torch.tensor([a for a, _ in starts]).unsqueeze(-1) + torch.arange(length)
        index = own.reshape(-1)
        before = torch.tensor([p for _, p in starts]).unsqueeze(-1) + torch.arange(prefix)
        key_index = torch.cat([before, own], dim=1).reshape(-1)
        groups.append((len(starts), length, index, prefix, key_index))
    order = torch.cat([g[2] for g in groups])
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel())
    return tuple(groups), inverse


def _make_packed_attention(original: str):
    from transformers import AttentionInterface

    fallback = AttentionInterface._global_mapping.get(original)

    def packed_attention(
        module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw
    ):
        if isinstance(attention_mask, PackedSegments):
            return _segment_attention(query, key, value, attention_mask, dropout, scaling), None
        if fallback is None:  # "eager" is not in the registry: the model file's own function
            eager = sys.modules[type(module).__module__].eager_attention_forward
            return eager(
                module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kw
            )
        return fallback(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kw
        )

    return packed_attention


def enable_packed_attention(model: torch.nn.Module) -> None:
    """Route the model's attention through `packed_attention` (idempotent).

    Registers `gmc_packed_<original>` once per original implementation (sdpa, eager, ...) with the
    original's mask function, and switches the model to it. Calls without `PackedSegments` run
    the original implementation unchanged; the switch is not saved by `save_pretrained`.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    config = model.config
    current = config._attn_implementation
    if current.startswith(PACKED_ATTENTION_PREFIX):
        return
    name = PACKED_ATTENTION_PREFIX + current
    if name not in AttentionInterface._global_mapping:
        AttentionInterface.register(name, _make_packed_attention(current))
        mask_fn = ALL_MASK_ATTENTION_FUNCTIONS._global_mapping.get(current)
        if mask_fn is not None:
            AttentionMaskInterface.register(name, mask_fn)
    try:
        model.set_attn_implementation(name)
    except (ValueError, KeyError, ImportError):  # a version that vets custom names differently
        config._attn_implementation = name
    if config._attn_implementation != name:
        raise RuntimeError(f"could not switch the model's attention to {name!r}")


def packed_hidden_states(model: torch.nn.Module, packed: PackedMicroBatch) -> Tensor:
    """The transformer body's last hidden states of a packed micro-batch: `[N, H]`."""
    enable_packed_attention(model)
    body = model.model
    layer_types = set(getattr(body.config, "layer_types", None) or ["full_attention"])
    calls = _SEGMENT_CALLS[0]
    hidden = body(
        input_ids=packed.input_ids,
        position_ids=packed.position_ids,
        attention_mask={kind: packed.segments for kind in layer_types},
        use_cache=False,
    ).last_hidden_state
    if _SEGMENT_CALLS[0] == calls:
        raise RuntimeError(
            "the packed forward pass did not reach the per-trajectory attention (this "
            "transformers version does not pass a dict attention mask through): use packed=False"
        )
    return hidden[0]


# --------------------------------------------------------------------------------------------
# Micro-batches by token budget
# --------------------------------------------------------------------------------------------


def micro_batch_ranges(
    group_tokens: Sequence[int], groups_per_micro: int, token_budget: int = 0
) -> list[tuple[int, int]]:
    """Split `B` groups into consecutive micro-batches of whole groups: `(start, stop)` ranges.

    token_budget = 0: fixed `groups_per_micro` groups each (the last may have fewer).
    token_budget > 0: greedy, as many consecutive groups as fit in `token_budget` real tokens
    (prompt + response); a group larger than the budget is a micro-batch of its own (groups are
    never split, so GMC's group coefficient stays the full-batch one).

    Args:
        group_tokens: `[B]` real tokens per group.
    """
    if groups_per_micro < 1:
        raise ValueError(f"groups_per_micro must be >= 1, got {groups_per_micro}")
    if token_budget < 0:
        raise ValueError(f"token_budget must be >= 0 (0: fixed groups), got {token_budget}")
    n = len(group_tokens)
    if token_budget == 0:
        return [(g0, min(n, g0 + groups_per_micro)) for g0 in range(0, n, groups_per_micro)]
    ranges, start, used = [], 0, 0
    for index, tokens in enumerate(group_tokens):
        if index > start and used + tokens > token_budget:
            ranges.append((start, index))
            start, used = index, 0
        used += int(tokens)
    if n:
        ranges.append((start, n))
    return ranges
