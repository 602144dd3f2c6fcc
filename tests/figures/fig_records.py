"""Synthetic run records for the figure tests: written with `gmc_grpo.run_writer.RunWriter`, the same
writer the trainers use, with known values so a test can compare a figure's data to them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gmc_grpo.run_writer import RunWriter

SIX = ("math500", "gsm8k", "gaokao2023en", "olympiadbench", "minerva", "amc23")


def metric_row(step: int, method: str, delay: int) -> dict[str, Any]:
    """A metrics row whose values depend on (step, method, delay) in a known way."""
    offset = {"grpo": 0.0, "tic": 0.05, "gmc": 0.1, "a3po": 0.02}.get(method, 0.03)
    return {
        "step": step,
        "reward/mean": 0.2 + offset + 0.001 * step,
        "policy/entropy": 1.0 + math.exp(-step / 10.0) - offset,
        "staleness/lag": float(delay if step >= delay else step),
        "ratio/removed_mass": 0.001 * delay * (2.0 if method == "tic" else 1.0),
        "ratio/capped_frac": min(1.0, 0.002 * delay),
        "ratio/kl_estimate": 0.01 * delay + 0.001 * (step % 3),
        "ratio/log_max": 0.1,
    }


def eval_value(step: int, method: str, benchmark: str, decoding: str) -> float:
    """A fraction in [0, 1] depending on everything it is keyed by."""
    base = {"grpo": 0.30, "tic": 0.40, "gmc": 0.45, "a3po": 0.42}.get(method, 0.35)
    return (
        round(
            base
            + 0.0005 * step
            + 0.01 * SIX.index(benchmark)
            + (0.02 if decoding == "greedy" else 0.0),
            6,
        )
        if benchmark in SIX
        else round(base + 0.001 * step, 6)
    )


def eval_rows(step: int, method: str, benchmarks: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for bench in benchmarks:
        greedy = eval_value(step, method, bench, "greedy")
        sampled = eval_value(step, method, bench, "sampled")
        rows.append(
            {
                "step": step,
                "benchmark": bench,
                "decoding": "greedy",
                "n": 1,
                "num_problems": 10,
                "accuracy": greedy,
                "pass_at_k": {"1": greedy},
            }
        )
        rows.append(
            {
                "step": step,
                "benchmark": bench,
                "decoding": "sampled",
                "n": 16,
                "num_problems": 10,
                "avg_at_n": sampled,
                "pass_at_k": {
                    k: min(1.0, sampled * (1 + 0.1 * i))
                    for i, k in enumerate(("1", "2", "4", "8", "16"))
                },
            }
        )
    return rows


def write_train_run(
    root: Path,
    name: str,
    *,
    method: str,
    delay: int = 0,
    schedule: str = "fixed_delay",
    group_size: int = 8,
    model: str = "models/Qwen3-1.7B-Base",
    steps: int = 40,
    eval_every: int = 10,
    benchmarks: tuple[str, ...] = ("math500",),
    seed: int | None = None,
    shift: float = 0.0,
) -> Path:
    """A training run directory as `gmc-grpo llm train` writes it. `seed` (written to the config
    when given) and `shift`, added to every reward, removed mass, KL and evaluation score, make
    the seeds of one setting."""
    path = root / name
    config = {
        "out": str(path),
        "model": model,
        "method": method,
        "schedule": schedule,
        "delay": delay,
        "group_size": group_size,
        "rollout_prompts": 8,
        "eps_high": 0.28,
        "total_steps": steps,
    }
    if seed is not None:
        config["seed"] = seed
    with RunWriter(path, config) as writer:
        for step in range(steps):
            row = metric_row(step, method, delay)
            for key in ("reward/mean", "ratio/removed_mass", "ratio/kl_estimate"):
                row[key] += shift
            writer.log_metrics(row)
        if eval_every:
            for step in range(0, steps + 1, eval_every):
                for row in eval_rows(step, method, benchmarks):
                    for key in ("accuracy", "avg_at_n"):
                        if key in row:
                            row[key] += shift
                    row["pass_at_k"] = {k: v + shift for k, v in row["pass_at_k"].items()}
                    writer.log_eval(row)
        writer.write_summary({"steps": steps})
    return path


def write_eval_run(
    root: Path,
    name: str,
    *,
    model: str,
    step: int | None,
    method_values: str,
    benchmarks: tuple[str, ...] = SIX,
    macro: bool = True,
) -> Path:
    """An eval run directory as `gmc-grpo llm eval` writes it (values keyed by `method_values`)."""
    path = root / name
    config = {
        "model": model,
        "out": str(path),
        "benchmarks": list(benchmarks),
        "decodings": ["greedy", "sampled"],
        "step": step,
    }
    with RunWriter(path, config) as writer:
        rows = eval_rows(step if step is not None else 0, method_values, benchmarks)
        for row in rows:
            row["step"] = step
            writer.log_eval(row)
        if macro:
            for decoding, key in (("greedy", "accuracy"), ("sampled", "avg_at_n")):
                vals = [r[key] for r in rows if r["decoding"] == decoding]
                writer.log_eval(
                    {
                        "step": step,
                        "benchmark": "macro",
                        "decoding": decoding,
                        key: sum(vals) / len(vals),
                    }
                )
        writer.write_summary({})
    return path


def write_toy_train_run(
    root: Path,
    name: str,
    *,
    delays: tuple[int, ...],
    methods: tuple[str, ...] = ("tic", "gmc"),
    steps: int = 30,
) -> Path:
    """A toy training directory whose rows carry `method`, `delay` and `seed` columns (exact KL;
    three seeds with the same rows)."""
    path = root / name
    with RunWriter(path, {"num_prompts": 4, "vocab_size": 3, "eps": 0.28}) as writer:
        for method in methods:
            for delay in delays:
                for step, seed in ((s, seed) for s in range(steps) for seed in (0, 1, 2)):
                    row = metric_row(step, method, delay)
                    kl = row.pop("ratio/kl_estimate")
                    row.update(
                        method=method,
                        delay=delay,
                        seed=seed,
                        **{
                            "ratio/kl_exact": kl,
                            "policy/objective": 0.5 + 0.01 * step,
                            "policy/grad_norm_sq": 1.0
                            / (1 + step)
                            * (0.9 if method == "gmc" else 1.0),
                        },
                    )
                    writer.log_metrics(row)
        writer.write_summary({})
    return path
