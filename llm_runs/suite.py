"""A suite of training runs over seeds, methods and delays, and its paired analysis.

`gmc-grpo llm train --recipe tiny_delay --seeds 0,1,2 --methods grpo,tic,gmc --delays 16 --out S`
runs one `llm train` per (delay, method, seed) into `S/<method>_d<D>_seed<s>/` (an ordinary run
record each), then writes `S/suite_summary.json` and `S/suite_summary.md` (`analyse_suite`).

**What the runs share** (`TrainConfig.cache_dir = S/cache`, `llm_runs.cache`): every method of a
seed starts from the same initial policy (the tiny model after its supervised warm-up), built once;
the rollouts of the initial policy (the FIFO fill of a fixed delay, the first launches of the other
schedules) are generated once per seed and read by every method. Sharing changes no record (a
test compares runs with and without the cache).

**Processes.** The runs are spread over `processes` worker processes (default: one per core, at
most two), each run with ONE torch thread, whatever the number of processes, so the records do
not depend on how the runs are spread (a test runs a suite with one and with two processes and
compares every record). On CUDA (runs whose `learner_device` is not "cpu", with GPUs visible)
the default is one process per visible GPU (per pair of GPUs in the "two_gpu" layout), each
pinned to its own GPU(s) through `CUDA_VISIBLE_DEVICES` before it imports torch
(`worker_devices`), and more processes than that are refused: two runs never share a GPU. Runs are ordered method-major (all seeds of the first method, then the
next method), so that the runs that start together are different seeds and never wait on each
other's warm-up.

**Resuming.** A run whose `summary.json` exists is finished and read back; an unfinished one with a
checkpoint is resumed; an unfinished one without a checkpoint is started again (its folder is
removed first). `S/suite.json` keeps the suite's base config; a second call with another base
config is refused (seeds, methods and delays may be added).

**The analysis** (`analyse_suite`, `SuiteAnalysis`): per delay and method, the mean over seeds
with a 95% Student-t interval (`gmc_grpo.stats.t_interval`) of

- `final_reward`: mean `reward/mean` over the last `final_fraction` (10%) of the updates;
- `mean_reward`: mean `reward/mean` over all updates (the area under the training curve);
- `rise`: `final_reward` minus the mean reward of the first `final_fraction` of the updates (did
  the method learn at all; not compared between methods, see `COMPARED`);
- `greedy`, `sampled`: held-out accuracy at the last evaluation (greedy accuracy; sampled Pass@1,
  the mean correctness of the `eval_samples` samples per problem);

and the paired differences GMC - TIC, GMC - GRPO, TIC - GRPO of each measure over the seeds both
methods ran (`gmc_grpo.stats.paired_difference`: the runs of one seed share the initial policy and
the first rollouts, so the per-seed difference removes their common noise). A comparison "holds"
only when its 95% interval excludes zero on the side the paper predicts; "reversed" when it
excludes zero on the other side; otherwise "not resolved".
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmc_grpo.configs import resolve_aliases
from gmc_grpo.records import (
    atomic_write_json,
    atomic_write_text,
    environment_info,
    read_json_object,
    read_run,
    record_gaps,
)
from gmc_grpo.runlock import clear_folder, locks_folder, run_lock
from gmc_grpo.seeding import SEEDING, check_seeding
from gmc_grpo.stats import paired_difference, t_interval

#: The paired comparisons of the analysis, `(a, b)` for `a - b`: the paper's ordering under delay
#: (GMC >= TIC > GRPO, Figure 2 and Table 3).
COMPARISONS: tuple[tuple[str, str], ...] = (("gmc", "tic"), ("gmc", "grpo"), ("tic", "grpo"))
#: The measures of one run (`run_measures`), in table order, with their labels.
MEASURES: dict[str, str] = {
    "final_reward": "final training reward (mean of the last 10% of updates)",
    "mean_reward": "mean training reward over all updates",
    "rise": "final reward minus the reward of the first 10% of updates",
    "greedy": "held-out accuracy, greedy (last evaluation)",
    "sampled": "held-out Pass@1, sampled (last evaluation)",
    # beside the rewards and Pass@1: answers scored incorrect because the scorer's comparison
    # reached its CPU limit twice (`llm_runs.scoring`); "-" in runs recorded before the count
    "reward_timeouts": "training responses scored incorrect after two scorer timeouts (run total)",
    "eval_timeouts": "held-out samples scored incorrect after two scorer timeouts (last "
    "evaluation, both decodings)",
}
#: The measures compared between methods (`rise` differs from `final_reward` only by the first
#: updates' reward, which the methods of one seed share under a fixed delay: the FIFO fill).
COMPARED: tuple[str, ...] = ("final_reward", "mean_reward", "greedy", "sampled")
#: Config fields a suite sets per run; the rest is the suite's base config.
PER_RUN_FIELDS = ("out", "method", "seed", "delay", "cache_dir", "progress", "resume")
SUITE_FILE = "suite.json"


@dataclass(frozen=True)
class SuiteRun:
    """One run of a suite: its cell and its folder."""

    method: str
    delay: int
    seed: int
    out: str


@dataclass
class SuiteConfig:
    """A suite of `gmc-grpo llm train` runs (`run_suite`)."""

    out: str
    """suite folder: one run folder per (method, delay, seed), `suite.json`,
    `suite_summary.json`, `suite_summary.md`, and the shared `cache/`"""
    base: dict[str, Any]
    """`TrainConfig` values shared by every run (a recipe plus overrides); `out`, `method`,
    `seed`, `delay`, `cache_dir`, `progress` are set per run (values given here are replaced)"""
    seeds: tuple[int, ...]
    """the seeds (>= 2 for an interval; the analysis of one seed is a demonstration)"""
    methods: tuple[str, ...]
    """registered methods (`gmc_grpo.methods`)"""
    delays: tuple[int, ...] | None = None
    """fixed delays `D`; None: the base config's delay"""
    processes: int = 0
    """worker processes (0: one per CPU core, at most 2; on CUDA one per visible GPU, or per
    pair of GPUs in the "two_gpu" layout, and no more than that); each run uses one torch
    thread"""
    share: bool = True
    """share the initial policy and its rollouts between runs (`cache_dir = out/cache`)"""
    final_fraction: float = 0.1
    """fraction of the last updates averaged into `final_reward`"""

    def __post_init__(self) -> None:
        from gmc_grpo.fieldchecks import seeds_problem
        from gmc_grpo.methods import method_names

        self.seeds = tuple(int(s) for s in self.seeds)
        self.methods = tuple(self.methods)
        if self.delays is not None:
            self.delays = tuple(int(d) for d in self.delays)
        if not self.out:
            raise ValueError("SuiteConfig.out='': name the suite folder (--out)")
        if seeds_problem(self.seeds):  # the toy learner's rule (`gmc_grpo.fieldchecks`)
            raise ValueError(
                f"SuiteConfig.seeds={self.seeds}: give distinct seeds >= 0, e.g. --seeds 0,1,2"
            )
        unknown = [m for m in self.methods if m not in method_names()]
        if not self.methods or unknown or len(set(self.methods)) != len(self.methods):
            raise ValueError(
                f"SuiteConfig.methods={self.methods}: give distinct registered methods "
                f"({', '.join(method_names())}), e.g. --methods grpo,tic,gmc"
            )
        if self.delays is not None and (not self.delays or min(self.delays) < 0):
            raise ValueError(f"SuiteConfig.delays={self.delays}: give delays >= 0, e.g. 0,16")
        if self.processes < 0:
            raise ValueError(f"SuiteConfig.processes={self.processes}: must be >= 0 (0: auto)")
        if not 0 < self.final_fraction <= 1:
            raise ValueError(f"SuiteConfig.final_fraction={self.final_fraction}: must be in (0, 1]")

    @property
    def suite_delays(self) -> tuple[int, ...]:
        return self.delays if self.delays is not None else (int(self.base.get("delay", 0)),)

    def runs(self) -> list[SuiteRun]:
        """Every run, method-major (then delay, then seed): see the module docstring."""
        root = Path(self.out)
        return [
            SuiteRun(m, d, s, str(root / run_name(m, d, s)))
            for m in self.methods
            for d in self.suite_delays
            for s in self.seeds
        ]

    def run_values(self, run: SuiteRun) -> dict[str, Any]:
        """The `TrainConfig` values of one run."""
        values = {
            **self.base,
            "out": run.out,
            "method": run.method,
            "seed": run.seed,
            "delay": run.delay,
            "progress": False,
        }
        if self.share:
            values["cache_dir"] = str(Path(self.out) / "cache")
        return values

    def worker_devices(self, gpus: int | None = None) -> list[str | None]:
        """Each worker process's `CUDA_VISIBLE_DEVICES` (None: a CPU worker, nothing set).

        gpus: the visible CUDA devices (None: ask torch). Runs on CUDA get one process per GPU
        (per pair in the "two_gpu" layout) by default, and `processes` above that is refused;
        CPU runs get `processes` (0: one per core, at most 2).
        """
        if gpus is None:
            gpus = visible_gpus()
        on_cuda = gpus > 0 and str(self.base.get("learner_device", "auto")) != "cpu"
        if not on_cuda:
            return [None] * (self.processes or max(1, min(2, os.cpu_count() or 1)))
        return worker_devices(
            self.processes,
            gpus,
            2 if self.base.get("layout") == "two_gpu" else 1,
            os.environ.get("CUDA_VISIBLE_DEVICES"),
        )


def visible_gpus() -> int:
    """The CUDA devices this process sees (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def worker_devices(processes: int, gpus: int, per_run: int, visible: str | None) -> list[str]:
    """`CUDA_VISIBLE_DEVICES` of each of the suite's worker processes on `gpus` visible GPUs.

    processes: asked for (0: as many as fit); per_run: GPUs one run uses (2 in the "two_gpu"
    layout); visible: this process's `CUDA_VISIBLE_DEVICES` (None: unset), whose entries are
    the devices handed out. Worker `i` gets GPUs `i * per_run .. (i + 1) * per_run - 1`.
    """
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else None
    ids = ids[:gpus] if ids is not None else [str(i) for i in range(gpus)]
    fit = len(ids) // per_run
    if fit == 0:
        raise ValueError(
            f"SuiteConfig: a run of this layout needs {per_run} GPUs and {len(ids)} are visible"
        )
    if processes > fit:
        raise ValueError(
            f"SuiteConfig.processes={processes}: {len(ids)} GPU(s) visible and {per_run} per run "
            f"give room for {fit} process(es) (runs never share a GPU): pass --processes {fit} "
            "or fewer, or make more GPUs visible"
        )
    count = processes or fit
    return [",".join(ids[i * per_run : (i + 1) * per_run]) for i in range(count)]


def _pin_worker(devices: Any) -> None:
    """Pool initializer: take one entry of the queue `devices` as this process's
    `CUDA_VISIBLE_DEVICES`, before any run imports torch."""
    device = devices.get()
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device


def run_name(method: str, delay: int, seed: int) -> str:
    """Folder name of one run of a suite: `<method>_d<D>_seed<s>`."""
    return f"{method}_d{delay}_seed{seed}"


# -- running ----------------------------------------------------------------------------------


def _check_config(values: Mapping[str, Any]) -> None:
    from llm_runs.recipes import config_from_values

    config_from_values(values)  # raises on a bad value, before any run starts


def _run_one(values: dict[str, Any]) -> dict[str, Any]:
    """Train one run in this process with one torch thread; return its summary."""
    import torch

    from llm_runs import checkpoint as ckpt
    from llm_runs.recipes import config_from_values
    from llm_runs.train import train

    out = Path(values["out"])
    with run_lock(out):  # held across the check and the run (train() takes it again)
        summary_path = out / "summary.json"
        if summary_path.is_file() and record_gaps(read_run(out)) is None:
            return read_json_object(summary_path)
        # unfinished, or finished with torn or missing rows (not finished: the resume cuts
        # back to the newest checkpoint its records reach and computes the rest again)
        values = dict(values)
        if ckpt.latest_checkpoint(out) is not None:
            values["resume"] = True
        else:
            clear_folder(out)  # an unfinished run without a checkpoint: start it again
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return train(config_from_values(values), notice=lambda _text: None)
        finally:
            torch.set_num_threads(threads)


def _check_suite_file(config: SuiteConfig) -> None:
    from llm_runs.config import TrainConfig

    path = Path(config.out) / SUITE_FILE
    base = {k: v for k, v in config.base.items() if k not in PER_RUN_FIELDS}
    if path.is_file():
        stored = json.loads(path.read_text())
        check_seeding(stored.get("seeding"), str(Path(config.out)), what="suite")
        # a suite written before a field was renamed holds its old name (`FIELD_ALIASES`)
        before = resolve_aliases(TrainConfig, stored.get("base") or {})
        if json.loads(json.dumps(before)) != json.loads(
            json.dumps(resolve_aliases(TrainConfig, base))
        ):
            raise ValueError(
                f"{path} holds a suite with another base config; choose another --out (a suite "
                "may only add seeds, methods or delays)"
            )
        previous = stored.get("cells", {})
    else:
        previous = {}
    cells = {
        "seeds": sorted(set(previous.get("seeds", [])) | set(config.seeds)),
        "methods": list(dict.fromkeys([*previous.get("methods", []), *config.methods])),
        "delays": sorted(set(previous.get("delays", [])) | set(config.suite_delays)),
    }
    atomic_write_json(
        path,
        {
            "base": base,
            "cells": cells,
            "share": config.share,
            "final_fraction": config.final_fraction,
            "seeding": SEEDING,
            "environment": environment_info(),
        },
    )


@locks_folder(lambda arguments: arguments["config"].out)
def run_suite(
    config: SuiteConfig,
    *,
    on_run: Callable[[SuiteRun, dict[str, Any]], None] | None = None,
) -> SuiteAnalysis:
    """Run every run of the suite (skipping finished ones), then analyse and write the summary.

    on_run(run, summary): called as each run finishes (in completion order).
    Holds the suite folder's lock throughout, and each run holds its own folder's
    (`gmc_grpo.runlock`: a second writer is refused).
    """
    runs = config.runs()
    for run in runs:
        _check_config(config.run_values(run))
    Path(config.out).mkdir(parents=True, exist_ok=True)
    _check_suite_file(config)
    devices = config.worker_devices()[: len(runs)]  # refuses more processes than GPUs
    workers = len(devices)
    if workers <= 1:
        for run in runs:
            summary = _run_one(config.run_values(run))
            if on_run is not None:
                on_run(run, summary)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        for device in devices:
            queue.put(device)
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_pin_worker, initargs=(queue,)
        ) as pool:
            futures = {pool.submit(_run_one, config.run_values(run)): run for run in runs}
            for future in as_completed(futures):
                summary = future.result()
                if on_run is not None:
                    on_run(futures[future], summary)
    analysis = analyse_suite(config.out, final_fraction=config.final_fraction)
    write_summary(analysis, config.out)
    return analysis


# -- analysis ---------------------------------------------------------------------------------


def run_measures(
    metrics: Sequence[Mapping[str, Any]],
    evals: Sequence[Mapping[str, Any]],
    final_fraction: float = 0.1,
) -> dict[str, float | None]:
    """The measures of one run (`MEASURES`) from its `metrics.jsonl` and `evals.jsonl` rows.

    final_reward: mean `reward/mean` of the last `k = ceil(final_fraction * N)` of its `N`
    updates; mean_reward: mean over all updates; rise: `final_reward` minus the mean of the first
    `k` updates; greedy / sampled: the held-out score at the largest evaluated step (greedy
    `accuracy`; sampled `pass_at_k["1"]`, else `avg_at_n`), None without evaluations;
    reward_timeouts / eval_timeouts: the answers a scorer timeout made incorrect (training rows'
    `reward/scoring_timeouts`, the last evaluation's `scoring_timeouts`), None when not recorded.
    """
    rewards = [float(r["reward/mean"]) for r in metrics if "reward/mean" in r]
    out: dict[str, float | None] = {"final_reward": None, "mean_reward": None, "rise": None}
    counted = [r["reward/scoring_timeouts"] for r in metrics if "reward/scoring_timeouts" in r]
    out["reward_timeouts"] = float(sum(counted)) if counted else None
    if rewards:
        k = max(1, math.ceil(final_fraction * len(rewards)))
        out["final_reward"] = sum(rewards[-k:]) / k
        out["mean_reward"] = sum(rewards) / len(rewards)
        out["rise"] = out["final_reward"] - sum(rewards[:k]) / k
    steps = [int(r["step"]) for r in evals if r.get("step") is not None]
    last = max(steps) if steps else None
    at_last = [
        r["scoring_timeouts"] for r in evals if r.get("step") == last and "scoring_timeouts" in r
    ]
    out["eval_timeouts"] = float(sum(at_last)) if at_last else None
    for decoding in ("greedy", "sampled"):
        rows = [r for r in evals if r.get("step") == last and r.get("decoding") == decoding]
        value = None
        if rows:
            row = rows[-1]
            if decoding == "greedy":
                value = row.get("accuracy")
            else:
                value = (row.get("pass_at_k") or {}).get("1", row.get("avg_at_n"))
        out[decoding] = None if value is None else float(value)
    return out


def verdict(interval: Mapping[str, float]) -> str:
    """ "holds" (the interval excludes 0 above), "reversed" (below), "not resolved" (contains 0),
    or "one seed" (no interval)."""
    if interval["n"] < 2 or not math.isfinite(interval["lo"]):
        return "one seed" if interval["n"] == 1 else "no data"
    if interval["lo"] > 0:
        return "holds"
    if interval["hi"] < 0:
        return "reversed"
    return "not resolved"


@dataclass
class SuiteAnalysis:
    """Per-seed measures, per-method intervals and paired differences of a suite.

    values[(delay, method, measure)]: `{seed: value}`.
    methods[(delay, method, measure)]: `t_interval` over seeds (`mean, lo, hi, n`).
    paired: one dict per (delay, measure, a, b): `a`, `b`, `delay`, `measure`, `mean`, `lo`,
        `hi`, `n`, `half_width`, `verdict`, `seeds` (the seeds both ran).
    """

    delays: list[int]
    methods: list[str]
    seeds: list[int]
    final_fraction: float
    values: dict[tuple[int, str, str], dict[int, float]] = field(default_factory=dict)
    intervals: dict[tuple[int, str, str], dict[str, float]] = field(default_factory=dict)
    paired: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """runs left out because their records have gaps (`gmc_grpo.records.record_gaps`): name
    and what they lack"""

    def to_json(self) -> dict[str, Any]:
        def key(k: tuple[int, str, str]) -> str:
            return f"d{k[0]}/{k[1]}/{k[2]}"

        return {
            "delays": self.delays,
            "methods": self.methods,
            "seeds": self.seeds,
            "final_fraction": self.final_fraction,
            "values": {key(k): {str(s): v for s, v in d.items()} for k, d in self.values.items()},
            "intervals": {key(k): v for k, v in self.intervals.items()},
            "paired": self.paired,
            "runs": self.runs,
            "skipped": self.skipped,
        }


def _suite_cells(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """`(run folder, resolved config)` of every finished run directly below `root`."""
    found = []
    for child in sorted(root.iterdir()):
        if (child / "summary.json").is_file() and (child / "config.json").is_file():
            config = json.loads((child / "config.json").read_text())
            found.append((child, config.get("config", config)))
    return found


def analyse_records(
    measures: Mapping[tuple[int, str, int], Mapping[str, float | None]],
    final_fraction: float = 0.1,
) -> SuiteAnalysis:
    """The analysis from per-run measures `{(delay, method, seed): run_measures(...)}`."""
    delays = sorted({d for d, _, _ in measures})
    order = {name: i for i, name in enumerate(["grpo", "tic", "gmc"])}
    methods = sorted({m for _, m, _ in measures}, key=lambda m: (order.get(m, 99), m))
    seeds = sorted({s for _, _, s in measures})
    analysis = SuiteAnalysis(delays, methods, seeds, final_fraction)
    for (delay, method, seed), values in sorted(measures.items()):
        for measure in MEASURES:
            value = values.get(measure)
            if value is not None and math.isfinite(value):
                analysis.values.setdefault((delay, method, measure), {})[seed] = float(value)
    for key, by_seed in analysis.values.items():
        analysis.intervals[key] = t_interval(by_seed[s] for s in sorted(by_seed))
    for delay in delays:
        for a, b in COMPARISONS:
            if a not in methods or b not in methods:
                continue
            for measure in COMPARED:
                va = analysis.values.get((delay, a, measure), {})
                vb = analysis.values.get((delay, b, measure), {})
                if not va or not vb:
                    continue
                diff = paired_difference(va, vb)
                half = (diff["hi"] - diff["lo"]) / 2 if diff["n"] >= 2 else math.inf
                analysis.paired.append(
                    {
                        "delay": delay,
                        "measure": measure,
                        "a": a,
                        "b": b,
                        **diff,
                        "half_width": half,
                        "verdict": verdict(diff),
                        "seeds": sorted(set(va) & set(vb)),
                    }
                )
    return analysis


def analyse_suite(folder: str | Path, final_fraction: float = 0.1) -> SuiteAnalysis:
    """Read every finished run directly below `folder` and analyse it (`analyse_records`)."""
    root = Path(folder)
    measures: dict[tuple[int, str, int], dict[str, float | None]] = {}
    runs = []
    skipped: list[str] = []
    for path, config in _suite_cells(root):
        record = read_run(path)
        gaps = record_gaps(record)
        if gaps is not None:  # not finished: its records lack rows (rerun the suite)
            skipped.append(f"{path.name}: {gaps}")
            continue
        key = (int(config.get("delay", 0)), str(config["method"]), int(config["seed"]))
        measures[key] = run_measures(record.metrics, record.evals, final_fraction)
        runs.append({"run": path.name, "delay": key[0], "method": key[1], "seed": key[2]})
    if not measures:
        raise FileNotFoundError(f"{root} holds no finished run (a folder with summary.json)")
    analysis = analyse_records(measures, final_fraction)
    analysis.runs = runs
    analysis.skipped = skipped
    return analysis


# -- report -----------------------------------------------------------------------------------


def _fmt(interval: Mapping[str, float] | None, scale: float = 1.0) -> str:
    if interval is None or interval["n"] == 0:
        return "-"
    mean = interval["mean"] * scale
    if interval["n"] < 2:
        return f"{mean:.3f} (1 seed)"
    half = (interval["hi"] - interval["lo"]) / 2 * scale
    return f"{mean:.3f} ± {half:.3f}"


def suite_markdown(analysis: SuiteAnalysis, machine: str | None = None) -> str:
    """Two Markdown tables: per delay and method the means (± 95% half-width over seeds), then
    the paired differences with their intervals and verdicts."""
    seeds = ", ".join(str(s) for s in analysis.seeds)
    lines = [
        f"Seeds {seeds} ({len(analysis.seeds)}); mean over seeds ± half-width of the 95% "
        "Student-t interval." + (f" Machine: {machine}." if machine else ""),
        "",
        "| delay | method | " + " | ".join(MEASURES) + " |",
        "| ---: | --- | " + " | ".join("---:" for _ in MEASURES) + " |",
    ]
    for delay in analysis.delays:
        for method in analysis.methods:
            cells = [_fmt(analysis.intervals.get((delay, method, m))) for m in MEASURES]
            lines.append(f"| {delay} | {method} | " + " | ".join(cells) + " |")
    if analysis.skipped:
        lines += ["", "Left out (records with gaps, not finished): " + "; ".join(analysis.skipped)]
    lines += [
        "",
        "Paired differences over seeds (95% interval); **holds** only when the interval excludes "
        "zero in the predicted direction.",
        "",
        "| delay | measure | difference | mean | 95% interval | seeds | verdict |",
        "| ---: | --- | --- | ---: | --- | ---: | --- |",
    ]
    for row in analysis.paired:
        interval = f"[{row['lo']:+.3f}, {row['hi']:+.3f}]" if math.isfinite(row["lo"]) else "(none)"
        verdict_text = f"**{row['verdict']}**" if row["verdict"] == "holds" else row["verdict"]
        lines.append(
            f"| {row['delay']} | {row['measure']} | {row['a']} - {row['b']} | "
            f"{row['mean']:+.3f} | {interval} | {row['n']} | {verdict_text} |"
        )
    return "\n".join(lines) + "\n"


def write_summary(analysis: SuiteAnalysis, folder: str | Path) -> None:
    """`suite_summary.json` (the analysis) and `suite_summary.md` (its tables)."""
    folder = Path(folder)
    atomic_write_json(folder / "suite_summary.json", analysis.to_json())
    atomic_write_text(folder / "suite_summary.md", suite_markdown(analysis))
