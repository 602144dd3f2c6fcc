"""Interval statistics shared by the toy analyses, the LM bias measurement and the figures
(quantiles from `scipy.stats`).

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

**Block vectors** (`gram_matrix`, `two_sample_u`, `jackknife_interval`, `gram_statistics`;
`llm_runs.lm_bias` measures with them): with `K` i.i.d. block estimates `x_k` of a vector mean
and `K0` i.i.d. blocks `y_j` of another, independent of them,

    U = sum_{k != k'} <x_k, x_k'> / (K (K-1)) - 2 <x_bar, y_bar> + sum_{j != j'} <y_j, y_j'> / (K0 (K0-1))

is unbiased for `||E x - E y||^2` (the Monte Carlo noise of both means removed, not just shrunk),
computed from the Gram matrix of all the blocks. Its interval is normal with the two-sample
delete-one jackknife variance (one block of either sample left out at a time). `torch` is imported
inside these functions, so that `gmc-grpo theory` (which reads this module) never loads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor


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


# ----------------------------------------------------------------------------------------------
# Statistics of block vectors, from their Gram matrix (module docstring)
# ----------------------------------------------------------------------------------------------


def normal_interval(value: float, se: float, level: float = 0.95) -> dict[str, float]:
    """`{value, lo, hi, se}`: the normal interval `value -+ z se` at confidence `level`."""
    z = normal_quantile(level)
    return {"value": value, "lo": value - z * se, "hi": value + z * se, "se": se}


def mean_interval(values: Sequence[float | None], level: float = 0.95) -> dict[str, float]:
    """Normal interval for the mean of i.i.d. block values: `{value, lo, hi, se}`.

    `None` and non-finite values are dropped; with no value every entry is NaN, with one the
    standard error is infinite.
    """
    x = [v for v in values if v is not None and math.isfinite(v)]
    if not x:
        return {"value": math.nan, "lo": math.nan, "hi": math.nan, "se": math.nan}
    mean = sum(x) / len(x)
    se = (
        math.sqrt(sum((v - mean) ** 2 for v in x) / (len(x) - 1) / len(x))
        if len(x) > 1
        else math.inf
    )
    return normal_interval(mean, se, level)


def independent_difference(
    a: Mapping[str, float], b: Mapping[str, float], level: float = 0.95
) -> dict[str, float]:
    """`a - b` of two independent estimates `{value, se, ...}`: `{value, lo, hi, se}`, the
    normal interval of the summed variances."""
    return normal_interval(a["value"] - b["value"], math.sqrt(a["se"] ** 2 + b["se"] ** 2), level)


def interval_sign(interval: Mapping[str, float]) -> str:
    """Where an interval `{lo, hi}` lies: `"above 0"`, `"below 0"` or `"not resolved"`."""
    if interval["lo"] > 0:
        return "above 0"
    if interval["hi"] < 0:
        return "below 0"
    return "not resolved"


def gram_matrix(vectors: Sequence[Tensor], chunk: int = 1 << 16) -> Tensor:
    """`[N, N]` float64 inner products of `N` vectors `[P]` (accumulated over chunks of `P`)."""
    import torch

    stacked = torch.stack(list(vectors))
    gram = torch.zeros(len(vectors), len(vectors), dtype=torch.float64)
    for start in range(0, stacked.shape[1], chunk):
        part = stacked[:, start : start + chunk].double()
        gram += part @ part.T
    return gram


def offdiag_mean(block: Tensor) -> Tensor:
    """Mean of the off-diagonal entries of a square `[K, K]` block (K >= 2): the unbiased
    estimate of `||E x||^2` from the Gram matrix of `K` i.i.d. vectors."""
    k = block.shape[0]
    return (block.sum() - block.diagonal().sum()) / (k * (k - 1))


def two_sample_u(gram: Tensor, x: Sequence[int], y: Sequence[int]) -> Tensor:
    """`U` of the module docstring: unbiased for `||E x - E y||^2`, from the Gram matrix `[N, N]`
    of all block vectors and the indices of the `x` and `y` blocks (at least 2 each)."""
    import torch

    xi, yi = torch.as_tensor(list(x)), torch.as_tensor(list(y))
    gxx, gyy = gram[xi][:, xi], gram[yi][:, yi]
    return offdiag_mean(gxx) - 2 * gram[xi][:, yi].mean() + offdiag_mean(gyy)


def jackknife_interval(
    statistic: Callable[[list[int], list[int]], Any],
    x: Iterable[int],
    y: Iterable[int],
    level: float,
) -> dict[str, float]:
    """`{value, lo, hi, se}`: `statistic(x, y)` with a normal interval from the two-sample
    delete-one jackknife (each `x` block left out, then each `y` block; variances added).

    statistic: a function of two index lists (the blocks kept of each sample) returning a
    number; x, y: the indices of the two samples' blocks (a sample of fewer than 3 blocks adds
    no variance).
    """
    x, y = list(x), list(y)
    value = float(statistic(x, y))
    var = 0.0
    for sample, other, first in ((x, y, True), (y, x, False)):
        n = len(sample)
        if n < 3:
            continue
        leave = [
            float(
                statistic(sample[:k] + sample[k + 1 :], other)
                if first
                else statistic(other, sample[:k] + sample[k + 1 :])
            )
            for k in range(n)
        ]
        mean = sum(leave) / n
        var += (n - 1) / n * sum((v - mean) ** 2 for v in leave)
    se = math.sqrt(var)
    z = normal_quantile(level)
    return {"value": value, "lo": value - z * se, "hi": value + z * se, "se": se}


def gram_statistics(
    gram: Tensor,
    methods: dict[str, list[int]],
    target: list[int],
    level: float,
    pairs: Sequence[tuple[str, str]] = (("gmc", "tic"),),
) -> dict[str, Any]:
    """Squared bias (absolute and relative to `||E y||^2`) of each method's blocks against the
    target's, and the paired differences of `pairs`, all with jackknife intervals.

    gram: `[N, N]` float64 Gram matrix of all block vectors; methods: name -> indices of its
    `K` blocks (the same `K` for every method, block `k` of each from the same samples, so a
    pair's difference leaves out the same block of both); target: indices of the `K0` target
    blocks. Returns `{"target_norm_sq": interval, "methods": {name: {"bias_sq",
    "relative_bias_sq"}}, "paired": {"a - b": {"bias_sq", "relative_bias_sq"}}}`, each entry a
    `jackknife_interval`.
    """
    import torch

    norm = jackknife_interval(
        lambda _x, y: offdiag_mean(gram[torch.as_tensor(y)][:, torch.as_tensor(y)]),
        [],
        target,
        level,
    )
    out: dict[str, Any] = {"target_norm_sq": norm, "methods": {}, "paired": {}}
    for name, xs in methods.items():

        def bias(kx: list[int], ky: list[int], xs: list[int] = xs) -> Tensor:
            return two_sample_u(gram, [xs[k] for k in kx], ky)

        def relative(kx: list[int], ky: list[int], xs: list[int] = xs) -> Tensor:
            yi = torch.as_tensor(ky)
            return bias(kx, ky, xs) / offdiag_mean(gram[yi][:, yi])

        positions = list(range(len(xs)))
        out["methods"][name] = {
            "bias_sq": jackknife_interval(bias, positions, target, level),
            "relative_bias_sq": jackknife_interval(relative, positions, target, level),
        }
    for a, b in pairs:
        if a not in methods or b not in methods:
            continue
        xa, xb = methods[a], methods[b]

        def diff(kx: list[int], ky: list[int], xa: list[int] = xa, xb: list[int] = xb) -> Tensor:
            return two_sample_u(gram, [xa[k] for k in kx], ky) - two_sample_u(
                gram, [xb[k] for k in kx], ky
            )

        def rel_diff(kx: list[int], ky: list[int], xa=xa, xb=xb) -> Tensor:
            yi = torch.as_tensor(ky)
            return diff(kx, ky, xa, xb) / offdiag_mean(gram[yi][:, yi])

        positions = list(range(len(xa)))
        out["paired"][f"{a} - {b}"] = {
            "bias_sq": jackknife_interval(diff, positions, target, level),
            "relative_bias_sq": jackknife_interval(rel_diff, positions, target, level),
        }
    return out
