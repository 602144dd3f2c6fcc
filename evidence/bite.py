"""Theorems 1-2 where they bite: toy runs at the bound-minimising step, each with a verdict that
could have been "refuted" (issue 31).

The explicit bounds (`theory.bounds.theorem_terms`) are vacuous at the step sizes of the other
bound-tracking experiments (`evidence.vacuity`): above the a-priori ceiling
`T L R^2 log|A| / 2` of `||grad J||^2`, no run could contradict them. At the step `eta*` that
minimises the bound `a/eta + b eta + c eta^4` (`BoundTerms.best_step_size`) the bound is smallest;
for `N = 1,000` and `10,000`, `D = 2` and `32` on the `bounds_bite` MDP it falls below the ceiling
in 4 of the 8 cells with Proposition 1's constant 8 (GMC at `D = 2` and at `D = 32, N = 10,000`,
TIC at `D = 2, N = 10,000`), and there a run's measured `(1/N) sum_n ||grad J(theta_n)||^2` could
exceed it.

`design_points` gives the shipped experiment's step sizes (`toy_mdps/configs/
train_bounds_optimal.json`, `..._full.json`) from `BITE_CONSTANTS`: the constants the
`bounds_bite` runs recorded (T = 5, |A| = 4, R = 1, L = 0.5, the largest log C 5.28, eps = 0.28,
objective gap `R - J(theta_0)` = 0.89) and the fixed delay's `tau4 = D^4`, with Proposition 1's
constant 8 (the paper's). A run's own bound (`evidence.measured.run_bounds`) uses its own recorded
`L`, `log C`, realised `tau4` (the first `D` steps have shorter lags) and `J(theta_0)`, so its step
is within a few per cent of its own minimiser (`eta / eta*` in the table).

Verdict of one run and one constant (`run_verdict`; an upper bound, tested one-sided):

* **vacuous**: the bound is at or above the ceiling (no check);
* **refuted**: the lower end of the measurement's 95% t-interval over seeds is above the bound;
* **holds**: the upper end is below the bound, and the bound below the ceiling;
* **unresolved**: the interval contains the bound.

Tightness (measured / bound) is reported beside, not as the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evidence.measured import CONSTANTS, RunBounds
from gmc_grpo.json_files import read_json
from theory.bounds import BoundTerms, gradient_norm_sq_ceiling, theorem_terms

BITE_EXPERIMENTS: tuple[str, ...] = ("bounds_optimal", "bounds_optimal_full")
"""The shipped experiments at the bound-minimising step (`toy_mdps/configs/train_<name>.json`)."""

BITE_CONSTANTS: dict[str, float] = {
    "T": 5,
    "vocab_size": 4,
    "R": 1.0,
    "L": 0.5,
    "log_C": 5.28,
    "eps": 0.28,
    "objective_gap": 0.89,
}
"""The `bounds_bite` MDP's constants as its runs recorded them (module docstring)."""

VACUOUS, HOLDS, REFUTED, UNRESOLVED = "vacuous", "holds", "refuted", "unresolved"
VERDICTS = (VACUOUS, HOLDS, REFUTED, UNRESOLVED)
STEP_DIGITS = 3
"""Significant digits of the shipped step sizes."""


def bound_at_best_step(
    method: str,
    *,
    N: float,
    tau4: float,
    T: float,
    vocab_size: float,
    R: float,
    L: float,
    log_C: float,
    eps: float,
    objective_gap: float,
    constant: str | float = "paper",
) -> BoundTerms:
    """Theorem 1 (`"gmc"`) or 2 (`"tic"`) with explicit constants at its own minimising step.

    Returns the `BoundTerms` at `eta* = argmin_eta (a/eta + b eta + c eta^4)`; `.eta` is `eta*`,
    `.total` the smallest bound. Scalars only.
    """
    terms = theorem_terms(
        method,
        T=T,
        vocab_size=vocab_size,
        R=R,
        C=math.exp(log_C),
        L=L,
        eta=1.0,
        N=N,
        eps=eps,
        tau4=tau4,
        objective_gap=objective_gap,
        constant=constant,
    )
    return terms.at(terms.best_step_size())


def design_points(
    steps: Sequence[int] = (1_000, 10_000),
    delays: Sequence[int] = (2, 32),
    methods: Sequence[str] = ("tic", "gmc"),
    constants: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """One design point per `(N, D, method)`: `{method, delay, total_steps, lr, bound, ceiling}`
    with `lr` the paper-constant minimiser for `tau4 = D^4`, rounded to `STEP_DIGITS` significant
    digits, `bound` the bound at that step (constants `BITE_CONSTANTS` by default)."""
    c = dict(BITE_CONSTANTS if constants is None else constants)
    ceiling = float(gradient_norm_sq_ceiling(c["T"], c["L"], c["R"], c["vocab_size"]))
    out = []
    for n in steps:
        for d in delays:
            for method in methods:
                best = bound_at_best_step(method, N=n, tau4=float(d) ** 4, **c)
                lr = float(f"{float(best.eta):.{STEP_DIGITS}g}")
                bound = float(
                    theorem_terms(
                        method,
                        T=c["T"],
                        vocab_size=c["vocab_size"],
                        R=c["R"],
                        C=math.exp(c["log_C"]),
                        L=c["L"],
                        eta=lr,
                        N=n,
                        eps=c["eps"],
                        tau4=float(d) ** 4,
                        objective_gap=c["objective_gap"],
                    ).total
                )
                out.append(
                    {
                        "method": method,
                        "delay": d,
                        "total_steps": n,
                        "lr": lr,
                        "bound": bound,
                        "ceiling": ceiling,
                    }
                )
    return out


def run_verdict(bound: float, ceiling: float, measured: dict[str, float]) -> str:
    """`vacuous`, `refuted`, `holds` or `unresolved` (module docstring); `measured` a t-interval
    `{mean, lo, hi, n}` over seeds."""
    if bound >= ceiling:
        return VACUOUS
    if measured["lo"] > bound:
        return REFUTED
    if measured["hi"] < bound:
        return HOLDS
    return UNRESOLVED


def is_bite_run(result: RunBounds) -> bool:
    """A run of one of `BITE_EXPERIMENTS` (its name starts with the experiment's)."""
    return result.name.split("/")[0] in BITE_EXPERIMENTS


def bite_row(result: RunBounds) -> dict[str, Any]:
    """One run at the bound-minimising step: its grid point, `eta` against its own minimiser,
    the ceiling, the measurement with its interval, and per constant the bound, measured/bound
    and the verdict."""
    c = result.constants
    config = read_json(Path(result.run_dir) / "config.json")
    config = config.get("config", config)
    ceiling = float(gradient_norm_sq_ceiling(c["T"], c["L"], c["R"], c["vocab_size"]))
    measured = result.terms["total"]["measured"]
    own = bound_at_best_step(
        result.method,
        N=c["N"],
        tau4=c["tau4"],
        T=c["T"],
        vocab_size=c["vocab_size"],
        R=c["R"],
        L=c["L"],
        log_C=c["log_C"],
        eps=c["eps"],
        objective_gap=c["R"] - c["J0"],
    )
    row: dict[str, Any] = {
        "run": result.name,
        "method": result.method,
        "delay": int(config["delay"]),
        "N": int(c["N"]),
        "seeds": int(c["num_seeds"]),
        "eta": float(c["eta"]),
        "eta_over_own_best": float(c["eta"]) / float(own.eta),
        "ceiling": ceiling,
        "measured": measured,
        "in_setting": result.in_setting,
    }
    for const in CONSTANTS:
        bound = float(result.terms["total"][const]["bound"])
        row[const] = {
            "bound": bound,
            "ratio": measured["mean"] / bound,
            "verdict": run_verdict(bound, ceiling, measured),
        }
    return row


def bite_rows(results: Sequence[RunBounds]) -> list[dict[str, Any]]:
    """`bite_row` of every run of `BITE_EXPERIMENTS` in the theorems' setting, sorted by
    `(N, delay, method)`."""
    rows = [
        bite_row(r)
        for r in results
        if is_bite_run(r) and r.in_setting and "paper" in r.terms.get("total", {})
    ]
    return sorted(rows, key=lambda r: (r["N"], r["delay"], r["method"], r["run"]))


def bite_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per constant and method: how many runs got each verdict (no pooling across constants)."""
    out: dict[str, Any] = {"runs": len(rows)}
    for const in CONSTANTS:
        out[const] = {
            method: {
                v: sum(r[const]["verdict"] == v for r in rows if r["method"] == method)
                for v in VERDICTS
            }
            for method in ("gmc", "tic")
        }
    return out
