"""The theory's exact coefficients equal the core's, method by method (issue 33, item 4).

The core computes `c_i` once (`gmc_grpo.estimators.coefficients`: torch, log space, any group
shape); the theory computes the same `c_i` in float64 numpy ratio space on exact small problems
(`theory.exact.class_coefficients`, which both exact engines, `theory.divergences` and the
closed forms for `G = 1` use). This one parametrised test checks every theory version against the
core on random groups, groups on both sides of the cap and extreme ratios: the coefficients, the
group removed mass `(1/G) sum_i (rho_i - c_i)` (GMC's closed form `(rho_bar - (1+eps))_+`, TIC's
dropped mass) and the single-token (`G = 1`) forms of `theory.exact.single_token_moments`.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from gmc_grpo.defaults import PAPER_EPS
from gmc_grpo.estimators import coefficients, group_diagnostics
from theory.divergences import gmc_removed_mass, gmc_single_removed_mass, tic_removed_mass
from theory.exact import CLASS_METHODS, class_coefficients, single_token_moments

TRUNCATION = 1.5  # VCPO's c, inside the class at eps = 0.5
RTOL = 1e-12


def ratio_groups(eps: float) -> np.ndarray:
    """`[N, 4]` groups of ratios: random (log-normal, sigma 2), just below and above the cap
    `1 + eps` (TIC's edge; GMC's group mass at the cap) and extreme (e^-30 .. e^30)."""
    gen = np.random.default_rng(0)
    random = np.exp(2.0 * gen.standard_normal((64, 4)))
    cap = 1.0 + eps
    edges = np.array(
        [
            [cap * (1 - 1e-9), cap * (1 + 1e-9), 0.5, 1.0],
            [cap * (1 + 1e-9)] * 4,  # group mean just above the cap: GMC scales it
            [cap * (1 - 1e-9)] * 4,  # just below: GMC keeps it
            [np.exp(30.0), np.exp(-30.0), 1.0, np.exp(-5.0)],
        ]
    )
    return np.concatenate([random, edges])


def core(method: str, rho: np.ndarray, eps: float) -> dict[str, np.ndarray]:
    s = torch.from_numpy(np.log(rho))
    kw = {"truncation": TRUNCATION}
    diag = group_diagnostics(method, s, eps, **kw)
    return {
        "c": coefficients(method, s, eps, **kw).numpy(),
        "removed": diag["removed_mass"].numpy(),
    }


@pytest.mark.parametrize("eps", [0.05, PAPER_EPS, 0.5])
@pytest.mark.parametrize("method", CLASS_METHODS)
def test_theory_coefficients_equal_the_core(method: str, eps: float) -> None:
    rho = ratio_groups(eps)
    want = core(method, rho, eps)
    vcpo_cap = TRUNCATION if method == "vcpo" else None

    # the coefficients and the group removed mass (both exact engines use class_coefficients)
    got = class_coefficients(rho, eps, method, vcpo_cap)
    np.testing.assert_allclose(got, want["c"], rtol=RTOL, atol=0)
    np.testing.assert_allclose((rho - got).mean(-1), want["removed"], rtol=1e-9, atol=1e-15)
    # the counts engine's form: GMC's group mean given apart from the ratios
    rho_bar = rho.mean(-1, keepdims=True)
    np.testing.assert_array_equal(
        class_coefficients(rho, eps, method, vcpo_cap, rho_bar=rho_bar), got
    )

    # theory.divergences' removed masses over i.i.d. groups from mu: the core's, enumerated
    mu = np.array([0.5, 0.3, 0.2])
    pi = np.array([0.1, 0.3, 0.6])
    if method == "tic":
        expected = float(mu @ core(method, (pi / mu)[:, None], eps)["removed"])
        assert tic_removed_mass(mu, pi, eps) == pytest.approx(expected, rel=RTOL)
    if method == "gmc":
        for group_size in (1, 2, 3):
            idx = np.array(list(itertools.product(range(3), repeat=group_size)))
            weight = np.prod(mu[idx], axis=1)
            expected = float(weight @ core(method, (pi / mu)[idx], eps)["removed"])
            got_mass = gmc_removed_mass(mu, pi, eps, group_size=group_size)
            assert got_mass == pytest.approx(expected, rel=1e-9)
        single = float(mu @ core(method, (pi / mu)[:, None], eps)["removed"])
        assert gmc_single_removed_mass(mu, pi, eps) == pytest.approx(single, rel=1e-9)

    # single_token_moments' G = 1 coefficients (through its removed mass E_m[rho - c])
    if method in ("tic", "gmc"):
        logits = np.log(pi)[None, :]
        behavior = np.log(mu)[None, :]
        moments = single_token_moments(logits, behavior, np.ones((1, 3)), eps, method)
        p = np.exp(logits) / np.exp(logits).sum()
        m = np.exp(behavior) / np.exp(behavior).sum()
        removed = core(method, (p / m).reshape(3, 1), eps)["removed"]
        assert float(moments.removed_mass[0]) == pytest.approx(float(m[0] @ removed), rel=1e-9)
