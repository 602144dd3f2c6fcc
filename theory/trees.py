"""Log-linear token trees: every quantity of §2-§4 exactly, by enumerating all trajectories.

A tree of depth `T` over `A` tokens has one context per prefix `y_<t` (`n_ctx = sum_t A^t`) and
`A^T` trajectories. The policy is log-linear in a shared parameter `theta` of dimension `d`:

    pi_theta(a | ctx) = softmax_a(theta . phi(ctx, a)),    features phi: [n_ctx, A, d].

Tabular softmax is the special case of one-hot features (`d = n_ctx * A`, one logit per context
and token; `tabular_tree`). With fewer features than logits the parameter is shared across
contexts and time steps, which is what exercises the factor `T` of §4.2's KL bound
(`D <= (T L / 2) ||theta - theta'||^2`): a tabular parameter moves each context's logits
separately, so its KL never picks up more than `L/2 ||dtheta||^2`.

Smoothness (Assumption 1). `grad^2 log pi(a | ctx) = -Cov_{pi(.|ctx)}(phi(ctx, .))`, so `L` is the
largest variance of `v . phi(ctx, .)` over unit `v`, contexts and distributions; by Popoviciu's
inequality (`Var X <= (max X - min X)^2 / 4`) it is at most
`max_ctx max_{a,a'} ||phi(ctx,a) - phi(ctx,a')||^2 / 4`. That is the `L` we use (a rigorous upper
bound; equal to the supremum when `A = 2`). For one-hot features it is `1/2`.

Normalisation: the trajectory score is `s(y) = grad log pi(y) = sum_t grad log pi(y_t | y_<t)`
(no `1/T`); the paper's estimators divide by `T` themselves (`theory.exact`).
Everything is numpy; shapes are given as `[K]` (trajectories), `[K, T]`, `[K, d]`, `[K, T, d]`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class TokenTree:
    """A depth-`depth` tree over `vocab_size` tokens with features `[n_ctx, vocab_size, dim]`."""

    vocab_size: int
    depth: int
    features: NDArray[np.float64]

    def __post_init__(self) -> None:
        n_ctx = sum(self.vocab_size**t for t in range(self.depth))
        if self.vocab_size < 2 or self.depth < 1:
            raise ValueError(
                f"need vocab_size >= 2 and depth >= 1, got {self.vocab_size}, {self.depth}"
            )
        if self.features.ndim != 3 or self.features.shape[:2] != (n_ctx, self.vocab_size):
            raise ValueError(
                f"features must have shape [n_ctx={n_ctx}, vocab_size={self.vocab_size}, dim], "
                f"got {self.features.shape}"
            )

    @property
    def dim(self) -> int:
        """Parameter dimension `d`."""
        return int(self.features.shape[2])

    @cached_property
    def trajectories(self) -> NDArray[np.int64]:
        """`[K, T]` token indices of all `K = A^T` trajectories (lexicographic order)."""
        return np.array(list(itertools.product(range(self.vocab_size), repeat=self.depth)))

    @cached_property
    def contexts(self) -> NDArray[np.int64]:
        """`[K, T]` context index of every token position (prefixes numbered level by level)."""
        a, out = self.vocab_size, np.zeros_like(self.trajectories)
        for t in range(self.depth):
            offset = sum(a**s for s in range(t))
            prefix = np.zeros(len(self.trajectories), dtype=np.int64)
            for s in range(t):
                prefix = prefix * a + self.trajectories[:, s]
            out[:, t] = offset + prefix
        return out

    @property
    def smoothness(self) -> float:
        """Rigorous `L` of Assumption 1: `max_ctx max_{a,a'} ||phi(ctx,a) - phi(ctx,a')||^2 / 4`."""
        diff = self.features[:, :, None, :] - self.features[:, None, :, :]
        return float(np.max(np.sum(diff**2, axis=-1)) / 4.0)


def tabular_tree(vocab_size: int, depth: int) -> TokenTree:
    """Tabular softmax: one logit per (context, token); `theta` flattens `[n_ctx, A]`, `L = 1/2`."""
    n_ctx = sum(vocab_size**t for t in range(depth))
    eye = np.eye(n_ctx * vocab_size).reshape(n_ctx, vocab_size, n_ctx * vocab_size)
    return TokenTree(vocab_size, depth, eye)


def shared_tree(features_per_token: NDArray[np.float64], depth: int) -> TokenTree:
    """Log-linear tree whose features `[A, d]` are the same in every context (fully shared)."""
    f = np.asarray(features_per_token, dtype=np.float64)
    n_ctx = sum(f.shape[0] ** t for t in range(depth))
    return TokenTree(f.shape[0], depth, np.broadcast_to(f, (n_ctx, *f.shape)).copy())


@dataclass(frozen=True)
class TreeTables:
    """Per-trajectory quantities at one `theta` (`K = A^T` trajectories, `d` parameters)."""

    token_logp: NDArray[np.float64]  # [K, T] log pi(y_t | y_<t)
    token_score: NDArray[np.float64]  # [K, T, d] grad log pi(y_t | y_<t)
    token_cov: NDArray[np.float64]  # [K, T, d, d] Cov_{pi(.|ctx_t)}(phi) = -grad^2 log pi(y_t|.)

    @property
    def logp(self) -> NDArray[np.float64]:
        """`[K]` trajectory log-probabilities."""
        return self.token_logp.sum(axis=1)

    @property
    def prob(self) -> NDArray[np.float64]:
        """`[K]` trajectory probabilities."""
        return np.exp(self.logp)

    @property
    def score(self) -> NDArray[np.float64]:
        """`[K, d]` trajectory scores `grad log pi(y)` (sum over tokens, no `1/T`)."""
        return self.token_score.sum(axis=1)


def tables(tree: TokenTree, theta: NDArray[np.float64], with_cov: bool = False) -> TreeTables:
    """Exact token log-probabilities, scores (and covariances) of every trajectory at `theta`."""
    th = np.asarray(theta, dtype=np.float64).ravel()
    if th.size != tree.dim:
        raise ValueError(f"theta must have {tree.dim} entries, got {th.size}")
    logits = tree.features @ th  # [n_ctx, A]
    logits = logits - logits.max(axis=1, keepdims=True)
    logz = np.log(np.exp(logits).sum(axis=1, keepdims=True))
    logp_ctx = logits - logz  # [n_ctx, A]
    p_ctx = np.exp(logp_ctx)
    mean_phi = np.einsum("ca,cad->cd", p_ctx, tree.features)  # [n_ctx, d]
    ctx, tok = tree.contexts, tree.trajectories
    token_logp = logp_ctx[ctx, tok]
    token_score = tree.features[ctx, tok] - mean_phi[ctx]
    if with_cov:
        centred = tree.features - mean_phi[:, None, :]
        cov_ctx = np.einsum("ca,cad,cae->cde", p_ctx, centred, centred)
        token_cov = cov_ctx[ctx]
    else:
        token_cov = np.zeros((0,))
    return TreeTables(token_logp, token_score, token_cov)


def trajectory_kl(
    tree: TokenTree, theta: NDArray[np.float64], theta_other: NDArray[np.float64]
) -> float:
    """`KL(pi_theta || pi_theta_other)` over whole trajectories (exact), the `D_n^(b)` of §4.2."""
    lp, lq = tables(tree, theta).logp, tables(tree, theta_other).logp
    return float(np.sum(np.exp(lp) * (lp - lq)))


def objective(tree: TokenTree, theta: NDArray[np.float64], rewards: NDArray[np.float64]) -> float:
    """`J(theta) = E_{pi_theta}[r(y)]` (one prompt)."""
    return float(tables(tree, theta).prob @ np.asarray(rewards, dtype=np.float64))


def objective_gradient(
    tree: TokenTree, theta: NDArray[np.float64], rewards: NDArray[np.float64]
) -> NDArray[np.float64]:
    """`grad J = E_pi[r(y) s(y)]`, shape `[d]` (exact)."""
    tab = tables(tree, theta)
    return (tab.prob * np.asarray(rewards, dtype=np.float64)) @ tab.score


def objective_hessian(
    tree: TokenTree, theta: NDArray[np.float64], rewards: NDArray[np.float64]
) -> NDArray[np.float64]:
    """`grad^2 J = E_pi[r (s s^T + grad^2 log pi)]` with `grad^2 log pi = -sum_t Cov_t`, `[d, d]`."""
    tab = tables(tree, theta, with_cov=True)
    w = tab.prob * np.asarray(rewards, dtype=np.float64)
    outer = np.einsum("k,kd,ke->de", w, tab.score, tab.score)
    return outer - np.einsum("k,ktde->de", w, tab.token_cov)


def min_token_prob(tree: TokenTree, *thetas: NDArray[np.float64]) -> float:
    """Smallest token probability over every context of the given policies: Assumption 2's `1/C`."""
    return float(min(np.exp(tables(tree, th).token_logp).min() for th in thetas))
