"""Exact checks of Proposition 1 and of §4.2's KL drift bound on tabular softmax token trees.

A tree of depth `T` over a vocabulary of `A` tokens has one logit vector per prefix (context);
`pi_theta(y) = prod_t softmax(theta[ctx_t])[y_t]`. For tabular softmax, `log pi(y_t | ctx)` has
Hessian `-(diag p - p p^T)` in that context's block, whose norm is at most `1/2` (Popoviciu:
`Var_p(v) <= (max v - min v)^2/4 <= 1/2` for a unit vector `v`), so Assumption 1 holds with
`L = 1/2`. Every expectation here is exact (enumeration of all groups), numpy only.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

TABULAR_SOFTMAX_L = 0.5


def _softmax(z: NDArray[np.float64]) -> NDArray[np.float64]:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def tree_contexts(vocab_size: int, depth: int) -> dict[tuple[int, ...], int]:
    """Index of every prefix of length `0 .. depth-1` (the contexts that hold logits)."""
    out: dict[tuple[int, ...], int] = {}
    for t in range(depth):
        for prefix in itertools.product(range(vocab_size), repeat=t):
            out[prefix] = len(out)
    return out


def trajectory_table(
    theta: NDArray[np.float64], vocab_size: int, depth: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """`(log pi(y), score(y))` for all `A^T` trajectories; scores flattened to `theta.size`."""
    ctx = tree_contexts(vocab_size, depth)
    probs = _softmax(theta)
    trajs = list(itertools.product(range(vocab_size), repeat=depth))
    logp = np.zeros(len(trajs))
    score = np.zeros((len(trajs), theta.size))
    for j, y in enumerate(trajs):
        for t in range(depth):
            c = ctx[y[:t]]
            logp[j] += np.log(probs[c, y[t]])
            grad = -probs[c].copy()
            grad[y[t]] += 1.0
            score[j, c * vocab_size : (c + 1) * vocab_size] += grad
    return logp, score


def trajectory_kl(
    theta: NDArray[np.float64], theta_other: NDArray[np.float64], vocab_size: int, depth: int
) -> float:
    """`KL(pi_theta || pi_theta_other)` over whole trajectories (exact)."""
    lp, _ = trajectory_table(theta, vocab_size, depth)
    lq, _ = trajectory_table(theta_other, vocab_size, depth)
    return float(np.sum(np.exp(lp) * (lp - lq)))


def coefficients(rho: NDArray[np.float64], eps: float, method: str) -> NDArray[np.float64]:
    """Per-trajectory `w_i rho_i` over the last axis (a group): TIC, GMC or raw IS."""
    if method == "tic":
        return rho * (rho <= 1.0 + eps)
    if method == "gmc":
        return rho / np.maximum(1.0, rho.mean(axis=-1, keepdims=True) / (1.0 + eps))
    if method == "is":
        return rho
    raise ValueError(f"method must be 'tic', 'gmc' or 'is', got {method!r}")


def exact_second_moment(
    theta: NDArray[np.float64],
    theta_behavior: NDArray[np.float64],
    rewards: NDArray[np.float64],
    eps: float,
    method: str,
    group_size: int,
    vocab_size: int,
    depth: int,
) -> float:
    """Exact `E||g||^2` of one group's `g = 1/(T G) sum_i w_i rho_i score_i A_i` (B = 1).

    Groups are `G` i.i.d. trajectories of the behavior policy; the advantage is the centred
    reward `r_i - mean(r)`, so `|A_i| <= R` when rewards lie in `[0, R]`.
    """
    lp, score = trajectory_table(theta, vocab_size, depth)
    lb, _ = trajectory_table(theta_behavior, vocab_size, depth)
    rho = np.exp(lp - lb)
    mu = np.exp(lb)
    idx = np.array(list(itertools.product(range(rho.size), repeat=group_size)))
    weight = np.prod(mu[idx], axis=1)
    r = rewards[idx]
    adv = r - r.mean(axis=1, keepdims=True)
    coef = coefficients(rho[idx], eps, method) * adv
    g = np.einsum("ng,ngd->nd", coef, score[idx]) / (depth * group_size)
    return float(np.sum(weight * np.sum(g**2, axis=1)))
