"""Property and hand-computed tests of gmc_grpo.estimators (the weighted class, eq. 4-9)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import linprog

from gmc_grpo import estimators
from gmc_grpo.estimators import coefficients, group_diagnostics, log_coefficients, weights

EPS_VALUES = st.floats(min_value=1e-3, max_value=10.0)


def groups(max_abs: float = 50.0, min_g: int = 2, max_g: int = 32):
    """[B, G] float64 log-ratio arrays."""
    shape = st.tuples(st.integers(1, 4), st.integers(min_g, max_g))
    return shape.flatmap(
        lambda sh: arrays(
            np.float64, sh, elements=st.floats(-max_abs, max_abs, allow_nan=False, width=64)
        )
    )


@settings(max_examples=300, deadline=None)
@given(s=groups(), eps=EPS_VALUES)
def test_gmc_group_mass_is_capped(s, eps):
    c = coefficients("gmc", torch.tensor(s), eps)
    mass = c.mean(dim=-1)
    assert bool((mass <= (1 + eps) * (1 + 1e-9)).all())


@settings(max_examples=300, deadline=None)
@given(s=groups(max_abs=3.0), eps=EPS_VALUES)
def test_gmc_is_plain_is_below_the_cap(s, eps):
    log_ratio = torch.tensor(s)
    rho = log_ratio.exp()
    below = rho.mean(dim=-1) <= 1 + eps
    c = coefficients("gmc", log_ratio, eps)
    assert torch.allclose(c[below], rho[below], rtol=1e-12, atol=0)


@settings(max_examples=300, deadline=None)
@given(s=groups(), eps=EPS_VALUES)
def test_gmc_scale_is_common_to_the_group(s, eps):
    log_ratio = torch.tensor(s)
    log_w = log_coefficients("gmc", log_ratio, eps) - log_ratio
    spread = log_w.max(dim=-1).values - log_w.min(dim=-1).values
    assert float(spread.max()) <= 1e-9  # one alpha per group: direction preserved


@settings(max_examples=300, deadline=None)
@given(s=groups(), eps=EPS_VALUES)
def test_tic_keeps_or_drops_each_trajectory(s, eps):
    log_ratio = torch.tensor(s)
    rho = log_ratio.exp()
    c = coefficients("tic", log_ratio, eps)
    kept = rho <= 1 + eps
    assert torch.equal(c[kept], rho[kept])
    assert bool((c[~kept] == 0).all())


@settings(max_examples=300, deadline=None)
@given(s=groups(), eps=EPS_VALUES, trunc=st.floats(0.5, 20.0))
def test_every_coefficient_lies_between_zero_and_rho(s, eps, trunc):
    log_ratio = torch.tensor(s)
    rho = log_ratio.exp()
    for method in ("is", "tic", "gmc", "vcpo"):
        c = coefficients(method, log_ratio, eps, truncation=trunc)
        assert bool((c >= 0).all()), method
        assert bool((c <= rho * (1 + 1e-12)).all()), method
        w = weights(method, log_ratio, eps, truncation=trunc)
        assert bool(((w >= 0) & (w <= 1)).all()), method


@settings(max_examples=300, deadline=None)
@given(s=groups(max_abs=1e4), eps=EPS_VALUES)
def test_bounded_methods_are_finite_for_extreme_float32_ratios(s, eps):
    log_ratio = torch.tensor(s, dtype=torch.float32)
    group_size = log_ratio.shape[-1]
    bounds = {"gmc": group_size * (1 + eps), "tic": 1 + eps, "vcpo": estimators.VCPO_TRUNCATION}
    for method, bound in bounds.items():
        c = coefficients(method, log_ratio, eps)
        assert c.dtype == torch.float32
        assert bool(torch.isfinite(c).all()), method
        assert float(c.max()) <= bound * (1 + 1e-5), method
        diag = group_diagnostics(method, log_ratio, eps)
        assert not bool(diag["kept_mass"].isnan().any())


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    eps=EPS_VALUES,
    length=st.integers(1, 64),
    scale=st.sampled_from([0.1, 5.0, 200.0]),
)
def test_bf16_logprob_inputs_give_finite_coefficients(data, eps, length, scale):
    seed = data.draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    shape = (2, 4, length)
    logprobs = (-scale * torch.rand(shape, generator=gen)).to(torch.bfloat16)
    behavior = (-scale * torch.rand(shape, generator=gen)).to(torch.bfloat16)
    mask = torch.ones(shape, dtype=torch.bool)
    from gmc_grpo.logratio import trajectory_log_ratio

    s = trajectory_log_ratio(logprobs, behavior, mask)
    assert s.dtype == torch.float32
    for method in ("tic", "gmc", "vcpo"):
        assert bool(torch.isfinite(coefficients(method, s, eps)).all())


def test_infinite_eps_turns_gmc_and_tic_into_plain_is():
    log_ratio = torch.tensor([[-2.0, 0.3, 1.5, 4.0], [0.0, 0.0, 0.0, 10.0]], dtype=torch.float64)
    rho = log_ratio.exp()
    for method in ("gmc", "tic"):
        assert torch.equal(coefficients(method, log_ratio, math.inf), rho)


def test_hand_computed_coefficients():
    # rho = [0.5, 1, 2, 4]: rho_bar = 1.875 > 1.28, so GMC scales by alpha = 1.28 / 1.875.
    log_ratio = torch.log(torch.tensor([[0.5, 1.0, 2.0, 4.0]], dtype=torch.float64))
    alpha = 1.28 / 1.875
    expected = {
        "is": [0.5, 1.0, 2.0, 4.0],
        "tic": [0.5, 1.0, 0.0, 0.0],
        "gmc": [0.5 * alpha, alpha, 2 * alpha, 4 * alpha],
        "vcpo": [0.5, 1.0, 2.0, 3.0],  # truncation c = 3
    }
    for method, values in expected.items():
        got = coefficients(method, log_ratio, 0.28, truncation=3.0)
        assert torch.allclose(got, torch.tensor([values], dtype=torch.float64), atol=1e-12), method
    diag_gmc = group_diagnostics("gmc", log_ratio, 0.28)
    assert diag_gmc["removed_mass"].item() == pytest.approx(1.875 - 1.28, abs=1e-12)
    assert diag_gmc["kept_mass"].item() == pytest.approx(1.28, abs=1e-12)
    diag_tic = group_diagnostics("tic", log_ratio, 0.28)
    assert diag_tic["removed_mass"].item() == pytest.approx((2.0 + 4.0) / 4, abs=1e-12)


def test_unknown_method_and_bad_eps_raise_with_the_value():
    s = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="unknown trajectory method 'gcm'"):
        coefficients("gcm", s, 0.2)
    with pytest.raises(ValueError, match="eps must be > 0"):
        coefficients("gmc", s, -0.1)


# ---------------------------------------------------------------------------------------------
# Proposition 2: GMC's alpha* solves the linear program of eq. 8 over one scale per group.
# ---------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(s=groups(max_abs=4.0, max_g=16), eps=st.floats(0.01, 3.0))
def test_gmc_solves_the_linear_program_of_eq_8(s, eps):
    log_ratio = torch.tensor(s)
    c_gmc = coefficients("gmc", log_ratio, eps).numpy()
    rho = np.exp(s)
    for b in range(rho.shape[0]):
        r = rho[b]
        group_size = r.size
        # One scale alpha in [0, 1] (direction preserving): max (1/G) sum alpha rho_i s.t. cap.
        res = linprog(
            c=[-r.mean()], A_ub=[[r.mean()]], b_ub=[1 + eps], bounds=[(0, 1)], method="highs"
        )
        assert res.status == 0
        alpha_lp = res.x[0]
        assert c_gmc[b].mean() == pytest.approx(alpha_lp * r.mean(), rel=1e-7, abs=1e-9)
        # Any weights w_i in [0, 1] under the cap (direction preserving or not) keep no more.
        res_w = linprog(
            c=-r / group_size,
            A_ub=[r / group_size],
            b_ub=[1 + eps],
            bounds=[(0, 1)] * group_size,
            method="highs",
        )
        assert res_w.status == 0
        assert -res_w.fun <= c_gmc[b].mean() * (1 + 1e-7) + 1e-9
