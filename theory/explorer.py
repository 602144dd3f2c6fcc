"""The bounds explorer's numbers: Theorems 1-2 and Corollaries 1-2 at one setting (compute only).

`evaluate(settings)` takes an `ExplorerSettings` (the paper's `eps`, `N`, `tau4`, `G`, `eta`,
`delta` and the problem's constants `T`, `|A|`, `R`, `log C`, `L`, `J* - J(theta_0)`) and returns
an `ExplorerResult`: every number the explorer shows, each computed by `theory.bounds`,
`theory.constants`, `theory.numerics` or `theory.curves`, with its provenance:

* `paper`: a formula printed in the paper, evaluated as printed (Lemma 1's optimisation term,
  Lemma 1 x Proposition 1's variance term with the printed 8, the rate exponents of the remark
  after Theorem 1);
* `paper, our c_eps`: a printed formula in `c_eps` (the improvement factor
  `(c_eps/log(1+2eps))^(2/5)` of §4.3, the delay coefficients' ratio
  `(c_eps/log(1+2eps))^2`), evaluated with our `c_eps` (below);
* `paper, unit constants`: a printed `O(.)` or `Theta(.)` shape with every hidden constant set to
  1 (Corollary 1's prescription `min{1, tau4^(1/7) N^(-3/14)}`, the minimiser of the printed
  tuned bound);
* `ours`: a quantity that needs a constant the paper does not print, reconstructed in
  `theory.chain` / `theory.bounds` (every term of Theorems 1-2 with explicit constants, the tuned
  step sizes of those bounds, Corollary 2's denominator `2 eps G/(1+delta)`, the constant of the
  closed-form `eps*`) and `c_eps = log(1+eps) - eps/(1+eps)` itself: the paper names `c_eps`
  without a formula; ours is the largest constant for which Theorem 2's step holds.

`explorer_curves(settings)` returns the arrays the explorer draws around that setting. The notebook
explorer (`theory.explorer_widgets`) and the static page (`theory.explorer_page`) only call these.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gmc_grpo.defaults import PAPER_EPS
from theory import numerics
from theory.bounds import BoundTerms, theorem_terms
from theory.constants import c_eps, gmc_denominator, improvement_factor, tight_gmc_denominator
from theory.curves import corollary1_closed_form, rate_exponent

TOLERANCE_EXPONENT = 1.5  # tau4 = O(N^(3/2)) keeps the no-delay rate (remark after Theorem 1)
CONSTANT_CHOICES = ("paper", "ours")  # Proposition 1's 8 (printed) or our sharper 2

PAPER = "paper"
PAPER_SHAPE = "paper, unit constants"
PAPER_C_EPS = "paper, our c_eps"
OURS = "ours"


@dataclass(frozen=True)
class ExplorerSettings:
    """One point of the explorer. Defaults: the made-up toy setting of `notebooks/bounds.ipynb`."""

    eps: float = PAPER_EPS
    """Cap threshold `eps > 0` (GMC caps the group mean ratio at `1+eps`, TIC clips at `1+eps`)."""
    N: float = 1e4
    """Number of learner iterations `N > 1` (the bounds average `||grad J||^2` over them)."""
    tau4: float = 16.0
    """Averaged fourth moment of the rollout delay, `bar tau_4 >= 0` (e.g. `D^4` for a fixed lag D)."""
    eta: float = 1e-3
    """Step size `eta > 0` of the plain SGD update the theorems analyse."""
    G: float = 8.0
    """Group size `G >= 1` (Corollary 2 only: Theorems 1-2 do not depend on it)."""
    delta: float = 0.5
    """Corollary 2's overlap condition `|rho - 1| <= delta`, `delta >= 0`."""
    T: float = 8.0
    """Maximum response length `T >= 1` (tokens)."""
    vocab_size: float = 16.0
    """Vocabulary size `|A| >= 2` (enters through `log|A|`)."""
    R: float = 1.0
    """Reward range: rewards in `[0, R]`, `R > 0`."""
    log_C: float = math.log(64.0)
    """`log C > 0` of Assumption 2 (every token probability `>= 1/C`)."""
    L: float = 0.5
    """Lipschitz constant `L > 0` of the token score (Assumption 1)."""
    objective_gap: float = 1.0
    """`J* - E J(theta_0)`, in `(0, R]` for rewards in `[0, R]` (Lemma 1's first term)."""
    constant: str = "paper"
    """Proposition 1's constant: `"paper"` (its printed 8) or `"ours"` (2, for `|A_hat| <= R`)."""
    tight: bool = False
    """Use the tight KL denominators (ours: Lambert-W GMC constant; TIC's `c_eps` is already tight)."""

    def __post_init__(self) -> None:
        positive = ("eps", "N", "eta", "T", "R", "log_C", "L", "objective_gap")
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"ExplorerSettings.{name} must be finite and > 0, got {value!r}")
        for name, low in (("tau4", 0.0), ("delta", 0.0), ("G", 1.0), ("T", 1.0)):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= low):
                raise ValueError(f"ExplorerSettings.{name} must be >= {low:g}, got {value!r}")
        if not self.N > 1:
            raise ValueError(f"ExplorerSettings.N must be > 1 (iterations), got {self.N!r}")
        if not self.vocab_size >= 2:
            raise ValueError(f"ExplorerSettings.vocab_size must be >= 2, got {self.vocab_size!r}")
        if self.log_C > 500:
            raise ValueError(
                f"ExplorerSettings.log_C must be <= 500 (C = e^log_C), got {self.log_C}"
            )
        if self.constant not in CONSTANT_CHOICES:
            raise ValueError(
                f"ExplorerSettings.constant must be one of {CONSTANT_CHOICES}, got {self.constant!r}"
            )

    def replace(self, **changes: Any) -> ExplorerSettings:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Every field by name."""
        return asdict(self)

    def problem(self) -> dict[str, Any]:
        """Keyword arguments of `theory.bounds.theorem_terms` (without `eta`)."""
        return {
            "T": self.T,
            "vocab_size": self.vocab_size,
            "R": self.R,
            "C": math.exp(self.log_C),
            "L": self.L,
            "N": self.N,
            "eps": self.eps,
            "tau4": self.tau4,
            "objective_gap": self.objective_gap,
            "constant": self.constant,
            "tight": self.tight,
        }


SETTING_FIELDS = tuple(f.name for f in fields(ExplorerSettings))


@dataclass(frozen=True)
class Slider:
    """One slider of the explorer: range, scale and the values the static page offers."""

    name: str
    """Field of `ExplorerSettings`."""
    label: str
    """What the slider shows (plain text with the paper's symbol)."""
    low: float
    high: float
    log: bool = True
    """Logarithmic slider (values spread over decades)."""
    steps: int = 8
    """Grid values per decade (log) or in all (linear) on the static page."""
    notable: tuple[float, ...] = ()
    """Values the static page's grid must hold exactly (defaults, the paper's settings)."""
    integer: bool = False
    """Only whole numbers (`G`, `T`, `|A|`)."""

    def grid(self) -> NDArray[np.float64]:
        """The static page's values: an even grid (log or linear) joined with `notable`."""
        if self.log:
            decades = math.log10(self.high) - math.log10(self.low)
            base = np.logspace(
                math.log10(self.low), math.log10(self.high), round(decades * self.steps) + 1
            )
        else:
            base = np.linspace(self.low, self.high, self.steps + 1)
        if self.integer:
            base = np.unique(np.round(base))
        values = np.unique(np.concatenate([base, np.asarray(self.notable, dtype=np.float64)]))
        # drop grid points within 1% of a notable value (two ticks for one place)
        keep = [
            v
            for v in values
            if v in self.notable
            or all(abs(v - n) > 0.01 * max(abs(n), 1e-300) for n in self.notable)
        ]
        return np.asarray(keep, dtype=np.float64)


# The fixed-delay suite of Appendix B.1 (D up to 512, tau4 = D^4), 800 steps, eta = 1e-6,
# eps_high = 0.28, G = 8, completions up to 4096 tokens; Qwen3's vocabulary has 151936 entries
# (its published config). L, R, log C of an LLM are not known: the sliders are for exploring.
_LAGS4 = tuple(float(d**4) for d in (32, 64, 128, 256, 512))
SLIDERS: tuple[Slider, ...] = (
    Slider("eps", "eps (cap 1+eps)", 1e-3, 10.0, steps=10, notable=(0.2, PAPER_EPS, 1.0)),
    Slider("N", "N (iterations)", 10.0, 1e12, steps=3, notable=(800.0, 1e4)),
    Slider("tau4", "tau4 (mean delay^4)", 1.0, 1e20, steps=3, notable=(16.0, *_LAGS4)),
    Slider("eta", "eta (step size)", 1e-9, 1.0, steps=6, notable=(1e-6, 1e-3)),
    Slider("G", "G (group size)", 1.0, 1024.0, steps=10 / 3, notable=(8.0,), integer=True),
    Slider("delta", "delta (|rho-1| <= delta)", 0.0, 4.0, log=False, steps=40, notable=(0.5,)),
    Slider("T", "T (max length)", 1.0, 32768.0, steps=10 / 3, notable=(8.0, 4096.0), integer=True),
    Slider("vocab_size", "|A| (vocabulary)", 2.0, 262144.0, steps=10 / 3, notable=(16.0, 151936.0),
           integer=True),
    Slider("R", "R (reward range)", 0.1, 10.0, steps=10, notable=(1.0,)),
    Slider("log_C", "log C (min token prob 1/C)", 0.01, 100.0, steps=6,
           notable=(math.log(64.0),)),
    Slider("L", "L (score Lipschitz)", 1e-3, 1e3, steps=5, notable=(0.5,)),
    Slider("objective_gap", "J* - J0", 0.01, 10.0, steps=6, notable=(1.0,)),
)  # fmt: skip
SLIDER_BY_NAME = {s.name: s for s in SLIDERS}


@dataclass(frozen=True)
class Number:
    """One shown number: key, label, value, provenance (`PAPER`, `PAPER_SHAPE`, `OURS`)."""

    key: str
    label: str
    value: float
    provenance: str
    group: str


@dataclass(frozen=True)
class ExplorerResult:
    """Everything the explorer shows at one setting (`evaluate`)."""

    settings: ExplorerSettings
    gmc: BoundTerms
    """Theorem 1 (GMC) with explicit constants at `settings.eta` (ours)."""
    tic: BoundTerms
    """Theorem 2 (TIC) with explicit constants at `settings.eta` (ours)."""
    corollary2: BoundTerms
    """Corollary 2 (GMC, `|rho-1| <= delta`, group size `G`) with explicit constants (ours)."""
    tuned_gmc: BoundTerms
    """Theorem 1 at its best step size (numeric minimisation over `eta`)."""
    tuned_tic: BoundTerms
    """Theorem 2 at its best step size."""
    numbers: tuple[Number, ...] = field(default=())

    def __getitem__(self, key: str) -> float:
        for number in self.numbers:
            if number.key == key:
                return number.value
        raise KeyError(f"no number {key!r}; known: {', '.join(n.key for n in self.numbers)}")

    def as_dict(self) -> dict[str, float]:
        """`{key: value}` of every shown number."""
        return {n.key: n.value for n in self.numbers}


def delay_balanced_value(terms: BoundTerms) -> tuple[float, float]:
    """`(eta*, min)` of the optimisation and delay terms alone, `a/eta + c eta^4` (scalar bounds).

    The tuned delay term of Theorems 1-2: its ratio between GMC and TIC is the §4.3 improvement
    factor when nothing else differs (`min = 5 4^(-4/5) a^(4/5) c^(1/5)`, `theory.rates`);
    computed numerically here (bounded Brent in `log eta`), so the identity is checked, not assumed.
    """
    a, _, c = (float(v) for v in terms.coefficients)
    if c <= 0:
        return math.inf, 0.0
    centre = math.log((a / c) ** 0.2)
    s = numerics.brent_minimise(
        lambda s: a * math.exp(-s) + c * math.exp(4 * s), centre - 10, centre + 10
    )
    eta = math.exp(s)
    return eta, a / eta + c * eta**4


def _terms(settings: ExplorerSettings, method: str, **extra: Any) -> BoundTerms:
    return theorem_terms(method, eta=settings.eta, **settings.problem(), **extra)


def _denominators(settings: ExplorerSettings) -> tuple[float, float]:
    """`(GMC, TIC)` KL denominators in use: `log(1+2eps)` (tight: Lambert W) and `c_eps`."""
    eps = settings.eps
    gmc = tight_gmc_denominator(eps) if settings.tight else gmc_denominator(eps)
    return float(gmc), float(c_eps(eps))


def evaluate(settings: ExplorerSettings | None = None) -> ExplorerResult:
    """Every number of the explorer at one setting (module docstring for the provenance)."""
    s = ExplorerSettings() if settings is None else settings
    gmc, tic = _terms(s, "gmc"), _terms(s, "tic")
    cor2 = _terms(s, "gmc", group_size=s.G, delta=s.delta)
    tuned_gmc, tuned_tic = gmc.at(gmc.best_step_size()), tic.at(tic.best_step_size())
    _, balanced_gmc = delay_balanced_value(gmc)
    _, balanced_tic = delay_balanced_value(tic)
    den_gmc, den_tic = _denominators(s)
    p = math.log(s.tau4) / math.log(s.N) if s.tau4 > 0 else -math.inf
    tolerance = s.N**TOLERANCE_EXPONENT
    closed = float(corollary1_closed_form(np.float64(s.N), np.float64(s.tau4)))
    has_delay = s.tau4 > 0
    eps_gmc = numerics.corollary1_eps_star(s.N, s.tau4, "gmc") if has_delay else 0.0
    eps_tic = numerics.corollary1_eps_star(s.N, s.tau4, "tic") if has_delay else 0.0
    factor = float(improvement_factor(s.eps, tight=s.tight))
    thm = "Thm 1 (GMC)"
    gmc_den = "kappa_eps" if s.tight else "log(1+2eps)"
    rows = [
        # the terms at the chosen step size
        ("optimisation", "optimisation term 2T(J*-J0)/(eta N) (Lemma 1), both", gmc.optimisation,
         PAPER, "terms"),
        ("variance", "variance term (Lemma 1 x Prop. 1), both", gmc.variance,
         PAPER if s.constant == "paper" else OURS, "terms"),
        ("delay_gmc", f"delay term, {thm}", gmc.delay, OURS, "terms"),
        ("delay_tic", "delay term, Thm 2 (TIC)", tic.delay, OURS, "terms"),
        ("delay_cor2", "delay term, Cor. 2 (GMC, G, delta)", cor2.delay, OURS, "terms"),
        ("total_gmc", f"bound, {thm}", gmc.total, OURS, "terms"),
        ("total_tic", "bound, Thm 2 (TIC)", tic.total, OURS, "terms"),
        ("total_cor2", "bound, Cor. 2 (GMC)", cor2.total, OURS, "terms"),
        # GMC / TIC at the same step size
        ("delay_ratio", "delay term GMC/TIC", gmc.delay / tic.delay if tic.delay else math.nan,
         OURS, "equal eta"),
        ("delay_ratio_formula", f"(den_TIC/den_GMC)^2 = (c_eps/{gmc_den})^2",
         (den_tic / den_gmc) ** 2, PAPER_C_EPS, "equal eta"),
        ("total_ratio", "bound GMC/TIC", gmc.total / tic.total, OURS, "equal eta"),
        # each bound at its own best step size
        ("eta_gmc", f"best eta, {thm}", float(tuned_gmc.eta), OURS, "tuned eta"),
        ("eta_tic", "best eta, Thm 2 (TIC)", float(tuned_tic.eta), OURS, "tuned eta"),
        ("tuned_total_gmc", f"tuned bound, {thm}", tuned_gmc.total, OURS, "tuned eta"),
        ("tuned_total_tic", "tuned bound, Thm 2 (TIC)", tuned_tic.total, OURS, "tuned eta"),
        ("tuned_ratio", "tuned bound GMC/TIC", tuned_gmc.total / tuned_tic.total, OURS,
         "tuned eta"),
        ("tuned_delay_ratio", "tuned delay term GMC/TIC, min_eta(a/eta + c eta^4)",
         balanced_gmc / balanced_tic if balanced_tic else math.nan, OURS, "tuned eta"),
        ("improvement_factor", f"improvement factor (c_eps/{gmc_den})^(2/5)", factor,
         PAPER_C_EPS, "tuned eta"),
        # Corollary 1 and the delay tolerance
        ("eps_star_closed", "eps* = ((4/5)(tau4/4)^(1/5) N^(-3/10))^(5/7)", closed, OURS,
         "Corollary 1"),
        ("eps_star_gmc", "eps* minimising the printed tuned bound, GMC", eps_gmc, PAPER_SHAPE,
         "Corollary 1"),
        ("eps_star_tic", "eps* minimising the printed tuned bound, TIC", eps_tic, PAPER_SHAPE,
         "Corollary 1"),
        ("eps_prescription", "min{1, tau4^(1/7) N^(-3/14)}",
         min(1.0, s.tau4 ** (1 / 7) * s.N ** (-3 / 14)), PAPER_SHAPE, "Corollary 1"),
        ("tolerance", "N^(3/2): largest tau4 keeping O(N^(-1/2))", tolerance, PAPER_SHAPE,
         "delay tolerance"),
        ("delay_exponent", "p = log tau4 / log N", p, PAPER, "delay tolerance"),
        ("rate_exponent", "rate exponent of the bound at tau4 = N^p", float(rate_exponent(p)),
         PAPER, "delay tolerance"),
        ("tolerated", "tau4 <= N^(3/2) (1 yes, 0 no)", float(s.tau4 <= tolerance), PAPER,
         "delay tolerance"),
        # the denominators
        ("den_gmc", f"GMC denominator {gmc_den}" + (" (tight)" if s.tight else ""),
         den_gmc, OURS if s.tight else PAPER, "denominators"),
        ("den_tic", "TIC denominator c_eps = log(1+eps) - eps/(1+eps)", den_tic, OURS,
         "denominators"),
    ]  # fmt: skip
    numbers = tuple(Number(*row) for row in rows)
    return ExplorerResult(s, gmc, tic, cor2, tuned_gmc, tuned_tic, numbers)


def _log_span(
    centre: float, lo: float, hi: float, decades: float, points: int
) -> NDArray[np.float64]:
    """A log grid around `centre` (spanning `decades` each side), clipped to `[lo, hi]`."""
    a = max(math.log10(lo), math.log10(centre) - decades)
    b = min(math.log10(hi), math.log10(centre) + decades)
    return np.logspace(a, b, points)


def explorer_curves(settings: ExplorerSettings | None = None, points: int = 61) -> dict[str, Any]:
    """The arrays the explorer draws around one setting.

    * `eta`: Theorems 1-2 (and Corollary 2) terms on a step-size grid spanning the chosen and the
      tuned step sizes;
    * `eps`: GMC/TIC at the chosen `eta` (delay-term and bound ratios), at tuned `eta` (bound
      ratio, delay-term ratio) and the improvement factor, on `eps` in `[1e-3, 10]`;
    * `N`: Corollary 1's `eps*` (closed form, numeric GMC and TIC) at the chosen `tau4`;
    * `p`: the rate exponent of the bound at `tau4 = N^p` (the delay tolerance).
    """
    s = ExplorerSettings() if settings is None else settings
    result = evaluate(s)
    etas = [s.eta, float(result.tuned_gmc.eta), float(result.tuned_tic.eta)]
    lo, hi = min(etas), max(etas)
    eta = np.logspace(math.log10(lo) - 2, math.log10(hi) + 2, points)
    gmc = theorem_terms("gmc", eta=eta, **s.problem())
    tic = theorem_terms("tic", eta=eta, **s.problem())
    cor2 = theorem_terms("gmc", eta=eta, group_size=s.G, delta=s.delta, **s.problem())

    eps = np.logspace(-3, 1, (points + 1) // 2 + 10)  # two numeric minimisations per point
    problem = {**s.problem(), "eps": eps}
    gmc_e = theorem_terms("gmc", eta=s.eta, **problem)
    tic_e = theorem_terms("tic", eta=s.eta, **problem)
    tuned, balanced = [], []
    for e in eps:
        g, t = _terms(s.replace(eps=float(e)), "gmc"), _terms(s.replace(eps=float(e)), "tic")
        tuned.append(g.at(g.best_step_size()).total / t.at(t.best_step_size()).total)
        balanced.append(delay_balanced_value(g)[1] / delay_balanced_value(t)[1])

    n = _log_span(s.N, SLIDER_BY_NAME["N"].low, SLIDER_BY_NAME["N"].high, 4, points)
    has_delay = s.tau4 > 0
    p = np.linspace(0.0, 4.5, 91)
    return {
        "eta": {
            "eta": eta,
            "optimisation": np.asarray(gmc.optimisation),
            "variance": np.asarray(gmc.variance),
            "delay_gmc": np.asarray(gmc.delay),
            "delay_tic": np.asarray(tic.delay),
            "delay_cor2": np.asarray(cor2.delay),
            "total_gmc": np.asarray(gmc.total),
            "total_tic": np.asarray(tic.total),
            "total_cor2": np.asarray(cor2.total),
        },
        "eps": {
            "eps": eps,
            "delay_ratio": np.asarray(gmc_e.delay) / np.asarray(tic_e.delay),
            "total_ratio": np.asarray(gmc_e.total) / np.asarray(tic_e.total),
            "tuned_ratio": np.asarray(tuned),
            "tuned_delay_ratio": np.asarray(balanced),
            "improvement_factor": np.asarray(improvement_factor(eps, tight=s.tight)),
        },
        "N": {
            "N": n,
            "eps_star_closed": np.asarray(corollary1_closed_form(n, np.full_like(n, s.tau4))),
            "eps_star_gmc": np.array(
                [numerics.corollary1_eps_star(v, s.tau4, "gmc") if has_delay else 0.0 for v in n]
            ),
            "eps_star_tic": np.array(
                [numerics.corollary1_eps_star(v, s.tau4, "tic") if has_delay else 0.0 for v in n]
            ),
        },
        "p": {"p": p, "rate_exponent": np.asarray(rate_exponent(p))},
        "result": result,
    }


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "n/a" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.4g}"


def numbers_markdown(result: ExplorerResult) -> str:
    """The shown numbers as a Markdown table (group, quantity, value, provenance)."""
    lines = ["| | quantity | value | provenance |", "|---|---|---|---|"]
    previous = ""
    for n in result.numbers:
        group = n.group if n.group != previous else ""
        previous = n.group
        label = n.label.replace("|", "\\|").replace("*", "\\*")
        lines.append(f"| {group} | {label} | {_fmt(n.value)} | {n.provenance} |")
    return "\n".join(lines)


def numbers_html(result: ExplorerResult) -> str:
    """The shown numbers as an HTML table (for the notebook's widget)."""
    import html

    rows = []
    previous = ""
    for n in result.numbers:
        if n.group != previous:
            rows.append(
                f'<tr><th colspan="3" style="text-align:left">{html.escape(n.group)}</th></tr>'
            )
            previous = n.group
        rows.append(
            f"<tr><td>{html.escape(n.label)}</td><td style='text-align:right'>{_fmt(n.value)}</td>"
            f"<td><i>{html.escape(n.provenance)}</i></td></tr>"
        )
    return "<table style='font-size:12px'>" + "".join(rows) + "</table>"
