"""VCPO's step size and baseline, GAC's projection: hand-computed batches."""

import math

import pytest
import torch

from gmc_grpo.hooks import GACState, gac_project, vcpo_baseline_advantages, vcpo_step_scale


def test_vcpo_step_scale_on_a_hand_batch():
    rho = torch.tensor([[1.0, 2.0], [3.0, 2.0]], dtype=torch.float64)
    ess = rho.sum() ** 2 / (4 * (rho**2).sum())  # 64 / (4 * 18) = 8/9
    assert ess.item() == pytest.approx(8 / 9)
    assert vcpo_step_scale(rho.log()) == pytest.approx(math.sqrt(8 / 9))
    assert vcpo_step_scale(torch.zeros(3, 4)) == pytest.approx(1.0)
    assert vcpo_step_scale(rho.log(), rho_ref=0.5) == pytest.approx(1.0)  # min(1, ESS/rho_ref)


def test_vcpo_step_scale_is_finite_for_huge_ratios():
    s = torch.tensor([[5000.0, 0.0, -3000.0, 10.0]])
    assert vcpo_step_scale(s) == pytest.approx(math.sqrt(0.25), rel=1e-9)


def test_vcpo_baseline_matches_the_formula():
    rewards = torch.tensor([[1.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
    rho = torch.tensor([[1.0, 2.0, 0.5, 1.0]], dtype=torch.float64)
    norms = torch.tensor([[4.0, 1.0, 2.0, 3.0]], dtype=torch.float64)
    w = rho**2 * norms
    baseline = (w * rewards).sum() / (w.sum() + 1e-8)
    sigma = rewards.std(unbiased=True)
    expected = (rewards - baseline) / sigma
    got = vcpo_baseline_advantages(rewards, rho.log(), norms)
    assert torch.allclose(got.double(), expected, atol=1e-6)


def test_gac_removes_exactly_the_parallel_component_above_the_upper_threshold():
    state = GACState()
    g1 = torch.tensor([1.0, 0.0, 0.0])
    out, info = gac_project(g1, state)
    assert torch.equal(out, g1) and info["gac/removed_frac"] == 0.0
    g2 = torch.tensor([2.0, 1.0, 0.0])  # cosine 2/sqrt(5) = 0.894 > 0.30
    out, info = gac_project(g2, state)
    assert info["gac/cosine"] == pytest.approx(2 / math.sqrt(5))
    assert info["gac/removed_frac"] == 1.0
    assert torch.allclose(out, torch.tensor([0.0, 1.0, 0.0]))
    assert torch.equal(state.previous_gradient, g2)  # the raw gradient is remembered


def test_gac_ramp_and_no_change_below_lower_threshold():
    state = GACState(previous_gradient=torch.tensor([1.0, 0.0]))
    angle = math.acos(0.175)  # midway between 0.05 and 0.30
    g = torch.tensor([math.cos(angle), math.sin(angle)], dtype=torch.float32)
    out, info = gac_project(g, state)
    assert info["gac/removed_frac"] == pytest.approx(0.5, abs=1e-5)
    assert out[0].item() == pytest.approx(0.5 * math.cos(angle), abs=1e-6)
    state = GACState(previous_gradient=torch.tensor([1.0, 0.0]))
    g = torch.tensor([0.04, 1.0])  # cosine ~ 0.04 < 0.05
    out, info = gac_project(g, state)
    assert torch.equal(out, g) and info["gac/removed_frac"] == 0.0
