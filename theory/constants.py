"""The KL denominators of Theorems 1 and 2, their tight versions and the delay penalties.

Notation. `mu` is the behavior policy, `pi` the current policy, `rho = pi / mu` the trajectory
importance ratio (so `E_mu[rho] = 1`) and

    phi(x) = x log x - x + 1 >= 0,    KL(pi || mu) = E_mu[rho log rho] = E_mu[phi(rho)].

The second step of the chain of §4.2 bounds the importance mass a correction removes by
`KL / denominator`:

* TIC-GRPO (Theorem 2) removes `E_mu[rho 1{rho > 1+eps}]`, bounded by `KL / c_eps`;
* GMC-GRPO (Theorem 1) removes `E[(rho_bar - (1+eps))_+]`, which convexity of `(.)_+` bounds by
  `E_mu[(rho - (1+eps))_+]`, and that by `KL / log(1+2 eps)`.

Every function here is vectorised: a scalar in gives a float out, an array in gives an array out.
Derivations are in the docstrings; `theory.symbolic` checks them with sympy.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import lambertw

FloatOrArray = float | NDArray[np.float64]


def _as_eps(eps: ArrayLike) -> NDArray[np.float64]:
    """Validate `eps > 0` and return it as a float array."""
    arr = np.asarray(eps, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"eps must be finite and > 0, got {eps!r}")
    return arr


def _out(value: NDArray[np.float64], like: ArrayLike) -> FloatOrArray:
    """Return a float when the input was a scalar, else the array."""
    return float(value) if np.ndim(like) == 0 else value


def phi(x: ArrayLike) -> FloatOrArray:
    """`phi(x) = x log x - x + 1` (with `phi(0) = 1`), the integrand of `KL = E_mu[phi(rho)]`.

    `phi >= 0`, `phi(1) = phi'(1) = 0`, `phi''(x) = 1/x`: convex, so every tangent line lies below.
    """
    arr = np.asarray(x, dtype=np.float64)
    if np.any(arr < 0):
        raise ValueError("phi is defined for x >= 0")
    safe = np.where(arr > 0, arr, 1.0)
    return _out(np.where(arr > 0, safe * np.log(safe) - safe + 1.0, 1.0), x)


def c_eps(eps: ArrayLike) -> FloatOrArray:
    """TIC denominator of Theorem 2: `c_eps = log(1+eps) - eps/(1+eps)`.

    Derivation. Removed mass `E_mu[rho 1{rho > 1+eps}] <= KL / c` holds for every `mu, pi` if
    `c x 1{x > 1+eps} <= phi(x)` for all `x >= 0`. For `x <= 1+eps` this is `phi >= 0`; for
    `x > 1+eps` it reads `c <= phi(x)/x = log x - 1 + 1/x`, whose derivative `(x-1)/x^2` is
    positive for `x > 1`, so the infimum is the value at `x = 1+eps`:
    `c_eps = log(1+eps) - 1 + 1/(1+eps)`. Series: `eps^2/2 - 2 eps^3/3 + O(eps^4)`, so
    `c_eps = Theta(eps^2)` with leading coefficient 1/2 (the paper states `Theta(eps^2)`, §4.3).
    The paper prints no formula for `c_eps`; this is the largest constant for which the inequality
    holds (see `tight_tic_denominator`), so any valid `c_eps` is at most this one.
    Computed as `log1p(eps) - eps/(1+eps)` with a series for `eps < 1e-3` (no cancellation).
    """
    e = _as_eps(eps)
    direct = np.log1p(e) - e / (1.0 + e)
    # log(1+e) - e/(1+e) = sum_{k>=2} (-1)^k (k-1)/k e^k, alternating: truncation < next term.
    series = e**2 / 2 - 2 * e**3 / 3 + 3 * e**4 / 4 - 4 * e**5 / 5 + 5 * e**6 / 6
    return _out(np.where(e < 1e-3, series, direct), eps)


def gmc_denominator(eps: ArrayLike) -> FloatOrArray:
    """GMC denominator of Theorem 1: `log(1 + 2 eps)`.

    Why it is valid (our proof; the paper's appendix is absent). We need
    `log(1+2eps) (x - 1 - eps)_+ <= phi(x)` for all `x >= 0`. The tangent of `phi` at
    `x0 = 1 + 2 eps` has slope `phi'(x0) = log x0` and meets the x-axis at `x0 - phi(x0)/log x0 =
    2 eps / log(1+2eps)`. Since `f(eps) = log(1+2eps) - 2eps/(1+eps)` has `f(0) = 0` and
    `f'(eps) = 2 eps^2 / ((1+2eps)(1+eps)^2) > 0`, that intercept is `< 1+eps`; so the line of
    slope `log x0` through `(1+eps, 0)` lies below the tangent for `x >= 1+eps`, hence below
    `phi` (convexity). Series: `2 eps - 2 eps^2 + O(eps^3)`, `Theta(eps)` with coefficient 2.
    """
    e = _as_eps(eps)
    return _out(np.log1p(2.0 * e), eps)


def tight_tic_denominator(eps: ArrayLike) -> FloatOrArray:
    """Largest `c` with `E_mu[rho 1{rho>1+eps}] <= KL / c` for every pair of distributions.

    Equals `c_eps` (same closed form). Proof: by LP duality over mean-one measures the best
    constant is `sup_a inf_x (phi(x) + a(x-1)) / (x 1{x>1+eps})`; feasibility requires
    `phi(x) + a(x-1) >= 0` near `x = 1` (left side 0 there), and since `phi(1) = phi'(1) = 0` this
    forces `a = 0`, leaving the pointwise constant. Equivalently, among two-point mean-one laws on
    `x1 < 1 < x2` the ratio KL/mass is `phi(x2)/x2 + (x2-1) phi(x1) / ((1-x1) x2)`, which tends to
    `phi(x2)/x2` as `x1 -> 1` and to `c_eps` as `x2 -> 1+eps`: the constant is attained in the limit
    (`near_extremal_distribution` in `theory.divergences` builds such a law).
    """
    return c_eps(eps)


def gmc_tangent_point(eps: ArrayLike) -> FloatOrArray:
    """The `x* > 1+eps` where the line through `(1+eps, 0)` touches `phi`.

    Minimising `phi(x)/(x-1-eps)` over `x > 1+eps`: the derivative vanishes when
    `log(x) (x-1-eps) = phi(x)`, i.e. `x - 1 = (1+eps) log x`. With `k = 1+eps` and
    `x = -k w` this is `w e^w = -e^{-1/k}/k` in `(-1/e, 0)`; the branch `W_0` gives the trivial
    root `x = 1`, the branch `W_{-1}` gives `x* = -k W_{-1}(-e^{-1/k}/k) > k`.
    """
    return _out(np.exp(np.asarray(tight_gmc_denominator(eps), dtype=np.float64)), eps)


def tight_gmc_denominator(eps: ArrayLike) -> FloatOrArray:
    """Largest `kappa` with `kappa (x-1-eps)_+ <= phi(x)` for all `x >= 0` (Lambert W form).

    `kappa(eps) = phi'(x*) = log x* = (x*-1)/(1+eps) = -W_{-1}(-e^{-1/k}/k) - 1/k`, `k = 1+eps`
    (see `gmc_tangent_point`). As for TIC, adding `a(x-1)` (allowed since `E_mu[rho-1] = 0`) does
    not help: `phi(1) = phi'(1) = 0` forces `a = 0`, so this is also the largest constant over all
    mean-one distributions (single-trajectory group, `G = 1`). Series: `kappa = 2 eps - 4 eps^2/3
    + O(eps^3)`; `log(1+2eps) <= kappa` for all `eps > 0` (see `gmc_denominator`).

    Numerics: the Lambert W value is ill-conditioned near the branch point (small `eps`), so it
    only seeds Newton's method on `F(kappa) = log(expm1(kappa)/kappa) - log1p(eps) = 0` (the
    tangency equation with `x* = e^kappa`), which is well conditioned for every `eps`.
    """
    e = _as_eps(eps)
    k = 1.0 + e
    with np.errstate(all="ignore"):
        w = lambertw(-np.exp(-1.0 / k) / k, -1).real
    seed_lw = -w - 1.0 / k
    seed_series = 2 * e - 4 * e**2 / 3
    kappa = np.where(e < 1e-2, seed_series, seed_lw)
    kappa = np.where(np.isfinite(kappa) & (kappa > 0), kappa, 2 * e)
    target = np.log1p(e)
    for _ in range(60):
        # log(expm1(k)/k) = k/2 + log(sinh(k/2)/(k/2)) = k/2 + k^2/24 - k^4/2880 + O(k^6).
        ks = np.where(kappa < 1e-3, 1.0, kappa)
        f_direct = np.log(np.expm1(ks) / ks)
        f_series = kappa / 2 + kappa**2 / 24 - kappa**4 / 2880
        f = np.where(kappa < 1e-3, f_series, f_direct) - target
        # d/dk log(expm1(k)/k) = e^k/expm1(k) - 1/k; series 1/2 + k/12 for small k.
        small = kappa < 1e-4
        ks = np.where(small, 1.0, kappa)
        dfdk = np.where(small, 0.5 + kappa / 12.0, np.exp(ks) / np.expm1(ks) - 1.0 / ks)
        step = f / dfdk
        kappa = np.maximum(kappa - step, kappa / 2)
        if np.all(np.abs(step) <= 4e-16 * np.abs(kappa)):
            break
    return _out(kappa, eps)


def tic_penalty(eps: ArrayLike) -> FloatOrArray:
    """Delay coefficient of Theorem 2, `(1+eps)^3 / c_eps^2` (~ `4 eps^-4` as `eps -> 0`)."""
    e = _as_eps(eps)
    return _out((1.0 + e) ** 3 / np.asarray(c_eps(e)) ** 2, eps)


def gmc_penalty(eps: ArrayLike) -> FloatOrArray:
    """Delay coefficient of Theorem 1, `(1+eps)^3 / log^2(1+2eps)` (~ `eps^-2 / 4` as `eps -> 0`)."""
    e = _as_eps(eps)
    return _out((1.0 + e) ** 3 / np.asarray(gmc_denominator(e)) ** 2, eps)


def improvement_factor(eps: ArrayLike, tight: bool = False) -> FloatOrArray:
    """Ratio of the tuned delay terms GMC/TIC: `(c_eps / log(1+2eps))^(2/5)` (§4.3).

    After the step size is tuned the delay term is `(penalty * tau4 / N^4)^(1/5)` (see
    `theory.rates`), so the ratio is `(penalty_GMC / penalty_TIC)^(1/5) = (c/den)^(2/5)`.
    Limits: `(eps/4)^(2/5) -> 0` as `eps -> 0`, `-> 1` as `eps -> oo`.
    With `tight=True` both denominators are replaced by their tight versions.
    """
    e = _as_eps(eps)
    den = tight_gmc_denominator(e) if tight else gmc_denominator(e)
    num = tight_tic_denominator(e) if tight else c_eps(e)
    return _out((np.asarray(num) / np.asarray(den)) ** 0.4, eps)


def gmc_slack(eps: ArrayLike) -> FloatOrArray:
    """`log(1+2eps) / kappa_tight(eps)` in (0, 1]: how much the paper's GMC denominator gives away.

    `1 - eps/3 + O(eps^2)` as `eps -> 0`; the delay coefficient is loose by the square of its
    inverse and the tuned delay term by its `-2/5` power.
    """
    e = _as_eps(eps)
    return _out(np.asarray(gmc_denominator(e)) / np.asarray(tight_gmc_denominator(e)), eps)
