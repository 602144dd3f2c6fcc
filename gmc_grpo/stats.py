"""Interval statistics shared by the toy analyses and the figures (quantiles from `scipy.stats`).

Every interval is two-sided at confidence `level`. Means over independent seeds use Student's t
(`t_interval`); means over many Monte Carlo draws use the normal quantile (`normal_quantile`);
method comparisons are paired over seeds (`paired_difference`): the learners of one seed share
their initial parameters and random numbers, so the per-seed difference removes their common
noise. `scipy.stats` is imported inside the functions: it takes about a second to import, and
the command-line help should not wait for it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")


def normal_quantile(level: float = 0.95) -> float:
    """`z` with `P(|Z| <= z) = level` for a standard normal `Z` (1.96 at 0.95)."""
    from scipy.stats import norm

    _check_level(level)
    return float(norm.ppf(0.5 + level / 2))


def t_quantile(df: int, level: float = 0.95) -> float:
    """`t` with `P(|T| <= t) = level` for Student's t with `df` degrees of freedom."""
    from scipy.stats import t

    _check_level(level)
    if df < 1:
        raise ValueError(f"Student's t needs df >= 1, got {df}")
    return float(t.ppf(0.5 + level / 2, df))


def t_interval(values: Iterable[float | None], level: float = 0.95) -> dict[str, float]:
    """Mean with a Student-t interval over independent values: `{mean, lo, hi, n}`.

    `None` and non-finite values are dropped; with no value the mean is NaN, with one the
    interval is `(-inf, inf)`.
    """
    x = [v for v in values if v is not None and math.isfinite(v)]
    n = len(x)
    if n == 0:
        return {"mean": math.nan, "lo": math.nan, "hi": math.nan, "n": 0}
    mean = sum(x) / n
    if n < 2:
        return {"mean": mean, "lo": -math.inf, "hi": math.inf, "n": n}
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1))
    half = t_quantile(n - 1, level) * sd / math.sqrt(n)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": n}


def interval_text(stat: dict[str, float], spec: str = ".3g") -> str:
    """`t_interval`'s result as text: `"mean [lo, hi]"` with each number in format `spec`; one
    value (or an infinite bound) gives `"mean (1 seed, no interval)"` instead of `[-inf, inf]`,
    no value `"no value"`."""
    mean, lo, hi = stat["mean"], stat["lo"], stat["hi"]
    if not math.isfinite(mean):
        return "no value"
    if stat.get("n", 2) < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
        count = stat.get("n", 1)
        return f"{mean:{spec}} ({count} seed{'s' if count != 1 else ''}, no interval)"
    return f"{mean:{spec}} [{lo:{spec}}, {hi:{spec}}]"


def paired_difference(
    a: Mapping[Hashable, float], b: Mapping[Hashable, float], level: float = 0.95
) -> dict[str, float]:
    """t-interval of `a[k] - b[k]` over the keys (seeds) present in both: `{mean, lo, hi, n}`."""
    return t_interval([a[k] - b[k] for k in a if k in b], level)
