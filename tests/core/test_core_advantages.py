"""Hand-computed advantages for each kind (`docs/METHODS.md`, "Advantages")."""

import math

import pytest
import torch

from gmc_grpo import advantages


def test_centered_loo_std_on_a_hand_worked_group():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    centered = advantages.compute(rewards, "centered")
    assert torch.allclose(centered, torch.tensor([[0.5, -0.5, -0.5, 0.5]]))
    loo = advantages.compute(rewards, "loo")
    # r_1 - mean(r_2, r_3, r_4) = 1 - 1/3 = 2/3
    assert torch.allclose(loo, torch.tensor([[2 / 3, -2 / 3, -2 / 3, 2 / 3]]))
    std = advantages.compute(rewards, "std")
    sample_std = math.sqrt(1 / 3)
    assert torch.allclose(std, torch.tensor([[0.5, -0.5, -0.5, 0.5]]) / (sample_std + 1e-4))


def test_loo_equals_explicit_leave_one_out_loop():
    gen = torch.Generator().manual_seed(0)
    rewards = torch.rand(5, 7, generator=gen, dtype=torch.float64)
    loo = advantages.compute(rewards, "loo")
    for b in range(5):
        for i in range(7):
            others = torch.cat([rewards[b, :i], rewards[b, i + 1 :]])
            assert loo[b, i].item() == pytest.approx((rewards[b, i] - others.mean()).item())


def test_std_kind_skips_constant_groups():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    out = advantages.compute(rewards, "std")
    assert torch.equal(out[0], torch.zeros(3))
    assert out[1, 1] > 0


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="advantage kind must be one of"):
        advantages.compute(torch.zeros(1, 2), "mean")
    with pytest.raises(ValueError, match="G >= 2"):
        advantages.compute(torch.zeros(3, 1), "loo")
