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
(the `O(eta^2 tau^2)` step). Deterministic checks allow a relative rounding of `1e-9`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from gmc_grpo.methods import MethodSettings, get_method
from gmc_grpo.records import read_json, read_jsonl
from gmc_grpo.stats import t_interval
from theory.bounds import (
    bias_norm_bound,
    bias_per_removed_mass,
    denominator,
    objective_smoothness,
    second_moment_bound,
    theorem_terms,
)

ROUNDING = 1e-9
CONSTANTS = ("paper", "ours")
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
# Reading the records
# ----------------------------------------------------------------------------------------------


def is_tracked_run(run_dir: str | Path) -> bool:
    """A toy training run directory whose config turned the bound tracking on."""
    path = Path(run_dir) / "config.json"
    if not path.is_file() or not (Path(run_dir) / "metrics.jsonl").is_file():
        return False
    try:
        config = read_json(path).get("config", {})
    except (OSError, ValueError):
        return False
    return int(config.get("bound_every", 0) or 0) > 0 and "total_steps" in config


def is_toy_train_run(run_dir: str | Path) -> bool:
    """A finished toy training run (tracked or not): config with `total_steps`, a summary."""
    path = Path(run_dir)
    if not (path / "config.json").is_file() or not (path / "summary.json").is_file():
        return False
    try:
        config = read_json(path / "config.json").get("config", {})
    except (OSError, ValueError):
        return False
    return {"total_steps", "method", "optimizer", "delay"} <= set(config)


def find_runs(paths: Iterable[str | Path], tracked: bool = True) -> list[Path]:
    """Run directories under `paths` (recursively), sorted; tracked ones only by default."""
    test = is_tracked_run if tracked else is_toy_train_run
    found: set[Path] = set()
    for root in map(Path, paths):
        candidates = [root, *root.rglob("config.json")]
        for c in candidates:
            run_dir = c.parent if c.name == "config.json" else c
            if test(run_dir):
                found.add(run_dir)
    return sorted(found)


def setting(config: dict[str, Any]) -> list[str]:
    """Why a run is outside the theorems' setting (empty: inside; module docstring)."""
    spec = get_method(config["method"])
    reasons = []
    if spec.class_cap is None:
        reasons.append(f"{spec.label} is not in the class of eq. 5")
    elif spec.removed_mass_bound is None:
        reasons.append(f"no theorem for {spec.label} (Theorems 1-2 are GMC and TIC)")
    if config["optimizer"] != "sgd":
        reasons.append(f"optimizer {config['optimizer']} (the theorems analyse SGD)")
    if config.get("lr_schedule", "constant") != "constant":
        reasons.append(f"step-size schedule {config['lr_schedule']} (the theorems: constant)")
    if config.get("grad_clip") is not None:
        reasons.append(f"gradient clipping at {config['grad_clip']}")
    if spec.step_scale is not None:
        reasons.append(f"{spec.label}'s per-step step-size factor ({spec.step_scale.metric})")
    if spec.uses_baseline(config.get("advantage", "paper")):
        reasons.append(f"{spec.label}'s baseline (not the leave-one-out advantage)")
    elif spec.advantage_kind(config.get("advantage", "paper")) != "loo":
        kind = spec.advantage_kind(config.get("advantage", "paper"))
        reasons.append(f"{kind} advantages (the bias chain assumes unbiased IS: leave-one-out)")
    return reasons


def class_eps(config: dict[str, Any]) -> float | None:
    """The `eps` with `(1/G) sum_i c_i <= 1 + eps` in every group (the registry's `class_cap`)."""
    spec = get_method(config["method"])
    if spec.class_cap is None:
        return None
    settings = MethodSettings.of(SimpleNamespace(**config))
    return float(spec.class_cap(settings))


@dataclass
class RunSeries:
    """A run's records as `[S, N]` arrays (every step) and `[S, R]` arrays (recorded steps)."""

    config: dict[str, Any]
    seeds: list[int]
    every: dict[str, np.ndarray]
    recorded_steps: np.ndarray
    recorded: dict[str, np.ndarray]
    final_objective: np.ndarray


EVERY_STEP = {
    "grad_norm_sq": "policy/grad_norm_sq",
    "objective": "policy/objective",
    "lag": "staleness/lag",
    "update_norm": "optim/grad_norm",
    "lr": "optim/lr",
    "kl_batch": "ratio/kl_exact",
    "log_coverage": "bounds/log_coverage",
    "drift_sq": "bounds/drift_sq",
    "step_sq": "bounds/step_sq",
    "lag_sq": "bounds/lag_sq",
    "lag_fourth": "bounds/lag_fourth",
    "group_coef_max": "bounds/group_coef_max",
    "lipschitz_L": "bounds/lipschitz_L",
    "grad_dot_step": "bounds/grad_dot_step",
}
RECORDED = {
    name: f"bounds/{name}"
    for base in ("bias_sq", "second_moment", "removed_mass", "grad_dot_bias")
    for name in (base, f"{base}_lo", f"{base}_hi")
} | {"kl_mean": "bounds/kl_mean", "kl_max": "bounds/kl_max"}


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def load_series(run_dir: str | Path) -> RunSeries:
    """The arrays of a tracked run (`is_tracked_run`); raises `ValueError` on missing fields."""
    run_dir = Path(run_dir)
    config = read_json(run_dir / "config.json")["config"]
    rows = read_jsonl(run_dir / "metrics.jsonl")
    seeds = [int(s) for s in config["seeds"]]
    steps = int(config["total_steps"])
    by_seed: dict[int, list[dict[str, Any]]] = {s: [] for s in seeds}
    for row in rows:
        by_seed.setdefault(int(row["seed"]), []).append(row)
    for seed in seeds:
        by_seed[seed].sort(key=lambda r: r["step"])
        if len(by_seed[seed]) != steps:
            raise ValueError(
                f"{run_dir}: seed {seed} has {len(by_seed[seed])} of {steps} steps (unfinished run?)"
            )
    missing = [k for k in EVERY_STEP.values() if k not in by_seed[seeds[0]][0]]
    if missing:
        raise ValueError(f"{run_dir}: metrics rows lack {missing} (bound tracking was off?)")
    every = {
        name: np.array([[_float(r.get(key)) for r in by_seed[s]] for s in seeds])
        for name, key in EVERY_STEP.items()
    }
    marks = [i for i, r in enumerate(by_seed[seeds[0]]) if r.get("bounds/bias_sq") is not None]
    recorded = {
        name: np.array([[_float(by_seed[s][i].get(key)) for i in marks] for s in seeds])
        for name, key in RECORDED.items()
    }
    final = np.array([np.nan] * len(seeds))
    summary_path = run_dir / "summary.json"
    if summary_path.is_file():
        per_seed = read_json(summary_path).get("per_seed", {})
        final = np.array([_float(per_seed.get(str(s), {}).get("final_objective")) for s in seeds])
    return RunSeries(config, seeds, every, np.array(marks, dtype=np.int64), recorded, final)


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
    Lemma 1's right-hand side with measured moments; checks: per-step check -> counts and the
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
    cfg, ev, rec = series.config, series.every, series.recorded
    label = name or str(cfg.get("name", Path(run_dir).name))
    spec = get_method(cfg["method"])
    T, V, R = int(cfg["max_length"]), int(cfg["vocab_size"]), float(cfg["reward_scale"])
    eta, N = float(cfg["lr"]), int(cfg["total_steps"])
    L = float(np.nanmax(ev["lipschitz_L"]))
    log_c = float(np.nanmax(ev["log_coverage"]))
    eps = class_eps(cfg)
    j0 = float(ev["objective"][0, 0])
    tau2, tau4 = float(np.mean(ev["lag_sq"])), float(np.mean(ev["lag_fourth"]))
    constants = {
        "T": T,
        "vocab_size": V,
        "R": R,
        "L": L,
        "log_C": log_c,
        "eta": eta,
        "N": N,
        "G": int(cfg["group_size"]),
        "B": int(cfg["num_groups"]),
        "eps": eps,
        "tau2": tau2,
        "tau4": tau4,
        "J0": j0,
        "num_seeds": len(series.seeds),
        "recorded_steps": int(series.recorded_steps.size),
    }
    out = RunBounds(label, str(run_dir), cfg["method"], constants, setting(cfg))
    seeds = series.seeds
    steps_all = np.arange(N)
    # -- class membership (eq. 5), realised -------------------------------------------------------
    if eps is not None:
        coef = ev["group_coef_max"]
        out.class_check = {
            "class_eps": eps,
            "run_eps": float(cfg["eps"]),
            "max_group_mass": float(np.nanmax(coef)) if np.isfinite(coef).any() else None,
        }
        _Checker("class: (1/G) sum c_i <= 1 + eps", label, out.checks, out.refutations).add(
            coef, np.full_like(coef, 1.0 + eps), steps_all, seeds
        )
    # -- per-step checks -------------------------------------------------------------------------
    kl_factor = T * L / 2.0
    checks, refs = out.checks, out.refutations
    _Checker("step 3: KL_batch <= (TL/2)||dtheta||^2", label, checks, refs).add(
        ev["kl_batch"], kl_factor * ev["drift_sq"], steps_all, seeds
    )
    lag = ev["lag"]
    uniform = np.isclose(ev["lag_sq"], lag**2)
    cum = np.concatenate([np.zeros((len(seeds), 1)), np.cumsum(ev["step_sq"], axis=1)], axis=1)
    lag_i = np.rint(lag).astype(np.int64)
    start = np.clip(steps_all[None, :] - lag_i, 0, N)
    window = cum[np.arange(len(seeds))[:, None], steps_all[None, :]] - np.take_along_axis(
        cum, start, axis=1
    )
    pathwise = np.where(uniform, lag * window, np.nan)
    _Checker("drift, pathwise: ||dtheta||^2 <= tau sum ||step||^2", label, checks, refs).add(
        ev["drift_sq"], pathwise, steps_all, seeds
    )
    marks = series.recorded_steps
    bounds_m = {
        c: float(second_moment_bound(eps if eps is not None else 0.28, T, L, R, V, c))
        for c in CONSTANTS
    }
    sm = rec["second_moment"]
    for c in CONSTANTS:
        bound = np.full_like(sm, bounds_m[c])
        _Checker(f"Prop. 1 ({c}): E||g||^2 <= M", label, checks, refs).add(
            sm, bound, marks, seeds, lower=rec["second_moment_lo"]
        )
    bias = np.sqrt(np.clip(rec["bias_sq"], 0, None))
    bias_lo = np.sqrt(np.clip(rec["bias_sq_lo"], 0, None))
    log_c_n = ev["log_coverage"][:, marks]
    k_b = np.asarray(bias_per_removed_mass(R, L, np.exp(np.minimum(log_c_n, 700.0))))
    removed_b = k_b * rec["removed_mass"]
    if spec.removed_mass_bound is not None and eps is not None:
        den = float(denominator(eps, spec.removed_mass_bound))
        # no capped group in any of the M minibatches leaves a degenerate interval [0, 0] for
        # E[m]: that step is not evaluated (the exact bound K_b KL / den still is)
        removed_hi = np.where(rec["removed_mass_hi"] > 0, rec["removed_mass_hi"], np.nan)
        _Checker("Prop. 1 bias: ||b|| <= K_b E[m]", label, checks, refs).add(
            bias, k_b * removed_hi, marks, seeds, lower=bias_lo
        )
        _Checker("Prop. 1 bias and step 2: ||b|| <= K_b KL / den", label, checks, refs).add(
            bias, k_b * rec["kl_mean"] / den, marks, seeds, lower=bias_lo
        )
        _Checker("step 2: E[m] <= KL / den", label, checks, refs).add(
            rec["removed_mass"], rec["kl_mean"] / den, marks, seeds, lower=rec["removed_mass_lo"]
        )
    # SGD: every update is at most eta ||g_n|| (a clip or a schedule factor <= 1 only shrinks it)
    sgd = cfg["optimizer"] == "sgd"
    if sgd:
        drift = [_interval(ev["drift_sq"][:, j]) for j in range(N)]
        expected = (eta**2 * ev["lag_sq"] * bounds_m["paper"]).mean(axis=0, keepdims=True)
        _Checker("drift: E||dtheta||^2 <= eta^2 tau^2 M", label, checks, refs).add(
            np.array([[d["mean"] for d in drift]]),
            expected,
            steps_all,
            ["mean over seeds"],
            lower=np.array([[d["lo"] if d["n"] > 1 else d["mean"] for d in drift]]),
        )
    if spec.removed_mass_bound is not None and eps is not None:
        chain = bias_norm_bound(
            eta=eta,
            tau2=ev["lag_sq"][:, marks],
            eps=eps,
            T=T,
            L=L,
            R=R,
            C=np.exp(np.minimum(log_c_n, 700.0)),
            vocab_size=V,
            method=spec.removed_mass_bound,
        )
        out.series["bias"] = {
            "steps": marks.tolist(),
            "measured ||b_n||": _band(bias),
            "K_b E[m_n] (Prop. 1 bias)": _band(removed_b),
            "K_b KL_n / den (step 2)": _band(k_b * rec["kl_mean"] / den),
            "K_b (TL/2)||dtheta||^2 / den (step 3)": _band(
                k_b * kl_factor * ev["drift_sq"][:, marks] / den
            ),
        }
        if sgd:
            out.series["bias"]["K_b (TL/2) eta^2 tau^2 M / den (chain)"] = _band(np.asarray(chain))
    out.series["second_moment"] = {
        "steps": marks.tolist(),
        "measured E||g_n||^2": _band(sm),
        "M, Prop. 1 (8)": _band(np.full_like(sm, bounds_m["paper"])),
        "M, ours (2)": _band(np.full_like(sm, bounds_m["ours"])),
    }
    out.series["drift"] = {
        "steps": steps_all.tolist(),
        "measured ||theta_n - theta_{n-tau}||^2": _band(ev["drift_sq"]),
        "tau sum ||step||^2 (pathwise)": _band(np.nan_to_num(pathwise, nan=0.0)),
    }
    if sgd:
        out.series["drift"]["eta^2 tau^2 M (Prop. 1)"] = _band(
            eta**2 * ev["lag_sq"] * bounds_m["paper"]
        )
    out.series["kl"] = {
        "steps": steps_all.tolist(),
        "measured KL (batch prompts)": _band(ev["kl_batch"]),
        "(TL/2)||theta_n - theta_{n-tau}||^2": _band(kl_factor * ev["drift_sq"]),
    }
    # -- the run-level terms ---------------------------------------------------------------------
    smooth = float(objective_smoothness(T, R, L, V))
    final = series.final_objective
    if not np.all(np.isfinite(final)):
        final = ev["objective"][:, -1]
    per_seed = {
        "total": ev["grad_norm_sq"].mean(axis=1),
        "optimisation": 2 * T * (final - j0) / (eta * N),
        "variance": T * smooth * eta * np.mean(ev["update_norm"] ** 2, axis=1),
        "delay": T**2 * np.nanmean(rec["bias_sq"], axis=1) if marks.size else np.zeros(len(seeds)),
    }
    lemma_rhs = per_seed["optimisation"] + per_seed["variance"] + per_seed["delay"]
    diff = _interval(per_seed["total"] - lemma_rhs)
    out.lemma1 = {
        "measured_total": _interval(per_seed["total"]),
        "rhs_with_measured_moments": _interval(lemma_rhs),
        "difference": diff,
        "holds": not diff["lo"] > 0,
    }
    if diff["lo"] > 0:
        refs.append(
            {
                "run": label,
                "check": "Lemma 1 with measured moments",
                "step": N,
                "seed": "mean",
                "measured": diff["mean"],
                "bound": 0.0,
            }
        )
    out.first_order = first_order_identity(series, per_seed["total"], final)
    theorem = {}
    if spec.removed_mass_bound is not None and eps is not None:
        theorem = {
            c: theorem_terms(
                spec.removed_mass_bound,
                T=T,
                vocab_size=V,
                R=R,
                C=math.exp(min(log_c, 700.0)),
                L=L,
                eta=eta,
                N=N,
                eps=eps,
                tau4=tau4,
                objective_gap=R - j0,
                constant=c,
            ).as_dict()
            for c in CONSTANTS
        }
    for term in TERMS:
        measured = _interval(per_seed[term])
        entry: dict[str, Any] = {"measured": measured}
        for c, bound in theorem.items():
            b = float(bound[term])
            entry[c] = {"bound": b, "ratio": _ratio(measured["mean"], b)}
            if measured["lo"] > b:
                refs.append(
                    {
                        "run": label,
                        "check": f"Theorem ({c} constants), {term}",
                        "step": N,
                        "seed": "mean",
                        "measured": measured["mean"],
                        "bound": b,
                    }
                )
        out.terms[term] = entry
    if theorem:
        out.series["theorem"] = _theorem_series(series, out, smooth, theorem)
    return out


FIRST_ORDER_TERMS = ("progress", "curvature", "bias", "residual")


def first_order_identity(series: RunSeries, total: np.ndarray, final: np.ndarray) -> dict[str, Any]:
    """The measured convergence metric split exactly into progress, curvature and bias.

    With a constant step, `theta_{n+1} - theta_n = eta g_n` and `E[g_n | F_n^-] = grad J_n / T +
    b_n`; writing `J_{n+1} - J_n = <grad J_n, theta_{n+1} - theta_n> + r_n` (`r_n` the exact
    second-order remainder) and averaging over steps,

        (1/N) sum ||grad J_n||^2 = T (J_N - J_0) / (eta N)          progress
                                 - (T / (eta N)) sum_n r_n           curvature
                                 - (T / N) sum_n <grad J_n, b_n>     bias (recorded steps)
                                 - (T / N) sum_n <grad J_n, xi_n>    residual: sampling noise,
                                                                     mean zero over seeds

    (`xi_n = g_n - E[g_n | F_n^-]`). Lemma 1 bounds the same quantity after Young's inequality
    turns `-<grad J, b>` into `||grad J||^2 / (2T) + (T/2) ||b||^2` and smoothness bounds `-r_n`;
    here every term is measured. Per seed, then mean and t-interval over seeds; empty unless the
    run takes plain SGD steps of constant size (no clip, no per-step factor).
    """
    cfg, ev, rec = series.config, series.every, series.recorded
    spec = get_method(cfg["method"])
    plain = (
        cfg["optimizer"] == "sgd"
        and cfg.get("lr_schedule") == "constant"
        and cfg.get("grad_clip") is None
        and spec.step_scale is None
    )
    if not plain or series.recorded_steps.size == 0:
        return {}
    T, eta, N = int(cfg["max_length"]), float(cfg["lr"]), int(cfg["total_steps"])
    objective = ev["objective"]
    following = np.concatenate([objective[:, 1:], final[:, None]], axis=1)
    remainder = following - objective - ev["grad_dot_step"]
    per_seed = {
        "progress": T * (final - objective[:, 0]) / (eta * N),
        "curvature": -T * remainder.sum(axis=1) / (eta * N),
        "bias": -T * np.nanmean(rec["grad_dot_bias"], axis=1),
    }
    per_seed["residual"] = total - sum(per_seed.values())
    return {
        "total": _interval(total),
        **{k: _interval(v) for k, v in per_seed.items()},
        "per_seed": {k: v.tolist() for k, v in per_seed.items()},
    }


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


# ----------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------


def _g(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def _stat(stat: dict[str, float], digits: int = 3) -> str:
    return f"{_g(stat['mean'], digits)} [{_g(stat['lo'], digits)}, {_g(stat['hi'], digits)}]"


def all_run_bounds(paths: Iterable[str | Path]) -> tuple[list[RunBounds], list[str]]:
    """`run_bounds` of every tracked run under `paths`, and one line per run that failed."""
    results, problems = [], []
    for run_dir in find_runs(paths):
        try:
            results.append(run_bounds(run_dir))
        except (ValueError, KeyError) as err:
            problems.append(f"{run_dir}: {err}")
    return results, problems


def summary_line(results: Sequence[RunBounds]) -> str:
    """One line: runs in the setting, the largest measured/bound, refutations."""
    inside = [r for r in results if r.in_setting]
    refs = sum(len(r.refutations) for r in results)
    if not inside:
        return f"{len(results)} tracked runs, none in the theorems' setting; {refs} refutations"
    ratios = [r.terms["total"]["paper"]["ratio"] for r in inside if "paper" in r.terms["total"]]
    worst = max(ratios) if ratios else math.nan
    apart = sorted({get_method(r.method).label for r in results if not r.in_setting})
    outside = f"{len(results) - len(inside)} tracked run{'s' if len(results) - len(inside) != 1 else ''} outside"
    return (
        f"{len(inside)} runs in the theorems' setting: measured/bound at most {worst:.2g} "
        f"(Theorems 1-2 with explicit constants); {outside}"
        + (f" ({', '.join(apart)})" if apart else "")
        + f"; {refs} refutations"
    )


def bounds_markdown(results: Sequence[RunBounds], outside: Sequence[dict[str, Any]] = ()) -> str:
    """Markdown (with `$...$` math): the run table, the per-term table, the per-step checks,
    refutations, and the runs outside the setting (`outside`: rows of `outside_rows`)."""
    inside = [r for r in results if r.in_setting and "paper" in r.terms.get("total", {})]
    lines = [
        r"Runs of TIC and GMC with plain SGD at a constant step size (the setting of Lemma 1 and "
        r"Theorems 1-2). Measured: $\frac{1}{N}\sum_n\Vert\nabla J(\theta_n)\Vert^2$, mean "
        r"[95% t-interval over seeds]. Bound: Theorem 1 (GMC) or 2 (TIC) with explicit "
        r"constants, at the run's $T, |\mathcal{A}|, R, \mathcal{C}, L, \eta, N, \epsilon$ and "
        r"realised $\bar\tau_4$; $\kappa = 8$ is Proposition 1's constant, $\kappa = 2$ ours. "
        r"Ratio = measured / bound (the fraction of the bound used).",
        "",
        "| run | $\\eta$ | $N$ | $\\bar\\tau_4$ | $\\log\\mathcal{C}$ | measured | bound "
        "($\\kappa=8$) | ratio | bound ($\\kappa=2$) | ratio | refutations |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in inside:
        t, c = r.terms["total"], r.constants
        lines.append(
            f"| {r.name} | {_g(c['eta'])} | {c['N']} | {_g(c['tau4'])} | {_g(c['log_C'])} "
            f"| {_stat(t['measured'])} | {_g(t['paper']['bound'])} | {_g(t['paper']['ratio'])} "
            f"| {_g(t['ours']['bound'])} | {_g(t['ours']['ratio'])} | {len(r.refutations)} |"
        )
    if inside:
        lines += [
            "",
            "Each term of the bound ($\\kappa = 8$) beside its measured counterpart (Lemma 1's "
            "right-hand side with the run's measured moments):",
            "",
            "| run | term | measured | bound | ratio |",
            "| --- | --- | --- | ---: | ---: |",
        ]
        for r in inside:
            for term in TERMS[1:]:
                e = r.terms[term]
                lines.append(
                    f"| {r.name} | {term}: {TERM_LATEX[term]} | {_stat(e['measured'])} "
                    f"| {_g(e['paper']['bound'])} | {_g(e['paper']['ratio'])} |"
                )
        held = sum(r.lemma1["holds"] for r in inside)
        lines += [
            "",
            f"Lemma 1 with measured moments (measured total below "
            f"$\\frac{{2T(J(\\theta_N)-J(\\theta_0))}}{{\\eta N}} + T L_J \\eta\\,\\overline{{\\Vert "
            f"g_n\\Vert^2}} + T^2\\overline{{\\Vert b_n\\Vert^2}}$, paired over seeds): holds in "
            f"{held} of {len(inside)} runs.",
        ]
    lines += [
        "",
        "Per-step checks (every tracked run): Monte Carlo measurements count as violations only "
        "when the lower end of their 95% interval is above the bound, and the largest ratio is "
        "that lower end over the bound; exact quantities are compared as they are.",
        "",
    ]
    lines += ["| check | evaluated | violations | largest ratio |", "| --- | ---: | ---: | ---: |"]
    merged: dict[str, dict[str, Any]] = {}
    for r in results:
        for name, entry in r.checks.items():
            m = merged.setdefault(name, {"evaluated": 0, "violations": 0, "max_ratio": 0.0})
            m["evaluated"] += entry["evaluated"]
            m["violations"] += entry["violations"]
            m["max_ratio"] = max(m["max_ratio"], entry["max_ratio"])
    for name, m in merged.items():
        lines.append(f"| {name} | {m['evaluated']} | {m['violations']} | {_g(m['max_ratio'])} |")
    refs = [ref for r in results for ref in r.refutations]
    lines += ["", f"Refutations (a bound below a measurement): {len(refs)}."]
    for ref in refs[:20]:
        lines.append(
            f"- {ref['run']}, {ref['check']}, step {ref['step']}, seed {ref['seed']}: measured "
            f"{_g(ref['measured'], 4)} > bound {_g(ref['bound'], 4)}"
        )
    if len(refs) > 20:
        lines.append(f"- ... and {len(refs) - 20} more (bounds.json)")
    apart = [r for r in results if not r.in_setting]
    if apart or outside:
        lines += [
            "",
            "Outside the theorems' setting (reported apart; their per-step checks are above):",
            "",
            "| run | measured $\\frac{1}{N}\\sum_n\\Vert\\nabla J\\Vert^2$ | why outside |",
            "| --- | --- | --- |",
        ]
        for r in apart:
            why = "; ".join(r.setting)
            mass = r.class_check.get("max_group_mass")
            if mass is not None:
                eps = r.class_check["class_eps"]
                inside = "in" if mass <= 1 + eps + ROUNDING else "outside"
                why += (
                    f"; {inside} the class: largest group mass {mass:.4g} vs 1 + eps = {1 + eps:g}"
                )
            lines.append(f"| {r.name} | {_stat(r.terms['total']['measured'])} | {why} |")
        for row in outside:
            lines.append(f"| {row['name']} | {_stat(row['measured'])} | {row['why']} |")
    return "\n".join(lines) + "\n"


def outside_rows(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Untracked toy runs of class methods outside the setting (e.g. Adam): name, measured
    convergence metric (from `summary.json`), why outside."""
    rows = []
    for run_dir in find_runs(paths, tracked=False):
        if is_tracked_run(run_dir):
            continue
        config = read_json(run_dir / "config.json")["config"]
        spec = get_method(config["method"])
        if spec.class_cap is None:
            continue
        why = setting(config) or ["no bound tracking (bound_every = 0)"]
        stat = read_json(run_dir / "summary.json").get("mean", {}).get("convergence_metric")
        if stat is None:
            continue
        rows.append(
            {"name": config.get("name", run_dir.name), "measured": stat, "why": "; ".join(why)}
        )
    return rows


def bounds_text(results: Sequence[RunBounds]) -> str:
    """Plain-text table for `gmc-grpo theory --runs`."""
    lines = [
        "Bounds beside toy-run measurements (Theorems 1-2 with explicit constants; kappa = 8 is "
        "Proposition 1's constant, 2 ours)",
        "=" * 100,
        f"{'run':40s} {'measured':>11s} {'bound k=8':>11s} {'ratio':>9s} {'bound k=2':>11s} "
        f"{'ratio':>9s} {'refut.':>6s}",
    ]
    for r in results:
        t = r.terms.get("total", {})
        if r.in_setting and "paper" in t:
            lines.append(
                f"{r.name[:40]:40s} {t['measured']['mean']:11.3g} {t['paper']['bound']:11.3g} "
                f"{t['paper']['ratio']:9.2g} {t['ours']['bound']:11.3g} {t['ours']['ratio']:9.2g} "
                f"{len(r.refutations):6d}"
            )
        else:
            lines.append(
                f"{r.name[:40]:40s} {t['measured']['mean']:11.3g}  outside: {'; '.join(r.setting)}"
            )
    for r in results:
        if r.in_setting and "paper" in r.terms.get("total", {}):
            lines.append(
                f"  {r.name}: "
                + ", ".join(
                    f"{term} {r.terms[term]['measured']['mean']:.3g} / {r.terms[term]['paper']['bound']:.3g}"
                    for term in TERMS[1:]
                )
            )
    refs = [ref for r in results for ref in r.refutations]
    lines.append(f"refutations: {len(refs)}")
    for ref in refs[:20]:
        lines.append(
            f"  {ref['run']}, {ref['check']}, step {ref['step']}, seed {ref['seed']}: "
            f"measured {ref['measured']:.4g} > bound {ref['bound']:.4g}"
        )
    lines.append(summary_line(results))
    return "\n".join(lines)
