"""Numeric evaluators of the paper's bounds with explicit constants (numpy only).

Every evaluator takes scalars or numpy arrays (elementwise, e.g. one value per learner step) and
returns a float for scalar input, else an array, so measured toy-run quantities can sit next to
their bounds ("measured vs bound, ratio").

Normalisation (the paper's): the estimator `g_n = 1/(T B G) sum c_i s_i A_i` carries `1/T`, so
`E[g^IS | F_n^-] = grad J(theta_n) / T` (Assumption 3). "Second moment" is `E[||g_n||^2 | F_n^-]`
of that `g_n`; the bias is `b_n = E[g_n | F_n^-] - grad J(theta_n) / T`, a vector of the same
normalisation; Lemma 1 and Theorems 1-2 bound `(1/N) sum_n E||grad J(theta_n)||^2` (no `1/T`).

Provenance of the constants ("paper": printed in the paper; "ours": derived here, see
`theory.chain` for the step-by-step derivation in sympy, which a test checks these against):

============================  ===========================================  ==========
quantity                      value                                        provenance
============================  ===========================================  ==========
Lemma 1 coefficients          `2T/(eta N)`, `T^2 eta R L (2 log|A|+1)`,    paper (re-derived)
                              `T^2`
smoothness of `J`             `L_J = T R L (2 log|A| + 1)`                 ours (implied by Lemma 1)
gradient ceiling              `||grad J||^2 <= T L R^2 log|A| / 2`           ours
Prop. 1 second moment         `(8/T)(1+eps) L R^2 log|A|`                  paper
                              `(2/T)(1+eps) L R^2 log|A|` (`|A_hat| <= R`) ours
score bound (pathwise)        `||s(y)|| <= T sqrt(2 L log C)`              ours (Assumption 2)
update bound (pathwise)       `||g||^2 <= 2 (1+eps)^2 R^2 L log C`         ours
Prop. 1 bias                  `||group bias|| <= R sqrt(2 L log C) m`      ours (paper: `O(m)`)
removed mass `m`              `<= KL / log(1+2eps)` (GMC), `KL / c_eps`    paper
                              (TIC); tight versions                        ours
KL drift                      `KL <= (T L/2) ||theta_n - theta_{n-tau}||^2` paper
drift                         `E||Delta||^2 <= eta^2 tau2 M`               ours (paper: `O(eta^2 tau^2)`)
                              `E||Delta||^4 <= eta^4 tau4 P M`             ours
Theorem 1/2 delay term        `kappa T^3 L^5 R^6 log^2 C log|A| (1+eps)^3  ours (paper: `O(.)`)
                              eta^4 tau4 / den^2`
Corollary 2 denominator       `den_G = 2 eps G / (1+delta)`                ours
============================  ===========================================  ==========
"""

from __future__ import annotations

from dataclasses import dataclass

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

SECOND_MOMENT_CONSTANTS = {"paper": 8.0, "ours": 2.0}
"""Proposition 1's constant: the paper's 8 and our 2 (valid when `|A_hat| <= R`, e.g. leave-one-out
or centred advantages of rewards in `[0, R]`; the same derivation gives 8 when `|A_hat| <= 2R`)."""


def _f(x: ArrayLike, *likes: ArrayLike) -> FloatOrArray:
    """Float when every input was a scalar, else the array."""
    arr = np.asarray(x, dtype=np.float64)
    return float(arr) if all(np.ndim(v) == 0 for v in likes) else arr


def _a(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _kappa(constant: str | float) -> float:
    """Proposition 1's constant from `"paper"`, `"ours"` or a number."""
    if isinstance(constant, str):
        if constant not in SECOND_MOMENT_CONSTANTS:
            raise ValueError(
                f"constant must be 'paper', 'ours' or a number, got {constant!r}; "
                "'paper' is Proposition 1's 8, 'ours' the sharper 2"
            )
        return SECOND_MOMENT_CONSTANTS[constant]
    return float(constant)


def second_moment_bound(
    eps: ArrayLike,
    T: ArrayLike,
    L: ArrayLike,
    R: ArrayLike,
    vocab_size: ArrayLike,
    constant: str | float = "paper",
) -> FloatOrArray:
    """Proposition 1: `E[||g_n^w||^2 | F_n^-] <= (kappa/T)(1+eps) L R^2 log|A|`.

    Bounds the conditional second moment of the paper's `g_n` (with its `1/T`) for every
    estimator of the class (eq. 5). `constant="paper"`: `kappa = 8` (Proposition 1);
    `"ours"`: `kappa = 2`. Derivation (ours; `theory.chain.derive_second_moment_constant`):
    `||sum_i c_i v_i||^2 <= (sum c_i)(sum c_i ||v_i||^2)` with `sum_i c_i <= G(1+eps)` (eq. 5);
    `c_i <= rho_i` changes measure to the current policy, where the trajectory score is a sum of
    `T` martingale differences, and an `L`-smooth `log p <= 0` has `||grad log p||^2 <= 2L(-log p)`,
    whose mean is the entropy `<= log|A|`: `E||g||^2 <= (1/T^2)(1+eps) R_A^2 2 L T log|A|`, i.e.
    `kappa = 2 (R_A / R)^2` for advantages `|A_hat| <= R_A`.
    """
    out = _kappa(constant) / _a(T) * (1.0 + _a(eps)) * _a(L) * _a(R) ** 2 * np.log(_a(vocab_size))
    return _f(out, eps, T, L, R, vocab_size)


def objective_smoothness(
    T: ArrayLike, R: ArrayLike, L: ArrayLike, vocab_size: ArrayLike
) -> FloatOrArray:
    """`L_J = T R L (2 log|A| + 1)`: `||grad^2 J|| <= L_J`, the smoothness behind Lemma 1 (ours).

    `grad^2 J = E_pi[r (grad^2 log pi + s s^T)]`: `||grad^2 log pi(y)|| <= T L` (Assumption 1, `T`
    tokens) and `0 <= E[r s s^T] <= R E||s||^2 <= 2 R L T log|A|` (as in Proposition 1). Lemma 1's
    printed coefficient `T^2 eta R L (2 log|A| + 1)` is `T L_J eta`.
    """
    out = _a(T) * _a(R) * _a(L) * (2.0 * np.log(_a(vocab_size)) + 1.0)
    return _f(out, T, R, L, vocab_size)


def gradient_norm_sq_ceiling(
    T: ArrayLike, L: ArrayLike, R: ArrayLike, vocab_size: ArrayLike
) -> FloatOrArray:
    """`||grad J(theta)||^2 <= T L R^2 log|A| / 2` at every `theta` (ours): no run's
    `(1/N) sum_n ||grad J(theta_n)||^2` can exceed it, so a bound above it is vacuous.

    `grad J = E_pi[(r - R/2) s]` (the score has mean zero), Cauchy-Schwarz with `|r - R/2| <= R/2`,
    and `E||s||^2 <= 2 L T log|A|` as in Proposition 1 (martingale differences, `||grad log p||^2
    <= 2 L (-log p)`, entropy `<= log|A|`).
    """
    out = _a(T) * _a(L) * _a(R) ** 2 * np.log(_a(vocab_size)) / 2.0
    return _f(out, T, L, R, vocab_size)


def score_norm_bound(T: ArrayLike, L: ArrayLike, C: ArrayLike) -> FloatOrArray:
    """Pathwise `||grad log pi(y)|| <= T sqrt(2 L log C)` for every trajectory (ours).

    Per token, `||grad log p||^2 <= 2 L (-log p) <= 2 L log C` (Assumption 2: `p >= 1/C`).
    """
    return _f(_a(T) * np.sqrt(2.0 * _a(L) * np.log(_a(C))), T, L, C)


def update_norm_sq_bound(eps: ArrayLike, R: ArrayLike, L: ArrayLike, C: ArrayLike) -> FloatOrArray:
    """Pathwise `||g_n||^2 <= P = 2 (1+eps)^2 R^2 L log C` for the class (ours).

    `||1/(TG) sum_i c_i s_i A_i|| <= (1/(TG)) (sum_i c_i) R T sqrt(2 L log C)` and
    `sum_i c_i <= G(1+eps)` (eq. 5); a batch average of `B` groups obeys the same bound.
    """
    out = 2.0 * (1.0 + _a(eps)) ** 2 * _a(R) ** 2 * _a(L) * np.log(_a(C))
    return _f(out, eps, R, L, C)


def bias_per_removed_mass(R: ArrayLike, L: ArrayLike, C: ArrayLike) -> FloatOrArray:
    """`K_b = R sqrt(2 L log C)`: Proposition 1's bias half, `||group bias|| <= K_b m` (ours).

    `E[g^w - g^IS | group] = 1/(TG) sum_i (c_i - rho_i) s_i A_i` has norm at most
    `(1/T) R T sqrt(2 L log C) (1/G) sum_i (rho_i - c_i)`; the last factor is the removed mass
    `m` (TIC: `mean rho_i 1{rho_i > 1+eps}`; GMC: `(rho_bar - 1 - eps)_+`).
    """
    return _f(_a(R) * np.sqrt(2.0 * _a(L) * np.log(_a(C))), R, L, C)


def group_bias_bound(
    removed_mass: ArrayLike, R: ArrayLike, L: ArrayLike, C: ArrayLike
) -> FloatOrArray:
    """Per-group bias norm `||E[g^w - g^IS | H_n]|| <= R sqrt(2 L log C) E[m | H_n]` (ours)."""
    out = _a(bias_per_removed_mass(R, L, C)) * _a(removed_mass)
    return _f(out, removed_mass, R, L, C)


def removed_mass_bound(
    kl: ArrayLike, eps: ArrayLike, method: str, tight: bool = False
) -> FloatOrArray:
    """Step 2 of the §4.2 chain: removed importance mass `<= KL / denominator`.

    `method="tic"`: `E_mu[rho 1{rho > 1+eps}] <= KL / c_eps`; `method="gmc"`:
    `E[(rho_bar - 1 - eps)_+] <= KL / log(1+2eps)` (any group size, by convexity). With
    `tight=True` the tight denominators (`theory.constants`) are used.
    """
    return _f(_a(kl) / _a(denominator(eps, method, tight)), kl, eps)


def denominator(
    eps: ArrayLike,
    method: str,
    tight: bool = False,
    group_size: ArrayLike | None = None,
    delta: ArrayLike | None = None,
) -> FloatOrArray:
    """The KL denominator of the chain: `log(1+2eps)` (GMC), `c_eps` (TIC), tight versions (ours),
    or Corollary 2's `2 eps G / (1+delta)` (GMC under `|rho - 1| <= delta`, when `group_size` and
    `delta` are given; ours, `theory.chain.derive_group_removed_mass_denominator`)."""
    if method not in ("tic", "gmc"):
        raise ValueError(f"method must be 'tic' or 'gmc', got {method!r}")
    if group_size is not None or delta is not None:
        if method != "gmc" or group_size is None or delta is None:
            raise ValueError("group_size and delta (Corollary 2) go together and only with 'gmc'")
        return _f(2.0 * _a(eps) * _a(group_size) / (1.0 + _a(delta)), eps, group_size, delta)
    if method == "tic":
        return tight_tic_denominator(eps) if tight else c_eps(eps)
    return tight_gmc_denominator(eps) if tight else gmc_denominator(eps)


def group_removed_mass_bound(
    kl: ArrayLike, eps: ArrayLike, group_size: ArrayLike, delta: ArrayLike
) -> FloatOrArray:
    """Corollary 2's regime `|rho - 1| <= delta`: `E[(rho_bar-1-eps)_+] <= (1+delta) KL/(2 eps G)`.

    Derivation (ours; `theory.chain.derive_group_removed_mass_denominator`): `(y-eps)_+ <=
    y^2/(4eps)` gives `chi^2/(4 eps G)`, and `phi(x) >= (x-1)^2/(2(1+delta))` gives
    `chi^2 <= 2(1+delta) KL`. Squared, this is the `(1+delta)^2/(G^2 eps^2)` of Corollary 2.
    """
    den = denominator(eps, "gmc", group_size=group_size, delta=delta)
    return _f(_a(kl) / _a(den), kl, eps, group_size, delta)


def kl_drift_bound(T: ArrayLike, L: ArrayLike, drift_sq: ArrayLike) -> FloatOrArray:
    """Step 3 of §4.2: `D_KL(pi_theta || pi_theta') <= (T L / 2) ||theta - theta'||^2`.

    Per token, `theta' -> E_theta[log pi_theta - log pi_theta']` vanishes with zero gradient at
    `theta' = theta` (the score has mean zero) and has `L`-Lipschitz gradient (Assumption 1);
    summing `T` tokens gives the factor `T`.
    """
    return _f(_a(T) * _a(L) / 2.0 * _a(drift_sq), T, L, drift_sq)


def drift_bound(eta: ArrayLike, tau: ArrayLike, second_moment: ArrayLike) -> FloatOrArray:
    """`||theta_n - theta_{n-tau}||^2 <= eta^2 tau^2 M` for one lag `tau` (the `O(eta^2 tau^2)`).

    `||sum_{k<tau} eta g_k||^2 <= tau sum_k eta^2 ||g_k||^2` (Cauchy-Schwarz) and `E||g_k||^2 <= M`
    (Proposition 1). For random lags use `drift_second_moment_bound` with `tau2 = E[tau^2]`.
    """
    return _f(_a(eta) ** 2 * _a(tau) ** 2 * _a(second_moment), eta, tau, second_moment)


def drift_second_moment_bound(
    eta: ArrayLike, tau2: ArrayLike, second_moment: ArrayLike
) -> FloatOrArray:
    """`E||theta_n - theta_{n-tau_n}||^2 <= eta^2 E[tau^2] M` (delay regularity, Assumption 3)."""
    return _f(_a(eta) ** 2 * _a(tau2) * _a(second_moment), eta, tau2, second_moment)


def drift_fourth_moment_bound(
    eta: ArrayLike, tau4: ArrayLike, second_moment: ArrayLike, update_sq_bound: ArrayLike
) -> FloatOrArray:
    """`E||theta_n - theta_{n-tau_n}||^4 <= eta^4 E[tau^4] P M` (ours).

    `||Delta_t||^4 <= (eta^2 t^2 P) ||Delta_t||^2` (pathwise bound on one factor), then the
    delay-regularity condition and `E||Delta_t||^2 <= eta^2 t^2 M`.
    """
    out = _a(eta) ** 4 * _a(tau4) * _a(second_moment) * _a(update_sq_bound)
    return _f(out, eta, tau4, second_moment, update_sq_bound)


def lag_moments(lags: ArrayLike) -> tuple[float, float]:
    """Averaged realised-lag moments `(tau2, tau4)` = means of `tau^2`, `tau^4` over all groups.

    `lags` holds the lag of every group used, e.g. `[N, B]`; `tau4` is the paper's `bar tau_4`.
    """
    lag = _a(lags)
    if lag.size == 0 or np.any(lag < 0):
        raise ValueError("lags must be a non-empty array of non-negative delays")
    return float(np.mean(lag**2)), float(np.mean(lag**4))


def _chain_factors(
    eps: ArrayLike,
    T: ArrayLike,
    L: ArrayLike,
    R: ArrayLike,
    C: ArrayLike,
    method: str,
    tight: bool,
    group_size: ArrayLike | None,
    delta: ArrayLike | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(K_b, T L / 2, den)`: bias per removed mass, the KL drift factor, the KL denominator."""
    den = _a(denominator(eps, method, tight, group_size, delta))
    return _a(bias_per_removed_mass(R, L, C)), _a(T) * _a(L) / 2.0, den


def bias_norm_bound(
    *,
    eta: ArrayLike,
    tau2: ArrayLike,
    eps: ArrayLike,
    T: ArrayLike,
    L: ArrayLike,
    R: ArrayLike,
    C: ArrayLike,
    vocab_size: ArrayLike,
    method: str,
    constant: str | float = "paper",
    tight: bool = False,
    group_size: ArrayLike | None = None,
    delta: ArrayLike | None = None,
) -> FloatOrArray:
    """Per-step `E||b_n|| <= K_b (T L / 2) eta^2 tau2 M / den` (the chain in first moments; ours).

    `b_n` is the bias vector of `g_n` (normalisation `1/T`); `tau2` the step's (or average)
    `E[tau^2]`; `M` Proposition 1 (`constant`), `den` as in `denominator`.
    """
    m = second_moment_bound(eps, T, L, R, vocab_size, constant)
    k_b, kl_factor, den = _chain_factors(eps, T, L, R, C, method, tight, group_size, delta)
    out = k_b * kl_factor * _a(drift_second_moment_bound(eta, tau2, m)) / den
    return _f(out, eta, tau2, eps, T, L, R, C, vocab_size)


def bias_sq_bound(
    *,
    eta: ArrayLike,
    tau4: ArrayLike,
    eps: ArrayLike,
    T: ArrayLike,
    L: ArrayLike,
    R: ArrayLike,
    C: ArrayLike,
    vocab_size: ArrayLike,
    method: str,
    constant: str | float = "paper",
    tight: bool = False,
    group_size: ArrayLike | None = None,
    delta: ArrayLike | None = None,
) -> FloatOrArray:
    """Per-step `E||b_n||^2 <= K_b^2 (T L / 2)^2 eta^4 tau4 P M / den^2` (the squared chain; ours).

    Equals `kappa T L^5 R^6 log^2(C) log|A| (1+eps)^3 eta^4 tau4 / den^2`.
    """
    m = second_moment_bound(eps, T, L, R, vocab_size, constant)
    p = update_norm_sq_bound(eps, R, L, C)
    k_b, kl_factor, den = _chain_factors(eps, T, L, R, C, method, tight, group_size, delta)
    out = (k_b * kl_factor / den) ** 2 * _a(drift_fourth_moment_bound(eta, tau4, m, p))
    return _f(out, eta, tau4, eps, T, L, R, C, vocab_size)


@dataclass(frozen=True)
class BoundTerms:
    """A bound `a/eta + b eta + c eta^4` split into its terms at the given step size.

    `optimisation` (`a/eta`), `variance` (`b eta`, the second-moment term) and `delay` (`c eta^4`,
    the squared-bias term) are contributions to the right-hand side of a bound on
    `(1/N) sum_n E||grad J(theta_n)||^2`; `eta` and the coefficients are kept so the same bound can
    be re-evaluated or tuned (`at`, `best_step_size`).
    """

    eta: FloatOrArray
    optimisation: FloatOrArray
    variance: FloatOrArray
    delay: FloatOrArray

    @property
    def total(self) -> FloatOrArray:
        """Sum of the three terms."""
        return _f(
            _a(self.optimisation) + _a(self.variance) + _a(self.delay),
            self.optimisation,
            self.variance,
            self.delay,
        )

    @property
    def coefficients(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`(a, b, c)` with `optimisation = a/eta`, `variance = b eta`, `delay = c eta^4`."""
        e = _a(self.eta)
        return _a(self.optimisation) * e, _a(self.variance) / e, _a(self.delay) / e**4

    def at(self, eta: ArrayLike) -> BoundTerms:
        """The same bound at another step size."""
        a, b, c = self.coefficients
        e = _a(eta)
        likes = (eta, self.optimisation, self.variance, self.delay)
        return BoundTerms(_f(e, eta), _f(a / e, *likes), _f(b * e, *likes), _f(c * e**4, *likes))

    def best_step_size(self) -> float:
        """Step size minimising the total (scalar bounds only; numeric, convex in `log eta`)."""
        from theory.numerics import min_over_eta

        a, b, c = (float(v) for v in self.coefficients)
        return min_over_eta(a, b, c)[0]

    def as_dict(self) -> dict[str, FloatOrArray]:
        """`eta`, the three terms and the total."""
        return {
            "eta": self.eta,
            "optimisation": self.optimisation,
            "variance": self.variance,
            "delay": self.delay,
            "total": self.total,
        }


@dataclass(frozen=True)
class LemmaOneTerms:
    """Lemma 1's right-hand side from measured (or bounded) per-step moments."""

    optimisation: float
    variance: float
    bias: float

    @property
    def total(self) -> float:
        """Sum of the three terms."""
        return self.optimisation + self.variance + self.bias


def lemma1_terms(
    eta: float,
    T: float,
    R: float,
    L: float,
    vocab_size: int,
    second_moments: ArrayLike,
    bias_sq: ArrayLike,
    objective_gap: float | None = None,
) -> LemmaOneTerms:
    """Lemma 1 (paper's constants): the three terms for `N = len(second_moments)` steps.

    Bounds `(1/N) sum_n E||grad J(theta_n)||^2` by

    * optimisation `2 T (J* - E J(theta_0)) / (eta N)` (`objective_gap`, default `R`, since
      `J in [0, R]`),
    * variance `(T^2/N) sum_n eta R L (2 log|A| + 1) E||g_n||^2 = T L_J eta mean(E||g_n||^2)`,
    * bias `(T^2/N) sum_n E||b_n||^2`,

    with per-step second moments `E||g_n||^2` and squared bias norms `E||b_n||^2` of the paper's
    `g_n` (normalisation `1/T`), e.g. measured on a toy run. Derivation: `theory.chain.derive_lemma1`.
    """
    g2 = _a(second_moments).ravel()
    b2 = _a(bias_sq).ravel()
    if g2.shape != b2.shape or g2.size == 0:
        raise ValueError("second_moments and bias_sq must be non-empty and of one length N")
    n = g2.size
    gap = R if objective_gap is None else objective_gap
    smooth = float(objective_smoothness(T, R, L, vocab_size))
    return LemmaOneTerms(
        optimisation=2.0 * T * gap / (eta * n),
        variance=float(T * smooth * eta * np.mean(g2)),
        bias=float(T**2 * np.mean(b2)),
    )


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
    """Total of Lemma 1's right-hand side (`lemma1_terms(...).total`; the earlier signature)."""
    return lemma1_terms(
        eta, T, R, L, vocab_size, second_moments, bias_sq, objective_gap=objective_gap
    ).total


def theorem_terms(
    method: str,
    *,
    T: ArrayLike,
    vocab_size: ArrayLike,
    R: ArrayLike,
    C: ArrayLike,
    L: ArrayLike,
    eta: ArrayLike,
    N: ArrayLike,
    eps: ArrayLike,
    tau4: ArrayLike,
    objective_gap: ArrayLike | None = None,
    constant: str | float = "paper",
    tight: bool = False,
    group_size: ArrayLike | None = None,
    delta: ArrayLike | None = None,
) -> BoundTerms:
    """Theorem 1 (`method="gmc"`) or 2 (`"tic"`) with explicit constants (ours; see module table).

    Bounds `(1/N) sum_n E||grad J(theta_n)||^2` by

    * optimisation `2 T gap / (eta N)` (`gap = J* - E J(theta_0) <= R`),
    * variance `T L_J eta M = kappa T L^2 R^3 log|A| (2 log|A|+1) (1+eps) eta`,
    * delay `T^2 E||b||^2 <= kappa T^3 L^5 R^6 log^2(C) log|A| (1+eps)^3 eta^4 tau4 / den^2`,

    `den = log(1+2eps)` (GMC) or `c_eps` (TIC), or the tight versions (`tight=True`), or
    Corollary 2's `2 eps G/(1+delta)` (GMC with `group_size`, `delta`); `tau4` the averaged fourth
    moment of the realised lags (`lag_moments`); `constant` Proposition 1's (`"paper"` 8, `"ours"` 2).
    """
    gap = _a(R) if objective_gap is None else _a(objective_gap)
    m = _a(second_moment_bound(eps, T, L, R, vocab_size, constant))
    e = _a(eta)
    opt = 2.0 * _a(T) * gap / (e * _a(N))
    var = _a(T) * _a(objective_smoothness(T, R, L, vocab_size)) * e * m
    bias2 = bias_sq_bound(
        eta=eta,
        tau4=tau4,
        eps=eps,
        T=T,
        L=L,
        R=R,
        C=C,
        vocab_size=vocab_size,
        method=method,
        constant=constant,
        tight=tight,
        group_size=group_size,
        delta=delta,
    )
    delay = _a(T) ** 2 * _a(bias2)
    likes = (T, vocab_size, R, C, L, eta, N, eps, tau4)
    return BoundTerms(_f(e, *likes), _f(opt, *likes), _f(var, *likes), _f(delay, *likes))


def theorem1_terms(**kwargs: ArrayLike) -> BoundTerms:
    """Theorem 1 (GMC-GRPO): `theorem_terms("gmc", ...)`."""
    return theorem_terms("gmc", **kwargs)  # type: ignore[arg-type]


def theorem2_terms(**kwargs: ArrayLike) -> BoundTerms:
    """Theorem 2 (TIC-GRPO): `theorem_terms("tic", ...)`."""
    return theorem_terms("tic", **kwargs)  # type: ignore[arg-type]


def corollary2_terms(*, group_size: ArrayLike, delta: ArrayLike, **kwargs: ArrayLike) -> BoundTerms:
    """Corollary 2 (GMC, `|rho - 1| <= delta`): Theorem 1 with `den = 2 eps G / (1+delta)`."""
    return theorem_terms("gmc", group_size=group_size, delta=delta, **kwargs)  # type: ignore[arg-type]


def theorem_bound(
    eta: ArrayLike,
    N: ArrayLike,
    eps: ArrayLike,
    tau4: ArrayLike,
    method: str = "gmc",
    constants: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> FloatOrArray:
    """Theorem 1/2's printed shape `C1/(eta N) + C2 (1+eps) eta + C3 K eta^4 tau4` (unit constants).

    `K = (1+eps)^3 / log^2(1+2eps)` (GMC) or `(1+eps)^3 / c_eps^2` (TIC). For scalings (slopes,
    ratios between methods); `theorem_terms` has the explicit constants.
    """
    c1, c2, c3 = constants
    k = gmc_penalty(eps) if method == "gmc" else tic_penalty(eps)
    e, t, n = _a(eta), _a(tau4), _a(N)
    out = c1 / (e * n) + c2 * (1.0 + _a(eps)) * e + c3 * _a(k) * e**4 * t
    return _f(out, eta, N, eps, tau4)


def tuned_bound(N: ArrayLike, eps: ArrayLike, tau4: ArrayLike, method: str = "gmc") -> FloatOrArray:
    """Step-size-tuned shape `sqrt((1+eps)/N) + (K tau4 / N^4)^(1/5)` (Theorem 2's printed form)."""
    k = gmc_penalty(eps) if method == "gmc" else tic_penalty(eps)
    n = _a(N)
    out = np.sqrt((1.0 + _a(eps)) / n) + (_a(k) * _a(tau4) / n**4) ** 0.2
    return _f(out, N, eps, tau4)


def tuned_step_size(
    N: ArrayLike, eps: ArrayLike, tau4: ArrayLike, method: str = "gmc"
) -> FloatOrArray:
    """`eta = min{((1+eps) N)^(-1/2), (K tau4 N)^(-1/5)}`, within a factor 2 of the best bound."""
    k = gmc_penalty(eps) if method == "gmc" else tic_penalty(eps)
    n, t = _a(N), _a(tau4)
    eta_s = ((1.0 + _a(eps)) * n) ** -0.5
    with np.errstate(divide="ignore"):
        eta_d = np.where(t > 0, (_a(k) * t * n) ** -0.2, np.inf)
    return _f(np.minimum(eta_s, eta_d), N, eps, tau4)


def corollary2_bound(
    N: ArrayLike, eps: ArrayLike, tau4: ArrayLike, group_size: ArrayLike, delta: ArrayLike
) -> FloatOrArray:
    """Corollary 2's printed shape `sqrt((1+eps)/N) + ((1+delta)^2 (1+eps)^3 tau4 / (G^2 eps^2 N^4))^(1/5)`."""
    n, e = _a(N), _a(eps)
    d = (1 + _a(delta)) ** 2 * (1 + e) ** 3 * _a(tau4)
    out = np.sqrt((1 + e) / n) + (d / (_a(group_size) ** 2 * e**2 * n**4)) ** 0.2
    return _f(out, N, eps, tau4, group_size, delta)
