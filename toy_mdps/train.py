"""`gmc-grpo toy train`: resumable runs of the asynchronous toy learner, and experiments (grids).

**A run** (`train`) is one `TrainConfig` for all its seeds at once. Its directory is a standard
run record (`gmc_grpo.records`): `config.json`, `metrics.jsonl` with **one row per step per
seed** (field `seed`; the metrics are exact and taken at `theta_n`, before the step's update),
`summary.json` (per-seed final `J(theta_N)`, the convergence metric
`(1/N) sum_{n<N} ||grad J(theta_n)||^2`, the realised lag moments, and means with t-intervals
over seeds), and while running `checkpoint.pt` (parameters, Adam moments, schedules with their
queued batches, generator states, GAC states), written atomically every `checkpoint_every`
steps. A killed run restarted on the same directory drops the rows at or after the checkpoint's
step and continues from it; since every random number comes from the checkpointed per-seed
generators, the records equal those of an uninterrupted run (a test checks it).

**An experiment** (`ExperimentConfig`, files `toy_mdps/configs/train_*.json`) is a grid of runs:
`base` TrainConfig fields, a cartesian `grid` and a `zip` of equally long lists (zipped, then
crossed with the grid). Each grid point is a run in `<out>/<point name>/`; finished points
(summary present, same config) are skipped, partial ones resume from their checkpoint. At the end
`results.csv` (one row per point) and `summary.json` (the experiment's analysis,
`toy_mdps.train_analysis`) are written, and the figures (`figures.toy_training`).
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gmc_grpo.records import RunWriter, atomic_write_json, read_json, read_jsonl
from toy_mdps.config import dataclass_from_dict, read_json_config
from toy_mdps.learner import CONFIG_DIR, AsyncLearner, TrainConfig, exact_state

EXPERIMENT_KINDS = ("runs", "delay_sweep", "group_size", "length_coupled", "eps_star")
CHECKPOINT = "checkpoint.pt"


def t_interval(values: list[float], level: float = 0.95) -> dict[str, float]:
    """Mean with a Student-t interval over independent seeds: `{mean, lo, hi, n}`."""
    from scipy.special import stdtrit  # Student-t quantile (scipy.stats imports slowly)

    x = [v for v in values if v is not None and math.isfinite(v)]
    n = len(x)
    if n == 0:
        return {"mean": math.nan, "lo": math.nan, "hi": math.nan, "n": 0}
    mean = sum(x) / n
    if n < 2:
        return {"mean": mean, "lo": -math.inf, "hi": math.inf, "n": n}
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1))
    half = float(stdtrit(n - 1, 0.5 + level / 2)) * sd / math.sqrt(n)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "n": n}


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def summarise_rows(
    rows: list[dict[str, Any]],
    config: TrainConfig,
    final_objective: dict[int, float],
    level: float = 0.95,
) -> dict[str, Any]:
    """Per-seed and across-seed summary of a run's metrics rows (see the module docstring)."""
    per_seed: dict[int, dict[str, float]] = {}
    for seed in config.seeds:
        mine = [r for r in rows if r["seed"] == seed]
        mine.sort(key=lambda r: r["step"])
        lags = [r["staleness/lag"] for r in mine]
        n = len(mine)
        quarter = mine[: max(1, n // 4)]
        per_seed[seed] = {
            "convergence_metric": sum(r["policy/grad_norm_sq"] for r in mine) / n,
            "final_objective": final_objective[seed],
            "mean_objective": sum(r["policy/objective"] for r in mine) / n,
            "objective_at_quarter": mine[len(quarter)]["policy/objective"]
            if len(quarter) < n
            else final_objective[seed],
            "lag_mean": sum(lags) / n,
            "lag_tau4": sum(lag**4 for lag in lags) / n,
            "kl_mean": sum(r["ratio/kl_exact"] for r in mine) / n,
            "final_entropy": mine[-1]["policy/entropy"],
        }
    keys = next(iter(per_seed.values())).keys()
    across = {k: t_interval([per_seed[s][k] for s in config.seeds], level) for k in keys}
    return {
        "name": config.name,
        "num_steps": config.num_steps,
        "seeds": list(config.seeds),
        "confidence": level,
        "per_seed": {str(s): v for s, v in per_seed.items()},
        "mean": across,
    }


def train(
    config: TrainConfig,
    run_dir: str | Path,
    *,
    resume: bool = True,
    progress: bool = False,
    stop_after: int | None = None,
) -> dict[str, Any] | None:
    """Run (or resume, or reuse) one run in `run_dir`; returns its summary.

    Args:
        resume: continue from `checkpoint.pt` (or reuse a finished run) if the directory holds
            the same config; `False` starts over.
        progress: show a tqdm bar over steps.
        stop_after: stop after this many steps without a summary (simulates a killed run;
            returns `None`).
    """
    from tqdm import tqdm

    run_dir = Path(run_dir)
    ckpt_path = run_dir / CHECKPOINT
    same = (run_dir / "config.json").exists() and read_json(run_dir / "config.json").get(
        "config"
    ) == config.to_dict()
    if resume and same and (run_dir / "summary.json").exists():
        return read_json(run_dir / "summary.json")
    if resume and (run_dir / "config.json").exists() and not same:
        raise ValueError(
            f"{run_dir} holds a run with a different config; pass --fresh or choose another --out"
        )
    learner = AsyncLearner(config)
    start = 0
    if resume and same and ckpt_path.exists():
        learner.load_state_dict(torch.load(ckpt_path, weights_only=False))
        start = learner.step
    elif not (resume and same):
        ckpt_path.unlink(missing_ok=True)
    writer = RunWriter(run_dir, config.to_dict(), resume=resume and same, keep_steps_below=start)
    bar = tqdm(total=config.num_steps, initial=start, desc=config.name, disable=not progress)
    try:
        for n in range(start, config.num_steps):
            writer.log_metrics_many(learner.train_step())
            bar.update(1)
            if learner.step % config.checkpoint_every == 0 and learner.step < config.num_steps:
                _save_checkpoint(ckpt_path, learner.state_dict())
            if stop_after is not None and n + 1 >= stop_after:
                return None
        final = exact_state(learner.mdp, learner.policy, learner.theta)
        rows = read_jsonl(run_dir / "metrics.jsonl")
        final_j = {s: float(final.objective[i]) for i, s in enumerate(config.seeds)}
        summary = summarise_rows(rows, config, final_j)
        writer.write_summary(summary)
        ckpt_path.unlink(missing_ok=True)
        return summary
    finally:
        bar.close()
        writer.close()


# ----------------------------------------------------------------------------------------------
# Experiments
# ----------------------------------------------------------------------------------------------


@dataclass
class ExperimentConfig:
    """A grid of toy training runs (`toy_mdps/configs/train_*.json`).

    name: experiment name (default output folder `runs/toy_train_<name>`).
    kind: what the analysis reports: `runs` (table only), `delay_sweep` (Table 3 analogue),
        `group_size` (Table 4), `length_coupled` (Table 1 setting), `eps_star` (Corollary 1).
    base: `TrainConfig` fields shared by every point.
    grid: `TrainConfig` field -> list of values, crossed (cartesian product).
    zip: `TrainConfig` field -> list of values, all of one length, taken together (e.g.
        `num_steps` with `learning_rate`), then crossed with `grid`.
    confidence: level of the intervals over seeds.
    figures: write the figures at the end.
    description: one line for the report.
    """

    name: str = "experiment"
    kind: str = "runs"
    base: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    zip: dict[str, list[Any]] = field(default_factory=dict)
    confidence: float = 0.95
    figures: bool = True
    description: str = ""

    def __post_init__(self) -> None:
        if self.kind not in EXPERIMENT_KINDS:
            raise ValueError(
                f"ExperimentConfig.kind={self.kind!r}: must be one of {EXPERIMENT_KINDS}"
            )
        fields = {f.name for f in dataclasses.fields(TrainConfig)}
        for part in ("base", "grid", "zip"):
            unknown = sorted(set(getattr(self, part)) - fields)
            if unknown:
                raise ValueError(
                    f"ExperimentConfig.{part} has unknown TrainConfig fields {unknown}"
                )
        for part in ("grid", "zip"):
            for key, values in getattr(self, part).items():
                if not isinstance(values, list) or not values:
                    raise ValueError(f"ExperimentConfig.{part}[{key!r}]={values!r}: needs a list")
        lengths = {len(v) for v in self.zip.values()}
        if len(lengths) > 1:
            raise ValueError(f"ExperimentConfig.zip={self.zip!r}: lists of different lengths")
        overlap = set(self.grid) & set(self.zip)
        if overlap:
            raise ValueError(f"ExperimentConfig: fields {sorted(overlap)} in both grid and zip")
        if not 0 < self.confidence < 1:
            raise ValueError(f"ExperimentConfig.confidence={self.confidence}: must be in (0, 1)")
        for point in self.points():  # every point must be a valid TrainConfig
            point[1]

    def points(self) -> list[tuple[str, TrainConfig, dict[str, Any]]]:
        """`(point name, TrainConfig, the varied values)` for every grid point, in run order."""
        zipped = (
            [
                dict(zip(self.zip, values, strict=True))
                for values in zip(*self.zip.values(), strict=True)
            ]
            if self.zip
            else [{}]
        )
        crossed = [
            dict(zip(self.grid, values, strict=True))
            for values in itertools.product(*self.grid.values())
        ]
        out = []
        for z in zipped:
            for g in crossed:
                varied = {**z, **g}
                label = "_".join(f"{k}={_label(v)}" for k, v in varied.items()) or "run"
                cfg = TrainConfig.from_dict({**self.base, **varied, "name": f"{self.name}/{label}"})
                out.append((label, cfg, varied))
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
        return dataclass_from_dict(cls, data)

    @classmethod
    def from_file(cls, path: str | Path) -> ExperimentConfig:
        return cls.from_dict(read_json_config(path, "experiment", "train_*.json"))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _label(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def shipped_experiment(name: str) -> Path:
    """Path of a shipped experiment, e.g. `"delay_quick"` -> `configs/train_delay_quick.json`."""
    return CONFIG_DIR / f"train_{name}.json"


RESULT_COLUMNS = (
    "point",
    "method",
    "delay",
    "schedule",
    "group_size",
    "eps",
    "num_steps",
    "learning_rate",
    "num_seeds",
)
RESULT_METRICS = (
    "convergence_metric",
    "final_objective",
    "mean_objective",
    "objective_at_quarter",
    "lag_mean",
    "lag_tau4",
    "kl_mean",
    "final_entropy",
)


def result_row(label: str, cfg: TrainConfig, summary: dict[str, Any]) -> dict[str, Any]:
    """One row of `results.csv`: the point's settings and each metric's mean and interval."""
    row: dict[str, Any] = {
        "point": label,
        "method": cfg.method,
        "delay": cfg.delay if cfg.schedule == "fixed" else None,
        "schedule": cfg.schedule,
        "group_size": cfg.group_size,
        "eps": cfg.eps,
        "num_steps": cfg.num_steps,
        "learning_rate": cfg.learning_rate,
        "num_seeds": len(cfg.seeds),
    }
    for key in RESULT_METRICS:
        stat = summary["mean"][key]
        row[key] = stat["mean"]
        row[f"{key}_lo"] = stat["lo"]
        row[f"{key}_hi"] = stat["hi"]
    return row


def run_experiment(
    config: ExperimentConfig,
    out_dir: str | Path,
    *,
    fresh: bool = False,
    progress: bool = True,
    write_figures: bool | None = None,
) -> dict[str, Any]:
    """Run (or resume) every point of the experiment; returns the experiment's summary."""
    from tqdm import tqdm

    from toy_mdps.train_analysis import analyse

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "experiment.json", config.to_dict())
    points = config.points()
    rows = []
    started = time.perf_counter()
    bar = tqdm(total=len(points), desc=f"toy train {config.name}", disable=not progress)
    try:
        for label, cfg, _ in points:
            bar.set_postfix_str(label)
            summary = train(cfg, out_dir / label, resume=not fresh)
            assert summary is not None
            rows.append(result_row(label, cfg, summary))
            bar.update(1)
    finally:
        bar.close()
    write_results_csv(rows, out_dir / "results.csv")
    analysis = analyse(config, rows, out_dir)
    analysis["wall_s"] = time.perf_counter() - started
    atomic_write_json(out_dir / "summary.json", analysis)  # the figures read it
    figures_on = config.figures if write_figures is None else write_figures
    if figures_on:
        from figures.toy_training import write_training_figures

        paths = write_training_figures(out_dir)
        analysis["figures"] = [str(p.relative_to(out_dir)) for p in paths]
        atomic_write_json(out_dir / "summary.json", analysis)
    return analysis


def write_results_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """`results.csv`: one row per grid point (`RESULT_COLUMNS`, then each metric, lo, hi)."""
    columns = list(RESULT_COLUMNS)
    for key in RESULT_METRICS:
        columns += [key, f"{key}_lo", f"{key}_hi"]
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k) for k in columns})
    os.replace(tmp, path)


QUICK_EXPERIMENTS = ("delay_quick", "group_quick", "length_quick", "eps_quick")


def reproduce_stage(out_dir: Path) -> dict[str, Any]:
    """The `make reproduce` stage: the quick experiments, their figures and a report section.

    Returns `{"headline": one line, "markdown": the report section, "experiments": summaries}`.
    """
    from toy_mdps.train_analysis import experiment_markdown

    torch.set_num_threads(1)  # small tensors: one thread is fastest, and robust on shared cores
    out_dir = Path(out_dir)
    summaries = {}
    parts = []
    for name in QUICK_EXPERIMENTS:
        config = ExperimentConfig.from_file(shipped_experiment(name))
        summary = run_experiment(config, out_dir / config.name, progress=False)
        summaries[config.name] = summary
        parts.append(experiment_markdown(config, summary, prefix=f"{out_dir.name}/{config.name}"))
    claims = [c for s in summaries.values() for c in s.get("orderings", [])]
    held = sum(c["verdict"].startswith("holds") for c in claims)
    significant = sum(c["verdict"] == "holds" for c in claims)
    headline = f"{held} of {len(claims)} orderings hold on the toy MDPs ({significant} significant)"
    for s in summaries.values():
        fit = s.get("eps_star")
        if not fit:
            continue
        if "tau4_exponent" in fit:
            headline += (
                f"; eps* ~ tau4^{fit['tau4_exponent']:.2f} N^{fit['n_exponent']:.2f} "
                "(paper 1/7, -3/14)"
            )
        else:
            headline += (
                f"; eps*: no interior optimum ({fit['censored_cells']} of "
                f"{len(fit['table'])} cells censored)"
            )
    return {"headline": headline, "markdown": "\n\n".join(parts), "experiments": summaries}
