"""Small autoregressive token MDPs whose responses can all be enumerated.

A `TokenMDP` has `K` prompts (uniform prompt distribution), a vocabulary of `V` tokens of which
token `V - 1` is the end-of-sequence token `EOS`, and a maximum response length `T`.

**The response set.** A response is a sequence of non-EOS tokens that either ends with EOS
(length `l = 1..T`, the EOS counted as a token of the response) or reaches `T` non-EOS tokens and
is truncated there. Per prompt there are

    N_x = sum_{l=0}^{T-1} (V-1)^l   (EOS-terminated)  +  (V-1)^T   (truncated)
        = sum_{l=0}^{T} (V-1)^l

responses (`V = 4, T = 6`: 1,093), and every one has positive probability under a softmax policy.
The policy's states are `(prompt, prefix)` with a prefix of `0..T-1` non-EOS tokens:
`S = K sum_{l=0}^{T-1} (V-1)^l` states (`K = 8, V = 4, T = 6`: 2,912).

Every response is precomputed once: its token ids, its mask, and the state of each of its tokens,
so that `log pi(y | x)` for *all* responses of all prompts is one gather from a `[S, V]`
log-softmax table (`response_token_logprobs`).

**Rewards** (`[0, R]`): `pattern` (default) gives `R` when the response contains the prompt's
target pattern (a fixed string of `pattern_length` non-EOS tokens drawn from the seed) as a
contiguous substring, else 0 -- a sparse verifier reward; `length` gives `R * L / T` with `L` the
number of response tokens (EOS included), a dense length-dependent reward.

**Policies** (`toy_mdps.policies`): the tabular softmax (one logit vector per state) and a
log-linear policy with shared features; both map parameters to the `[S, V]` logits table.

Cost of the enumeration (measured on one CPU core of the 2-core dev machine, float64, `K = 8`):

| `V`, `T` | responses | states  | build   | `J` + `grad J` + `KL` |
|----------|-----------|---------|---------|-----------------------|
| 4, 6     | 8,744     | 2,912   | 0.002 s | 0.02 s                |
| 3, 12    | 65,528    | 32,760  | 0.06 s  | 0.11 s                |
| 4, 8     | 78,728    | 26,240  | 0.06 s  | 0.19 s                |
| 6, 7     | 781,248   | 156,248 | 0.64 s  | 2.4 s                 |

`N_x` grows like `(V-1)^T`; the estimator statistics hold one dense `[S, V]` gradient per
minibatch, so their memory grows like `M S V` (processed in chunks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from toy_mdps.response_space import (  # noqa: F401 (re-exported: the MDP's public names)
    MAX_RESPONSES,
    REWARD_KINDS,
    RewardKind,
    num_responses_per_prompt,
    num_responses_up_to,
)


@dataclass
class TokenMDP:
    """A token MDP with enumerated responses (see the module docstring for the response set).

    Args:
        num_prompts: `K`, prompts drawn uniformly.
        vocab_size: `V >= 2`, token `V - 1` is EOS.
        max_length: `T >= 1`, the maximum number of response tokens.
        reward: `"pattern"` (sparse: target substring per prompt) or `"length"` (`R L / T`).
        reward_scale: `R`, the largest reward.
        pattern_length: length of each prompt's target pattern (`pattern` reward), `<= T`.
        seed: draws the target patterns (an explicit `torch.Generator`).
        dtype: float dtype of the precomputed tables and of every exact quantity.

    Attributes (all precomputed; `N = K N_x` responses, `S` states):
        response_tokens: `[N, T]` long, token ids (0 on padding).
        response_mask: `[N, T]` bool.
        response_states: `[N, T]` long, state index of each token (0 on padding).
        response_prompt: `[N]` long, the prompt of each response (responses sorted by prompt).
        response_length: `[N]` long, number of response tokens (EOS included).
        rewards: `[N]` float, `r(x, y)`.
        state_prompt: `[S]` long, the prompt of each state.
        state_depth: `[S]` long, the prefix length of each state.
        patterns: `[K, pattern_length]` long, the target patterns.
    """

    num_prompts: int = 8
    vocab_size: int = 4
    max_length: int = 6
    reward: RewardKind = "pattern"
    reward_scale: float = 1.0
    pattern_length: int = 2
    seed: int = 0
    dtype: torch.dtype = torch.float64
    response_tokens: Tensor = field(init=False, repr=False)
    response_mask: Tensor = field(init=False, repr=False)
    response_states: Tensor = field(init=False, repr=False)
    response_prompt: Tensor = field(init=False, repr=False)
    response_length: Tensor = field(init=False, repr=False)
    rewards: Tensor = field(init=False, repr=False)
    state_prompt: Tensor = field(init=False, repr=False)
    state_depth: Tensor = field(init=False, repr=False)
    patterns: Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.num_prompts < 1:
            raise ValueError(f"TokenMDP.num_prompts must be >= 1, got {self.num_prompts}")
        if self.vocab_size < 2:
            raise ValueError(
                f"TokenMDP.vocab_size must be >= 2 (one token is EOS), got {self.vocab_size}"
            )
        if self.max_length < 1:
            raise ValueError(f"TokenMDP.max_length must be >= 1, got {self.max_length}")
        if self.reward not in REWARD_KINDS:
            raise ValueError(f"TokenMDP.reward must be one of {REWARD_KINDS}, got {self.reward!r}")
        if not self.reward_scale > 0:
            raise ValueError(f"TokenMDP.reward_scale must be > 0, got {self.reward_scale}")
        if not 1 <= self.pattern_length <= self.max_length:
            raise ValueError(
                f"TokenMDP.pattern_length must be in [1, max_length={self.max_length}], "
                f"got {self.pattern_length}"
            )
        total = num_responses_up_to(
            self.num_prompts, self.vocab_size, self.max_length, MAX_RESPONSES
        )
        if total > MAX_RESPONSES:
            raise ValueError(
                f"TokenMDP with vocab_size={self.vocab_size}, max_length={self.max_length}, "
                f"num_prompts={self.num_prompts} has more than {MAX_RESPONSES:,} responses; "
                "choose a smaller vocabulary or maximum length"
            )
        self._enumerate()

    # ------------------------------------------------------------------------------------------
    @property
    def eos(self) -> int:
        """The end-of-sequence token id, `V - 1`."""
        return self.vocab_size - 1

    @property
    def num_states(self) -> int:
        return int(self.state_prompt.numel())

    @property
    def num_responses(self) -> int:
        return int(self.response_prompt.numel())

    @property
    def responses_per_prompt(self) -> int:
        return num_responses_per_prompt(self.vocab_size, self.max_length)

    def random_parameters(self, seed: int = 0, scale: float = 1.0) -> Tensor:
        """Tabular softmax logits `[S, V]`, i.i.d. `N(0, scale^2)` from an explicit generator."""
        gen = torch.Generator().manual_seed(seed)
        shape = (self.num_states, self.vocab_size)
        return scale * torch.randn(shape, generator=gen, dtype=self.dtype)

    # ------------------------------------------------------------------------------------------
    def _enumerate(self) -> None:
        """Build the response and state tables, vectorised level by level (no per-response loop)."""
        V, T, K = self.vocab_size, self.max_length, self.num_prompts
        word = V - 1  # non-EOS tokens are 0..V-2
        # Prefixes of depth l: all words in {0..V-2}^l, as [n_l, l] in lexicographic order.
        prefixes: list[Tensor] = [torch.zeros(1, 0, dtype=torch.long)]
        for _ in range(1, T + 1):
            prev = prefixes[-1]
            ext = torch.arange(word).repeat(prev.shape[0]).unsqueeze(1)
            prefixes.append(torch.cat([prev.repeat_interleave(word, dim=0), ext], dim=1))
        # Within a prompt, states are the prefixes of depth 0..T-1 in order; offsets per depth.
        depth_sizes = [p.shape[0] for p in prefixes[:T]]
        depth_offset = torch.tensor([0] + depth_sizes[:-1]).cumsum(0)
        n_states_prompt = sum(depth_sizes)

        def prefix_index(tokens: Tensor, depth: int) -> Tensor:
            """Rank of the depth-`depth` prefix of each row among words of that length."""
            if depth == 0:
                return torch.zeros(tokens.shape[0], dtype=torch.long)
            powers = word ** torch.arange(depth - 1, -1, -1)
            return (tokens[:, :depth] * powers).sum(dim=1)

        tokens_l, mask_l, states_l = [], [], []
        for length in range(1, T + 1):
            # EOS-terminated: (length - 1) non-EOS tokens then EOS.
            body = prefixes[length - 1]
            toks = torch.cat([body, torch.full((body.shape[0], 1), self.eos)], dim=1)
            tokens_l.append(toks)
            mask_l.append(torch.full((body.shape[0],), length))
        truncated = prefixes[T]  # T non-EOS tokens, no EOS
        tokens_l.append(truncated)
        mask_l.append(torch.full((truncated.shape[0],), T))
        n_x = sum(t.shape[0] for t in tokens_l)
        padded = torch.zeros(n_x, T, dtype=torch.long)
        lengths = torch.cat(mask_l)
        row = 0
        for toks in tokens_l:
            padded[row : row + toks.shape[0], : toks.shape[1]] = toks
            row += toks.shape[0]
        positions = torch.arange(T)
        mask = positions.unsqueeze(0) < lengths.unsqueeze(1)
        for t in range(T):
            states_l.append(depth_offset[t] + prefix_index(padded, t))
        local_states = torch.stack(states_l, dim=1) * mask  # [n_x, T]

        # Rewards per prompt.
        gen = torch.Generator().manual_seed(self.seed)
        self.patterns = torch.randint(0, word, (K, self.pattern_length), generator=gen)
        nonstop = mask & (padded != self.eos)
        if self.reward == "pattern":
            P = self.pattern_length
            windows = padded.unfold(1, P, 1)  # [n_x, T - P + 1, P]
            win_valid = nonstop.unfold(1, P, 1).all(dim=-1)  # [n_x, T - P + 1]
            hit = (windows.unsqueeze(0) == self.patterns[:, None, None, :]).all(dim=-1)
            rewards = (hit & win_valid.unsqueeze(0)).any(dim=-1).to(self.dtype)  # [K, n_x]
        else:
            rewards = (lengths.to(self.dtype) / T).unsqueeze(0).expand(K, n_x)
        prompt_offset = (torch.arange(K) * n_states_prompt).view(K, 1, 1)
        self.response_tokens = padded.repeat(K, 1)
        self.response_mask = mask.repeat(K, 1)
        self.response_states = ((local_states.unsqueeze(0) + prompt_offset) * mask).reshape(
            K * n_x, T
        )
        self.response_prompt = torch.arange(K).repeat_interleave(n_x)
        self.response_length = lengths.repeat(K)
        self.rewards = (self.reward_scale * rewards).reshape(K * n_x).contiguous()
        self.state_prompt = torch.arange(K).repeat_interleave(n_states_prompt)
        depth = torch.cat([torch.full((n,), d) for d, n in enumerate(depth_sizes)])
        self.state_depth = depth.repeat(K)
