"""The parameter drift of toy learners over a grid of step sizes and lags, and its exponents.

§4.2: "the uniform second-moment bound limits the parameter drift accumulated over `tau` updates
to `O(eta^2 tau^2)`" (ours with its constant: `E||theta_n - theta_{n-tau}||^2 <= eta^2 tau^2 M`,
`M` Proposition 1's bound). A learner run with `drift_max_lag = H > 0` records, per seed and for
every lag `t = 1..H`, the sum over its steps `n >= t` of `D_n(t) = ||theta_n - theta_{n-t}||^2`
(`summary.json`, `delay_regularity.per_seed[s].time_sum`, with the step counts `time_count`); the
time average `bar D_s(t)` of a run at step size `eta` is the measurement here.

**The fit** (`fit_drift`), per seed `s` over every run (all step sizes, schedules and methods
of the grid) and every lag: least squares of `log bar D_s(t) = c + a log eta + b log t`; the
exponents `a` (step size) and `b` (lag) are then summarised over the seeds (mean and Student-t
95% interval: the seeds are independent replicates of the same grid). Local lag exponents (the
slope over the smallest and the largest lags of each run) say where the rate changes: sums of
independent zero-mean update components grow like `t`, aligned updates like `t^2`.

**The bound**: per run and lag, the mean over seeds of `bar D_s(t)` against `eta^2 t^2 M` (the
constant-step SGD runs only: every update is `eta g_n`); a violation is a lower 95% end above it.
`M` (Proposition 1) is below the pathwise ceiling `eta^2 t^2 P` of the drift (`P` the pathwise
`||g||^2` bound; `M / P` = 0.16 on the shipped MDP), so a run could exceed it; the **measured-moment
bound** `eta^2 t^2 max_n E||g_n||^2` (Cauchy-Schwarz with each run's own largest measured second
moment over its seeds and recorded steps, ours) is tighter still: a violation is a lower 95% end
of the drift above the bound's upper end (the largest upper 95% end of the measured
`E[||g_n||^2 | F_n^-]`). Both are upper bounds and tested one-sided; how tight they are (the
ratio, the exponents) is reported beside, not as the verdict.

Only plain SGD runs at a constant step size of a class method enter (`evidence.measured.is_plain_sgd`):
the claim is about `theta_{n+1} = theta_n + eta g_n`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evidence.measured import is_plain_sgd, run_constants
from gmc_grpo.json_files import read_json
from gmc_grpo.stats import t_interval
from theory.bounds import second_moment_bound
from toy_mdps.train.run_records import RunSeries, class_eps, load_series

# lags per end of a run's lag range for the local exponents (the smallest and the largest)
LOCAL_LAGS = 4


@dataclass
class DriftRun:
    """One run's drift record: `drift [S, H]` the time-averaged `D_s(t)` for `t = 1..H`."""

    name: str
    method: str
    schedule: str
    eta: float
    second_moment_bound: float
    seeds: list[int]
    lags: np.ndarray
    drift: np.ndarray
    measured_second_moment: float = math.nan
    """largest measured `E[||g_n||^2 | F_n^-]` over seeds and recorded steps (NaN: none)"""
    measured_second_moment_hi: float = math.nan
    """largest upper 95% end of the same (the measured-moment bound's upper end)"""

    @property
    def bound(self) -> np.ndarray:
        """`[H]` `eta^2 t^2 M` (Proposition 1's `M`, the paper's constant 8)."""
        return self.shape() * self.second_moment_bound

    def shape(self, exponents: tuple[float, float] = (2.0, 2.0)) -> np.ndarray:
        """`[H]` `eta^a t^b` for `exponents = (a, b)` (the claim's `(2, 2)` by default)."""
        return self.eta ** exponents[0] * self.lags ** exponents[1]

    def measured_bound(
        self, upper: bool = False, exponents: tuple[float, float] = (2.0, 2.0)
    ) -> np.ndarray:
        """`[H]` `eta^2 t^2 max_n E||g_n||^2` (measured; `upper`: with the interval's upper end)."""
        moment = self.measured_second_moment_hi if upper else self.measured_second_moment
        return self.shape(exponents) * moment


def drift_run(run_dir: str | Path, series: RunSeries | None = None) -> DriftRun | None:
    """The drift record of a tracked plain-SGD run of a class method, or None (no record, or
    outside: another optimizer, a schedule, a clip, a method outside the class)."""
    run_dir = Path(run_dir)
    series = series or load_series(run_dir)
    cfg = series.config
    eps = class_eps(cfg)
    if eps is None or not is_plain_sgd(cfg) or int(cfg.get("drift_max_lag", 0) or 0) < 2:
        return None
    record = read_json(run_dir / "summary.json").get("delay_regularity") or {}
    if "time_count" not in record:
        return None
    count = np.asarray(record["time_count"], dtype=np.float64)
    lags = np.arange(len(count), dtype=np.float64)
    keep = (lags >= 1) & (count > 0)
    per_seed = record["per_seed"]
    drift = (
        np.array(
            [np.asarray(per_seed[str(s)]["time_sum"], dtype=np.float64)[keep] for s in series.seeds]
        )
        / count[keep]
    )
    c = run_constants(series)
    m = float(second_moment_bound(eps, c["T"], c["L"], c["R"], c["vocab_size"], "paper"))
    moments = series.recorded["second_moment"]
    moments_hi = series.recorded["second_moment_hi"]
    return DriftRun(
        str(cfg.get("name", run_dir.name)),
        str(cfg["method"]),
        str(cfg["schedule"]),
        float(cfg["lr"]),
        m,
        list(series.seeds),
        lags[keep],
        drift,
        float(np.nanmax(moments)) if np.isfinite(moments).any() else math.nan,
        float(np.nanmax(moments_hi)) if np.isfinite(moments_hi).any() else math.nan,
    )


def _seed_fit(runs: Sequence[DriftRun], seed_index: int) -> tuple[float, float]:
    """`(a, b)` of `log D = c + a log eta + b log t` over every run and lag, for one seed."""
    rows, ys = [], []
    for run in runs:
        values = run.drift[seed_index]
        ok = values > 0
        for t, v in zip(run.lags[ok], values[ok], strict=True):
            rows.append((1.0, math.log(run.eta), math.log(t)))
            ys.append(math.log(v))
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)
    return float(coef[1]), float(coef[2])


def _local_exponent(run: DriftRun, lags: slice) -> float:
    """Slope of `log mean_s D(t)` on `log t` over a slice of the run's lags."""
    x, y = np.log(run.lags[lags]), np.log(run.drift.mean(axis=0)[lags])
    return float(np.polyfit(x, y, 1)[0])


def fit_drift(
    runs: Sequence[DriftRun],
    level: float = 0.95,
    exponents: tuple[float, float] = (2.0, 2.0),
) -> dict[str, Any]:
    """The exponents with intervals over seeds, the local lag exponents, the bound check against
    `eta^2 t^2 M` (`bound_max_ratio`, `bound_max_ratio_lower`: drift's lower end over the bound)
    and against the measured-moment bound (`measured_bound`: runs with recorded moments, lags
    evaluated, violations, the largest mean ratio and lower-end/upper-end ratio); module
    docstring. `exponents`: the bounds' `(a, b)` in `eta^a t^b` (the claim's `(2, 2)`; another
    value is a perturbed claim). Needs runs at two step sizes at least, with the same seeds."""
    etas = sorted({r.eta for r in runs})
    if len(runs) < 2 or len(etas) < 2:
        raise ValueError(
            f"the drift fit needs runs at two step sizes at least, got {len(runs)} run(s) at "
            f"eta = {etas}"
        )
    seeds = runs[0].seeds
    if any(r.seeds != seeds for r in runs):
        raise ValueError("the drift fit needs the same seeds in every run (paired replicates)")
    fits = [_seed_fit(runs, i) for i in range(len(seeds))]
    eta_exp = t_interval([a for a, _ in fits], level)
    tau_exp = t_interval([b for _, b in fits], level)
    worst, worst_lo, worst_at = 0.0, 0.0, ""
    measured: dict[str, Any] = {"runs": 0, "evaluated": 0, "violations": 0, "max_ratio": 0.0}
    measured["max_ratio_lower"], measured["max_at"] = 0.0, ""
    local = []
    for run in runs:
        mean = run.drift.mean(axis=0)
        spread = [t_interval(run.drift[:, j], level) for j in range(run.drift.shape[1])]
        drift_lo = np.array([s["lo"] if s["n"] > 1 else s["mean"] for s in spread])
        bound = run.shape(exponents) * run.second_moment_bound
        ratio = mean / bound
        lower = drift_lo / bound
        j = int(np.argmax(ratio))
        if ratio[j] > worst:
            worst, worst_at = float(ratio[j]), f"{run.name}, t = {int(run.lags[j])}"
        worst_lo = max(worst_lo, float(lower.max()))
        if math.isfinite(run.measured_second_moment_hi) and run.measured_second_moment > 0:
            m_ratio = mean / run.measured_bound(exponents=exponents)
            m_lower = drift_lo / run.measured_bound(upper=True, exponents=exponents)
            measured["runs"] += 1
            measured["evaluated"] += int(m_lower.size)
            measured["violations"] += int(np.sum(m_lower > 1.0))
            k = int(np.argmax(m_ratio))
            if m_ratio[k] > measured["max_ratio"]:
                measured["max_ratio"] = float(m_ratio[k])
                measured["max_at"] = f"{run.name}, t = {int(run.lags[k])}"
            measured["max_ratio_lower"] = max(measured["max_ratio_lower"], float(m_lower.max()))
        half = min(LOCAL_LAGS, len(run.lags) // 2)
        local.append(
            {
                "run": run.name,
                "eta": run.eta,
                "schedule": run.schedule,
                "method": run.method,
                "small_lags": _local_exponent(run, slice(0, half)),
                "large_lags": _local_exponent(run, slice(len(run.lags) - half, None)),
            }
        )
    return {
        "runs": len(runs),
        "seeds": len(seeds),
        "step_sizes": etas,
        "schedules": sorted({r.schedule for r in runs}),
        "methods": sorted({r.method for r in runs}),
        "max_lag": int(max(r.lags.max() for r in runs)),
        "eta_exponent": eta_exp,
        "tau_exponent": tau_exp,
        "local": local,
        "bound_max_ratio": worst,
        "bound_max_ratio_lower": worst_lo,
        "bound_max_at": worst_at,
        "measured_bound": measured,
    }
