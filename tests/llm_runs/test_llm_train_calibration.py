"""The simulated pipeline's mean lag and the calibration of the unit of `L`."""

from __future__ import annotations

import pytest

from llm_runs.calibration import calibrate_length_unit, simulate_mean_lag


def test_constant_length_mean_lag_includes_the_warmup_ramp():
    """L = 5.7 for every batch: steady-state lag 28 L ~ 160, but the first ~160 updates consume
    policy-0 batches with lags 0, 1, 2, ..., so the mean over 800 updates is ~ x - x^2 / 1600."""
    lag = simulate_mean_lag([570.0], 100.0, lam=28.0, steps=800, max_launches=400)
    x = 28 * 5.7
    assert lag == pytest.approx(x - x * x / 1600, abs=1.0)
    assert lag == pytest.approx(143.1, abs=0.05)


@pytest.mark.parametrize("target", [160.0, 140.0])
def test_calibrated_unit_reproduces_the_target_mean_lag(target):
    lengths = [420.0, 510.0, 560.0, 600.0, 650.0, 700.0, 820.0]
    unit = calibrate_length_unit(lengths, target)
    assert simulate_mean_lag(lengths, unit) == pytest.approx(target, abs=1.5)


def test_unreachable_target_is_refused():
    with pytest.raises(ValueError, match="out of reach"):
        calibrate_length_unit([500.0], 5000.0, steps=100)
