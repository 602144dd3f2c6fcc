"""Adversarial searches: how close do exact examples get to each bound of the §4.2 chain?

A bound checked only on random examples that reach a few percent of it would let a wrong constant
through. Each search here maximises `exact quantity / bound` over small token trees (policies,
behavior policies, advantages or rewards, `eps`) with scipy's Nelder-Mead from several seeded
starts, and returns the best ratio with the example that attains it. A ratio above one is a
counterexample (the claims table then says "refuted"); the best ratio also says how large an error
in the constant the check would catch (a claimed constant below `ratio * constant` is refuted).

Searches (all exact, by enumeration of the groups; `theory.exact`, `theory.trees`):

* `search_second_moment`: `E||g^w||^2 / M_ours` for TIC and GMC (Proposition 1), and
  `search_second_moment_by_depth` the same at response lengths `T = 1..4`;
* `search_bias`: `||E[g^w - g^IS]|| / (K_b * removed mass)` (Proposition 1's bias half);
* `search_kl_drift`: `KL / ((T L / 2) ||dtheta||^2)` on shared-parameter (log-linear) trees;
* `search_smoothness`: `||grad^2 J|| / L_J` (the smoothness behind Lemma 1);
* `search_group_removed_mass`: `E(rho_bar - 1 - eps)_+ / ((1+delta) KL / (2 eps G))` over
  two-point ratio laws with `|rho - 1| <= delta` (Corollary 2's removed-mass bound).

Parameters are unconstrained reals mapped into their domains (logits are free; advantages
`R tanh(.)`; `eps` log-uniform in `[1e-3, 3]`; rewards `R sigmoid(.)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

from theory.bounds import bias_per_removed_mass, second_moment_bound
from theory.divergences import group_removed_mass_binomial
from theory.exact import group_moments, problem_from_tree, single_token_moments
from theory.trees import (
    TokenTree,
    min_token_prob,
    objective_hessian,
    shared_tree,
    tabular_tree,
    trajectory_kl,
)

EPS_RANGE = (1e-3, 3.0)


@dataclass(frozen=True)
class SearchResult:
    """Best ratio found, the example attaining it and how many starts and evaluations it took."""

    name: str
    ratio: float
    example: dict[str, object] = field(compare=False)
    restarts: int
    evaluations: int


def maximise(
    f: Callable[[NDArray[np.float64]], float],
    starts: list[NDArray[np.float64]],
    maxfev: int,
) -> tuple[float, NDArray[np.float64], int]:
    """Nelder-Mead on `-f` from every start; returns `(best value, its x, evaluations used)`."""
    best, best_x, used = -np.inf, starts[0], 0
    for x0 in starts:
        res = minimize(
            lambda x: -f(x),
            x0,
            method="Nelder-Mead",
            options={"maxfev": maxfev, "xatol": 1e-9, "fatol": 1e-13, "adaptive": True},
        )
        used += int(res.nfev)
        if -res.fun > best:
            best, best_x = float(-res.fun), np.asarray(res.x)
    return best, best_x, used


def _eps(z: float) -> float:
    lo, hi = np.log(EPS_RANGE[0]), np.log(EPS_RANGE[1])
    return float(np.exp(lo + (hi - lo) / (1.0 + np.exp(-z))))


def _split(
    x: NDArray[np.float64], tree: TokenTree
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """`x -> (theta, theta_behavior, advantages in [-1, 1], eps)` for a tabular tree."""
    d, k = tree.dim, tree.vocab_size**tree.depth
    return x[:d], x[d : 2 * d], np.tanh(x[2 * d : 2 * d + k]), _eps(x[-1])


def _starts(rng: np.random.Generator, dim: int, n: int, scale: float = 1.5) -> list[np.ndarray]:
    return [rng.normal(scale=scale, size=dim) for _ in range(n)]


def _single_token_search(
    objective: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str], np.ndarray],
    rng: np.random.Generator,
    restarts: int,
    maxfev: int,
    screen: int = 512,
) -> tuple[float, dict[str, object], int]:
    """Single token (`T = 1`, `G = 1`, `A = 2, 3`): vectorised random screen, then Nelder-Mead
    from the best `restarts` points. `objective(logits, behavior, adv, eps, method)` is batched."""
    best, best_ex, evals = -np.inf, {}, 0
    for vocab in (2, 3):
        for method in ("gmc", "tic"):
            dim = 3 * vocab + 1

            def batch(x: np.ndarray, vocab: int = vocab, method: str = method) -> np.ndarray:
                lo, hi = np.log(EPS_RANGE[0]), np.log(EPS_RANGE[1])
                eps = np.exp(lo + (hi - lo) / (1.0 + np.exp(-x[..., -1])))
                v = vocab
                return objective(
                    x[..., :v], x[..., v : 2 * v], np.tanh(x[..., 2 * v : 3 * v]), eps, method
                )

            pool = rng.normal(scale=1.5, size=(screen, dim))
            values = batch(pool)
            starts = [pool[i] for i in np.argsort(values)[::-1][:restarts]]
            value, x, used = maximise(lambda x, f=batch: float(f(x)), starts, maxfev)
            evals += used + screen
            if value > best:
                best = value
                best_ex = {
                    "vocab_size": vocab,
                    "depth": 1,
                    "group_size": 1,
                    "method": method,
                    "eps": _eps(x[-1]),
                    "logits": x[:vocab].tolist(),
                    "behavior_logits": x[vocab : 2 * vocab].tolist(),
                    "advantages": np.tanh(x[2 * vocab : 3 * vocab]).tolist(),
                }
    return best, best_ex, evals


def _engine_shapes() -> list[tuple[TokenTree, int]]:
    """Cross-check shapes through the general engine (GMC): `G = 2` on one token, `T = 2`."""
    return [(tabular_tree(2, 1), 2), (tabular_tree(2, 2), 1)]


@lru_cache(maxsize=4)
def search_second_moment(restarts: int = 2, maxfev: int = 200, seed: int = 0) -> SearchResult:
    """Largest `E||g^w||^2 / ((2/T)(1+eps) L R^2 log|A|)` (our constant 2; `R = 1`, `L = 1/2`).

    Proposition 1 with the paper's 8 is four times that denominator, so the fraction of the paper's
    bound reached is `ratio / 4`. The supremum for one token is `1/(2 log 2) = 0.7213` (uniform
    current policy, `eps -> 0`): the steps `||grad log p||^2 <= 2L(-log p)` and entropy
    `<= log|A|` lose that factor together, the Cauchy-Schwarz and cap steps are tight at `G = 1`.
    """
    rng = np.random.default_rng(seed)

    def single(
        lg: np.ndarray, bl: np.ndarray, adv: np.ndarray, eps: np.ndarray, method: str
    ) -> np.ndarray:
        m2 = single_token_moments(lg, bl, adv, eps, method).second_moment
        vocab = lg.shape[-1]
        return m2 / np.asarray(second_moment_bound(eps, 1, 0.5, 1.0, vocab, "ours"))

    best, best_ex, evals = _single_token_search(single, rng, restarts, maxfev)
    for tree, group in _engine_shapes():
        k = tree.vocab_size**tree.depth

        def ratio(x: np.ndarray, tree: TokenTree = tree, group: int = group) -> float:
            th, tb, adv, eps = _split(x, tree)
            prob = problem_from_tree(tree, th, tb, advantages=adv)
            m2 = group_moments(prob, "gmc", eps, group, advantage="fixed").second_moment
            bound = second_moment_bound(
                eps, tree.depth, tree.smoothness, 1.0, tree.vocab_size, "ours"
            )
            return m2 / bound

        value, x, used = maximise(ratio, _starts(rng, 2 * tree.dim + k + 1, 1), maxfev // 2)
        evals += used
        if value > best:
            best = value
            best_ex = {
                "depth": tree.depth,
                "group_size": group,
                "method": "gmc",
                "eps": _eps(x[-1]),
            }
    return SearchResult("Prop. 1 second moment / ours", best, best_ex, restarts * 4 + 2, evals)


# depths of Proposition 1's search over several T (tabular trees, vocabulary 2: 2^T trajectories)
SECOND_MOMENT_DEPTHS = (1, 2, 3, 4)


@lru_cache(maxsize=4)
def search_second_moment_by_depth(
    depths: tuple[int, ...] = SECOND_MOMENT_DEPTHS,
    screen: int = 256,
    maxfev: int = 150,
    seed: int = 4,
) -> dict[int, SearchResult]:
    """Proposition 1's search at several response lengths `T`: per depth, the largest
    `E||g^w||^2 / ((2/T)(1+eps) L R^2 log|A|)` over tabular trees of vocabulary 2 (every context
    its own logits), TIC and GMC with `G = 1`, fixed advantages in `[-1, 1]`, `eps` in
    `EPS_RANGE`: a random screen of `screen` points (the first one the one-token extremal point
    lifted to `T` tokens), then Nelder-Mead from the best one.

    The bound falls like `1/T` (the score is a sum of `T` martingale differences, each token's
    squared score at most `2L(-log p)`); a ratio that grew with `T` would show the `1/T` is not
    earned, one above 1 would refute the bound.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for depth in depths:
        tree = tabular_tree(2, depth)
        k = tree.vocab_size**tree.depth
        bound_of = {}

        def ratio(x: np.ndarray, method: str, tree: TokenTree = tree) -> float:
            th, tb, adv, eps = _split(x, tree)
            prob = problem_from_tree(tree, th, tb, advantages=adv)
            m2 = group_moments(prob, method, eps, 1, advantage="fixed").second_moment
            bound = second_moment_bound(
                eps, tree.depth, tree.smoothness, 1.0, tree.vocab_size, "ours"
            )
            return float(m2 / bound)

        best, evals, best_method = -np.inf, 0, ""
        for method in ("gmc", "tic"):
            pool = rng.normal(scale=1.5, size=(screen, 2 * tree.dim + k + 1))
            # the one-token extremal point lifted to T tokens: uniform current and behavior
            # policies, advantages near 1, eps near its smallest value
            pool[0] = np.concatenate([np.zeros(2 * tree.dim), np.full(k, 4.0), [-8.0]])
            values = [ratio(x, method) for x in pool]
            start = pool[int(np.argmax(values))]
            value, _, used = maximise(lambda x, m=method: ratio(x, m), [start], maxfev)
            evals += used + screen
            value = max(value, max(values))
            bound_of[method] = value
            if value > best:
                best, best_method = value, method
        out[depth] = SearchResult(
            f"Prop. 1 second moment / ours, T = {depth}",
            best,
            {"depth": depth, "vocab_size": 2, "group_size": 1, "method": best_method, **bound_of},
            2,
            evals,
        )
    return out


@lru_cache(maxsize=4)
def search_bias(restarts: int = 2, maxfev: int = 200, seed: int = 1) -> SearchResult:
    """Largest `||E[g^w - g^IS]|| / (R sqrt(2 L log C) * removed mass)` (`R = 1`, `L = 1/2`).

    `C` is Assumption 2's constant for the two policies of the example (one over their smallest
    token probability). The example also reports `ratio_exact_score`: the same with the score bound
    replaced by the example's largest score norm (the first, exact step of the chain), which one
    removed trajectory with an aligned advantage attains.
    """
    rng = np.random.default_rng(seed)

    def single(
        lg: np.ndarray, bl: np.ndarray, adv: np.ndarray, eps: np.ndarray, method: str
    ) -> np.ndarray:
        mom = single_token_moments(lg, bl, adv, eps, method)
        k_b = np.sqrt(2.0 * 0.5 * np.log(1.0 / mom.min_prob))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.linalg.norm(mom.bias, axis=-1) / (k_b * mom.removed_mass)
        return np.where(mom.removed_mass > 1e-12, r, 0.0)

    best, best_ex, evals = _single_token_search(single, rng, restarts, maxfev)
    if best_ex:
        lg, bl = np.array(best_ex["logits"]), np.array(best_ex["behavior_logits"])
        adv = np.array(best_ex["advantages"])
        mom = single_token_moments(lg, bl, adv, best_ex["eps"], str(best_ex["method"]))
        p = np.exp(lg - lg.max()) / np.exp(lg - lg.max()).sum()
        max_score = float(np.sqrt(np.max(1.0 - 2.0 * p + np.sum(p**2))))
        best_ex["coverage_C"] = float(1.0 / mom.min_prob)
        best_ex["ratio_exact_score"] = float(
            np.linalg.norm(mom.bias) / (max_score * mom.removed_mass)
        )
    for tree, group in _engine_shapes():
        k = tree.vocab_size**tree.depth

        def ratio(x: np.ndarray, tree: TokenTree = tree, group: int = group) -> float:
            th, tb, adv, eps = _split(x, tree)
            mom = group_moments(
                problem_from_tree(tree, th, tb, advantages=adv),
                "gmc",
                eps,
                group,
                advantage="fixed",
            )
            if mom.removed_mass < 1e-12:
                return 0.0
            k_b = bias_per_removed_mass(1.0, tree.smoothness, 1.0 / min_token_prob(tree, th, tb))
            return float(np.linalg.norm(mom.bias) / (k_b * mom.removed_mass))

        value, _, used = maximise(ratio, _starts(rng, 2 * tree.dim + k + 1, 1), maxfev // 2)
        evals += used
        best = max(best, value)
    return SearchResult("Prop. 1 bias / (K_b removed mass)", best, best_ex, restarts * 4 + 2, evals)


def kl_drift_trees() -> list[TokenTree]:
    """Shared-parameter trees for the KL drift search: `A = 2`, `T = 3`, two feature sets."""
    rng = np.random.default_rng(7)
    return [
        shared_tree(np.eye(2), depth=3),
        shared_tree(rng.normal(size=(2, 3)), depth=3),
    ]


@lru_cache(maxsize=4)
def search_kl_drift(restarts: int = 2, maxfev: int = 250, seed: int = 2) -> SearchResult:
    """Largest `KL(pi_theta || pi_theta') / ((T L / 2) ||theta - theta'||^2)` on shared trees.

    The parameter is shared by all `T` positions, so the factor `T` is exercised: a ratio near one
    means the bound is tight, and a bound with `T^(1-x)` or a constant below `1/2` would be exceeded.
    """
    rng = np.random.default_rng(seed)
    best, best_ex, evals = -np.inf, {}, 0
    for tree in kl_drift_trees():
        d = tree.dim

        def ratio(x: np.ndarray, tree: TokenTree = tree, d: int = d) -> float:
            theta, direction = x[:d], x[d : 2 * d]
            norm = float(np.linalg.norm(direction))
            if norm < 1e-12:
                return 0.0
            step = direction / norm * np.exp(-7.0 + 7.0 / (1.0 + np.exp(-x[-1])))
            kl = trajectory_kl(tree, theta, theta + step)
            return kl / (tree.depth * tree.smoothness / 2.0 * float(step @ step))

        value, x, used = maximise(ratio, _starts(rng, 2 * d + 1, restarts, scale=1.0), maxfev)
        evals += used
        if value > best:
            best = value
            best_ex = {"depth": tree.depth, "dim": d, "L": tree.smoothness, "theta": x[:d].tolist()}
    return SearchResult("KL / ((T L/2) ||dtheta||^2)", best, best_ex, restarts * 2, evals)


@lru_cache(maxsize=4)
def search_smoothness(restarts: int = 2, maxfev: int = 150, seed: int = 3) -> SearchResult:
    """Largest `||grad^2 J(theta)||_2 / (T R L (2 log|A| + 1))` over `theta` and rewards in `[0, 1]`."""
    rng = np.random.default_rng(seed)
    best, best_ex, evals = -np.inf, {}, 0
    for tree in (tabular_tree(2, 1), tabular_tree(2, 2)):
        d, k = tree.dim, tree.vocab_size**tree.depth
        l_j = tree.depth * tree.smoothness * (2.0 * np.log(tree.vocab_size) + 1.0)

        def ratio(x: np.ndarray, tree: TokenTree = tree, d: int = d, l_j: float = l_j) -> float:
            rewards = 1.0 / (1.0 + np.exp(-x[d:]))
            hess = objective_hessian(tree, x[:d], rewards)
            return float(np.max(np.abs(np.linalg.eigvalsh(hess)))) / l_j

        value, x, used = maximise(ratio, _starts(rng, d + k, restarts), maxfev)
        evals += used
        if value > best:
            best = value
            best_ex = {"vocab_size": tree.vocab_size, "depth": tree.depth}
    return SearchResult("||grad^2 J|| / L_J", best, best_ex, restarts * 2, evals)


@lru_cache(maxsize=4)
def search_group_removed_mass(
    group_sizes: tuple[int, ...] = (1, 4, 16),
    delta: float = 0.5,
    restarts: int = 2,
    maxfev: int = 250,
    seed: int = 4,
) -> dict[int, SearchResult]:
    """Per `G`: largest `E(rho_bar - 1 - eps)_+ * 2 eps G / ((1+delta) KL)` over two-point laws.

    Laws: `rho in {x_low, x_high}` with mean one and `1 - delta <= x_low < 1 < x_high <= 1+delta`;
    `eps` in `(0, delta)` (otherwise nothing is removed). Exact binomial expectation.
    """
    from theory.divergences import kl_divergence, two_point

    rng = np.random.default_rng(seed)
    out: dict[int, SearchResult] = {}
    for g in group_sizes:

        def ratio(x: np.ndarray, g: int = g) -> float:
            s = 1.0 / (1.0 + np.exp(-x))
            x_low, x_high, eps = 1.0 - delta * s[0], 1.0 + delta * s[1], delta * s[2]
            if x_high - 1.0 < 1e-9 or 1.0 - x_low < 1e-9 or eps < 1e-9:
                return 0.0
            mass = group_removed_mass_binomial(x_low, x_high, eps, g)
            kl = kl_divergence(*two_point(x_low, x_high))
            return mass * 2.0 * eps * g / ((1.0 + delta) * kl)

        pool = _starts(rng, 3, 16 * restarts)
        values = [ratio(x0) for x0 in pool]
        starts = [pool[i] for i in np.argsort(values)[::-1][:restarts]]
        value, x, used = maximise(ratio, starts, maxfev)
        used += len(pool)
        s = 1.0 / (1.0 + np.exp(-x))
        out[g] = SearchResult(
            f"Cor. 2 removed mass / bound (G = {g})",
            value,
            {
                "x_low": float(1 - delta * s[0]),
                "x_high": float(1 + delta * s[1]),
                "eps": float(delta * s[2]),
            },
            restarts,
            used,
        )
    return out
