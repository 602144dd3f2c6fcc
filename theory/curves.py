"""Arrays behind the theory plots (compute only; `theory.plots` draws them).

Each function returns a dict of numpy arrays with the grid under its own key, so the plots and the
notebook take the same numbers.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gmc_grpo.defaults import PAPER_EPS
from theory import numerics
from theory.constants import (
    c_eps,
    gmc_denominator,
    gmc_penalty,
    improvement_factor,
    tic_penalty,
    tight_gmc_denominator,
    tight_tic_denominator,
)

Curves = dict[str, NDArray[np.float64]]


def denominator_curves(eps: NDArray[np.float64] | None = None) -> Curves:
    """`c_eps`, `log(1+2eps)` and the tight versions on a log grid of `eps`."""
    eps = np.logspace(-3, 2, 200) if eps is None else np.asarray(eps, dtype=np.float64)
    return {
        "eps": eps,
        "c_eps": np.asarray(c_eps(eps)),
        "gmc_denominator": np.asarray(gmc_denominator(eps)),
        "tight_tic": np.asarray(tight_tic_denominator(eps)),
        "tight_gmc": np.asarray(tight_gmc_denominator(eps)),
    }


def penalty_curves(eps: NDArray[np.float64] | None = None) -> Curves:
    """Penalty ratio `K_TIC/K_GMC` and the improvement factor (paper's and tight) vs `eps`."""
    eps = np.logspace(-3, 2, 200) if eps is None else np.asarray(eps, dtype=np.float64)
    return {
        "eps": eps,
        "penalty_ratio": np.asarray(tic_penalty(eps)) / np.asarray(gmc_penalty(eps)),
        "improvement_factor": np.asarray(improvement_factor(eps)),
        "improvement_factor_tight": np.asarray(improvement_factor(eps, tight=True)),
    }


def corollary1_closed_form(
    n: NDArray[np.float64], tau4: NDArray[np.float64]
) -> NDArray[np.float64]:
    """`eps* = ((4/5)(tau4/4)^(1/5) N^(-3/10))^(5/7)` from `theory.rates.derive_corollary1`."""
    return (0.8 * (np.asarray(tau4) / 4) ** 0.2 * np.asarray(n) ** -0.3) ** (5 / 7)


def eps_star_curves(
    ns: NDArray[np.float64] | None = None, taus: tuple[float, ...] = (1.0, 1e3, 1e6)
) -> Curves:
    """`eps*` vs `N` for several `tau4`: Corollary 1 (closed form and numeric) and joint minimiser."""
    ns = np.logspace(6, 24, 13) if ns is None else np.asarray(ns, dtype=np.float64)
    out: Curves = {"N": ns, "tau4": np.asarray(taus, dtype=np.float64)}
    out["cor1_closed"] = np.array([corollary1_closed_form(ns, t) for t in taus])
    out["cor1_numeric"] = np.array([[numerics.corollary1_eps_star(n, t) for n in ns] for t in taus])
    out["joint_numeric"] = np.array([[numerics.joint_eps_star(n, t)[0] for n in ns] for t in taus])
    return out


def rate_exponent(p: NDArray[np.float64]) -> NDArray[np.float64]:
    """Best rate exponent of Theorem 1's bound for `tau4 = N^p`: `-1/2`, `-(4-p)/5`, or 0.

    `-1/2` for `p <= 3/2` (delay tolerated), `-(4-p)/5` for `3/2 < p < 4`, `0` (no guarantee)
    for `p >= 4`.
    """
    p = np.asarray(p, dtype=np.float64)
    return np.where(p <= 1.5, -0.5, np.where(p < 4, -(4 - p) / 5, 0.0))


def delay_tolerance_curves(p: NDArray[np.float64] | None = None) -> Curves:
    """Rate exponent vs `p` (symbolic) next to numeric slopes of the jointly minimised bound."""
    p = np.linspace(0.0, 4.5, 91) if p is None else np.asarray(p, dtype=np.float64)
    p_num = np.array([0.5, 1.0, 2.0, 2.5, 3.0, 3.5])
    ns = np.logspace(12, 30, 5)
    slopes = [
        numerics.loglog_slope(ns, np.array([numerics.joint_min_bound(n, n**q)[2] for n in ns]))
        for q in p_num
    ]
    return {
        "p": p,
        "exponent": rate_exponent(p),
        "p_numeric": p_num,
        "slope_numeric": np.array(slopes),
    }


def group_size_curves(
    gs: NDArray[np.float64] | None = None,
    n: float = 1e12,
    eps: float = PAPER_EPS,
    delta: float = 0.5,
) -> Curves:
    """Corollary 2's tuned delay term vs `G` (numeric min over `eta`, `tau4 = N^3`) and `G^(-2/5)`."""
    gs = (
        np.array([1.0, 2, 4, 8, 16, 32, 64, 128])
        if gs is None
        else np.asarray(gs, dtype=np.float64)
    )
    fit = numerics.fit_corollary2(gs, n=n, eps=eps, delta=delta)
    return {"G": gs, "delay_term": fit.y, "reference": fit.y[0] * (gs / gs[0]) ** -0.4}
