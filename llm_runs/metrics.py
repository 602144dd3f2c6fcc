"""Evaluation metrics: unbiased pass@k (Chen et al. 2021), avg@n and the macro average.

The numbers of the paper's tables (Appendix B.1): greedy accuracy, avg@n (mean correctness over
all `n` sampled outputs) and the unbiased pass@k estimator for k in {1, 2, 4, 8, 16}.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

# The k of the fixed-delay study's pass@k table (Appendix B.1, Table 3).
PASS_AT_K = (1, 2, 4, 8, 16)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem: `1 - C(n - c, k) / C(n, k)`.

    n: samples drawn, c: correct samples among them, k: budget (1 <= k <= n).
    Computed in the stable product form `1 - prod_{i=n-c+1}^{n} (1 - k / i)`, and exactly 1 when
    `n - c < k` (every k-subset contains a correct sample).
    """
    if n < 1:
        raise ValueError(f"pass_at_k: n must be >= 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: c must be in [0, n={n}], got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: k must be in [1, n={n}], got {k}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_at_k_exact(n: int, c: int, k: int) -> float:
    """The same estimator from exact integer binomials (reference twin of `pass_at_k`)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def ks_for(n: int, ks: Iterable[int] = PASS_AT_K) -> list[int]:
    """The k in `ks` that a problem with `n` samples supports (k <= n)."""
    return [k for k in ks if k <= n]


def mean_pass_at_k(
    correct_counts: Sequence[int], n: int, ks: Iterable[int] = PASS_AT_K
) -> dict[int, float]:
    """pass@k averaged over problems, for every k in `ks` with k <= n.

    correct_counts: number of correct samples per problem, each out of `n`.
    """
    if not correct_counts:
        raise ValueError("mean_pass_at_k needs at least one problem")
    return {
        k: sum(pass_at_k(n, c, k) for c in correct_counts) / len(correct_counts)
        for k in ks_for(n, ks)
    }


def avg_at_n(correct: Sequence[Sequence[bool]]) -> float:
    """Mean correctness over all sampled outputs of all problems (avg@n in Appendix B.1)."""
    flat = [bool(x) for row in correct for x in row]
    if not flat:
        raise ValueError("avg_at_n needs at least one sample")
    return sum(flat) / len(flat)


def macro_average(values: Mapping[str, float]) -> float:
    """Unweighted mean over benchmarks (the tables' last column, Appendix B.1)."""
    if not values:
        raise ValueError("macro_average needs at least one benchmark")
    return sum(values.values()) / len(values)
