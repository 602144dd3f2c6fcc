"""`gmc_grpo.stats`: paired t tests, Holm's adjustment and the power of a paired design, against
hand-worked numbers."""

from __future__ import annotations

import math

import pytest

from gmc_grpo.stats import (
    holm_adjust,
    minimum_detectable_difference,
    paired_t_power,
    paired_t_test,
    paired_test,
    seeds_for_power,
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
