"""Numeric evaluators of the paper's bounds (numpy only), for measured values to sit next to.

Explicit constants are used where the paper prints them (Lemma 1, Proposition 1) or where we
derive them (the removed-mass bounds of the §4.2 chain). Theorems 1 and 2 and Corollary 2 are
printed as `O(.)` shapes: their evaluators take the hidden constants as arguments (default 1),
so they are for scalings (slopes, ratios between methods), not absolute values.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from theory.constants import (
    FloatOrArray,
    c_eps,
    gmc_denominator,
    gmc_penalty,
    tic_penalty,
    tight_gmc_denominator,
    tight_tic_denominator,
)


def _f(x: np.ndarray, *likes: ArrayLike) -> FloatOrArray:
    """Float when every input was a scalar, else the array."""
    return float(x) if all(np.ndim(v) == 0 for v in likes) else x


def second_moment_bound(
    eps: ArrayLike, T: ArrayLike, L: ArrayLike, R: ArrayLike, vocab_size: ArrayLike
) -> FloatOrArray:
    """Proposition 1: `E[||g_n^w||^2 | F_n^-] <= 8/T (1+eps) L R^2 log|A|`.

    Our derivation reaches the same form with the constant 2 when `|A_hat| <= R` (8 when
    `|A_hat| <= 2R`): `||sum_i c_i v_i||^2 <= (sum c_i)(sum c_i ||v_i||^2)` with
    `c_i = w_i rho_i`, `sum_i c_i <= G(1+eps)` (eq. 5); `c_i <= rho_i` changes measure to the
    current policy, where the trajectory score is a sum of `T` martingale differences, and an
    `L`-smooth `log pi <= 0` has `||grad log pi||^2 <= 2L(-log pi)`, whose mean is the entropy
    `<= log|A|`. So `E||g||^2 <= (1/T^2)(1+eps) R^2 * 2 L T log|A|`.
    """
    e = np.asarray(eps, dtype=np.float64)
    out = 8.0 / np.asarray(T) * (1.0 + e) * np.asarray(L) * np.asarray(R) ** 2 * np.log(vocab_size)
    return _f(np.asarray(out, dtype=np.float64), eps, T, L, R, vocab_size)


def removed_mass_bound(
    kl: ArrayLike, eps: ArrayLike, method: str, tight: bool = False
) -> FloatOrArray:
    """Step 2 of the §4.2 chain: removed importance mass `<= KL / denominator`.

    `method="tic"`: `E_mu[rho 1{rho > 1+eps}] <= KL / c_eps`; `method="gmc"`:
    `E[(rho_bar - 1 - eps)_+] <= KL / log(1+2eps)` (any group size, by convexity). With
    `tight=True` the tight denominators (`theory.constants`) are used.
    """
    if method == "tic":
        den = tight_tic_denominator(eps) if tight else c_eps(eps)
    elif method == "gmc":
        den = tight_gmc_denominator(eps) if tight else gmc_denominator(eps)
    else:
        raise ValueError(f"method must be 'tic' or 'gmc', got {method!r}")
    return _f(np.asarray(kl, dtype=np.float64) / np.asarray(den), kl, eps)


def group_removed_mass_bound(
    kl: ArrayLike, eps: ArrayLike, group_size: ArrayLike, delta: ArrayLike
) -> FloatOrArray:
    """Corollary 2's regime `|rho - 1| <= delta`: `E[(rho_bar-1-eps)_+] <= (1+delta) KL/(2 eps G)`.

    Derivation (ours; see `theory.rates.derive_corollary2`): `(y-eps)_+ <= y^2/(4eps)` gives
    `chi^2/(4 eps G)`, and `phi(x) >= (x-1)^2/(2(1+delta))` gives `chi^2 <= 2(1+delta) KL`.
    Squared, this is the `(1+delta)^2/(G^2 eps^2)` of Corollary 2.
    """
    out = (
        (1.0 + np.asarray(delta))
        * np.asarray(kl)
        / (2.0 * np.asarray(eps) * np.asarray(group_size))
    )
    return _f(np.asarray(out, dtype=np.float64), kl, eps, group_size, delta)


def kl_drift_bound(T: ArrayLike, L: ArrayLike, drift_sq: ArrayLike) -> FloatOrArray:
    """Step 3 of §4.2: `D_KL(pi_theta || pi_theta') <= (T L / 2) ||theta - theta'||^2`.

    Per token, `theta' -> E_theta[log pi_theta - log pi_theta']` vanishes with zero gradient at
    `theta' = theta` (the score has mean zero) and has `L`-Lipschitz gradient (Assumption 1);
    summing `T` tokens gives the factor `T`.
    """
    out = np.asarray(T) * np.asarray(L) / 2.0 * np.asarray(drift_sq)
    return _f(np.asarray(out, dtype=np.float64), T, L, drift_sq)


def drift_bound(eta: ArrayLike, tau: ArrayLike, second_moment: ArrayLike) -> FloatOrArray:
    """`E||theta_n - theta_{n-tau}||^2 <= eta^2 tau^2 M` (Cauchy-Schwarz over `tau` updates).

    `||sum_{k<tau} eta g_k||^2 <= tau sum_k eta^2 ||g_k||^2` and `E||g_k||^2 <= M`
    (Proposition 1): the `O(eta^2 tau^2)` drift of §4.2.
    """
    out = np.asarray(eta) ** 2 * np.asarray(tau) ** 2 * np.asarray(second_moment)
    return _f(np.asarray(out, dtype=np.float64), eta, tau, second_moment)


def lemma1_rhs(
    eta: float,
    T: float,
    objective_gap: float,
    R: float,
    L: float,
    vocab_size: int,
    second_moments: ArrayLike,
    bias_sq: ArrayLike,
) -> float:
    """Right-hand side of Lemma 1 for `N = len(second_moments)` iterations.

    `2T (J* - E J(theta_0)) / (eta N) + T^2/N sum_n [eta R L (2 log|A| + 1) E||g_n||^2 +
    E||b_n||^2]`, with `objective_gap = J* - E J(theta_0)`, per-iteration second moments
    `E||g_n||^2` and squared biases `E||b_n||^2` (arrays of one length `N`).
    """
    g2 = np.asarray(second_moments, dtype=np.float64).ravel()
    b2 = np.asarray(bias_sq, dtype=np.float64).ravel()
    if g2.shape != b2.shape or g2.size == 0:
        raise ValueError("second_moments and bias_sq must be non-empty and of one length N")
    n = g2.size
    coef = eta * R * L * (2.0 * np.log(vocab_size) + 1.0)
    return float(2.0 * T * objective_gap / (eta * n) + T**2 / n * np.sum(coef * g2 + b2))


def theorem_bound(
    eta: ArrayLike,
    N: ArrayLike,
    eps: ArrayLike,
    tau4: ArrayLike,
    method: str = "gmc",
    constants: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> FloatOrArray:
    """Theorem 1 (GMC) / Theorem 2 (TIC) before tuning: `C1/(eta N) + C2 (1+eps) eta + C3 K eta^4 tau4`.

    `K = (1+eps)^3 / log^2(1+2eps)` (GMC) or `(1+eps)^3 / c_eps^2` (TIC); `C1..C3` are the
    constants hidden in the paper's `O(.)`.
    """
    c1, c2, c3 = constants
    k = gmc_penalty(eps) if method == "gmc" else tic_penalty(eps)
    e, t, n = (np.asarray(v, dtype=np.float64) for v in (eta, tau4, N))
    out = c1 / (e * n) + c2 * (1.0 + np.asarray(eps)) * e + c3 * np.asarray(k) * e**4 * t
    return _f(np.asarray(out), eta, N, eps, tau4)


def tuned_bound(N: ArrayLike, eps: ArrayLike, tau4: ArrayLike, method: str = "gmc") -> FloatOrArray:
    """Step-size-tuned shape `sqrt((1+eps)/N) + (K tau4 / N^4)^(1/5)` (Theorem 2's printed form)."""
    k = gmc_penalty(eps) if method == "gmc" else tic_penalty(eps)
    n = np.asarray(N, dtype=np.float64)
    out = np.sqrt((1.0 + np.asarray(eps)) / n) + (np.asarray(k) * np.asarray(tau4) / n**4) ** 0.2
    return _f(np.asarray(out), N, eps, tau4)


def tuned_step_size(
    N: ArrayLike, eps: ArrayLike, tau4: ArrayLike, method: str = "gmc"
) -> FloatOrArray:
    """`eta = min{((1+eps) N)^(-1/2), (K tau4 N)^(-1/5)}`, within a factor 2 of the best bound."""
    k = gmc_penalty(eps) if method == "gmc" else tic_penalty(eps)
    n = np.asarray(N, dtype=np.float64)
    t = np.asarray(tau4, dtype=np.float64)
    eta_s = ((1.0 + np.asarray(eps)) * n) ** -0.5
    with np.errstate(divide="ignore"):
        eta_d = np.where(t > 0, (np.asarray(k) * t * n) ** -0.2, np.inf)
    return _f(np.minimum(eta_s, eta_d), N, eps, tau4)


def corollary2_bound(
    N: ArrayLike, eps: ArrayLike, tau4: ArrayLike, group_size: ArrayLike, delta: ArrayLike
) -> FloatOrArray:
    """Corollary 2: `sqrt((1+eps)/N) + ((1+delta)^2 (1+eps)^3 tau4 / (G^2 eps^2 N^4))^(1/5)`."""
    n = np.asarray(N, dtype=np.float64)
    e = np.asarray(eps, dtype=np.float64)
    d = (1 + np.asarray(delta)) ** 2 * (1 + e) ** 3 * np.asarray(tau4)
    out = np.sqrt((1 + e) / n) + (d / (np.asarray(group_size) ** 2 * e**2 * n**4)) ** 0.2
    return _f(np.asarray(out), N, eps, tau4, group_size, delta)
