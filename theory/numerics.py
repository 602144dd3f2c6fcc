"""Numeric confirmations of the symbolic rates, and an interval-arithmetic check of the constants.

Each `fit_*` function minimises a bound numerically (scipy's bounded Brent search in log
coordinates, independent of the sympy algebra) on a grid of `N` (or `tau4`, `G`), fits the log-log
slope with least squares and returns a `SlopeFit` to compare with the derived exponent.
Excess quantities are written so that no cancellation occurs (`expm1`, `log1p`,
`1/u + u - 2 = (u-1)^2/u`), which lets `N` go to `1e30` in double precision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import mpmath
import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar

from gmc_grpo.defaults import PAPER_EPS
from theory.constants import c_eps, gmc_denominator


@dataclass(frozen=True)
class SlopeFit:
    """A fitted log-log slope next to the exponent it should match."""

    name: str
    x: NDArray[np.float64]
    y: NDArray[np.float64]
    slope: float
    expected: float

    @property
    def points(self) -> int:
        """How many grid points the fitted slope rests on."""
        return int(len(self.x))

    def within(self, claimed: float, tol: float = 0.01) -> bool:
        """`|slope - claimed| <= tol |claimed|` (absolute `tol` when `claimed == 0`)."""
        scale = abs(claimed) if claimed != 0 else 1.0
        return abs(self.slope - claimed) <= tol * scale

    def text(self, claimed: float | None = None) -> str:
        """`name: slope s on n points (claimed c)`."""
        c = self.expected if claimed is None else claimed
        return f"{self.name}: slope {self.slope:+.4f} on {self.points} points (claimed {c:+.4f})"

    @property
    def rel_error(self) -> float:
        """`|slope - expected| / |expected|` (absolute error when `expected == 0`)."""
        scale = abs(self.expected) if self.expected != 0 else 1.0
        return abs(self.slope - self.expected) / scale


def loglog_slope(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """Least-squares slope of `log y` against `log x`."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def penalty(eps: float, method: str) -> float:
    """Delay coefficient `(1+eps)^3 / den^2` with `den = log(1+2eps)` (GMC) or `c_eps` (TIC)."""
    den = gmc_denominator(eps) if method == "gmc" else c_eps(eps)
    return float((1.0 + eps) ** 3 / den**2)


def brent_minimise(f: Callable[[float], float], lo: float, hi: float) -> float:
    """Minimiser of a unimodal `f` on `[lo, hi]` (bounded Brent, tight tolerance)."""
    res = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-11})
    return float(res.x)


def min_over_eta(a: float, b: float, c: float) -> tuple[float, float]:
    """`argmin, min` over `eta > 0` of `a/eta + b eta + c eta^4` (convex in `log eta`).

    The search bracket spans the two pairwise balances `sqrt(a/b)` and `(a/c)^(1/5)` by a wide
    margin on both sides.
    """
    guesses = [np.sqrt(a / b)] + ([(a / c) ** 0.2] if c > 0 else [])
    lo, hi = np.log(min(guesses)) - 10, np.log(max(guesses)) + 10
    s = brent_minimise(lambda s: a * np.exp(-s) + b * np.exp(s) + c * np.exp(4 * s), lo, hi)
    eta = float(np.exp(s))
    return eta, a / eta + b * eta + c * eta**4


def fit_no_delay_step_size(
    ns: NDArray[np.float64] | None = None, eps: float = PAPER_EPS
) -> list[SlopeFit]:
    """`tau4 = 0`: numeric `eta*` and `min B` both scale as `N^(-1/2)` (Theorem 1, first two terms)."""
    ns = np.logspace(4, 16, 7) if ns is None else ns
    etas, vals = zip(*(min_over_eta(1.0 / n, 1.0 + eps, 0.0) for n in ns), strict=True)
    e, v = np.array(etas), np.array(vals)
    return [
        SlopeFit("eta* vs N (no delay)", ns, e, loglog_slope(ns, e), -0.5),
        SlopeFit("min bound vs N (no delay)", ns, v, loglog_slope(ns, v), -0.5),
    ]


def joint_min_bound(n: float, tau4: float) -> tuple[float, float, float]:
    """`(eta*, eps*, min B)` of Theorem 1's bound over `eta > 0` and `eps in [1e-3, 1e3]`.

    For the delay-dominated regime (`tau4` of order `N^p`, `p > 3/2`), where `eps*` is `Theta(1)`.
    """

    def over_eta(t: float) -> float:
        eps = float(np.exp(t))
        return min_over_eta(1.0 / n, 1.0 + eps, penalty(eps, "gmc") * tau4)[1]

    eps = float(np.exp(brent_minimise(over_eta, np.log(1e-3), np.log(1e3))))
    eta, val = min_over_eta(1.0 / n, 1.0 + eps, penalty(eps, "gmc") * tau4)
    return eta, eps, val


def fit_large_delay(p: float, ns: NDArray[np.float64] | None = None) -> list[SlopeFit]:
    """`tau4 = N^p`, `3/2 < p < 4`, joint minimisation over `(eta, eps)` of Theorem 1's bound.

    Expected: `eta* ~ N^(-(p+1)/5)`, `min B ~ N^(-(4-p)/5)`, `eps*` tends to a constant (slope 0).
    """
    ns = np.logspace(12, 30, 7) if ns is None else ns
    e, s, v = (np.array(col) for col in zip(*(joint_min_bound(n, n**p) for n in ns), strict=True))
    return [
        SlopeFit(f"eta* vs N (tau4 = N^{p:g})", ns, e, loglog_slope(ns, e), -(p + 1) / 5),
        SlopeFit(f"min bound vs N (tau4 = N^{p:g})", ns, v, loglog_slope(ns, v), -(4 - p) / 5),
        SlopeFit(f"eps* vs N (tau4 = N^{p:g})", ns, s, loglog_slope(ns, s), 0.0),
    ]


def tuned_excess(eps: float, n: float, tau4: float, method: str = "gmc") -> float:
    """`S + D - 1/sqrt(N)` for the tuned bound `sqrt((1+eps)/N) + (K tau4/N^4)^(1/5)` (Cor. 1).

    The `eps`-free `1/sqrt N` is removed exactly: `sqrt(1+eps) - 1 = expm1(log1p(eps)/2)`.
    """
    s_excess = np.expm1(0.5 * np.log1p(eps)) / np.sqrt(n)
    return float(s_excess + (penalty(eps, method) * tau4 / n**4) ** 0.2)


def corollary1_eps_star(n: float, tau4: float, method: str = "gmc") -> float:
    """Numeric minimiser over `eps` of the tuned bound `S + D` (Corollary 1's objective)."""
    t = brent_minimise(
        lambda t: tuned_excess(float(np.exp(t)), n, tau4, method), np.log(1e-25), np.log(1e2)
    )
    return float(np.exp(t))


def joint_excess(u: float, eps: float, n: float, tau4: float) -> float:
    """Theorem 1's bound minus `2/sqrt N`, with `eta = u/sqrt N` (no cancellation).

    `1/(eta N) + eta - 2/sqrt N = (u-1)^2/(u sqrt N)`, plus `eps eta + K tau4 eta^4`.
    """
    eta = u / np.sqrt(n)
    return float(
        (u - 1.0) ** 2 / (u * np.sqrt(n)) + eps * eta + penalty(eps, "gmc") * tau4 * eta**4
    )


def joint_excess_at(eps: float, n: float, tau4: float) -> float:
    """`min_eta` of Theorem 1's bound minus `2/sqrt N` at a given `eps` (delay-light regime).

    Searches `eta = u/sqrt N` with `u` in `[e^-3, e^3]`, which holds the minimiser whenever the
    delay term is lower order (`tau4 = o(N^(3/2))`).
    """
    s = brent_minimise(lambda s: joint_excess(float(np.exp(s)), eps, n, tau4), -3.0, 3.0)
    return joint_excess(float(np.exp(s)), eps, n, tau4)


def joint_eps_star(n: float, tau4: float) -> tuple[float, float]:
    """`(eps*, excess)` minimising Theorem 1's three-term bound jointly over `(eta, eps)`."""
    t = brent_minimise(
        lambda t: joint_excess_at(float(np.exp(t)), n, tau4), np.log(1e-25), np.log(1e2)
    )
    eps = float(np.exp(t))
    return eps, joint_excess_at(eps, n, tau4)


def fit_corollary1(
    ns: NDArray[np.float64] | None = None, taus: NDArray[np.float64] | None = None
) -> list[SlopeFit]:
    """Numeric `eps*` of the tuned bound: slopes `-3/14` in `N` (tau4 = 1), `1/7` in `tau4`."""
    ns = np.logspace(14, 30, 7) if ns is None else ns
    taus = np.logspace(0, 8, 7) if taus is None else taus
    e_n = np.array([corollary1_eps_star(n, 1.0) for n in ns])
    e_t = np.array([corollary1_eps_star(1e30, t) for t in taus])
    return [
        SlopeFit("Cor. 1 eps* vs N", ns, e_n, loglog_slope(ns, e_n), -3 / 14),
        SlopeFit("Cor. 1 eps* vs tau4", taus, e_t, loglog_slope(taus, e_t), 1 / 7),
    ]


def fit_joint_minimiser(
    ns: NDArray[np.float64] | None = None, taus: NDArray[np.float64] | None = None
) -> list[SlopeFit]:
    """Joint `(eta, eps)` minimiser of Theorem 1's bound: `eps* ~ tau4^(1/3) N^(-1/2)`."""
    ns = np.logspace(14, 30, 7) if ns is None else ns
    taus = np.logspace(0, 8, 7) if taus is None else taus
    e_n = np.array([joint_eps_star(n, 1.0)[0] for n in ns])
    e_t = np.array([joint_eps_star(1e30, t)[0] for t in taus])
    return [
        SlopeFit("joint eps* vs N", ns, e_n, loglog_slope(ns, e_n), -0.5),
        SlopeFit("joint eps* vs tau4", taus, e_t, loglog_slope(taus, e_t), 1 / 3),
    ]


def delay_tolerance_bound(
    n: float, q: float, tau_exp: float = 1 / 7, n_exp: float = -3 / 14
) -> float:
    """Theorem 1's bound at `eta = N^(-1/2)`, `eps = min{1, tau4^a N^b}` (the remark's prescription
    `a = 1/7`, `b = -3/14` by default), `tau4 = N^q`."""
    tau = n**q
    eps = min(1.0, tau**tau_exp * n**n_exp)
    eta = n**-0.5
    return 1.0 / (eta * n) + (1.0 + eps) * eta + penalty(eps, "gmc") * eta**4 * tau


def fit_delay_tolerance(
    qs: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0),
    ns: NDArray[np.float64] | None = None,
    tau_exp: float = 1 / 7,
    n_exp: float = -3 / 14,
) -> list[SlopeFit]:
    """Slope of the bound under the remark's choices: `-1/2` for `q <= 3/2`, `q - 2` above.

    `tau_exp`, `n_exp`: the exponents of the `eps` prescription `eps = min{1, tau4^a N^b}`."""
    ns = np.logspace(20, 40, 6) if ns is None else ns
    out = []
    for q in qs:
        v = np.array([delay_tolerance_bound(n, q, tau_exp, n_exp) for n in ns])
        out.append(
            SlopeFit(f"bound vs N (tau4 = N^{q:g})", ns, v, loglog_slope(ns, v), max(-0.5, q - 2))
        )
    return out


def fit_corollary2(
    gs: NDArray[np.float64] | None = None,
    n: float = 1e12,
    eps: float = PAPER_EPS,
    delta: float = 0.5,
) -> SlopeFit:
    """Delay-dominated regime (`tau4 = N^3`): the tuned delay term of Corollary 2 vs `G`.

    Minimises `1/(eta N) + (1+eps) eta + (1+delta)^2 (1+eps)^3/(G^2 eps^2) tau4 eta^4` over `eta`;
    with these defaults the delay part dominates the minimum (the no-delay part `~ N^(-1/2)` is
    about `1e-4` of it), so the slope in `G` is that of the delay term, `-2/5`.
    """
    gs = np.array([2.0, 4, 8, 16, 32, 64]) if gs is None else gs
    tau = n**3.0
    vals = []
    for g in gs:
        k = (1 + delta) ** 2 * (1 + eps) ** 3 / (g**2 * eps**2)
        vals.append(min_over_eta(1.0 / n, 1.0 + eps, k * tau)[1])
    v = np.array(vals)
    return SlopeFit("Cor. 2 delay term vs G", gs, v, loglog_slope(gs, v), -0.4)


def fit_penalties(eps: NDArray[np.float64] | None = None) -> list[SlopeFit]:
    """Small-`eps` slopes: TIC penalty `-4`, GMC penalty `-2`, improvement factor `2/5`."""
    eps = np.logspace(-7, -5, 5) if eps is None else eps
    tic = np.array([penalty(e, "tic") for e in eps])
    gmc = np.array([penalty(e, "gmc") for e in eps])
    factor = (np.asarray(c_eps(eps)) / np.asarray(gmc_denominator(eps))) ** 0.4
    return [
        SlopeFit("TIC penalty vs eps", eps, tic, loglog_slope(eps, tic), -4.0),
        SlopeFit("GMC penalty vs eps", eps, gmc, loglog_slope(eps, gmc), -2.0),
        SlopeFit("improvement factor vs eps", eps, factor, loglog_slope(eps, factor), 0.4),
    ]


def all_slope_fits() -> list[SlopeFit]:
    """Every numeric confirmation (about a second on one core)."""
    fits = fit_no_delay_step_size() + fit_penalties() + fit_corollary1() + fit_joint_minimiser()
    for p in (2.0, 3.0, 3.5):
        fits += fit_large_delay(p)
    return fits + fit_delay_tolerance() + [fit_corollary2()]


@lru_cache(maxsize=4)
def interval_check_denominators(
    lo: float = 1e-4, hi: float = 1e4, cells: int = 400
) -> tuple[bool, int]:
    """Rigorous check with `mpmath.iv` that `c_eps < log(1+2eps) <= kappa_tight` on `[lo, hi]`.

    On each cell `[a, b]` of a geometric grid:

    * interval arithmetic over the whole cell bounds `log(1+2e) - log(1+e) + e/(1+e)` from below;
      a positive bound proves `c_eps < log(1+2eps)` on the cell;
    * `h(e) = (1+e) log(1+2e) - 2e` is increasing (`h' = log(1+2e) - 2e/(1+2e) > 0`, as
      `log(1+y) > y/(1+y)`), so its minimum on the cell is `h(a)`, bounded below by interval
      arithmetic at the point `a`; `h > 0` is the intercept condition of
      `theory.symbolic.prove_gmc_denominator_valid`, equivalent to `log(1+2eps) <= kappa_tight`.

    The tails `eps < lo`, `eps > hi` are covered by the sympy proofs (both differences vanish at
    0 and increase), not by the grid. Returns `(all cells positive, number of cells)`.
    """
    iv = mpmath.iv
    edges = np.geomspace(lo, hi, cells + 1)
    ok = True
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        e = iv.mpf([float(a), float(b)])
        gap = iv.log(1 + 2 * e) - iv.log(1 + e) + e / (1 + e)
        ea = iv.mpf(float(a))
        h_a = (1 + ea) * iv.log(1 + 2 * ea) - 2 * ea
        ok &= bool(gap.a > 0) and bool(h_a.a > 0)
    return ok, cells
