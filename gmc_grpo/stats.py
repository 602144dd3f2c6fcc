"""Interval statistics shared by the toy analyses and the figures (quantiles from `scipy.stats`).

Every interval is two-sided at confidence `level`. Means over independent seeds use Student's t
(`t_interval`); means over many Monte Carlo draws use the normal quantile (`normal_quantile`);
method comparisons are paired over seeds (`paired_difference`): the learners of one seed share
their initial parameters and random numbers, so the per-seed difference removes their common
noise. `scipy.stats` is imported inside the functions: it takes about a second to import, and
the command-line help should not wait for it.

**Several comparisons.** One comparison is declared primary before the data are seen and judged
at level `alpha` on its own; the others (secondary) are judged together with Holm's step-down
adjustment (`holm_adjust`), which keeps the probability of any false "holds" among them at most
`alpha` whatever their dependence (Holm 1979, "A simple sequentially rejective multiple test
procedure", Scand. J. Statist. 6). `paired_t_test` gives the two-sided p-value that goes with
`paired_difference`'s interval (p < 1 - level exactly when the interval excludes 0).

**Power** (`paired_t_power`, `seeds_for_power`, `minimum_detectable_difference`): the paired t
test of `n` seeds whose per-seed differences have standard deviation `sd` rejects at level
`alpha` (two-sided) with probability `P(|T'| > t_{1-alpha/2, n-1})`, `T'` noncentral t with
`n - 1` degrees of freedom and noncentrality `delta sqrt(n) / sd` for a true mean difference
`delta`: exact for normal differences (the textbook formula, e.g. Cohen 1988, ch. 2).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence


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


def paired_t_test(differences: Iterable[float | None], level: float = 0.95) -> dict[str, float]:
    """One-sample t test of per-seed differences against 0: `{mean, lo, hi, n, sd, t, p}`.

    `lo, hi` is `t_interval`'s interval; `p` the two-sided p-value `2 P(T_{n-1} > |t|)`,
    `t = mean / (sd / sqrt(n))`. With fewer than 2 values `sd`, `t` and `p` are NaN; with
    `sd = 0` the p-value is 0 for a nonzero mean (1 for a zero one).
    """
    from scipy.stats import t as student_t

    x = [v for v in differences if v is not None and math.isfinite(v)]
    out: dict[str, float] = {**t_interval(x, level), "sd": math.nan, "t": math.nan, "p": math.nan}
    n = len(x)
    if n < 2:
        return out
    mean = out["mean"]
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1))
    out["sd"] = sd
    if sd == 0:
        out["t"] = math.copysign(math.inf, mean) if mean else 0.0
        out["p"] = 0.0 if mean else 1.0
        return out
    t_value = mean / (sd / math.sqrt(n))
    out["t"] = t_value
    out["p"] = float(2 * student_t.sf(abs(t_value), n - 1))
    return out


def paired_test(
    a: Mapping[Hashable, float], b: Mapping[Hashable, float], level: float = 0.95
) -> dict[str, float]:
    """`paired_t_test` of `a[k] - b[k]` over the keys (seeds) present in both."""
    return paired_t_test([a[k] - b[k] for k in a if k in b], level)


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given.

    With the `m` p-values sorted increasingly, `p_(1) <= ... <= p_(m)`, the adjusted value of
    `p_(k)` is `max_{j <= k} min(1, (m - j + 1) p_(j))`; rejecting where the adjusted value is
    below `alpha` is Holm's procedure at family-wise level `alpha`. NaN p-values (no test) stay
    NaN and do not count in `m`.
    """
    indexed = sorted(
        ((p, i) for i, p in enumerate(p_values) if not math.isnan(p)), key=lambda pair: pair[0]
    )
    m = len(indexed)
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def paired_t_power(delta: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Probability that the two-sided paired t test of `n` seeds rejects at level `alpha` when
    the per-seed differences have mean `delta` and standard deviation `sd` (module docstring)."""
    from scipy.stats import nct
    from scipy.stats import t as student_t

    _check_alpha(alpha)
    if n < 2:
        raise ValueError(f"a paired t test needs n >= 2 seeds, got {n}")
    if not sd > 0:
        raise ValueError(f"the standard deviation of the differences must be > 0, got {sd}")
    df = n - 1
    critical = float(student_t.ppf(1 - alpha / 2, df))
    noncentrality = delta * math.sqrt(n) / sd
    return float(nct.sf(critical, df, noncentrality) + nct.cdf(-critical, df, noncentrality))


def seeds_for_power(
    delta: float, sd: float, power: float = 0.8, alpha: float = 0.05, max_seeds: int = 10_000
) -> int:
    """The smallest number of seeds `n >= 2` whose paired t test detects a true difference
    `delta` with probability at least `power` (`paired_t_power`); raises beyond `max_seeds`."""
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power}")
    if delta == 0:
        raise ValueError("a difference of 0 cannot be detected: give delta != 0")
    for n in range(2, max_seeds + 1):
        if paired_t_power(delta, sd, n, alpha) >= power:
            return n
    raise ValueError(f"more than {max_seeds} seeds needed for delta={delta}, sd={sd}")


def minimum_detectable_difference(
    sd: float, n: int, power: float = 0.8, alpha: float = 0.05
) -> float:
    """The smallest true difference `delta > 0` that `n` seeds detect with probability `power`
    (the root of `paired_t_power(delta, sd, n, alpha) = power`)."""
    from scipy.optimize import brentq

    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power}")
    _check_alpha(alpha)
    if power <= alpha:
        raise ValueError(f"power={power} must exceed alpha={alpha}")
    high = sd
    while paired_t_power(high, sd, n, alpha) < power:
        high *= 2
    return float(brentq(lambda d: paired_t_power(d, sd, n, alpha) - power, 0.0, high, xtol=1e-12))
