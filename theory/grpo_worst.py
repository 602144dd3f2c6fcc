"""Vanilla GRPO's second moment as a function of Assumption 2's `C`: an upper bound and its search
(the paper's §3: "its second moment scales as O(C²) in the worst case").

The paper states the rate without proof (it cites Pang et al., 2025). The bounds here are **ours**.
Vanilla GRPO's estimator (`theory.exact`, method `"grpo"`) is
`g = 1/(T G) sum_i sum_t u_it r_it A_i s_it` with token ratios `r_it = pi/mu`, token scores
`s_it`, `|A_i| <= R` and `u_it in {0, 1}` (PPO-clip keeps `r <= 1+eps` for `A > 0` and
`r >= 1-eps` for `A < 0`). Under Assumption 2 every behavior token probability is at least
`1/C`, so `r_it <= 1/mu <= C` and, with `S = max ||s_t||` over the tokens of the problem:

* pathwise: `||g|| <= max_{i,t} r_it |A_i| ||s_it|| <= C R S`, so `max_groups ||g||^2 <= C^2 R^2 S^2`
  (the worst case over groups is `O(C^2)`);
* in expectation: `||g||^2 <= 1/(T G) sum_{i,t} r_it^2 A_i^2 ||s_it||^2` (Jensen) and
  `E_mu[r_t^2 | context] = sum_y pi^2/mu <= C`, so `E||g||^2 <= C R^2 S^2` (the second moment
  itself is `O(C)`).

`S` does not grow with `C` on tabular softmax trees (`||e_y - p||^2 <= 2`); under Assumption 1's
score bound `||s||^2 <= 2L(-log pi) <= 2L log C` it adds a `log C` factor. `search_grpo_worst`
maximises both ratios (`max ||g||^2 / (C R S)^2` and `E||g||^2 / (C R^2 S^2)`) over problems
where nothing is chosen to fit them: a ratio above 1 would refute our bound; its best value is how
near the search comes.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from theory.adversarial import EPS_RANGE, SearchResult, maximise
from theory.exact import group_moments, problem_from_tree
from theory.trees import TokenTree, tables, tabular_tree

# shapes searched: (vocabulary, response length T, group size G)
GRPO_SHAPES = ((2, 1, 2), (3, 1, 2), (2, 2, 2), (3, 1, 3))


def grpo_ratios(x: NDArray[np.float64], tree: TokenTree, group_size: int) -> tuple[float, float]:
    """`(max_groups ||g||^2 / (C R S)^2, E||g||^2 / (C R^2 S^2))` of one problem (`R = 1`).

    `x [2 d + K + 1]`: current logits, behavior logits, fixed advantages `tanh(.)` per
    trajectory, `eps` (log-uniform in `EPS_RANGE`). `C` = one over the smallest token probability
    of both policies (Assumption 2 holds with exactly this `C`), `S` = the largest token-score norm
    of the current policy over every token the trajectories use.
    """
    d, k = tree.dim, tree.vocab_size**tree.depth
    lo, hi = np.log(EPS_RANGE[0]), np.log(EPS_RANGE[1])
    eps = float(np.exp(lo + (hi - lo) / (1.0 + np.exp(-x[-1]))))
    theta, behavior = x[:d], x[d : 2 * d]
    adv = np.tanh(x[2 * d : 2 * d + k])
    prob = problem_from_tree(tree, theta, behavior, advantages=adv)
    cur, beh = tables(tree, theta), tables(tree, behavior)
    coverage = 1.0 / float(min(np.exp(cur.token_logp).min(), np.exp(beh.token_logp).min()))
    score_sq = float(np.max(np.sum(cur.token_score**2, axis=-1)))
    mom = group_moments(prob, "grpo", eps, group_size, advantage="fixed")
    return (
        mom.max_sq_norm / (coverage**2 * score_sq),
        mom.second_moment / (coverage * score_sq),
    )


@lru_cache(maxsize=4)
def search_grpo_worst(
    shapes: tuple[tuple[int, int, int], ...] = GRPO_SHAPES,
    screen: int = 64,
    maxfev: int = 120,
    seed: int = 11,
) -> dict[str, SearchResult]:
    """Largest pathwise (`"worst"`) and expected (`"mean"`) ratio of `grpo_ratios` per shape.

    Per shape and ratio: a seeded random screen of `screen` points (logits of scale 3, so that
    coverage constants from about 1 to 1e4 occur), then Nelder-Mead from the best one. Each
    result's example holds every shape's best ratio (`by_shape`).
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    out: dict[str, SearchResult] = {}
    for which, part in (("worst", 0), ("mean", 1)):
        best, evals, by_shape = -np.inf, 0, {}
        for vocab, depth, group in shapes:
            tree = tabular_tree(vocab, depth)
            dim = 2 * tree.dim + vocab**depth + 1

            def ratio(
                z: np.ndarray, tree: TokenTree = tree, group: int = group, part: int = part
            ) -> float:
                return grpo_ratios(z, tree, group)[part]

            pool = rng.normal(scale=3.0, size=(screen, dim))
            values = [ratio(z) for z in pool]
            start = pool[int(np.argmax(values))]
            value, _, used = maximise(ratio, [start], maxfev)
            value = max(value, max(values))
            evals += used + screen
            by_shape[f"|A| = {vocab}, T = {depth}, G = {group}"] = value
            best = max(best, value)
        out[which] = SearchResult(
            f"GRPO {which} second moment / our C-bound", best, {"by_shape": by_shape}, 1, evals
        )
    return out
