"""Policy classes on a `TokenMDP`: parameters -> the `[S, V]` logits table, and back.

Both classes are softmax policies `pi(a | s) = softmax(z(s))_a` with logits linear in the
parameters, `z = Phi theta`. A gradient is first accumulated with respect to the logits table
(`[..., S, V]`: the per-token score of a softmax is `onehot(a) - pi(. | s)` on row `s`) and then
pulled back to the parameters with `Phi^T` (`pullback`), which is exact because `z` is linear.

Lipschitz constant of the score (Assumption 1). The Jacobian of `grad_theta log pi(a | s)` is
`-Cov_{pi(.|s)}(phi(s, .))`, whose operator norm is at most `max_{a,b} ||phi(s,a) - phi(s,b)||^2 / 4`
(Popoviciu's inequality along every direction; attained by a two-point distribution). So
`L = max_s max_{a,b} ||phi(s,a) - phi(s,b)||^2 / 4`: `1/2` for the tabular softmax, and
`||h||_max^2 / 2` for the log-linear policy below.

`lipschitz_constant()` is **exact** for both classes: the smallest `L` for which Assumption 1
holds over all parameters, not merely an upper bound. The Jacobian's norm is
`lambda_max(diag(p) - p p^T) ||h(s)||^2` and `lambda_max <= 1/2` with equality in the limit of
two tokens of probability `1/2` each (attained when `V = 2`); both classes can put any logits at
a single state, so the supremum is reached at the state of largest `||h||` (tabular: `h` a
one-hot). `tests/toy_mdps/test_toy_mdp.py` checks it numerically with autograd Hessians: below
`L` at random parameters, within `1e-3` of `L` at near-two-point ones. A training run visits
only part of the parameter space; its realised curvature is lower.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from toy_mdps.mdp import TokenMDP


class Policy(Protocol):
    """What the exact quantities and the estimator statistics need from a policy class."""

    name: str

    def logits(self, theta: Tensor) -> Tensor:
        """`[S, V]` logits table."""
        ...

    def pullback(self, logit_grad: Tensor) -> Tensor:
        """`[..., S, V]` gradient w.r.t. the logits -> `[..., *param_shape]` w.r.t. `theta`."""
        ...

    def lipschitz_constant(self) -> float:
        """`L` of Assumption 1 for this class, exact (the supremum; module docstring)."""
        ...

    def random_parameters(self, seed: int = 0, scale: float = 1.0) -> Tensor:
        """Parameters drawn i.i.d. `N(0, scale^2)` from an explicit generator."""
        ...


class TabularSoftmax:
    """One free logit vector per state: `theta` is the `[S, V]` logits table itself."""

    name = "tabular"

    def __init__(self, mdp: TokenMDP) -> None:
        self.mdp = mdp
        self.param_shape = (mdp.num_states, mdp.vocab_size)

    def logits(self, theta: Tensor) -> Tensor:
        if tuple(theta.shape) != self.param_shape:
            raise ValueError(
                f"tabular theta must have shape {self.param_shape}, got {tuple(theta.shape)}"
            )
        return theta

    def pullback(self, logit_grad: Tensor) -> Tensor:
        return logit_grad

    def lipschitz_constant(self) -> float:
        return 0.5  # ||e_a - e_b||^2 / 4

    def random_parameters(self, seed: int = 0, scale: float = 1.0) -> Tensor:
        return self.mdp.random_parameters(seed, scale)


class LogLinearSoftmax:
    """Log-linear policy with shared features: `z(s)_a = <theta_a, h(s)>`, `theta` `[V, F]`.

    The state feature `h(s)` is the concatenation of a bias 1, a one-hot of the prefix length
    (`T` entries), a one-hot of the last prefix token (`V` entries; none at the empty prefix) and
    a one-hot of the prompt (`K` entries), so `F = 1 + T + V + K` and the `V F` parameters are
    shared across all `S` states. `phi(s, a) = onehot(a) (x) h(s)`, hence
    `||phi(s,a) - phi(s,b)||^2 = 2 ||h(s)||^2` and `L = max_s ||h(s)||^2 / 2 = 2` (4 ones).
    """

    name = "loglinear"

    def __init__(self, mdp: TokenMDP) -> None:
        self.mdp = mdp
        S, V, T, K = mdp.num_states, mdp.vocab_size, mdp.max_length, mdp.num_prompts
        # Last prefix token of each state: read it off any response that visits the state.
        last = torch.full((S,), -1, dtype=torch.long)
        states, tokens, mask = mdp.response_states, mdp.response_tokens, mdp.response_mask
        prev_tok = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], dim=1)
        last[states[mask]] = prev_tok[mask]
        feats = [torch.ones(S, 1, dtype=mdp.dtype)]
        feats.append(torch.nn.functional.one_hot(mdp.state_depth, T).to(mdp.dtype))
        last_oh = torch.nn.functional.one_hot(last.clamp(min=0), V).to(mdp.dtype)
        feats.append(last_oh * (last >= 0).unsqueeze(1).to(mdp.dtype))
        feats.append(torch.nn.functional.one_hot(mdp.state_prompt, K).to(mdp.dtype))
        self.features = torch.cat(feats, dim=1)  # [S, F]
        self.param_shape = (V, int(self.features.shape[1]))

    def logits(self, theta: Tensor) -> Tensor:
        if tuple(theta.shape) != self.param_shape:
            raise ValueError(
                f"log-linear theta must have shape {self.param_shape}, got {tuple(theta.shape)}"
            )
        return self.features @ theta.T  # [S, V]

    def pullback(self, logit_grad: Tensor) -> Tensor:
        return torch.einsum("...sv,sf->...vf", logit_grad, self.features)

    def lipschitz_constant(self) -> float:
        return float(self.features.pow(2).sum(dim=1).max()) / 2.0

    def random_parameters(self, seed: int = 0, scale: float = 1.0) -> Tensor:
        gen = torch.Generator().manual_seed(seed)
        return scale * torch.randn(self.param_shape, generator=gen, dtype=self.mdp.dtype)


POLICY_CLASSES = {"tabular": TabularSoftmax, "loglinear": LogLinearSoftmax}


def make_policy(mdp: TokenMDP, name: str = "tabular") -> Policy:
    """`"tabular"` or `"loglinear"`."""
    if name not in POLICY_CLASSES:
        raise ValueError(f"policy must be one of {tuple(POLICY_CLASSES)}, got {name!r}")
    return POLICY_CLASSES[name](mdp)
