"""The §4.2 proof chain in sympy, with every constant explicit (the paper's appendix is absent).

Symbols (all positive): `T` response length, `A` vocabulary size `|A|`, `R` reward bound
(`r in [0, R]`), `C` coverage constant (Assumption 2: every token probability `>= 1/C`), `L`
smoothness of token log-probabilities (Assumption 1), `eta` step size, `N` iterations, `eps`
threshold, `onep` = `1 + eps` (kept as its own symbol so its power can be read off), `den` the KL
denominator (`log(1+2eps)` for GMC, `c_eps` for TIC), `tau2`, `tau4` the averaged delay moments,
`kappa` Proposition 1's constant (paper: 8; ours: 2), `gap` = `J* - E J(theta_0) <= R`.

The chain (each step a function below; "ours" marks constants the paper does not print):

1. Lemma 1 (paper's constants, re-derived): ascent `theta_{n+1} = theta_n + eta g_n` on the
   `L_J`-smooth `J`, `E[g_n | F] = grad J / T + b_n`, Young's inequality with weight `1/T`:
   `(1/N) sum E||grad J||^2 <= 2T gap/(eta N) + (T^2/N) sum [T^-1 L_J eta E||g_n||^2 + E||b_n||^2]`
   with `L_J = T R L (2 log A + 1)` (Hessian of `J`: `||E[r grad^2 log pi]|| <= R T L`,
   `||E[r s s^T]|| <= R E||s||^2 <= 2 R L T log A`).
2. Proposition 1, second moment: `M = kappa (1+eps) L R^2 log A / T`; the derivation gives
   `kappa = 2 (R_A/R)^2` for advantages `|A_hat| <= R_A`: 2 (ours) for leave-one-out advantages,
   8 (the paper's) with `R_A = 2R`.
3. Pathwise (Assumption 2, ours): `||grad log pi(y_t|.)||^2 <= 2 L log C`, so a trajectory score is
   at most `T sqrt(2 L log C)` and `||g||^2 <= P = 2 (1+eps)^2 R^2 L log C` (uses
   `sum_i c_i |A_i| <= G (1+eps) R`).
4. Proposition 1, bias (constant ours): `||E[g^w - g^IS | group]|| <= K_b * removed mass`,
   `K_b = R sqrt(2 L log C)` (the `1/T` of `g` cancels the `T` of the score bound).
5. Removed mass `<= D / den` (convexity for GMC, `(rho_bar - 1 - eps)_+`; the pointwise bound for
   TIC); `D <= (T L / 2) ||theta_n - theta_{n-tau}||^2` (Assumption 1).
6. Drift (ours): `E||Delta||^2 <= eta^2 tau2 M` (Cauchy-Schwarz over `tau` updates, delay
   regularity) and `E||Delta||^4 <= eta^4 tau4 P M` (one factor pathwise, one in mean).
7. Squaring: `E||b_n||^2 <= K_b^2 (T L / 2)^2 eta^4 tau4 P M / den^2`, which is
   `kappa T L^5 R^6 log^2 C log A (1+eps)^3 eta^4 tau4 / den^2`: the `(1+eps)^3` of
   Theorem 1 is two powers from the pathwise bound and one from Proposition 1. With both
   fourth-moment factors pathwise (no delay regularity) the power would be 4.
8. Theorem 1/2 with explicit constants: optimisation `2 T gap/(eta N)`, variance
   `T L_J eta M`, delay `T^2 E||b||^2` bound; Corollary 2 replaces `den` by `2 eps G / (1+delta)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

T, A, R, C, L = sp.symbols("T A R C L", positive=True)
ETA, N, EPS, ONEP, DEN = sp.symbols("eta N epsilon onep den", positive=True)
TAU2, TAU4, KAPPA, GAP = sp.symbols("tau2 tau4 kappa gap", positive=True)
G, DELTA, RA = sp.symbols("G delta R_A", positive=True)
ONEPDELTA = sp.Symbol("onepdelta", positive=True)  # 1 + delta, for reading its power
G2, B2 = sp.symbols("g2 b2", positive=True)  # step averages of E||g_n||^2 and E||b_n||^2
RHOBAR, DTHETA2, MASS, MOMENT, KL = sp.symbols("rhobar dtheta2 m M KL", positive=True)
CAP, NABLA_J, TIC_BIAS = sp.symbols("c gradJ tic_bias")

LATEX_NAMES: dict[sp.Symbol, str] = {
    A: r"\lvert\mathcal{A}\rvert",
    C: r"\mathcal{C}",
    ETA: r"\eta",
    EPS: r"\epsilon",
    ONEP: r"(1+\epsilon)",
    DEN: r"\mathrm{den}",
    TAU2: r"\bar\tau_2",
    TAU4: r"\bar\tau_4",
    KAPPA: r"\kappa",
    GAP: r"\Delta_J",
    DELTA: r"\delta",
    ONEPDELTA: r"(1+\delta)",
    RA: r"R_{A}",
    G2: r"\overline{\mathbb{E}\Vert g_n\Vert^2}",
    B2: r"\overline{\mathbb{E}\Vert b_n\Vert^2}",
    RHOBAR: r"\bar\rho",
    DTHETA2: r"\Vert\theta_n-\theta_{n-\tau}\Vert^2",
    MASS: r"m",
    MOMENT: r"M",
    KL: r"D",
    CAP: r"c",
    NABLA_J: r"\nabla J(\theta_n)",
    TIC_BIAS: r"\mathbb{E}_\mu[(c-\rho)\,s\,(r-\mathbb{E}_\mu r)]",
}
PLAIN_NAMES = {
    "onepdelta": "(1+delta)",
    "onep": "(1+eps)",
    "epsilon": "eps",
    "rhobar": "rho_bar",
    "dtheta2": "||theta_n - theta_(n-tau)||^2",
    "gradJ": "grad J",
    "tic_bias": "E_mu[(c-rho) s (r - E_mu r)]",
    "g2": "mean E||g_n||^2",
    "b2": "mean E||b_n||^2",
}


def to_latex(expr: sp.Basic) -> str:
    """`sympy.latex` with the paper's symbol names (`|A|`, `\\mathcal{C}`, `\\bar\\tau_4`, ...)."""
    return sp.latex(expr, symbol_names=LATEX_NAMES)


def to_plain(expr: sp.Basic) -> str:
    """Plain-text form for a terminal: sympy's string with `^` for powers and readable names."""
    text = sp.sstr(expr).replace("**", "^")
    for name, plain in PLAIN_NAMES.items():
        text = re.sub(rf"\b{name}\b", plain, text)
    return text


def exponent(expr: sp.Expr, var: sp.Symbol) -> sp.Expr:
    """Power of `var` in a monomial-like `expr` (`var d log(expr) / d var`, simplified)."""
    return sp.simplify(var * sp.diff(sp.expand_log(sp.log(expr), force=True), var))


@dataclass(frozen=True)
class LemmaOne:
    """Lemma 1's three coefficients as derived: `rhs = opt * gap + var * E||g||^2 + bias * E||b||^2`
    (averages over steps), and the smoothness constant `L_J` of `J`."""

    opt: sp.Expr
    var: sp.Expr
    bias: sp.Expr
    smoothness: sp.Expr
    rhs: sp.Expr


@lru_cache(maxsize=1)
def derive_lemma1() -> LemmaOne:
    """Descent lemma with Young weight `a`, solved for the coefficients and evaluated at `a = 1/T`.

    One step: `E J_{n+1} >= E J_n + eta E<grad J, g_n> - (L_J/2) eta^2 E||g_n||^2` and
    `<grad J, grad J/T + b> >= (1/T - a/2)||grad J||^2 - ||b||^2/(2a)`. Summing over `N` steps and
    dividing by `N eta (1/T - a/2)` gives the coefficients below; `a = 1/T` yields the paper's.
    """
    a = sp.Symbol("a", positive=True)
    x_coef = ETA * (1 / T - a / 2)
    smooth = T * R * L * (2 * sp.log(A) + 1)
    opt = sp.simplify(1 / (N * x_coef))
    bias = sp.simplify((ETA / (2 * a)) / x_coef)
    var = sp.simplify((smooth * ETA**2 / 2) / x_coef)
    at = {a: 1 / T}
    opt, bias, var = (sp.simplify(e.subs(at)) for e in (opt, bias, var))
    return LemmaOne(opt, var, bias, smooth, opt * GAP + var * G2 + bias * B2)


def paper_lemma1_coefficients() -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """The coefficients printed in Lemma 1: `2T/(eta N)`, `T^2 eta R L (2 log|A| + 1)`, `T^2`."""
    return 2 * T / (ETA * N), T**2 * ETA * R * L * (2 * sp.log(A) + 1), T**2


def second_moment(kappa: sp.Expr = KAPPA) -> sp.Expr:
    """Proposition 1: `M = kappa (1+eps) L R^2 log|A| / T` (paper: `kappa = 8`)."""
    return kappa * ONEP * L * R**2 * sp.log(A) / T


@lru_cache(maxsize=1)
def derive_second_moment_constant() -> sp.Expr:
    """`kappa` produced by the derivation for advantages `|A_hat| <= R_A`: `2 R_A^2 / R^2`.

    `||1/(TG) sum_i c_i s_i A_i||^2 <= (1/(T G)^2) (sum_i c_i) (sum_i c_i ||s_i||^2 A_i^2)`
    (Cauchy-Schwarz, `c_i >= 0`), `sum_i c_i <= G (1+eps)` (eq. 5), `c_i <= rho_i` and
    `E_mu[rho ||s||^2] = E_pi||s||^2 <= 2 L T log|A|` (martingale scores, `||grad log p||^2 <=
    2 L (-log p)`, entropy `<= log|A|`).
    """
    bound = (1 / (T * G) ** 2) * G * ONEP * G * RA**2 * 2 * L * T * sp.log(A)
    return sp.simplify(bound / (ONEP * L * R**2 * sp.log(A) / T))


def pathwise_update_bound() -> sp.Expr:
    """`||g||^2 <= P = (1+eps)^2 R^2 2 L log C` (ours, Assumption 2)."""
    score = T * sp.sqrt(2 * L * sp.log(C))
    return (ONEP * G * R * score / (T * G)) ** 2


def bias_per_removed_mass() -> sp.Expr:
    """`K_b = R sqrt(2 L log C)`: group bias norm per unit of removed importance mass (ours)."""
    return R * T * sp.sqrt(2 * L * sp.log(C)) / T


def kl_drift_factor() -> sp.Expr:
    """`T L / 2`: `D <= (T L / 2) ||theta_n - theta_{n-tau}||^2` (§4.2 step 3)."""
    return T * L / 2


def drift_second_moment(m: sp.Expr) -> sp.Expr:
    """`E||theta_n - theta_{n-tau}||^2 <= eta^2 tau2 M` (the `O(eta^2 tau^2)` drift of §4.2)."""
    return ETA**2 * TAU2 * m


def drift_fourth_moment(m: sp.Expr, p: sp.Expr) -> sp.Expr:
    """`E||theta_n - theta_{n-tau}||^4 <= eta^4 tau4 P M` (pathwise times mean; ours)."""
    return ETA**4 * TAU4 * p * m


def bias_sq_bound(den: sp.Expr = DEN, m: sp.Expr | None = None) -> sp.Expr:
    """`E||b_n||^2 <= K_b^2 (T L/2)^2 E||Delta||^4 / den^2` (squaring the chain)."""
    m = second_moment() if m is None else m
    fourth = drift_fourth_moment(m, pathwise_update_bound())
    return bias_per_removed_mass() ** 2 * kl_drift_factor() ** 2 * fourth / den**2


def bias_norm_bound(den: sp.Expr = DEN, m: sp.Expr | None = None) -> sp.Expr:
    """`E||b_n|| <= K_b (T L/2) eta^2 tau2 M / den` (the chain in first moments, uses `tau2`)."""
    m = second_moment() if m is None else m
    return bias_per_removed_mass() * kl_drift_factor() * drift_second_moment(m) / den


@dataclass(frozen=True)
class TheoremTerms:
    """Theorem 1/2's right-hand side with explicit constants: three terms and their sum."""

    optimisation: sp.Expr
    variance: sp.Expr
    delay: sp.Expr

    @property
    def total(self) -> sp.Expr:
        """Sum of the three terms."""
        return self.optimisation + self.variance + self.delay


@lru_cache(maxsize=16)
def theorem_terms(den: sp.Expr = DEN, m: sp.Expr | None = None) -> TheoremTerms:
    """Lemma 1 with Proposition 1 and the bias chain plugged in (`gap` kept symbolic)."""
    m = second_moment() if m is None else m
    lem = derive_lemma1()
    return TheoremTerms(
        optimisation=lem.opt * GAP,
        variance=lem.var * m,
        delay=lem.bias * bias_sq_bound(den, m),
    )


@lru_cache(maxsize=1)
def derive_group_removed_mass_denominator() -> tuple[sp.Expr, bool]:
    """Corollary 2's effective denominator `2 eps G / (1+delta)`, derived, with its proof checks.

    `(y - eps)_+ <= y^2/(4 eps)` for all real `y` (`y^2 - 4 eps (y - eps) = (y - 2 eps)^2`);
    `E(rho_bar - 1)^2 = chi^2 / G` (mean of `G` i.i.d. ratios of mean one); on
    `|rho - 1| <= delta`, `phi(x) >= (x-1)^2 / (2 (1+delta))` because both vanish with zero slope at
    `x = 1` and `phi'' = 1/x >= 1/(1+delta)` there; so `chi^2 <= 2 (1+delta) KL` and
    `E(rho_bar - 1 - eps)_+ <= (1+delta) KL / (2 eps G) = KL / den_G`. Returned with `1 + delta`
    as the symbol `onepdelta` (so its power can be read off).
    """
    y = sp.Symbol("y", real=True)
    x = sp.Symbol("x", positive=True)
    kl, chi2 = sp.symbols("KL chi2", positive=True)
    square_ok = sp.expand(y**2 - 4 * EPS * (y - EPS) - (y - 2 * EPS) ** 2) == 0
    phi = x * sp.log(x) - x + 1
    lower = (x - 1) ** 2 / (2 * (1 + DELTA))
    diff = phi - lower
    taylor_ok = (
        sp.simplify(diff.subs(x, 1)) == 0
        and sp.simplify(sp.diff(diff, x).subs(x, 1)) == 0
        and sp.simplify(sp.diff(diff, x, 2) - (1 / x - 1 / (1 + DELTA))) == 0
    )
    mass = (chi2 / G) / (4 * EPS)
    mass = mass.subs(chi2, 2 * (1 + DELTA) * kl)
    den_g = sp.simplify((kl / mass).subs(DELTA, ONEPDELTA - 1))
    return den_g, bool(square_ok and taylor_ok)


@lru_cache(maxsize=8)
def tuned_delay_term(terms: TheoremTerms) -> sp.Expr:
    """Value of `a/eta + c eta^4` at its minimiser `eta = (a/(4c))^(1/5)`: `5 (a/4)^(4/5) c^(1/5)`.

    With `a = optimisation * eta` and `c = delay / eta^4` this is the delay-dominated tuned rate,
    `Theta((c tau4 ... / N^4)^(1/5))`, whose exponents Theorem 2 and Corollary 2 print.
    """
    a = terms.optimisation * ETA
    c = terms.delay / ETA**4
    value = sp.powsimp(5 * (a / 4) ** sp.Rational(4, 5) * c ** sp.Rational(1, 5), force=True)
    return value.replace(sp.Abs, lambda arg: arg)  # every quantity here is positive (C >= 1)


def only_through_log(expr: sp.Expr, var: sp.Symbol) -> bool:
    """True when `expr` depends on `var` only through `log(var)`."""
    ell = sp.Symbol("ell", positive=True)
    return var not in sp.expand_log(expr, force=True).subs(sp.log(var), ell).free_symbols
