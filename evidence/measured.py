"""The bounds of §3-§4 with their constants, beside what toy training runs measured (no torch).

Reads the run records of toy learners that tracked their bound quantities
(`TrainConfig.bound_every > 0`, `toy_mdps.train.bounds`): `config.json`, `metrics.jsonl` (one row
per step per seed, `bounds/*` fields) and `summary.json`. Only JSON is read, so
`gmc-grpo theory --runs DIR` needs neither torch nor the toy track: the bounds are evaluated here,
beside their evaluators (`theory.bounds`), and the measurements stay in the run records.

**Setting.** Lemma 1 and Theorems 1-2 analyse `theta_{n+1} = theta_n + eta g_n` with a constant
`eta`, the paper's `g_n` (`1/(T B G)`, advantages `|A_hat| <= R` whose IS estimator is unbiased:
leave-one-out), an estimator of the class (eq. 5) and a removed-mass bound (TIC: `c_eps`, GMC:
`log(1+2 eps)`). `setting(config)` lists what puts a run outside (Adam, a schedule, clipping,
VCPO's per-step ESS factor, another advantage, a method without theorem); such runs keep their
per-step checks (Proposition 1, the chain's steps 1-3), not the theorem row.

**Run-level table** (`RunBounds.terms`): per seed, then mean with a Student-t interval over seeds,

| term | measured | bound (Theorem 1 / 2, explicit constants, `theory.bounds.theorem_terms`) |
| --- | --- | --- |
| total | `(1/N) sum_n ||grad J(theta_n)||^2` | optimisation + variance + delay |
| optimisation | `2T (J(theta_N) - J(theta_0)) / (eta N)` | `2T (R - J(theta_0)) / (eta N)` (`J* <= R`) |
| variance | `T L_J eta mean_n ||g_n||^2` (realised updates) | `T L_J eta M` (Proposition 1) |
| delay | `T^2 mean ||b_n||^2` (recorded steps) | `kappa T^3 L^5 R^6 log^2 C log|A| (1+eps)^3 eta^4 tau4 / den^2` |

with `C` the largest `exp(bounds/log_coverage)` of the run, `tau4` the realised mean of `tau^4`,
`L_J = T R L (2 log|A| + 1)`, `M = (kappa/T)(1+eps) L R^2 log|A|`, `kappa = 8` (Proposition 1,
"paper") or 2 ("ours"). The measured column is Lemma 1's right-hand side with measured moments,
which must itself stay above the measured total (`lemma1` check).

**Per-step checks** (recorded steps; `refutations` lists every violation with run, step, seed and
numbers): second moment `E[||g_n||^2 | F_n^-] <= M` (violated when the interval's lower end is
above `M`); bias `||b_n|| <= K_b,n E[m_n]` with `K_b,n = R sqrt(2 L log C_n)` (Proposition 1's
bias half, ours; not evaluated where no minibatch removed any mass, whose interval is the
degenerate `[0, 0]`) and `||b_n|| <= K_b,n KL_n / den` (with step 2, an exact right-hand side),
removed mass `E[m_n] <= KL_n / den` (step 2), `KL_n <= (T L / 2)
||theta_n - theta_{n-tau}||^2` (step 3, exact, every step), the drift
`||theta_n - theta_{n-tau}||^2 <= tau sum_{k=n-tau}^{n-1} ||theta_{k+1} - theta_k||^2` (pathwise,
every step) and, in expectation over seeds, `E||theta_n - theta_{n-tau}||^2 <= eta^2 tau^2 M`
(the `O(eta^2 tau^2)` step), and Lemma 1's descent step at every step: the exact remainder
`J_{n+1} - J_n - <grad J(theta_n), theta_{n+1} - theta_n> >= -(L_J/2) ||theta_{n+1} - theta_n||^2`
(`_smoothness_check`). Deterministic checks allow a relative rounding of `1e-9`.

**Lemma 1 with measured moments** (`RunBounds.lemma1`) is a consistency check, not a test of the
lemma: its variance term integrates the same updates as the progress term, so the measured total
sits below the right-hand side by the bookkeeping; a right-hand side at or above the ceiling
`T L R^2 log|A| / 2` is `vacuous`, and each term's share is recorded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gmc_grpo.defaults import PAPER_EPS
from gmc_grpo.methods import get_method
from gmc_grpo.stats import t_interval
from theory.bounds import (
    bias_norm_bound,
    bias_per_removed_mass,
    denominator,
    gradient_norm_sq_ceiling,
    objective_smoothness,
    second_moment_bound,
)
from theory.run_terms import CONSTANTS, LOG_C_OVERFLOW_CAP, coverage, theorem_at_constants
from toy_mdps.train.run_records import (
    FIRST_ORDER_TERMS,
    RunSeries,
    class_eps,
    final_objectives,
    find_runs,
    first_order_identity,
    is_plain_sgd,
    is_toy_train_run,
    is_tracked_run,
    load_series,
    run_constants,
    setting,
)

__all__ = [  # the run-record readers are re-exported: callers read and evaluate from one module
    "CONSTANTS",
    "FIRST_ORDER_TERMS",
    "LOG_C_OVERFLOW_CAP",
    "TERMS",
    "RunBounds",
    "RunSeries",
    "all_run_bounds",
    "class_eps",
    "coverage",
    "find_runs",
    "first_order_identity",
    "is_plain_sgd",
    "is_toy_train_run",
    "is_tracked_run",
    "load_series",
    "run_bounds",
    "run_constants",
    "setting",
]

ROUNDING = 1e-9
TERMS = ("total", "optimisation", "variance", "delay")
# what a term's measured counterpart is (Markdown, `$...$` math)
TERM_LATEX = {
    "total": r"$\frac{1}{N}\sum_n\Vert\nabla J(\theta_n)\Vert^2$",
    "optimisation": r"$\frac{2T(J(\theta_N)-J(\theta_0))}{\eta N}$ vs "
    r"$\frac{2T(R-J(\theta_0))}{\eta N}$",
    "variance": r"$T L_J\eta\,\overline{\Vert g_n\Vert^2}$ vs $T L_J \eta M$",
    "delay": r"$T^2\,\overline{\Vert b_n\Vert^2}$ vs "
    r"$\frac{\kappa T^3L^5R^6\log^2\mathcal{C}\log|\mathcal{A}|(1+\epsilon)^3\eta^4\bar\tau_4}{\mathrm{den}^2}$",
}


# ----------------------------------------------------------------------------------------------
# Bounds beside the measurements
# ----------------------------------------------------------------------------------------------


def _interval(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    return t_interval([float(v) for v in np.ravel(values)])


def _ratio(measured: float, bound: float) -> float:
    return measured / bound if bound > 0 else math.inf


@dataclass
class RunBounds:
    """Everything `run_bounds` computes for one tracked run (JSON-able via `as_dict`).

    constants: `T, |A|, R, L, C, eta, N, G, B, eps, tau2, tau4, J0`; setting: reasons it is outside
    the theorems' setting (empty: inside); terms: `{term: {measured: interval, paper, ours}}`
    (bounds with Proposition 1's constant 8 and our 2); lemma1: the measured total against
    Lemma 1's right-hand side with measured moments (with the ceiling, `vacuous` when the
    right-hand side reaches it, each term's share, how many steps carry measured moments);
    smoothness: `L_J` and the largest measured curvature `-2 r_n / ||dtheta||^2` over it
    (`_smoothness_check`); checks: per-step check -> counts and the
    largest measured / bound; refutations: violations (run, check, step, seed, measured, bound);
    series: per-step arrays for the bound-tracking figure (`figures.bound_tracking`).
    """

    name: str
    run_dir: str
    method: str
    constants: dict[str, float]
    setting: list[str]
    terms: dict[str, dict[str, Any]] = field(default_factory=dict)
    lemma1: dict[str, Any] = field(default_factory=dict)
    first_order: dict[str, Any] = field(default_factory=dict)
    smoothness: dict[str, Any] = field(default_factory=dict)
    class_check: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    refutations: list[dict[str, Any]] = field(default_factory=list)
    series: dict[str, Any] = field(default_factory=dict)

    @property
    def in_setting(self) -> bool:
        return not self.setting

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["in_setting"] = self.in_setting
        return _jsonable(out)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


class _Checker:
    """Collects one per-step check: how often it was evaluated, the worst ratio, violations.

    Deterministic quantities are compared as they are (rounding `1e-9`); a Monte Carlo one by
    the lower end of its 95% interval (`lower`), so only a significant excess is a violation,
    and `max_ratio` is the largest `lower / bound`.
    """

    def __init__(self, name: str, run: str, out: dict[str, dict[str, Any]], refs: list) -> None:
        self.name, self.run, self.refs = name, run, refs
        self.entry = out.setdefault(name, {"evaluated": 0, "violations": 0, "max_ratio": 0.0})

    def add(
        self,
        measured: np.ndarray,
        bound: np.ndarray,
        steps: np.ndarray,
        seeds: Sequence[int | str],
        *,
        lower: np.ndarray | None = None,
    ) -> None:
        """`measured`, `bound`, `lower`: `[S, X]` (seeds x steps)."""
        measured, bound = np.asarray(measured, float), np.asarray(bound, float)
        compared = measured if lower is None else np.asarray(lower, float)
        ok = np.isfinite(compared) & np.isfinite(bound)
        slack = ROUNDING if lower is None else 0.0
        violated = ok & (compared > bound * (1 + slack) + 1e-300)
        self.entry["evaluated"] += int(ok.sum())
        self.entry["violations"] += int(violated.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(ok & (bound > 0), compared / bound, 0.0)
        if ok.any():
            self.entry["max_ratio"] = max(self.entry["max_ratio"], float(np.nanmax(ratio)))
        for i, j in zip(*np.nonzero(violated), strict=True):
            self.refs.append(
                {
                    "run": self.run,
                    "check": self.name,
                    "step": int(steps[j]),
                    "seed": seeds[i],
                    "measured": float(compared[i, j]),
                    "estimate": float(measured[i, j]),
                    "bound": float(bound[i, j]),
                }
            )


def _running_mean(x: np.ndarray) -> np.ndarray:
    """`[S, N]` -> `[S, N]` mean of the first `n + 1` columns."""
    return np.cumsum(x, axis=1) / np.arange(1, x.shape[1] + 1)


def _band(x: np.ndarray) -> dict[str, list[float]]:
    """`[S, X]` -> mean and t-interval over seeds per column."""
    cols = [_interval(x[:, j]) for j in range(x.shape[1])]
    return {k: [c[k] for c in cols] for k in ("mean", "lo", "hi")}


def run_bounds(run_dir: str | Path, name: str | None = None) -> RunBounds:
    """Bounds with their constants beside the measurements of one tracked run (module doc)."""
    series = load_series(run_dir)
    cfg = series.config
    label = name or str(cfg.get("name", Path(run_dir).name))
    out = RunBounds(label, str(run_dir), cfg["method"], run_constants(series), setting(cfg))
    _class_check(series, out)
    m_bound = {
        c: float(
            second_moment_bound(
                _eps_or_paper(out.constants["eps"]),
                out.constants["T"],
                out.constants["L"],
                out.constants["R"],
                out.constants["vocab_size"],
                c,
            )
        )
        for c in CONSTANTS
    }
    _drift_and_kl_checks(series, out, m_bound)
    _estimator_checks(series, out, m_bound)
    _smoothness_check(series, out)
    _run_terms(series, out)
    return out


CLASS_CHECK = "class: (1/G) sum c_i <= 1 + eps"
PATHWISE_DRIFT_CHECK = "drift, pathwise: ||dtheta||^2 <= tau sum ||step||^2"
TAUTOLOGICAL_CHECKS = (CLASS_CHECK, PATHWISE_DRIFT_CHECK)
"""per-step checks true by construction (the estimators' coefficients meet the cap by their
definition; Cauchy-Schwarz on the recorded steps): kept as code-consistency checks, named apart
and not counted as checks that could fail (issue 31)"""

SMOOTHNESS_CHECK = "Lemma 1 smoothness: -(J_n+1 - J_n - <grad J_n, dtheta>) <= (L_J/2)||dtheta||^2"


def _smoothness_check(series: RunSeries, out: RunBounds) -> None:
    """Lemma 1's descent step at every step, directly: the exact second-order remainder
    `r_n = J_{n+1} - J_n - <grad J(theta_n), theta_{n+1} - theta_n>` obeys
    `r_n >= -(L_J / 2) ||theta_{n+1} - theta_n||^2` (`L_J`-smoothness of `J`, ours:
    `theory.bounds.objective_smoothness`). Exact quantities (the toy MDP's `J` and its gradient),
    so compared as they are; `out.smoothness["max_curvature_over_L_J"]` is the largest
    `-2 r_n / ||dtheta||^2` over `L_J` (how loose `L_J` is). Every step of every run with updates
    recorded (any optimizer: the inequality is about `J`, not about the update rule)."""
    ev, c = series.every, out.constants
    N = c["N"]
    final = series.final_objective
    if not np.all(np.isfinite(final)):
        return
    smooth = float(objective_smoothness(c["T"], c["R"], c["L"], c["vocab_size"]))
    following = np.concatenate([ev["objective"][:, 1:], final[:, None]], axis=1)
    remainder = following - ev["objective"] - ev["grad_dot_step"]
    bound = smooth / 2.0 * ev["step_sq"]
    _Checker(SMOOTHNESS_CHECK, out.name, out.checks, out.refutations).add(
        -remainder, bound, np.arange(N), series.seeds
    )
    moved = ev["step_sq"] > 0
    curvature = np.where(moved, -2.0 * remainder / np.where(moved, ev["step_sq"], 1.0), np.nan)
    out.smoothness = {
        "L_J": smooth,
        "max_curvature_over_L_J": float(np.nanmax(curvature)) / smooth
        if np.isfinite(curvature).any()
        else None,
    }


def _eps_or_paper(eps: float | None) -> float:
    """A method outside the class has no `eps` of eq. 5: its Proposition 1 bound is shown at the
    paper's `eps` (for reference only; it is not a bound for that method)."""
    return PAPER_EPS if eps is None else eps


def _class_check(series: RunSeries, out: RunBounds) -> None:
    """Class membership (eq. 5) on the run's realised groups: `(1/G) sum_i c_i <= 1 + eps`."""
    eps = out.constants["eps"]
    if eps is None:
        return
    coef = series.every["group_coef_max"]
    out.class_check = {
        "class_eps": eps,
        "run_eps": float(series.config["eps"]),
        "max_group_mass": float(np.nanmax(coef)) if np.isfinite(coef).any() else None,
    }
    _Checker(CLASS_CHECK, out.name, out.checks, out.refutations).add(
        coef, np.full_like(coef, 1.0 + eps), np.arange(out.constants["N"]), series.seeds
    )


def _drift_and_kl_checks(series: RunSeries, out: RunBounds, m_bound: dict[str, float]) -> None:
    """Step 3 (KL vs drift, exact), the pathwise drift bound and, for plain SGD, the drift in
    expectation over seeds against `eta^2 tau^2 M` (`O(eta^2 tau^2)`); their series."""
    ev, seeds, c = series.every, series.seeds, out.constants
    N, eta = c["N"], c["eta"]
    steps_all = np.arange(N)
    kl_factor = c["T"] * c["L"] / 2.0
    checks, refs = out.checks, out.refutations
    _Checker("step 3: KL_batch <= (TL/2)||dtheta||^2", out.name, checks, refs).add(
        ev["kl_batch"], kl_factor * ev["drift_sq"], steps_all, seeds
    )
    lag = ev["lag"]
    uniform = np.isclose(ev["lag_sq"], lag**2)  # one lag per batch: the pathwise bound applies
    cum = np.concatenate([np.zeros((len(seeds), 1)), np.cumsum(ev["step_sq"], axis=1)], axis=1)
    start = np.clip(steps_all[None, :] - np.rint(lag).astype(np.int64), 0, N)
    window = cum[np.arange(len(seeds))[:, None], steps_all[None, :]] - np.take_along_axis(
        cum, start, axis=1
    )
    pathwise = np.where(uniform, lag * window, np.nan)
    _Checker(PATHWISE_DRIFT_CHECK, out.name, checks, refs).add(
        ev["drift_sq"], pathwise, steps_all, seeds
    )
    # SGD: every update is at most eta ||g_n|| (a clip or a schedule factor <= 1 only shrinks it)
    sgd = series.config["optimizer"] == "sgd"
    expected = eta**2 * ev["lag_sq"] * m_bound["paper"]
    if sgd:
        drift = [_interval(ev["drift_sq"][:, j]) for j in range(N)]
        _Checker("drift: E||dtheta||^2 <= eta^2 tau^2 M", out.name, checks, refs).add(
            np.array([[d["mean"] for d in drift]]),
            expected.mean(axis=0, keepdims=True),
            steps_all,
            ["mean over seeds"],
            lower=np.array([[d["lo"] if d["n"] > 1 else d["mean"] for d in drift]]),
        )
    out.series["drift"] = {
        "steps": steps_all.tolist(),
        "measured ||theta_n - theta_{n-tau}||^2": _band(ev["drift_sq"]),
        "tau sum ||step||^2 (pathwise)": _band(np.nan_to_num(pathwise, nan=0.0)),
    }
    if sgd:
        out.series["drift"]["eta^2 tau^2 M (Prop. 1)"] = _band(expected)
    out.series["kl"] = {
        "steps": steps_all.tolist(),
        "measured KL (batch prompts)": _band(ev["kl_batch"]),
        "(TL/2)||theta_n - theta_{n-tau}||^2": _band(kl_factor * ev["drift_sq"]),
    }


def _estimator_checks(series: RunSeries, out: RunBounds, m_bound: dict[str, float]) -> None:
    """At the recorded steps: Proposition 1 (second moment, bias half) and step 2 (removed mass
    vs KL), from the estimator statistics; their series."""
    ev, rec, seeds, c = series.every, series.recorded, series.seeds, out.constants
    spec = get_method(series.config["method"])
    marks, eps = series.recorded_steps, c["eps"]
    T, L, R = c["T"], c["L"], c["R"]
    checks, refs = out.checks, out.refutations
    sm = rec["second_moment"]
    for const in CONSTANTS:
        _Checker(f"Prop. 1 ({const}): E||g||^2 <= M", out.name, checks, refs).add(
            sm, np.full_like(sm, m_bound[const]), marks, seeds, lower=rec["second_moment_lo"]
        )
    out.series["second_moment"] = {
        "steps": marks.tolist(),
        "measured E||g_n||^2": _band(sm),
        "M, Prop. 1 (8)": _band(np.full_like(sm, m_bound["paper"])),
        "M, ours (2)": _band(np.full_like(sm, m_bound["ours"])),
    }
    if spec.removed_mass_bound is None or eps is None:
        return
    bias = np.sqrt(np.clip(rec["bias_sq"], 0, None))
    bias_lo = np.sqrt(np.clip(rec["bias_sq_lo"], 0, None))
    cover_n = coverage(ev["log_coverage"][:, marks])
    k_b = np.asarray(bias_per_removed_mass(R, L, cover_n))
    den = float(denominator(eps, spec.removed_mass_bound))
    # no capped group in any of the M minibatches leaves a degenerate interval [0, 0] for
    # E[m]: that step is not evaluated (the exact bound K_b KL / den still is)
    removed_hi = np.where(rec["removed_mass_hi"] > 0, rec["removed_mass_hi"], np.nan)
    _Checker("Prop. 1 bias: ||b|| <= K_b E[m]", out.name, checks, refs).add(
        bias, k_b * removed_hi, marks, seeds, lower=bias_lo
    )
    _Checker("Prop. 1 bias and step 2: ||b|| <= K_b KL / den", out.name, checks, refs).add(
        bias, k_b * rec["kl_mean"] / den, marks, seeds, lower=bias_lo
    )
    _Checker("step 2: E[m] <= KL / den", out.name, checks, refs).add(
        rec["removed_mass"], rec["kl_mean"] / den, marks, seeds, lower=rec["removed_mass_lo"]
    )
    out.series["bias"] = {
        "steps": marks.tolist(),
        "measured ||b_n||": _band(bias),
        "K_b E[m_n] (Prop. 1 bias)": _band(k_b * rec["removed_mass"]),
        "K_b KL_n / den (step 2)": _band(k_b * rec["kl_mean"] / den),
        "K_b (TL/2)||dtheta||^2 / den (step 3)": _band(
            k_b * T * L / 2.0 * ev["drift_sq"][:, marks] / den
        ),
    }
    if series.config["optimizer"] == "sgd":
        chain = bias_norm_bound(
            eta=c["eta"],
            tau2=ev["lag_sq"][:, marks],
            eps=eps,
            T=T,
            L=L,
            R=R,
            C=cover_n,
            vocab_size=c["vocab_size"],
            method=spec.removed_mass_bound,
        )
        out.series["bias"]["K_b (TL/2) eta^2 tau^2 M / den (chain)"] = _band(np.asarray(chain))


def _run_terms(series: RunSeries, out: RunBounds) -> None:
    """The run-level terms (module table), Lemma 1 with the measured moments, the first-order
    split of the metric and, for a method with a theorem, Theorem 1/2's terms with constants."""
    ev, rec, c = series.every, series.recorded, out.constants
    spec = get_method(series.config["method"])
    T, eta, N, j0 = c["T"], c["eta"], c["N"], c["J0"]
    smooth = float(objective_smoothness(T, c["R"], c["L"], c["vocab_size"]))
    final = final_objectives(series)
    per_seed = {
        "total": ev["grad_norm_sq"].mean(axis=1),
        "optimisation": 2 * T * (final - j0) / (eta * N),
        "variance": T * smooth * eta * np.mean(ev["update_norm"] ** 2, axis=1),
        "delay": T**2 * np.nanmean(rec["bias_sq"], axis=1)
        if series.recorded_steps.size
        else np.zeros(len(series.seeds)),
    }
    lemma_rhs = per_seed["optimisation"] + per_seed["variance"] + per_seed["delay"]
    diff = _interval(per_seed["total"] - lemma_rhs)
    rhs = _interval(lemma_rhs)
    ceiling = float(gradient_norm_sq_ceiling(T, c["L"], c["R"], c["vocab_size"]))
    rhs_mean = float(np.mean(lemma_rhs))
    out.lemma1 = {
        "measured_total": _interval(per_seed["total"]),
        "rhs_with_measured_moments": rhs,
        "difference": diff,
        "holds": not diff["lo"] > 0,
        # a right-hand side at or above the ceiling could not have been exceeded: no check
        "ceiling": ceiling,
        "vacuous": rhs_mean >= ceiling,
        "shares": {
            t: float(np.mean(per_seed[t])) / rhs_mean if rhs_mean > 0 else math.nan
            for t in ("optimisation", "variance", "delay")
        },
        "moment_steps": int(series.recorded_steps.size),
        "steps": int(N),
    }
    if diff["lo"] > 0:
        out.refutations.append(
            {
                "run": out.name,
                "check": "Lemma 1 with measured moments",
                "step": N,
                "seed": "mean",
                "measured": diff["mean"],
                "bound": 0.0,
            }
        )
    out.first_order = first_order_identity(series, per_seed["total"], final)
    theorem = theorem_at_constants(spec.removed_mass_bound, c)
    for term in TERMS:
        measured = _interval(per_seed[term])
        entry: dict[str, Any] = {"measured": measured}
        for const, bound in theorem.items():
            b = float(bound[term])
            entry[const] = {"bound": b, "ratio": _ratio(measured["mean"], b)}
            if measured["lo"] > b:
                out.refutations.append(
                    {
                        "run": out.name,
                        "check": f"Theorem ({const} constants), {term}",
                        "step": N,
                        "seed": "mean",
                        "measured": measured["mean"],
                        "bound": b,
                    }
                )
        out.terms[term] = entry
    if theorem:
        out.series["theorem"] = _theorem_series(series, out, smooth, theorem)


def _theorem_series(
    series: RunSeries, out: RunBounds, smooth: float, theorem: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """Running versions of the run-level terms: after `n` steps, measured and bound (paper's `8`)."""
    ev, rec, c = series.every, series.recorded, out.constants
    T, eta, j0 = c["T"], c["eta"], c["J0"]
    n = np.arange(1, c["N"] + 1)
    bound = theorem["paper"]
    marks = series.recorded_steps
    bias_running = np.full_like(ev["objective"], np.nan)
    if marks.size:
        cum = np.cumsum(np.nan_to_num(rec["bias_sq"]), axis=1) / np.arange(1, marks.size + 1)
        idx = np.searchsorted(marks, np.arange(c["N"]), side="right") - 1
        bias_running = np.where(idx >= 0, cum[:, np.clip(idx, 0, None)], np.nan)
    tau4_running = _running_mean(ev["lag_fourth"]).mean(axis=0)
    delay_bound = bound["delay"] * tau4_running / max(c["tau4"], 1e-300)
    return {
        "steps": (n - 1).tolist(),
        "measured (1/n) sum ||grad J||^2": _band(_running_mean(ev["grad_norm_sq"])),
        "bound: total": {
            "mean": (bound["optimisation"] * c["N"] / n + bound["variance"] + delay_bound).tolist()
        },
        "measured optimisation": _band(2 * T * (ev["objective"] - j0) / (eta * n)),
        "bound: optimisation": {"mean": (bound["optimisation"] * c["N"] / n).tolist()},
        "measured variance": _band(T * smooth * eta * _running_mean(ev["update_norm"] ** 2)),
        "bound: variance": {"mean": [bound["variance"]] * len(n)},
        "measured delay": _band(T**2 * bias_running),
        "bound: delay": {"mean": delay_bound.tolist()},
    }


def all_run_bounds(paths: Iterable[str | Path]) -> tuple[list[RunBounds], list[str]]:
    """`run_bounds` of every tracked run under `paths`, and one line per run that failed."""
    results, problems = [], []
    for run_dir in find_runs(paths):
        try:
            results.append(run_bounds(run_dir))
        except (ValueError, KeyError) as err:
            problems.append(f"{run_dir}: {err}")
    return results, problems
