"""`gmc-grpo toy train`: resumable runs of the asynchronous toy learner, and experiments (grids).

**A run** (`train`) is one `ToyTrainConfig` for all its seeds at once. Its directory is a standard
run record (`gmc_grpo.records`): `config.json`, `metrics.jsonl` with **one row per step per
seed** (field `seed`; the metrics are exact and taken at `theta_n`, before the step's update),
`summary.json` (per-seed final `J(theta_N)`, the convergence metric
`(1/N) sum_{n<N} ||grad J(theta_n)||^2`, the realised lag moments, and means with t-intervals
over seeds; when a batch mixes lags (the worker schedule) also each seed's `lag_statistics` over
its groups, and
with `drift_max_lag > 0` the delay-regularity record `delay_regularity`), and `checkpoints/step_<N>/` (`state.safetensors` + `state.json`: whatever
`AsyncLearner.state_dict()` returns -- parameters, Adam moments, schedules with their queued
batches, generator states, the method's state -- through `gmc_grpo.state_files`, so nothing is
unpickled), written atomically every `checkpoint_every` steps and at the end (the newest one is
kept: it lets `--extend-to` continue a finished run).

**Resuming** (the default when `run_dir` holds a run): the config must be the run's
(`gmc_grpo.resume.check_resume_config`; only `RESUME_FREE_FIELDS` may differ), or the change
must be asked for (`ResumeRequest`: `--extend-to N` for more updates, with the step-size
schedule of an `N`-update run from the resume step on; `--allow-config-change FIELD`). The rows
at or after the checkpoint's step are dropped and the run continues from it (from step 0 when it
was killed before its first checkpoint); since every random number comes from the checkpointed
per-seed generators, the records equal those of an uninterrupted run (a test checks it). A
finished run with the same config is reused. `resume=False` (`--fresh`) starts over.

**An experiment** (`toy_mdps.train.config.ExperimentConfig`, files
`toy_mdps/configs/train_*.json`) is a grid of runs:
`base` ToyTrainConfig fields, a cartesian `grid` and a `zip` of equally long lists (zipped, then
crossed with the grid). Each grid point is a run in `<out>/<point name>/`; finished points
(summary present, same config) are skipped, partial ones resume from their checkpoint. At the end
`results.csv` (one row per point) and `summary.json` (the experiment's analysis,
`toy_mdps.train.analysis`) are written. The figures are drawn from these files afterwards
(`figures.toy_training`; `gmc-grpo toy train` does it through `pipeline.toy`).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import sys
import time
from collections.abc import Mapping
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any

from gmc_grpo.json_files import atomic_write_json, read_json, read_jsonl
from gmc_grpo.records import RecordGapError, check_records_reach, read_run_config
from gmc_grpo.resume import ResumeRequest, check_resume_config, config_differences
from gmc_grpo.run_writer import RecordsExistError, RunWriter, check_same_kind, erased_text
from gmc_grpo.runlock import locks_folder
from gmc_grpo.seeding import check_seeding
from gmc_grpo.staleness import get_schedule, lag_statistics
from gmc_grpo.state_files import (
    latest_checkpoint,
    list_checkpoints,
    pickled_files,
    read_state,
    remove_checkpoints,
    save_step_folder,
    step_dir_name,
    write_state,
)
from gmc_grpo.stats import t_interval
from toy_mdps.jobs import check_jobs, single_thread, worker_pool
from toy_mdps.train.analysis import analyse
from toy_mdps.train.bound_measurement import BoundTracker
from toy_mdps.train.config import RESUME_FREE_FIELDS, ExperimentConfig, ToyTrainConfig
from toy_mdps.train.learner import AsyncLearner, exact_state

# how a refused fresh start continues, in the messages of this command
FRESH_HINT = "rerun with its config to continue it, pass --fresh to start over, or choose --out"
# a run whose records lack rows its checkpoint covers (`check_records_reach`)
GAP_HINT = (
    "pass --fresh to compute the run again from step 0 (a toy run's rows follow from its config "
    "and seeds; --fresh erases this run), or choose another --out"
)


def summarise_rows(
    rows: list[dict[str, Any]],
    config: ToyTrainConfig,
    final_objective: dict[int, float],
    level: float = 0.95,
    lag_stats: dict[int, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Per-seed and across-seed summary of a run's metrics rows (see the module docstring).

    `lag_tau4` is the mean over groups of `lag^4` (`staleness/lag4_mean` per step when a batch
    mixes lags, else the step's lag to the 4th); `lag_stats` (worker schedule: each seed's
    `gmc_grpo.staleness.lag_statistics`) adds `lag_tau2`, `lag_max` and `lag_spread_std`.
    """
    per_seed: dict[int, dict[str, float]] = {}
    for seed in config.seeds:
        mine = [r for r in rows if r["seed"] == seed]
        mine.sort(key=lambda r: r["step"])
        lags = [r["staleness/lag"] for r in mine]
        fourth = [r.get("staleness/lag4_mean", r["staleness/lag"] ** 4) for r in mine]
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
            "lag_tau4": sum(fourth) / n,
            "kl_mean": sum(r["ratio/kl_exact"] for r in mine) / n,
            "final_entropy": mine[-1]["policy/entropy"],
        }
        if lag_stats is not None:
            stats_of_seed = lag_stats[seed]
            per_seed[seed]["lag_tau2"] = stats_of_seed["tau2"]
            per_seed[seed]["lag_max"] = stats_of_seed["max"]
            per_seed[seed]["lag_spread_std"] = stats_of_seed["spread_std"]
    keys = next(iter(per_seed.values())).keys()
    across = {k: t_interval([per_seed[s][k] for s in config.seeds], level) for k in keys}
    return {
        "name": config.name,
        "total_steps": config.total_steps,
        "seeds": list(config.seeds),
        "confidence": level,
        "per_seed": {str(s): v for s, v in per_seed.items()},
        "mean": across,
    }


def _refuse_pickles(run_dir: Path) -> None:
    """A pickled checkpoint (`checkpoint.pt` of gmc-grpo before safetensors) is never loaded."""
    found = pickled_files(run_dir)
    if found:
        raise ValueError(
            f"{found[0]} is a pickled checkpoint (gmc-grpo now writes checkpoints/step_<N>/ as "
            "safetensors + JSON); a pickle can run code, so it is never loaded: start the run "
            "over with --fresh (which deletes it), or choose another --out"
        )


def _is_toy_train_config(config: Mapping[str, Any]) -> bool:
    """A run's `config` written by `toy train`: every field one of `ToyTrainConfig`'s."""
    return set(config) <= {f.name for f in dataclasses.fields(ToyTrainConfig)}


def _run_state(
    config: ToyTrainConfig, run_dir: Path, request: ResumeRequest
) -> tuple[dict[str, Any] | None, dict[str, Any], dict[str, Any]]:
    """`(learner state or None, accepted config changes, the previous config)` of the run in
    `run_dir`, after checking that `config` may continue it (raises a one-line ValueError)."""
    payload = read_run_config(run_dir)
    assert payload is not None
    previous = payload.get("config")
    fields = [f.name for f in dataclasses.fields(ToyTrainConfig)]
    if not isinstance(previous, dict) or not _is_toy_train_config(previous):
        raise RecordsExistError(
            f"{run_dir} holds another kind of run (its config.json is not a toy train config): "
            "choose another --out"
        )
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:  # a run restarted from step 0 keeps none of its streams
        check_seeding(payload.get("seeding"), str(run_dir))
    state = read_state(checkpoint) if checkpoint is not None else None
    old = state["config"] if state is not None else previous
    defaults = ToyTrainConfig().to_dict()
    changes = check_resume_config(
        old,
        config.to_dict(),
        free=RESUME_FREE_FIELDS,
        request=request,
        where=str(run_dir),
        defaults=defaults,
        fields=fields,
    )
    return state, changes, old


@locks_folder("run_dir")
def train(
    config: ToyTrainConfig,
    run_dir: str | Path,
    *,
    resume: bool = True,
    progress: bool = False,
    stop_after: int | None = None,
    request: ResumeRequest | None = None,
    require_run: bool = False,
) -> dict[str, Any] | None:
    """Run (or resume, or reuse) one run in `run_dir`; returns its summary.

    Args:
        resume: continue the run in `run_dir` when there is one (its config must allow it, see
            the module docstring); `False` starts over, erasing its records.
        progress: show a tqdm bar over steps.
        stop_after: stop after this many steps without a summary (simulates a killed run;
            returns `None`).
        request: config changes asked for on purpose (`--extend-to`, `--allow-config-change`).
        require_run: refuse when `run_dir` holds no run (`--resume`).

    Holds `run_dir`'s lock throughout (`gmc_grpo.runlock`: a second writer is refused).
    """
    from tqdm import tqdm

    run_dir = Path(run_dir)
    request = request or ResumeRequest()
    has_run = (run_dir / "config.json").is_file()
    if (require_run or request.asked) and not (resume and has_run):
        raise FileNotFoundError(
            f"{run_dir} holds no run to continue (config.json is missing): start it without "
            "--resume/--extend-to/--allow-config-change, or point --out at the run's folder"
        )
    if resume:
        _refuse_pickles(run_dir)
    learner = AsyncLearner(config)
    tracker = BoundTracker(learner) if config.bound_every > 0 else None
    if resume and has_run:
        opened = _continue_run(config, run_dir, request, learner, tracker)
        if isinstance(opened, dict):  # finished with the same config: reused
            return opened
        writer = opened
    else:
        if not resume:
            check_same_kind(run_dir, is_own=_is_toy_train_config, kind="toy train")
            erased = erased_text(run_dir)
            if erased:
                print(f"--fresh: erasing the records of {run_dir} ({erased})", file=sys.stderr)
            remove_checkpoints(run_dir)
            for path in pickled_files(run_dir):
                path.unlink()
        writer = RunWriter.fresh(run_dir, config.to_dict(), overwrite=not resume, hint=FRESH_HINT)
    start = learner.step
    bar = tqdm(total=config.total_steps, initial=start, desc=config.name, disable=not progress)
    try:
        for n in range(start, config.total_steps):
            if tracker is not None:
                tracker.before_step(learner)
            rows = learner.train_step()
            if tracker is not None:
                tracker.after_step(learner, rows)
            writer.log_metrics_many(rows)
            bar.update(1)
            last = learner.step == config.total_steps
            if last or learner.step % config.checkpoint_every == 0:
                writer.sync()  # the rows this checkpoint covers reach the disk before it
                _save_checkpoint(run_dir, learner, tracker)
            if stop_after is not None and n + 1 >= stop_after:
                return None
        summary = _run_summary(config, run_dir, learner)
        writer.write_summary(summary)
        return summary
    finally:
        bar.close()
        writer.close()


def _continue_run(
    config: ToyTrainConfig,
    run_dir: Path,
    request: ResumeRequest,
    learner: AsyncLearner,
    tracker: BoundTracker | None,
) -> RunWriter | dict[str, Any]:
    """Continue the run in `run_dir`: its summary when it is finished with the same config (and
    nothing was asked), else a writer after the learner (and tracker) took the checkpoint's
    state; a config change is refused unless asked for (`_run_state`)."""
    state, changes, _old = _run_state(config, run_dir, request)
    steps = list_checkpoints(run_dir)
    if steps:  # the records must reach the checkpoint: rows below it are never recomputed
        check_records_reach(
            run_dir,
            max(steps),
            seeds=config.seeds,
            covered_by=f"its checkpoint {step_dir_name(max(steps))}",
            hint=GAP_HINT,
        )
    done = (run_dir / "summary.json").is_file()
    if done and not request.asked and not changes:
        return read_json(run_dir / "summary.json")
    if state is not None:
        state["config"] = config.to_dict()  # the changes were checked above
        learner.load_state_dict(state)
        if tracker is not None and "bounds" in state:
            tracker.load_state_dict(state["bounds"])
    segment = {
        "config_changes": {k: [a, b] for k, (a, b) in changes.items()},
        **({"request": request.as_record()} if request.asked else {}),
    }
    (run_dir / "summary.json").unlink(missing_ok=True)
    return RunWriter.resume(
        run_dir, config.to_dict(), keep_steps_below=learner.step, segment=segment
    )


def _save_checkpoint(run_dir: Path, learner: AsyncLearner, tracker: BoundTracker | None) -> None:
    """`checkpoints/step_<n>/` with the learner's (and the tracker's) state; the newest kept."""
    state = learner.state_dict()
    if tracker is not None:
        state["bounds"] = tracker.state_dict()
    save_step_folder(run_dir, learner.step, lambda tmp, s=state: write_state(tmp, s), keep=1)


def _run_summary(config: ToyTrainConfig, run_dir: Path, learner: AsyncLearner) -> dict[str, Any]:
    """`summary.json` of a finished run: `summarise_rows` of its rows and final `J`, with each
    seed's lag statistics when a batch mixes lags and the delay-regularity record."""
    final = exact_state(learner.mdp, learner.policy, learner.theta)
    rows = read_jsonl(run_dir / "metrics.jsonl")
    final_j = {s: float(final.objective[i]) for i, s in enumerate(config.seeds)}
    lag_stats = None
    if learner.mixes_lags:
        lag_stats = {
            seed: lag_statistics(schedule.lags_per_batch)
            for seed, schedule in zip(config.seeds, learner.schedules, strict=True)
        }
    summary = summarise_rows(rows, config, final_j, lag_stats=lag_stats)
    if lag_stats is not None:
        summary["lag_statistics"] = {str(seed): st for seed, st in lag_stats.items()}
    if config.drift_max_lag > 0:
        summary["delay_regularity"] = learner.drift_summary()
    return summary


# ----------------------------------------------------------------------------------------------
# Experiments
# ----------------------------------------------------------------------------------------------


RESULT_COLUMNS = (
    "point",
    "method",
    "delay",
    "schedule",
    "group_size",
    "eps",
    "total_steps",
    "lr",
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


def result_row(label: str, cfg: ToyTrainConfig, summary: dict[str, Any]) -> dict[str, Any]:
    """One row of `results.csv`: the point's settings and each metric's mean and interval."""
    row: dict[str, Any] = {
        "point": label,
        "method": cfg.method,
        "delay": get_schedule(cfg.schedule).setting(cfg, "delay"),
        "schedule": cfg.schedule,
        "group_size": cfg.group_size,
        "eps": cfg.eps,
        "total_steps": cfg.total_steps,
        "lr": cfg.lr,
        "num_seeds": len(cfg.seeds),
    }
    for key in RESULT_METRICS:
        stat = summary["mean"][key]
        row[key] = stat["mean"]
        row[f"{key}_lo"] = stat["lo"]
        row[f"{key}_hi"] = stat["hi"]
    return row


def _train_point(config_dict: dict[str, Any], run_dir: Path, resume: bool) -> dict[str, Any]:
    """One point of an experiment in a worker process (`run_experiment(jobs > 1)`)."""
    return _point(ToyTrainConfig.from_dict(config_dict), run_dir, resume)


def _point(config: ToyTrainConfig, run_dir: Path, resume: bool) -> dict[str, Any]:
    """One point of an experiment: `train`, or, when the point's records lack rows its
    checkpoint covers, the point computed again from step 0 with a note (a point is its config
    alone: no extension or config change ever continued it, so the same rows come back)."""
    try:
        summary = train(config, run_dir, resume=resume)
    except RecordGapError as gap:
        print(f"note: {gap.args[0].split(', so continuing')[0]}; computing {run_dir} again from "
              "step 0", file=sys.stderr)  # fmt: skip
        summary = train(config, run_dir, resume=False)
    assert summary is not None
    return summary


@locks_folder("out_dir")
def run_experiment(
    config: ExperimentConfig,
    out_dir: str | Path,
    *,
    fresh: bool = False,
    progress: bool = True,
    jobs: int = 1,
) -> dict[str, Any]:
    """Run (or resume) every point of the experiment; returns the experiment's summary.

    Writes `experiment.json`, one run directory per point, `results.csv` and `summary.json`.
    `jobs > 1` runs that many points at once in worker processes (one torch thread each); every
    point's records equal those of `jobs=1` with one thread. Holds `out_dir`'s lock throughout
    (each point's run holds its own).
    """
    from tqdm import tqdm

    check_jobs(jobs)
    out_dir = Path(out_dir)
    if (out_dir / "config.json").is_file():  # a run's folder, not an experiment's: never erased
        raise RecordsExistError(
            f"{out_dir} holds a run (config.json), not an experiment (experiment.json), which "
            "an experiment does not write into nor --fresh erase: choose another --out"
        )
    if not fresh and (out_dir / "experiment.json").is_file():
        changes = config_differences(read_json(out_dir / "experiment.json"), config.to_dict())
        if changes:
            detail = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changes.items())
            raise ValueError(
                f"{out_dir} holds another experiment ({detail}): pass --fresh to start it over "
                "(erases its runs) or choose another --out"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "experiment.json", config.to_dict())
    points = config.points()
    rows = []
    started = time.perf_counter()
    bar = tqdm(total=len(points), desc=f"toy train {config.name}", disable=not progress)
    pool = None
    try:
        if jobs == 1:
            summaries = []
            for label, cfg, _ in points:
                bar.set_postfix_str(label)
                summaries.append(_point(cfg, out_dir / label, not fresh))
                bar.update(1)
        else:
            pool = worker_pool(jobs, single_thread)
            futures = [
                pool.submit(_train_point, cfg.to_dict(), out_dir / label, not fresh)
                for label, cfg, _ in points
            ]
            for future in as_completed(futures):
                future.result()  # a failed point raises here
                bar.update(1)
            summaries = [future.result() for future in futures]
        for (label, cfg, _), summary in zip(points, summaries, strict=True):
            assert summary is not None
            rows.append(result_row(label, cfg, summary))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        bar.close()
    write_results_csv(rows, out_dir / "results.csv")
    analysis = analyse(config, rows, out_dir)
    analysis["wall_s"] = time.perf_counter() - started
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
