"""Reading the records of toy training runs for the theory (JSON only: no torch, no toy track).

A toy training run directory holds `config.json` (`{"config": ToyTrainConfig fields, ...}`),
`metrics.jsonl` (one row per step per seed) and `summary.json` (per-seed and mean results, and
with `drift_max_lag > 0` the drift record `delay_regularity`). A run is *tracked* when its config
turned the bound tracking on (`bound_every > 0`, `toy_mdps.train.bound_measurement`): its rows then carry
the `bounds/*` fields `evidence.measured` sets beside the bounds.

`setting(config)` lists what puts a run outside the theorems' setting (Lemma 1 and Theorems 1-2
analyse plain SGD at a constant step with an estimator of the class and leave-one-out
advantages): Adam, a schedule, clipping, VCPO's per-step ESS factor, another advantage, a method
without theorem.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from gmc_grpo.json_files import read_json_object, read_jsonl
from gmc_grpo.methods import MethodSettings, get_method
from gmc_grpo.records import describe_missing, missing_steps
from gmc_grpo.stats import t_interval


def is_tracked_run(run_dir: str | Path) -> bool:
    """A toy training run directory whose config turned the bound tracking on."""
    path = Path(run_dir) / "config.json"
    if not path.is_file() or not (Path(run_dir) / "metrics.jsonl").is_file():
        return False
    try:
        config = read_json_object(path).get("config", {})
    except (OSError, ValueError, RecursionError):
        return False
    if not isinstance(config, dict) or not isinstance(config.get("bound_every", 0), int):
        return False
    return int(config.get("bound_every", 0) or 0) > 0 and "total_steps" in config


def is_toy_train_run(run_dir: str | Path) -> bool:
    """A finished toy training run (tracked or not): config with `total_steps`, a summary."""
    path = Path(run_dir)
    if not (path / "config.json").is_file() or not (path / "summary.json").is_file():
        return False
    try:
        config = read_json_object(path / "config.json").get("config", {})
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(config, dict) and {"total_steps", "method", "optimizer", "delay"} <= set(
        config
    )


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
    config = read_json_object(run_dir / "config.json").get("config")
    if not isinstance(config, dict):
        raise ValueError(f"{run_dir}/config.json: its 'config' is not a JSON object")
    rows = read_jsonl(run_dir / "metrics.jsonl")
    seeds = [int(s) for s in config["seeds"]]
    steps = int(config["total_steps"])
    gaps = missing_steps(rows, steps, seeds)
    if gaps:  # a run with gaps is left out, with the rows it lacks named (issue 36)
        count = sum(len(v) for v in gaps.values())
        raise ValueError(
            f"{run_dir}/metrics.jsonl lacks {count} of the {steps * len(seeds)} rows of its "
            f"{steps} steps ({describe_missing(gaps)}): an unfinished run, or rows lost"
        )
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
        per_seed = read_json_object(summary_path).get("per_seed", {})
        final = np.array([_float(per_seed.get(str(s), {}).get("final_objective")) for s in seeds])
    return RunSeries(config, seeds, every, np.array(marks, dtype=np.int64), recorded, final)


# ----------------------------------------------------------------------------------------------
# What the records give, read by the field names the toy track writes
# ----------------------------------------------------------------------------------------------


def _interval(values: Sequence[float] | np.ndarray) -> dict[str, float]:
    return t_interval([float(v) for v in np.ravel(values)])


def final_objectives(series: RunSeries) -> np.ndarray:
    """`[S]`: each seed's final `J` from `summary.json`, else its last recorded `J`."""
    final = series.final_objective
    if not np.all(np.isfinite(final)):
        final = series.every["objective"][:, -1]
    return final


def run_constants(series: RunSeries) -> dict[str, Any]:
    """The run's constants of the bounds: `T, |A|, R, L, log C, eta, N, G, B, eps, tau2, tau4,
    J0` (`L` and `C` the largest recorded values, `tau2`/`tau4` the realised lag moments)."""
    cfg, ev = series.config, series.every
    return {
        "T": int(cfg["max_length"]),
        "vocab_size": int(cfg["vocab_size"]),
        "R": float(cfg["reward_scale"]),
        "L": float(np.nanmax(ev["lipschitz_L"])),
        "log_C": float(np.nanmax(ev["log_coverage"])),
        "eta": float(cfg["lr"]),
        "N": int(cfg["total_steps"]),
        "G": int(cfg["group_size"]),
        "B": int(cfg["num_groups"]),
        "eps": class_eps(cfg),
        "tau2": float(np.mean(ev["lag_sq"])),
        "tau4": float(np.mean(ev["lag_fourth"])),
        "J0": float(ev["objective"][0, 0]),
        "num_seeds": len(series.seeds),
        "recorded_steps": int(series.recorded_steps.size),
    }


def is_plain_sgd(config: dict[str, Any]) -> bool:
    """Every update is `eta g_n` with one constant `eta`: SGD, constant step, no clip, no
    per-step factor (the updates Lemma 1 and the drift bound speak of)."""
    return (
        config["optimizer"] == "sgd"
        and config.get("lr_schedule", "constant") == "constant"
        and config.get("grad_clip") is None
        and get_method(config["method"]).step_scale is None
    )


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
    if not is_plain_sgd(cfg) or series.recorded_steps.size == 0:
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


def first_order_split(series: RunSeries) -> dict[str, Any]:
    """`first_order_identity` of the run's own metric and final `J` (the toy track's GMC/TIC
    comparison, `toy_mdps.train.analysis`; `evidence.measured` computes the same)."""
    return first_order_identity(
        series, series.every["grad_norm_sq"].mean(axis=1), final_objectives(series)
    )
