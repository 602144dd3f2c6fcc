"""Surrogate losses: autograd gradient == the estimator's hand formula; tiny exact cases."""

import math

import pytest
import torch

from gmc_grpo import advantages, estimators
from gmc_grpo.losses import PolicyLossConfig, policy_loss

ALL = ("is", "tic", "gmc", "vcpo", "grpo", "a3po")


def _random_batch(seed: int, B=3, G=4, T=6, scale=0.5):
    gen = torch.Generator().manual_seed(seed)
    logprobs = -torch.rand(B, G, T, generator=gen, dtype=torch.float64) * 2
    behavior = logprobs + scale * torch.randn(B, G, T, generator=gen, dtype=torch.float64)
    mask = torch.rand(B, G, T, generator=gen) > 0.25
    mask[..., 0] = True
    adv = torch.randn(B, G, generator=gen, dtype=torch.float64)
    lag = torch.randint(0, 5, (B, G), generator=gen)
    return logprobs, behavior, mask, adv, lag


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("aggregation", ["paper", "token_mean", "seq_mean_token_mean"])
@pytest.mark.parametrize("seed", range(5))
def test_autograd_equals_hand_formula(method, aggregation, seed):
    logprobs, behavior, mask, adv, lag = _random_batch(seed)
    logprobs.requires_grad_(True)
    config = PolicyLossConfig(method=method, aggregation=aggregation, max_length=8)
    loss, _ = policy_loss(logprobs, behavior, adv, mask, config, version_lag=lag)
    (grad,) = torch.autograd.grad(loss, logprobs)
    psi = estimators.token_gradient_weights(
        method,
        logprobs,
        behavior,
        adv,
        mask,
        version_lag=lag,
        aggregation=aggregation,
        max_length=8,
    )
    assert torch.allclose(grad, -psi, atol=1e-14, rtol=1e-10)


def test_gradient_through_a_real_parameter_matches_the_estimator():
    """Chain rule end to end: a tiny softmax policy, loss.backward() vs sum psi * score."""
    gen = torch.Generator().manual_seed(3)
    B, G, T, V = 2, 3, 4, 5
    logits = torch.randn(B, G, T, V, generator=gen, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(0, V, (B, G, T), generator=gen)
    mask = torch.ones(B, G, T, dtype=torch.bool)
    behavior = torch.log_softmax(torch.randn(B, G, T, V, generator=gen, dtype=torch.float64), -1)
    behavior = behavior.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    adv = advantages.compute(torch.rand(B, G, generator=gen, dtype=torch.float64), "loo")
    logprobs = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    loss, _ = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="gmc", eps=0.1))
    loss.backward()
    psi = estimators.token_gradient_weights("gmc", logprobs, behavior, adv, mask, eps=0.1)
    score = torch.nn.functional.one_hot(tokens, V) - torch.softmax(logits.detach(), -1)
    assert torch.allclose(logits.grad, -(psi.unsqueeze(-1) * score), atol=1e-14)


def test_infinite_eps_reduces_gmc_and_tic_losses_to_plain_is():
    logprobs, behavior, mask, adv, _ = _random_batch(7, scale=2.0)
    reference, _ = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="is"))
    for method in ("gmc", "tic"):
        loss, diag = policy_loss(
            logprobs, behavior, adv, mask, PolicyLossConfig(method=method, eps=math.inf)
        )
        assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
        assert diag["ratio/capped_frac"].item() == 0.0


def test_hand_computed_trajectory_losses():
    # B=1, G=4, T=2; token log-ratios put all of s_i on the first token.
    rho = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    logprobs = torch.tensor(
        [[[-1.0, -2.0], [-0.5, -0.5], [-3.0, -1.0], [-2.0, -2.0]]], dtype=torch.float64
    )
    behavior = logprobs.clone()
    behavior[..., 0] -= rho.log()
    mask = torch.ones(1, 4, 2, dtype=torch.bool)
    adv = torch.tensor([[1.0, -1.0, 0.5, -0.5]], dtype=torch.float64)
    seq_lp = torch.tensor([-3.0, -1.0, -4.0, -4.0], dtype=torch.float64)
    alpha = 1.28 / 1.875
    coef = {
        "is": rho,
        "tic": torch.tensor([0.5, 1.0, 0.0, 0.0], dtype=torch.float64),
        "gmc": rho * alpha,
        "vcpo": torch.tensor([0.5, 1.0, 2.0, 3.0], dtype=torch.float64),
    }
    for method, c in coef.items():
        config = PolicyLossConfig(method=method, eps=0.28, truncation=3.0)
        loss, diag = policy_loss(logprobs, behavior, adv, mask, config)
        expected = -(c * adv[0] * seq_lp).sum() / (2 * 1 * 4)
        assert loss.item() == pytest.approx(expected.item(), rel=1e-6), method
    _, diag = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="gmc"))
    assert diag["ratio/capped_frac"].item() == 1.0
    assert diag["ratio/removed_mass"].item() == pytest.approx(1.875 - 1.28, rel=1e-6)
    assert diag["ratio/log_max"].item() == pytest.approx(math.log(4.0), rel=1e-6)


def test_hand_computed_grpo_token_clip():
    # One group of two responses with one token each... and a padded second token.
    ratios = torch.tensor([[[0.5, 1.5], [1.1, 1.5]]], dtype=torch.float64)
    logprobs = torch.zeros(1, 2, 2, dtype=torch.float64, requires_grad=True)
    behavior = -ratios.log()
    mask = torch.tensor([[[True, True], [True, False]]])
    adv = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    loss, diag = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="grpo"))
    # A=+1: min(0.5, 0.8)=0.5 (active), min(1.5, 1.2)=1.2 (clipped); A=-1: r=1.1 -> -1.1 (active)
    expected = -(0.5 + 1.2 - 1.1) / (2 * 1 * 2)
    assert loss.item() == pytest.approx(expected, rel=1e-12)
    (grad,) = torch.autograd.grad(loss, logprobs)
    assert grad[0, 0, 0].item() == pytest.approx(-0.5 / 4)
    assert grad[0, 0, 1].item() == 0.0
    assert grad[0, 1, 0].item() == pytest.approx(1.1 / 4)
    assert diag["ratio/clipped_token_frac"].item() == pytest.approx(1 / 3)


def test_grpo_keeps_large_ratios_with_negative_advantage():
    """§3: for A < 0 the token clip keeps the gradient of arbitrarily large ratios."""
    logprobs = torch.zeros(1, 2, 1, dtype=torch.float64, requires_grad=True)
    behavior = torch.tensor([[[-10.0], [0.0]]], dtype=torch.float64)  # r = e^10 for the first
    adv = torch.tensor([[-1.0, 1.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, 1, dtype=torch.bool)
    loss, _ = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="grpo"))
    (grad,) = torch.autograd.grad(loss, logprobs)
    assert grad[0, 0, 0].item() == pytest.approx(math.exp(10) / 2)


def test_a3po_hand_case_and_masking():
    # d = 2: log(pi_prox/mu) = delta / 2. delta = log 4 -> prox weight 2, r = pi/pi_prox = 2.
    logprobs = torch.zeros(1, 2, 1, dtype=torch.float64, requires_grad=True)
    behavior = torch.tensor([[[-math.log(4.0)], [-math.log(144.0)]]], dtype=torch.float64)
    adv = torch.tensor([[-1.0, -1.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, 1, dtype=torch.bool)
    lag = torch.tensor([[2, 2]])
    loss, diag = policy_loss(
        logprobs, behavior, adv, mask, PolicyLossConfig(method="a3po"), version_lag=lag
    )
    # first: 2 * min(2 * -1, 1.2 * -1) = -4; second: prox weight 12 > 5 -> masked
    assert loss.item() == pytest.approx(4.0 / 2, rel=1e-12)
    assert diag["a3po/masked_token_frac"].item() == 0.5
    (grad,) = torch.autograd.grad(loss, logprobs)
    # gradient of the active token is (pi/mu) A / norm = 4 * -1 / 2, negated
    assert grad[0, 0, 0].item() == pytest.approx(4.0 / 2)
    assert grad[0, 1, 0].item() == 0.0


def test_lag_zero_a3po_and_on_policy_ratios_are_one():
    logprobs, _, mask, adv, _ = _random_batch(1)
    for method in ALL:
        _, diag = policy_loss(
            logprobs,
            logprobs.clone(),
            adv,
            mask,
            PolicyLossConfig(method=method),
            version_lag=torch.zeros(adv.shape, dtype=torch.long),
        )
        assert diag["ratio/log_max"].item() == 0.0
        assert diag["ratio/ess"].item() == pytest.approx(1.0)
        frac = diag.get("ratio/capped_frac", diag.get("ratio/clipped_token_frac"))
        assert frac.item() == 0.0


def test_config_and_input_errors_name_the_field():
    with pytest.raises(ValueError, match="PolicyLossConfig.method"):
        PolicyLossConfig(method="ppo")
    with pytest.raises(ValueError, match="PolicyLossConfig.eps"):
        PolicyLossConfig(eps=0.0)
    with pytest.raises(ValueError, match="PolicyLossConfig.aggregation"):
        PolicyLossConfig(aggregation="sum")
    logprobs, behavior, mask, adv, _ = _random_batch(0)
    bad = behavior.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="behavior_logprobs has 1 non-finite"):
        policy_loss(logprobs, bad, adv, mask, PolicyLossConfig())
    with pytest.raises(ValueError, match="group size G must be >= 2"):
        policy_loss(logprobs[:, :1], behavior[:, :1], adv[:, :1], mask[:, :1], PolicyLossConfig())
    with pytest.raises(ValueError, match="needs version_lag"):
        policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="a3po"))


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_minus_inf_at_padded_positions_changes_neither_loss_nor_gradient(method, dtype):
    """An engine may report log pi = -inf for a pad token: the loss must stay the value and the
    gradient of the same batch with finite padding (a product with the mask gives NaN)."""
    logprobs, behavior, mask, adv, lag = _random_batch(7)
    assert (~mask).any()
    config = PolicyLossConfig(method=method, max_length=8)

    def loss_and_grad(pad_logprob: float, pad_behavior: float):
        lp = torch.where(mask, logprobs, pad_logprob).to(dtype).requires_grad_(True)
        mu = torch.where(mask, behavior, pad_behavior).to(dtype)
        loss, diagnostics = policy_loss(lp, mu, adv.to(dtype), mask, config, version_lag=lag)
        (grad,) = torch.autograd.grad(loss, lp)
        return loss.detach(), grad, diagnostics

    clean_loss, clean_grad, clean_diag = loss_and_grad(0.0, 0.0)
    for pads in ((-math.inf, 0.0), (-math.inf, -math.inf), (0.0, -math.inf)):
        loss, grad, diagnostics = loss_and_grad(*pads)
        assert torch.isfinite(loss) and torch.isfinite(grad).all()
        assert torch.equal(loss, clean_loss) and torch.equal(grad, clean_grad)
        assert grad[~mask].abs().max() == 0
        for name, value in diagnostics.items():
            assert torch.equal(value, clean_diag[name]), name


def test_verl_loss_matrix_is_finite_with_minus_inf_padding():
    from gmc_grpo.integrations.verl import loss_matrix

    logprobs, behavior, mask, adv, _ = _random_batch(8)
    lp, old, mask = logprobs.reshape(12, 6), behavior.reshape(12, 6), mask.reshape(12, 6)
    token_adv = adv.reshape(12, 1).expand(12, 6)
    coef = torch.rand(12, 1, dtype=torch.float64).expand(12, 6) * mask
    clean = lp.clone().requires_grad_(True)
    want, want_drift = loss_matrix(old, clean, token_adv, mask, coef)
    padded = torch.where(mask, lp, -math.inf).requires_grad_(True)
    got, drift = loss_matrix(torch.where(mask, old, -math.inf), padded, token_adv, mask, coef)
    assert torch.isfinite(got).all() and torch.equal(drift, want_drift)
    assert torch.equal(got, want.detach())
    got.sum().backward()
    want.sum().backward()
    assert torch.equal(padded.grad, clean.grad)


def test_group_weight_concentration_hand_values():
    from gmc_grpo.logratio import group_weight_concentration

    share, ess = group_weight_concentration(torch.log(torch.tensor([[1.0, 1.0, 2.0], [3.0] * 3])))
    assert share.tolist() == pytest.approx([0.5, 1 / 3])
    assert ess.tolist() == pytest.approx([8 / 9, 1.0])  # (1+1+2)^2 / (3 * 6)
    # rho of 200 nats: no overflow, one response holds the whole group
    share, ess = group_weight_concentration(torch.tensor([[200.0, 0.0, 0.0, 0.0]]))
    assert share.item() == pytest.approx(1.0) and ess.item() == pytest.approx(0.25)
    # a group whose responses all carry weight 0 (TIC dropped them all): no effective sample
    share, ess = group_weight_concentration(torch.full((1, 3), -math.inf))
    assert share.item() == 0.0 and ess.item() == 0.0


def test_group_concentration_of_ratios_and_of_applied_weights():
    """One group, rho = (4, 1, 1, 1), G = 4, eps = 0.28: the largest share of the ratios is
    4/7 and their ESS 49 / (4 * 19); GMC scales the group as a whole (same shares), TIC
    drops rho_1 > 1.28 (weights 0, 1, 1, 1: share 1/3, ESS 9 / (4 * 3) = 3/4)."""
    T = 2
    behavior = torch.zeros(1, 4, T, dtype=torch.float64)
    logprobs = behavior.clone()
    logprobs[0, 0, 0] = math.log(4.0)
    mask = torch.ones(1, 4, T, dtype=torch.bool)
    adv = torch.tensor([[1.0, -1.0, 0.5, -0.5]], dtype=torch.float64)
    for method in ("gmc", "tic"):
        _, diag = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method=method))
        assert diag["ratio/group_share_max"].item() == pytest.approx(4 / 7, rel=1e-6)
        assert diag["ratio/group_ess_min"].item() == pytest.approx(49 / 76, rel=1e-6)
        assert diag["ratio/group_ess_mean"].item() == pytest.approx(49 / 76, rel=1e-6)
    _, gmc = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="gmc"))
    assert gmc["weight/group_share_max"].item() == pytest.approx(4 / 7, rel=1e-6)
    _, tic = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="tic"))
    assert tic["weight/group_share_max"].item() == pytest.approx(1 / 3, rel=1e-6)
    assert tic["weight/group_ess_min"].item() == pytest.approx(3 / 4, rel=1e-6)
    _, grpo = policy_loss(logprobs, behavior, adv, mask, PolicyLossConfig(method="grpo"))
    assert "weight/group_share_max" not in grpo  # token-level: no trajectory weight
