"""Exact group expectations of the paper's estimators on a finite trajectory space.

One prompt, one group (`B = 1`): `G` trajectories drawn i.i.d. from the behavior policy `mu`
(a stale `pi_{theta_{n-tau}}`), importance ratios `rho = pi / mu` against the current policy, and
the paper's estimator (eq. 2, eq. 4, eq. 9, with the `1/T` of the paper):

    g^w = 1/(T G) sum_i c_i s_i A_i,    c_i = w_i rho_i,    s_i = grad log pi_theta(y_i)  [d].

Methods (`c_i` as a function of the group's ratios `[..., G]`):

* `"is"`: `c = rho` (raw importance sampling, `g^IS`; unbiased: `E[g^IS] = grad J / T`);
* `"tic"`: `c = rho 1{rho <= 1+eps}` (TIC-GRPO, §4.3);
* `"gmc"`: `c = rho / max{1, rho_bar/(1+eps)}` (GMC-GRPO, eq. 9);
* `"vcpo"`: `c = min{rho, cap}` (VCPO's detached `min{rho, c}`, §3; in the class iff `cap <= 1+eps`);
* `"grpo"`: vanilla token-level PPO-clip gradient, `1/(T G) sum_i sum_t u_it r_it s_it A_i` with
  token ratios `r_it` and `u_it = 1{r_it <= 1+eps}` if `A_i > 0`, `1{r_it >= 1-eps}` if `A_i < 0`
  (the clipped branch has zero gradient): outside the class (§3).

Advantages: `"loo"` (leave-one-out `r_i - mean_{j != i} r_j`, the paper's for TIC and GMC,
Appendix B.1), `"centered"` (`r_i - mean_j r_j`), or fixed per-trajectory values `A(y)` (used by the
adversarial searches, where any `|A| <= R` is allowed).

Two exact engines compute the same numbers: `engine="counts"` sums over the multinomial count
vectors of a group (every method and advantage here depends on the group only through its counts;
`C(G+K-1, K-1)` terms, so `G` in the hundreds is cheap), and `engine="ordered"` over all `K^G`
ordered groups (the brute-force twin; tests compare them).

`class_coefficients` is the theory's one implementation of `c_i` (float64 numpy, in ratio
space, on exact small problems); both engines, `theory.divergences` and the checks call it. It
is the core's `gmc_grpo.estimators.coefficients` (torch, log space) written for numpy:
`tests/theory/test_theory_core_coefficients.py` checks the two equal, method by method.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln

from theory.trees import TokenTree, tables

CLASS_METHODS = ("is", "tic", "gmc", "vcpo")
METHODS = (*CLASS_METHODS, "grpo")


@dataclass(frozen=True)
class GroupProblem:
    """A finite trajectory space seen from one learner step.

    `mu [K]` behavior probabilities (`> 0`), `rho [K]` trajectory ratios, `score [K, d]` current
    trajectory scores, `depth` the `T` of the `1/T` normalisation; `rewards [K]` (for `"loo"` and
    `"centered"` advantages) or `advantages [K]` (fixed); for `"grpo"` also the token ratios
    `token_ratio [K, T]` and token scores `token_score [K, T, d]`.
    """

    mu: NDArray[np.float64]
    rho: NDArray[np.float64]
    score: NDArray[np.float64]
    depth: int
    rewards: NDArray[np.float64] | None = None
    advantages: NDArray[np.float64] | None = None
    token_ratio: NDArray[np.float64] | None = None
    token_score: NDArray[np.float64] | None = None


def problem_from_tree(
    tree: TokenTree,
    theta: NDArray[np.float64],
    theta_behavior: NDArray[np.float64],
    rewards: NDArray[np.float64] | None = None,
    advantages: NDArray[np.float64] | None = None,
) -> GroupProblem:
    """The `GroupProblem` of current `theta` and behavior `theta_behavior` on `tree`."""
    cur, beh = tables(tree, theta), tables(tree, theta_behavior)
    return GroupProblem(
        mu=beh.prob,
        rho=np.exp(cur.logp - beh.logp),
        score=cur.score,
        depth=tree.depth,
        rewards=None if rewards is None else np.asarray(rewards, dtype=np.float64),
        advantages=None if advantages is None else np.asarray(advantages, dtype=np.float64),
        token_ratio=np.exp(cur.token_logp - beh.token_logp),
        token_score=cur.token_score,
    )


def class_coefficients(
    rho: NDArray[np.float64],
    eps: float | NDArray[np.float64],
    method: str,
    vcpo_cap: float | None = None,
    rho_bar: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Per-trajectory `c_i = w_i rho_i` over the last axis (a group), shape `[..., G]`.

    eps: a number, or an array broadcastable to `rho`. rho_bar: GMC's group mean ratio
    `[..., 1]` when the group is not the last axis of `rho` (the counts engine: a count-weighted
    mean); default `rho.mean(-1)`.
    """
    rho = np.asarray(rho, dtype=np.float64)
    if method == "is":
        return rho
    if method == "tic":
        return rho * (rho <= 1.0 + eps)
    if method == "gmc":
        if rho_bar is None:
            rho_bar = rho.mean(axis=-1, keepdims=True)
        return rho / np.maximum(1.0, rho_bar / (1.0 + eps))
    if method == "vcpo":
        if vcpo_cap is None:
            raise ValueError("method 'vcpo' needs vcpo_cap (VCPO's truncation level c)")
        return np.minimum(rho, vcpo_cap)
    raise ValueError(f"method must be one of {CLASS_METHODS}, got {method!r}")


@dataclass(frozen=True)
class GroupMoments:
    """Exact moments of one group's estimator (`B = 1`).

    `mean [d]` = `E[g^w]`; `is_mean [d]` = `E[g^IS]` with the same advantages; `bias [d]` =
    `mean - is_mean` (the correction's bias; equals Lemma 1's `b_n` when `E[g^IS] = grad J/T`);
    `second_moment` = `E||g^w||^2`; `removed_mass` = `E[(1/G) sum_i (rho_i - c_i)]` (TIC:
    `E_mu[rho 1{rho > 1+eps}]`; GMC: `E(rho_bar - 1 - eps)_+`; nan for GRPO); `max_sq_norm` =
    the largest `||g^w||^2` over groups of positive probability (the pathwise worst case).
    """

    mean: NDArray[np.float64]
    is_mean: NDArray[np.float64]
    second_moment: float
    removed_mass: float
    max_sq_norm: float

    @property
    def bias(self) -> NDArray[np.float64]:
        """`E[g^w] - E[g^IS]`, shape `[d]`."""
        return self.mean - self.is_mean


def compositions(total: int, parts: int) -> NDArray[np.int64]:
    """All count vectors `[n, parts]` of non-negative integers summing to `total` (stars and bars)."""
    bars = np.array(
        list(itertools.combinations(range(total + parts - 1), parts - 1)), dtype=np.int64
    )
    bars = bars.reshape(-1, parts - 1)
    edges = np.concatenate(
        [np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), total + parts - 1)], axis=1
    )
    return np.diff(edges, axis=1) - 1


def _member_advantages(
    rewards: NDArray[np.float64],
    fixed: NDArray[np.float64],
    kind: str,
    group_size: int,
    sums: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Advantages of group members from their rewards and the group's reward sum `[n, 1]`."""
    if kind == "fixed":
        return fixed
    if kind == "loo":
        if group_size < 2:
            raise ValueError("leave-one-out advantages need group_size >= 2")
        return rewards - (sums - rewards) / (group_size - 1)
    if kind == "centered":
        return rewards - sums / group_size
    raise ValueError(f"advantage must be 'loo', 'centered' or 'fixed', got {kind!r}")


@dataclass(frozen=True)
class GroupUpdates:
    """Every distinct group with its probability: `weight [n]`, `g [n, d]` (the estimator),
    `g_is [n, d]` (raw IS with the same advantages), `removed [n]` (`(1/G) sum_i (rho_i - c_i)`,
    nan for GRPO)."""

    weight: NDArray[np.float64]
    g: NDArray[np.float64]
    g_is: NDArray[np.float64]
    removed: NDArray[np.float64]

    def moments(self) -> GroupMoments:
        """Aggregate to the exact `GroupMoments`."""
        sq = np.sum(self.g**2, axis=1)
        return GroupMoments(
            mean=self.weight @ self.g,
            is_mean=self.weight @ self.g_is,
            second_moment=float(self.weight @ sq),
            removed_mass=float(self.weight @ self.removed),
            max_sq_norm=float(np.max(sq[self.weight > 0])),
        )


def group_moments(
    problem: GroupProblem,
    method: str,
    eps: float,
    group_size: int,
    advantage: str = "loo",
    vcpo_cap: float | None = None,
    engine: str = "counts",
) -> GroupMoments:
    """Exact moments of `g^w` for one group of `group_size` i.i.d. behavior draws (see module doc).

    `advantage="fixed"` uses `problem.advantages`; `"loo"`/`"centered"` use `problem.rewards`.
    """
    return group_updates(problem, method, eps, group_size, advantage, vcpo_cap, engine).moments()


def group_updates(
    problem: GroupProblem,
    method: str,
    eps: float,
    group_size: int,
    advantage: str = "loo",
    vcpo_cap: float | None = None,
    engine: str = "counts",
) -> GroupUpdates:
    """Every group's estimator and probability (arguments as `group_moments`)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    kind = advantage
    if kind == "fixed" and problem.advantages is None:
        raise ValueError("advantage='fixed' needs problem.advantages")
    if kind != "fixed" and problem.rewards is None:
        raise ValueError(f"advantage={kind!r} needs problem.rewards")
    if method == "grpo" and (problem.token_ratio is None or problem.token_score is None):
        raise ValueError("method 'grpo' needs token_ratio and token_score (use problem_from_tree)")
    mu, rho, score = problem.mu, problem.rho, problem.score
    k, norm = mu.size, problem.depth * group_size
    r = problem.rewards if problem.rewards is not None else np.zeros(k)
    a = problem.advantages if problem.advantages is not None else np.zeros(k)
    if method == "grpo":
        tr, ts = problem.token_ratio, problem.token_score
        v_pos = np.einsum("kt,ktd->kd", tr * (tr <= 1.0 + eps), ts)
        v_neg = np.einsum("kt,ktd->kd", tr * (tr >= 1.0 - eps), ts)
    if engine == "counts":
        counts = compositions(group_size, k).astype(np.float64)  # [n, K]
        logw = gammaln(group_size + 1) - gammaln(counts + 1).sum(1) + counts @ np.log(mu)
        weight = np.exp(logw)
        sums = (counts @ r)[:, None]
        adv = _member_advantages(r[None, :], a[None, :], kind, group_size, sums)
        adv = np.broadcast_to(adv, counts.shape)
        rho_b = np.broadcast_to(rho, counts.shape)
        if method == "gmc":
            rho_bar = (counts @ rho / group_size)[:, None]
            coef = class_coefficients(rho_b, eps, method, rho_bar=rho_bar)
        elif method == "grpo":
            coef = np.full(counts.shape, np.nan)
        else:
            coef = np.broadcast_to(class_coefficients(rho, eps, method, vcpo_cap), counts.shape)
        if method == "grpo":
            g = ((counts * adv * (adv > 0)) @ v_pos + (counts * adv * (adv < 0)) @ v_neg) / norm
            removed = np.full(len(counts), np.nan)
        else:
            g = ((counts * coef * adv) @ score) / norm
            removed = (counts * (rho_b - coef)).sum(1) / group_size
        g_is = ((counts * rho_b * adv) @ score) / norm
    elif engine == "ordered":
        if k**group_size > 2_000_000:
            raise ValueError(f"K^G = {k}^{group_size} ordered groups is too many to enumerate")
        idx = np.array(list(itertools.product(range(k), repeat=group_size)))  # [n, G]
        weight = np.prod(mu[idx], axis=1)
        sums = r[idx].sum(1, keepdims=True)
        adv = _member_advantages(r[idx], a[idx], kind, group_size, sums)
        if method == "grpo":
            vec = np.where((adv > 0)[..., None], v_pos[idx], v_neg[idx])
            g = np.einsum("ng,ngd->nd", adv, vec) / norm
            removed = np.full(len(idx), np.nan)
        else:
            coef = class_coefficients(rho[idx], eps, method, vcpo_cap)
            g = np.einsum("ng,ngd->nd", coef * adv, score[idx]) / norm
            removed = (rho[idx] - coef).sum(1) / group_size
        g_is = np.einsum("ng,ngd->nd", rho[idx] * adv, score[idx]) / norm
    else:
        raise ValueError(f"engine must be 'counts' or 'ordered', got {engine!r}")
    return GroupUpdates(weight, g, g_is, removed)


@dataclass(frozen=True)
class SingleTokenMoments:
    """Closed-form moments for `T = 1`, `G = 1`, tabular softmax over `A` tokens, batched `[...]`."""

    second_moment: NDArray[np.float64]  # [...] E||g||^2
    bias: NDArray[np.float64]  # [..., A] E[g^w - g^IS]
    removed_mass: NDArray[np.float64]  # [...] E[rho - c]
    min_prob: NDArray[np.float64]  # [...] smallest probability of the two policies (1/C)


def single_token_moments(
    logits: NDArray[np.float64],
    behavior_logits: NDArray[np.float64],
    advantages: NDArray[np.float64],
    eps: NDArray[np.float64] | float,
    method: str,
) -> SingleTokenMoments:
    """Vectorised twin of `group_moments` for one token and one trajectory per group.

    Inputs `[..., A]` (advantages fixed per token) and `eps` broadcastable to `[...]`. With
    `p = softmax(logits)`, `m = softmax(behavior_logits)`, `rho = p/m`, score `s_y = e_y - p`
    (`||s_y||^2 = 1 - 2 p_y + sum p^2`) and `c_y = min(rho_y, 1+eps)` (GMC with `G = 1`) or
    `rho_y 1{rho_y <= 1+eps}` (TIC): `E||g||^2 = sum_y m_y c_y^2 A_y^2 ||s_y||^2`,
    `E[g - g^IS] = sum_y m_y (c_y - rho_y) A_y s_y`, removed mass `sum_y m_y (rho_y - c_y)`.
    """

    def softmax(z: NDArray[np.float64]) -> NDArray[np.float64]:
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    p, m = softmax(np.asarray(logits, float)), softmax(np.asarray(behavior_logits, float))
    a = np.asarray(advantages, dtype=np.float64)
    cap = 1.0 + np.asarray(eps, dtype=np.float64)[..., None]
    rho = p / m
    if method == "gmc":
        c = np.minimum(rho, cap)  # G = 1: rho / max{1, rho/(1+eps)} in closed form
    elif method == "tic":
        c = class_coefficients(rho, np.asarray(eps, dtype=np.float64)[..., None], method)
    else:
        raise ValueError(f"method must be 'tic' or 'gmc', got {method!r}")
    score_sq = 1.0 - 2.0 * p + np.sum(p**2, axis=-1, keepdims=True)
    w = m * (c - rho) * a
    return SingleTokenMoments(
        second_moment=np.sum(m * c**2 * a**2 * score_sq, axis=-1),
        bias=w - p * np.sum(w, axis=-1, keepdims=True),
        removed_mass=np.sum(m * (rho - c), axis=-1),
        min_prob=np.minimum(p.min(axis=-1), m.min(axis=-1)),
    )
