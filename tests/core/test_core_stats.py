"""`gmc_grpo.stats`: paired t tests, Holm's adjustment and the power of a paired design, against
hand-worked numbers; the Gram-matrix statistics of block vectors (`gram_statistics`: the LM
bias measurement's) by hand."""

from __future__ import annotations

import math

import pytest

from gmc_grpo.stats import (
    gram_matrix,
    gram_statistics,
    holm_adjust,
    independent_difference,
    interval_sign,
    jackknife_interval,
    mean_interval,
    minimum_detectable_difference,
    normal_quantile,
    paired_t_power,
    paired_t_test,
    paired_test,
    seeds_for_power,
    two_sample_u,
)


def test_holm_on_a_known_p_vector():
    # sorted: 0.005 x4 = 0.02; 0.01 x3 = 0.03; 0.03 x2 = 0.06; 0.04 x1 = 0.04 -> max(0.06, 0.04)
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # capped at 1, NaN left out of m: m = 2 here
    adjusted = holm_adjust([0.6, math.nan, 0.2])
    assert adjusted[0] == pytest.approx(0.6) and adjusted[2] == pytest.approx(0.4)
    assert math.isnan(adjusted[1])
    assert holm_adjust([0.9, 0.8]) == pytest.approx([1.0, 1.0])  # 2 x 0.8 capped at 1
    assert holm_adjust([]) == []


def test_paired_t_test_by_hand():
    # d = 1, 2, 3, 4: mean 2.5, sd sqrt(5/3), t = 2.5 / (sd / 2) = 3.873, df 3
    out = paired_t_test([1.0, 2.0, 3.0, 4.0])
    assert out["mean"] == 2.5 and out["n"] == 4
    assert out["sd"] == pytest.approx(math.sqrt(5 / 3))
    assert out["t"] == pytest.approx(3.872983346)
    assert out["p"] == pytest.approx(0.030466, abs=1e-5)  # 2 * P(T_3 > 3.873)
    # the interval excludes 0 exactly when p < 0.05
    assert out["lo"] > 0
    pair = paired_test({0: 3.0, 1: 5.0, 2: 1.0}, {0: 1.0, 1: 2.0, 2: 2.0, 3: 9.0})
    assert pair["n"] == 3 and pair["mean"] == pytest.approx(4 / 3)
    assert math.isnan(paired_t_test([1.0])["p"])
    assert paired_t_test([0.5, 0.5])["p"] == 0.0


def test_power_against_scipys_noncentral_t_and_a_table_value():
    from scipy.stats import nct
    from scipy.stats import t as student_t

    # n = 10, effect delta / sd = 1: power 0.803 (the classic table value, two-sided 5%)
    power = paired_t_power(1.0, 1.0, 10)
    critical = student_t.ppf(0.975, 9)
    by_hand = nct.sf(critical, 9, math.sqrt(10)) + nct.cdf(-critical, 9, math.sqrt(10))
    assert power == pytest.approx(by_hand, rel=1e-12)
    assert power == pytest.approx(0.8031, abs=5e-4)
    assert paired_t_power(-1.0, 1.0, 10) == pytest.approx(power)  # two-sided: symmetric
    assert paired_t_power(0.0, 1.0, 10) == pytest.approx(0.05)  # size of the test


def test_seeds_and_minimum_detectable_difference():
    # effect 1: 10 seeds give 0.803 >= 0.8, 9 give less
    assert seeds_for_power(1.0, 1.0, power=0.8) == 10
    assert paired_t_power(1.0, 1.0, 9) < 0.8
    mdd = minimum_detectable_difference(1.0, 10, power=0.8)
    assert paired_t_power(mdd, 1.0, 10) == pytest.approx(0.8, abs=1e-9)
    assert 0.98 < mdd < 1.0  # just below the effect 1 that has power 0.803
    assert minimum_detectable_difference(2.0, 10) == pytest.approx(2 * mdd)  # scales with sd
    with pytest.raises(ValueError, match="n >= 2"):
        paired_t_power(1.0, 1.0, 1)
    with pytest.raises(ValueError, match="delta"):
        seeds_for_power(0.0, 1.0)


def test_two_sample_u_by_hand():
    import torch

    # x blocks 1, 2, 3 and y blocks 0, 2 (scalars): sum_{k != k'} x_k x_k' = 2 * (2 + 3 + 6) = 22
    # -> 22 / 6; <x_bar, y_bar> = 2 * 1 = 2; sum_{j != j'} y_j y_j' = 0 -> U = 11/3 - 4 + 0
    vectors = [torch.tensor([v]) for v in (1.0, 2.0, 3.0, 0.0, 2.0)]
    gram = gram_matrix(vectors)
    assert gram.shape == (5, 5) and gram.dtype == torch.float64
    assert float(two_sample_u(gram, [0, 1, 2], [3, 4])) == pytest.approx(11 / 3 - 4)
    # unbiased for (E x - E y)^2: exact when both samples are constant (no noise)
    const = gram_matrix([torch.tensor([2.0, 1.0])] * 3 + [torch.tensor([0.5, 0.0])] * 3)
    assert float(two_sample_u(const, [0, 1, 2], [3, 4, 5])) == pytest.approx(1.5**2 + 1.0)
    # the chunked accumulation is the plain product
    wide = torch.randn(4, 10, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(gram_matrix(list(wide), chunk=3), wide.double() @ wide.double().T)


def test_jackknife_of_a_mean_is_the_standard_error():
    # the delete-one jackknife variance of a mean is exactly s^2 / n
    values = [1.0, 4.0, 2.0, 8.0, 5.0]
    out = jackknife_interval(lambda x, _y: sum(values[i] for i in x) / len(x), range(5), [], 0.95)
    mean = sum(values) / 5
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 4)
    assert out["value"] == pytest.approx(mean) and out["se"] == pytest.approx(sd / math.sqrt(5))
    z = normal_quantile(0.95)
    assert out["lo"] == pytest.approx(mean - z * out["se"])


def test_gram_statistics_of_constant_blocks_is_the_exact_squared_bias():
    import torch

    # no noise: every method's squared bias is ||x - y||^2 exactly, with a zero-width interval
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.0])
    gram = gram_matrix([y] * 4 + [x] * 3 + [y] * 3)  # target 0-3, "a" 4-6, "b" 7-9
    stats = gram_statistics(
        gram, {"a": [4, 5, 6], "b": [7, 8, 9]}, [0, 1, 2, 3], 0.95, [("a", "b")]
    )
    assert stats["target_norm_sq"]["value"] == pytest.approx(1.0)
    assert stats["methods"]["a"]["bias_sq"]["value"] == pytest.approx(2.0)
    assert stats["methods"]["a"]["relative_bias_sq"]["value"] == pytest.approx(2.0)
    assert stats["methods"]["b"]["bias_sq"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert stats["paired"]["a - b"]["bias_sq"]["value"] == pytest.approx(2.0)
    assert stats["methods"]["a"]["bias_sq"]["se"] == pytest.approx(0.0, abs=1e-12)


def test_mean_interval_difference_and_sign():
    out = mean_interval([1.0, None, 3.0, math.nan], 0.95)
    assert out["value"] == 2.0 and out["se"] == pytest.approx(1.0)  # sd sqrt(2) / sqrt(2)
    assert math.isinf(mean_interval([5.0])["se"]) and math.isnan(mean_interval([])["value"])
    diff = independent_difference({"value": 3.0, "se": 3.0}, {"value": 1.0, "se": 4.0}, 0.95)
    assert diff["value"] == 2.0 and diff["se"] == pytest.approx(5.0)
    assert interval_sign({"lo": 0.1, "hi": 1}) == "above 0"
    assert interval_sign({"lo": -1, "hi": -0.1}) == "below 0"
    assert interval_sign({"lo": -1, "hi": 1}) == "not resolved"
