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


def test_method_advantages_is_the_one_dispatch_of_both_learners():
    """`method_advantages` (what the toy and the LLM learner call): the method's kind under
    "paper", the chosen kind otherwise, and a baseline hook with the learner's trajectory scores,
    asked for score norms only when the hook needs them."""
    import dataclasses

    from gmc_grpo.methods import Baseline, MethodSettings, get_method

    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0]], dtype=torch.float64)
    log_ratio = torch.tensor([[0.1, -0.2, 0.3, 0.0], [0.0, 0.5, -0.5, 0.2]], dtype=torch.float64)
    asked: list[bool] = []

    def scores(needs_score_norms: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        asked.append(needs_score_norms)
        return log_ratio, torch.ones_like(log_ratio) if needs_score_norms else None

    settings = MethodSettings()
    gmc, vcpo = get_method("gmc"), get_method("vcpo")
    got = advantages.method_advantages(gmc, "paper", rewards, settings, scores)
    assert torch.equal(got, advantages.compute(rewards, "loo")) and asked == []  # B.1: loo
    got = advantages.method_advantages(gmc, "std", rewards, settings, scores)
    assert torch.equal(got, advantages.compute(rewards, "std")) and asked == []
    got = advantages.method_advantages(vcpo, "centered", rewards, settings, scores)
    assert torch.equal(got, advantages.compute(rewards, "centered")) and asked == []
    # VCPO's baseline under "paper", with score norms (all one: the baseline is the
    # rho^2-weighted mean reward of the group, `gmc_grpo.hooks`)
    want = vcpo.baseline.compute(rewards, log_ratio, torch.ones_like(log_ratio), settings)
    got = advantages.method_advantages(vcpo, "paper", rewards, settings, scores)
    assert torch.equal(got, want) and asked == [True]
    # a baseline without score norms gets None
    seen = []
    plain = Baseline(lambda r, s, n, _: (seen.append(n), r - s)[1], needs_score_norms=False)
    spec = dataclasses.replace(gmc, baseline=plain)
    got = advantages.method_advantages(spec, "paper", rewards, settings, scores)
    assert torch.equal(got, rewards - log_ratio) and asked == [True, False] and seen == [None]
