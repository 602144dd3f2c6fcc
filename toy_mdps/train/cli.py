"""`gmc-grpo toy train`: one run or a shipped experiment of the asynchronous toy learner.

Registered in `toy_mdps.cli.COMMANDS`.

- `--experiment NAME` (or `--config FILE` holding an `ExperimentConfig`): a grid of runs, e.g.
  `delay_quick`, `delay_full`, `group_quick`, `length_quick`, `eps_quick` (files
  `toy_mdps/configs/train_<NAME>.json`); output `runs/toy_train_<name>/`.
- otherwise one run of `TrainConfig` built from the flags (`--method gmc --delay 32 ...`);
  output `runs/toy_train_<method>_D<delay>/` (one `metrics.jsonl` row per step per seed).
A directory that already holds the same run or experiment is resumed (`--fresh` starts over).
An experiment's figures are drawn by the `draw_figures` callback when one is given (the
`gmc-grpo` command passes `pipeline.toy.draw_figures`; this track imports no `figures`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

HELP = "asynchronous learners (fixed delay or length-coupled) with exact metrics every step"
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
    "--schedule": ("schedule", str, "fixed_delay or length_coupled"),
    "--delay": ("delay", int, "D of the fixed-delay schedule"),
    "--lam": ("lam", float, "lambda of the length-coupled schedule (launches per token)"),
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
    "--mdp-seed": ("mdp_seed", int, "seed of the MDP (each prompt's target pattern)"),
    "--init-seed": ("init_seed", int, "seed of theta_0, shared by every learner seed"),
    "--seed": (
        "run_seed",
        int,
        "sampling seed: mixed with each learner seed (--seeds) into its generator",
    ),
    "--bound-every": (
        "bound_every",
        int,
        "record the bound quantities, estimator statistics every K steps (0: off)",
    ),
    "--bound-minibatches": ("bound_minibatches", int, "minibatches per recorded step"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `train` subcommand's arguments to `parser`."""
    parser.add_argument(
        "--experiment",
        default=None,
        help="shipped experiment: delay_quick, group_quick, length_quick, eps_quick, "
        "delay_full, group_full, length_full, eps_full",
    )
    parser.add_argument(
        "--config", type=Path, default=None, help="an ExperimentConfig JSON file (grid of runs)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="all quick experiments (the `make reproduce` set), one after another; with "
        "--experiment or --config: that experiment at the quick sizes (ExperimentConfig."
        "quick_sizes: at most 5 seeds, K <= 4 prompts, T <= 5, at most 150 steps)",
    )
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--fresh", action="store_true", help="start over instead of resuming")
    parser.add_argument("--no-figures", action="store_true", help="do not write figures")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
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
    if args.experiment and args.config:
        raise SystemExit("gmc-grpo toy train: give at most one of --experiment, --config")
    overrides = {
        name: getattr(args, flag.lstrip("-").replace("-", "_"))
        for flag, (name, _, _) in _RUN_FLAGS.items()
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if args.experiment or args.config or args.quick:
        alone = args.quick and not (args.experiment or args.config)
        names = list(QUICK_EXPERIMENTS) if alone else [None]
        root = args.out
        for name in names:
            try:
                path = (
                    args.config
                    if args.config
                    else shipped_experiment(name if name is not None else args.experiment)
                )
                config = ExperimentConfig.from_file(path)
                if args.quick and not alone:
                    config = config.quick_sizes()
                if overrides:
                    config = ExperimentConfig.from_dict(
                        {**config.to_dict(), "base": {**config.base, **overrides}}
                    )
            except (ValueError, FileNotFoundError) as err:
                raise SystemExit(f"gmc-grpo toy train: {err}") from None
            if alone:
                out = (root or Path("runs") / "toy_train") / config.name
            else:
                out = root or Path("runs") / f"toy_train_{config.name}"
            summary = run_experiment(config, out, fresh=args.fresh, progress=not args.no_progress)
            if draw_figures is not None and config.figures and not args.no_figures:
                draw_figures("experiment", out)
            print(f"wrote {out}/results.csv, {out}/summary.json ({summary['num_points']} runs)")
            for claim in summary.get("orderings", []):
                print(f"  {claim['claim']}: {claim['verdict']}  ({claim['detail']})")
            fit = summary.get("eps_star", {})
            if "tau4_exponent" in fit:
                print(
                    f"  eps* ~ tau4^{fit['tau4_exponent']:.3f} N^{fit['n_exponent']:.3f} "
                    f"(fit on {fit['num_cells']} interior cells; paper: tau4^0.143 N^-0.214)"
                )
            for cell in fit.get("table", []):
                test = cell["by_convergence"].get("interior_test")
                if test:
                    print(
                        f"  N={cell['total_steps']} D={cell['delay']}: best eps "
                        f"{test['best_eps']:g}, interior optimum: {test['verdict']}"
                    )
        return 0
    try:
        config = TrainConfig.from_dict(overrides)
    except ValueError as err:
        raise SystemExit(f"gmc-grpo toy train: {err}") from None
    out = args.out or Path("runs") / f"toy_train_{config.method}_D{config.delay}"
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
    return 0
