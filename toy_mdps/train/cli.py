"""`gmc-grpo toy train`: one run or a shipped experiment of the asynchronous toy learner.

Registered in `toy_mdps.cli.COMMANDS`.

- `--experiment NAME` (or `--config FILE` holding an `ExperimentConfig`): a grid of runs, e.g.
  `delay_quick`, `delay_full`, `group_quick`, `length_quick`, `eps_quick`, and with the worker
  schedule `mixed_quick`, `regularity_quick` (files `toy_mdps/configs/train_<NAME>.json`);
  output `runs/toy_train_<name>/`.
- otherwise one run of `TrainConfig` built from the flags (`--method gmc --delay 32 ...`, or
  `--schedule workers --workers 64 --generation-time exponential ...`); output
  `runs/toy_train_<method>_D<delay>/` (workers: `runs/toy_train_<method>_W<W>_<time model>/`;
  one `metrics.jsonl` row per step per seed).
A directory that already holds the same run or experiment is resumed (`--fresh` starts over).
An experiment's figures are drawn by the `draw_figures` callback when one is given (the
`gmc-grpo` command passes `pipeline.toy.draw_figures`; this track imports no `figures`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

HELP = (
    "asynchronous learners (fixed delay, length-coupled or rollout workers) with exact metrics "
    "every step"
)
# `(kind, run directory) -> written figure paths`; kind is "sweep" or "experiment"
DrawFigures = Callable[[str, Path], list[Path]]


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _optional_float(text: str) -> float | None:
    return None if text.lower() in ("none", "null", "off") else float(text)


# flag -> (TrainConfig field, parser, help)
_RUN_FLAGS: dict[str, tuple[str, Callable[[str], object], str]] = {
    "--method": ("method", str, "is, grpo, tic, gmc, vcpo, gac, a3po or a registered one"),
    "--eps": ("eps", float, "cap 1 + eps of TIC and GMC (0.28)"),
    "--schedule": ("schedule", str, "fixed_delay, length_coupled or workers"),
    "--delay": ("delay", int, "D of the fixed-delay schedule"),
    "--lam": ("lam", float, "lambda of the length-coupled schedule (launches per token)"),
    "--workers": ("num_workers", int, "W rollout workers of the worker schedule (mean lag W/B)"),
    "--generation-time": (
        "generation_time",
        str,
        "workers: constant, length_proportional or exponential",
    ),
    "--time-scale": (
        "time_scale",
        float,
        "workers: the constant duration, the time per token, or the exponential mean (1.0)",
    ),
    "--update-time": ("update_time", float, "workers: clock time of one update (0)"),
    "--drift-max-lag": (
        "drift_max_lag",
        int,
        "record both sides of the delay-regularity condition for lags 1..this (0: off)",
    ),
    "--group-size": ("group_size", int, "G"),
    "--num-groups": ("num_groups", int, "B"),
    "--optimizer": ("optimizer", str, "adam or sgd"),
    "--lr": ("lr", float, "peak step size"),
    "--lr-schedule": ("lr_schedule", str, "cosine or constant"),
    "--grad-clip": ("grad_clip", _optional_float, "gradient-norm clip (none disables)"),
    "--steps": ("total_steps", int, "learner updates N"),
    "--seeds": ("seeds", _int_list, "comma-separated seeds, run at once"),
    "--advantage": ("advantage", str, "paper, loo, centered or std"),
    "--num-prompts": ("num_prompts", int, "K"),
    "--max-length": ("max_length", int, "T"),
    "--policy": ("policy", str, "tabular or loglinear"),
    "--checkpoint-every": ("checkpoint_every", int, "steps between checkpoints"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `train` subcommand's arguments to `parser`."""
    parser.add_argument(
        "--experiment",
        default=None,
        help="shipped experiment: delay_quick, group_quick, length_quick, eps_quick, "
        "delay_full, group_full, length_full, eps_full; worker schedule: mixed_quick, "
        "regularity_quick, mixed_full, regularity_full",
    )
    parser.add_argument(
        "--config", type=Path, default=None, help="an ExperimentConfig JSON file (grid of runs)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="all quick experiments (the `make reproduce` set), one after another",
    )
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--fresh", action="store_true", help="start over instead of resuming")
    parser.add_argument("--no-figures", action="store_true", help="do not write figures")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="experiments: grid points run at once in worker processes, one torch thread each "
        "(e.g. 2 on a 2-core machine); the records equal those of --jobs 1 --threads 1",
    )
    for flag, (_, kind, text) in _RUN_FLAGS.items():
        parser.add_argument(flag, type=kind, default=None, help=f"single run: {text}")


def run(args: argparse.Namespace, draw_figures: DrawFigures | None = None) -> int:
    """Run what `args` asks for; returns the exit code (errors in the config exit with 2)."""
    import torch

    from toy_mdps.train.config import (
        QUICK_EXPERIMENTS,
        ExperimentConfig,
        TrainConfig,
        shipped_experiment,
    )
    from toy_mdps.train.run import run_experiment, train

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    chosen = sum(bool(x) for x in (args.experiment, args.config, args.quick))
    if chosen > 1:
        raise SystemExit("gmc-grpo toy train: give at most one of --experiment, --config, --quick")
    if args.jobs < 1:
        raise SystemExit(f"gmc-grpo toy train: --jobs={args.jobs}: must be >= 1")
    overrides = {
        name: getattr(args, flag.lstrip("-").replace("-", "_"))
        for flag, (name, _, _) in _RUN_FLAGS.items()
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if args.experiment or args.config or args.quick:
        names = list(QUICK_EXPERIMENTS) if args.quick else [None]
        root = args.out
        for name in names:
            try:
                path = (
                    args.config
                    if args.config
                    else shipped_experiment(name if name is not None else args.experiment)
                )
                config = ExperimentConfig.from_file(path)
                if overrides:
                    config = ExperimentConfig.from_dict(
                        {**config.to_dict(), "base": {**config.base, **overrides}}
                    )
            except (ValueError, FileNotFoundError) as err:
                raise SystemExit(f"gmc-grpo toy train: {err}") from None
            if args.quick:
                out = (root or Path("runs") / "toy_train") / config.name
            else:
                out = root or Path("runs") / f"toy_train_{config.name}"
            summary = run_experiment(
                config, out, fresh=args.fresh, progress=not args.no_progress, jobs=args.jobs
            )
            if draw_figures is not None and config.figures and not args.no_figures:
                draw_figures("experiment", out)
            print(f"wrote {out}/results.csv, {out}/summary.json ({summary['num_points']} runs)")
            for claim in summary.get("orderings", []):
                print(f"  {claim['claim']}: {claim['verdict']}  ({claim['detail']})")
            fit = summary.get("eps_star", {})
            if "tau4_exponent" in fit:
                print(
                    f"  eps* ~ tau4^{fit['tau4_exponent']:.3f} N^{fit['n_exponent']:.3f} "
                    "(paper: tau4^0.143 N^-0.214)"
                )
        return 0
    try:
        config = TrainConfig.from_dict(overrides)
    except ValueError as err:
        raise SystemExit(f"gmc-grpo toy train: {err}") from None
    if config.schedule == "workers":
        name = f"toy_train_{config.method}_W{config.num_workers}_{config.generation_time}"
    else:
        name = f"toy_train_{config.method}_D{config.delay}"
    out = args.out or Path("runs") / name
    try:
        summary = train(config, out, resume=not args.fresh, progress=not args.no_progress)
    except ValueError as err:
        raise SystemExit(f"gmc-grpo toy train: {err}") from None
    assert summary is not None
    mean = summary["mean"]
    print(
        f"wrote {out}/metrics.jsonl, {out}/summary.json: final J "
        f"{mean['final_objective']['mean']:.4f} [{mean['final_objective']['lo']:.4f}, "
        f"{mean['final_objective']['hi']:.4f}], (1/N) sum ||grad J||^2 "
        f"{mean['convergence_metric']['mean']:.3g}, mean lag {mean['lag_mean']['mean']:.1f}"
    )
    if "lag_statistics" in summary:
        print(
            f"  lags over groups (mean over seeds): mean {mean['lag_mean']['mean']:.2f}, tau2 "
            f"{mean['lag_tau2']['mean']:.2f}, tau4 {mean['lag_tau4']['mean']:.4g}, max "
            f"{mean['lag_max']['mean']:.1f}, within-batch std {mean['lag_spread_std']['mean']:.2f}"
        )
    return 0
