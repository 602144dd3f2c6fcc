"""Removed importance mass and KL for finite distributions: the quantities of the §4.2 chain.

A finite "trajectory space" is a support of `n` points with behavior probabilities `mu` and
current probabilities `pi` (both length-`n`, summing to one, `mu > 0`). Then `rho = pi / mu`,
`E_mu[rho] = 1` and `KL(pi || mu) = sum pi log(pi/mu) = E_mu[phi(rho)]`.

* TIC removes `rho - w rho = rho 1{rho > 1+eps}` per trajectory (weight `w = 1{rho <= 1+eps}`).
* GMC multiplies the group by `alpha* = min{1, (1+eps)/rho_bar}` (Proposition 2), removing
  `rho_bar - alpha* rho_bar = (rho_bar - (1+eps))_+` of group-average mass.

TIC's removed mass uses the theory's one coefficient (`theory.exact.class_coefficients`); GMC's is
the closed form `(rho_bar - (1+eps))_+` of `(1/G) sum_i (rho_i - c_i)` (both tested equal to the
core's `group_diagnostics` in `tests/theory/test_theory_core_coefficients.py`).
`gmc_removed_mass(..., group_size=G)` is exact (enumeration of the `n^G` groups of i.i.d. draws
from `mu`); `group_removed_mass_binomial` is exact for two-point laws and large `G`.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln

from theory.constants import phi, tight_gmc_denominator, tight_tic_denominator
from theory.exact import class_coefficients


def _validate(mu: ArrayLike, pi: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Check that `mu`, `pi` are probability vectors of one length with `mu > 0`."""
    m = np.asarray(mu, dtype=np.float64)
    p = np.asarray(pi, dtype=np.float64)
    if m.ndim != 1 or m.shape != p.shape:
        raise ValueError(f"mu and pi must be 1-D of one length, got {m.shape} and {p.shape}")
    if np.any(m <= 0) or np.any(p < 0):
        raise ValueError("need mu > 0 (coverage, Assumption 2) and pi >= 0")
    for name, v in (("mu", m), ("pi", p)):
        if abs(v.sum() - 1.0) > 1e-9:
            raise ValueError(f"{name} must sum to 1, sums to {v.sum()!r}")
    return m, p


def ratios(mu: ArrayLike, pi: ArrayLike) -> NDArray[np.float64]:
    """Importance ratios `rho = pi / mu` on the support."""
    m, p = _validate(mu, pi)
    return p / m


def kl_divergence(mu: ArrayLike, pi: ArrayLike) -> float:
    """`KL(pi || mu) = E_mu[phi(rho)]`, the `D_n^(b)` of §4.2 (current policy first)."""
    m, p = _validate(mu, pi)
    return float(np.sum(m * np.asarray(phi(p / m))))


def tic_removed_mass(mu: ArrayLike, pi: ArrayLike, eps: float) -> float:
    """`E_mu[rho 1{rho > 1+eps}]`: the mass TIC's indicator weight removes (§4.3)."""
    m, p = _validate(mu, pi)
    rho = p / m
    return float(np.sum(m * (rho - class_coefficients(rho, eps, "tic"))))


def gmc_removed_mass(mu: ArrayLike, pi: ArrayLike, eps: float, group_size: int = 1) -> float:
    """`E[(rho_bar - (1+eps))_+]` over groups of `group_size` i.i.d. draws from `mu` (exact).

    Enumerates all `n^G` ordered groups, so keep `n^G` small (at most about `10^6`).
    """
    m, p = _validate(mu, pi)
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    n = m.size
    if n**group_size > 2_000_000:
        raise ValueError(f"n^G = {n}^{group_size} groups is too many to enumerate")
    rho = p / m
    total = 0.0
    for idx in itertools.product(range(n), repeat=group_size):
        ii = np.asarray(idx)
        total += float(np.prod(m[ii])) * max(float(rho[ii].mean()) - (1.0 + eps), 0.0)
    return total


def gmc_single_removed_mass(mu: ArrayLike, pi: ArrayLike, eps: float) -> float:
    """`E_mu[(rho - (1+eps))_+]`, the `G = 1` mass that bounds every group's (convexity)."""
    m, p = _validate(mu, pi)
    return float(np.sum(m * np.maximum(p / m - (1.0 + eps), 0.0)))


def group_removed_mass_binomial(x_low: float, x_high: float, eps: float, group_size: int) -> float:
    """Exact `E[(rho_bar - (1+eps))_+]` when `rho` takes two values with mean one.

    `rho = x_high` with probability `q = (1 - x_low)/(x_high - x_low)`, else `x_low`; the count of
    high draws in a group is Binomial(G, q). Used to show the GMC removed mass vanishing as
    `G -> oo` while TIC's per-trajectory removed mass `q x_high 1{x_high > 1+eps}` stays put.
    """
    if not 0 <= x_low < 1 < x_high:
        raise ValueError("need 0 <= x_low < 1 < x_high")
    q = (1.0 - x_low) / (x_high - x_low)
    k = np.arange(group_size + 1)
    logpmf = (
        gammaln(group_size + 1)
        - gammaln(k + 1)
        - gammaln(group_size - k + 1)
        + k * np.log(q)
        + (group_size - k) * np.log1p(-q)
    )
    rho_bar = (k * x_high + (group_size - k) * x_low) / group_size
    return float(np.sum(np.exp(logpmf) * np.maximum(rho_bar - (1.0 + eps), 0.0)))


def two_point(x_low: float, x_high: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The mean-one two-point ratio law as a pair `(mu, pi)` on a two-point support."""
    if not 0 <= x_low < 1 < x_high:
        raise ValueError("need 0 <= x_low < 1 < x_high")
    q = (1.0 - x_low) / (x_high - x_low)
    mu = np.array([1.0 - q, q])
    pi = mu * np.array([x_low, x_high])
    return mu, pi / pi.sum()


def near_extremal_distribution(
    eps: float, method: str, rel_gap: float = 1e-3
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A two-point law whose `KL / removed mass` is within `rel_gap` of the tight constant.

    For a mean-one law on `x1 < 1 < x2` the ratio is
    `phi(x2)/h(x2) + (x2-1) phi(x1) / ((1-x1) h(x2))` with `h(x) = x` (TIC) or `x - 1 - eps`
    (GMC, `G = 1`). Put `x2` at the minimiser of `phi/h` (just above `1+eps` for TIC; the tangent
    point `x*` for GMC) and `x1` close enough to 1 that the second term, about
    `(x2-1)(1-x1) / (2 h(x2))`, is a fraction of `rel_gap`. Shows the tight constants are tight.
    """
    if method == "tic":
        target = float(tight_tic_denominator(eps))
        # phi(x)/x rises with slope (x-1)/x^2 ~ eps: step above 1+eps by a fraction of the gap.
        x2 = (1.0 + eps) * (1.0 + 0.25 * rel_gap * target / eps)
        h2 = x2
    elif method == "gmc":
        target = float(tight_gmc_denominator(eps))
        x2 = float(np.exp(target))
        h2 = x2 - 1.0 - eps
    else:
        raise ValueError(f"method must be 'tic' or 'gmc', got {method!r}")
    # Second term ~ (x2 - 1)(1 - x1) / (2 h2) <= rel_gap * target / 4.
    one_minus_x1 = min(0.5, 0.5 * rel_gap * target * h2 / (x2 - 1.0))
    return two_point(1.0 - one_minus_x1, x2)
