"""`gmc-grpo toy train`: one run or a shipped experiment of the asynchronous toy learner.

Registered in `toy_mdps.cli.COMMANDS`.

- `--experiment NAME` (or `--config FILE` holding an `ExperimentConfig`, or `--quick` for the
  four quick ones): a grid of runs, e.g. `delay_quick`, `delay_full`, `group_quick`,
  `length_quick`, `eps_quick`, and with the worker schedule `mixed_quick`, `regularity_quick`
  (files `toy_mdps/configs/train_<NAME>.json`); each experiment
  writes `<out>/<name>/` (default `--out runs/toy_train`), whichever flag chose it.
- otherwise one run of `ToyTrainConfig` built from the flags (`--method gmc --delay 32 ...`, or
  `--schedule workers --workers 64 --generation-time exponential ...`); output `--out`, default
  `runs/toy_train/<method>_D<delay>/` (workers: `runs/toy_train/<method>_W<W>_<time model>/`;
  one `metrics.jsonl` row per step per seed).
A directory that already holds the same run or experiment is resumed (`--fresh` starts over);
one that holds a run of another config is refused, naming the fields (`--extend-to N` and
`--allow-config-change FIELD` change a run on purpose; `toy_mdps.train.run`).
An experiment's figures are drawn by the `draw_figures` callback when one is given (the
`gmc-grpo` command passes `pipeline.toy.draw_figures`; this track imports no `figures`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from gmc_grpo.fieldchecks import (
    check_threads,
    flag_type,
    flag_value,
    parse_int_list,
    parse_whole_number,
)

HELP = (
    "asynchronous learners (fixed delay, length-coupled or rollout workers) with exact metrics "
    "every step"
)
# `(kind, run directory) -> written figure paths`; kind is "sweep" or "experiment"
DrawFigures = Callable[[str, Path], list[Path]]


def _optional_float(text: str) -> float | None:
    return None if text.lower() in ("none", "null", "off") else float(text)


# flag -> (ToyTrainConfig field, parser, help)
_RUN_FLAGS: dict[str, tuple[str, Callable[[str], object], str]] = {
    "--method": ("method", str, "is, grpo, tic, gmc, vcpo, gac, a3po or a registered one"),
    "--eps": ("eps", float, "cap 1 + eps of TIC and GMC (0.28)"),
    "--schedule": (
        "schedule",
        str,
        "fixed_delay, length_coupled, workers or a registered one (GMC_GRPO_SCHEDULES)",
    ),
    "--delay": ("delay", parse_whole_number, "D of the fixed-delay schedule"),
    "--lam": ("lam", float, "lambda of the length-coupled schedule (launches per token)"),
    "--workers": (
        "num_workers",
        parse_whole_number,
        "W rollout workers of the worker schedule (mean lag W/B)",
    ),
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
        parse_whole_number,
        "record both sides of the delay-regularity condition for lags 1..this (0: off)",
    ),
    "--group-size": ("group_size", parse_whole_number, "G"),
    "--num-groups": ("num_groups", parse_whole_number, "B"),
    "--optimizer": ("optimizer", str, "adam or sgd"),
    "--lr": ("lr", float, "peak step size"),
    "--lr-schedule": ("lr_schedule", str, "cosine or constant"),
    "--grad-clip": ("grad_clip", _optional_float, "gradient-norm clip (none disables)"),
    "--steps": ("total_steps", parse_whole_number, "learner updates N"),
    "--seeds": ("seeds", parse_int_list, "comma-separated seeds, run at once"),
    "--advantage": ("advantage", str, "paper, loo, centered or std"),
    "--num-prompts": ("num_prompts", parse_whole_number, "K"),
    "--max-length": ("max_length", parse_whole_number, "T"),
    "--policy": ("policy", str, "tabular or loglinear"),
    "--checkpoint-every": ("checkpoint_every", parse_whole_number, "steps between checkpoints"),
    "--mdp-seed": (
        "mdp_seed",
        parse_whole_number,
        "seed of the MDP (each prompt's target pattern)",
    ),
    "--init-seed": (
        "init_seed",
        parse_whole_number,
        "seed of theta_0, shared by every learner seed",
    ),
    "--seed": (
        "run_seed",
        parse_whole_number,
        "sampling seed: the root of each learner seed's (--seeds) streams (gmc_grpo.seeding)",
    ),
    "--bound-every": (
        "bound_every",
        parse_whole_number,
        "record the bound quantities, estimator statistics every K steps (0: off)",
    ),
    "--bound-minibatches": (
        "bound_minibatches",
        parse_whole_number,
        "minibatches per recorded step",
    ),
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
        help="all quick experiments (the `make reproduce` set), one after another; with "
        "--experiment or --config: that experiment at the quick sizes (ExperimentConfig."
        "quick_sizes: at most 5 seeds, K <= 4 prompts, T <= 5, at most 150 steps, delays scaled "
        "with the steps)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="single run: its directory (default runs/toy_train/<method>_D<delay>); "
        "experiments: the folder of their directories <out>/<name>/ (default runs/toy_train)",
    )
    parser.add_argument(
        "--fresh", action="store_true", help="start over, erasing the records in --out"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="single run: continue the run in --out and fail if there is none (a run with the "
        "same config is continued without it too)",
    )
    parser.add_argument(
        "--extend-to",
        type=int,
        default=None,
        metavar="N",
        help="single run: continue the run in --out to N updates in all (N > its total_steps); "
        "the step size follows the warm-up + cosine schedule of an N-update run from the resume "
        "step on; recorded in the run's history",
    )
    parser.add_argument(
        "--allow-config-change",
        action="append",
        default=[],
        metavar="FIELD",
        help="single run: let a resumed run continue with a changed ToyTrainConfig FIELD "
        "(repeatable; recorded in the run's history); without it a change is refused",
    )
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
        # a list is parsed in `run`, so that its error is one line naming the flag
        parser.add_argument(flag, type=flag_type(kind), default=None, help=f"single run: {text}")


def run(args: argparse.Namespace, draw_figures: DrawFigures | None = None) -> int:
    """Run what `args` asks for; returns the exit code (errors in the config exit with 2)."""
    from gmc_grpo.resume import ResumeRequest
    from gmc_grpo.runlock import check_output_folder
    from gmc_grpo.staleness import get_schedule
    from gmc_grpo.stats import interval_text
    from toy_mdps.jobs import check_jobs
    from toy_mdps.train.config import (
        QUICK_EXPERIMENTS,
        ExperimentConfig,
        ToyTrainConfig,
        shipped_experiment,
    )

    if args.experiment and args.config:
        raise SystemExit("gmc-grpo toy train: give at most one of --experiment, --config")
    check_jobs(args.jobs)
    check_threads(args.threads)
    chosen = bool(args.experiment or args.config or args.quick)
    overrides = {}
    for flag, (name, kind, _) in _RUN_FLAGS.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            overrides[name] = flag_value(kind, value, flag)
    if chosen:
        if args.resume or args.extend_to is not None or args.allow_config_change:
            raise ValueError(
                "--resume, --extend-to and --allow-config-change apply to a single run (an "
                "experiment resumes by itself): pass the run's folder as --out with its flags"
            )
        alone = args.quick and not (args.experiment or args.config)
        names = list(QUICK_EXPERIMENTS) if alone else [args.experiment]
        configs = []
        for name in names:  # every config is read and checked before any compute
            path = args.config if args.config else shipped_experiment(name)
            config = ExperimentConfig.from_file(path)
            if args.quick and not alone:
                config = config.quick_sizes()
            if overrides:
                config = ExperimentConfig.from_dict(
                    {**config.to_dict(), "base": {**config.base, **overrides}}
                )
            configs.append(config)
        return _run_experiments(configs, args, draw_figures)
    if args.extend_to is not None:
        overrides["total_steps"] = args.extend_to
    config = ToyTrainConfig.from_dict(overrides)
    request = ResumeRequest(args.extend_to, tuple(args.allow_config_change))
    name = f"{config.method}_{get_schedule(config.schedule).run_label(config)}"
    out = args.out or Path("runs") / "toy_train" / name
    check_output_folder(out)  # a file in the way is refused before torch loads
    _set_threads(args)
    from toy_mdps.train.run import train

    summary = train(
        config,
        out,
        resume=not args.fresh,
        progress=not args.no_progress,
        request=request,
        require_run=args.resume,
    )
    assert summary is not None
    mean = summary["mean"]
    print(
        f"wrote {out}/metrics.jsonl, {out}/summary.json: final J "
        f"{interval_text(mean['final_objective'], '.4f')}, (1/N) sum ||grad J||^2 "
        f"{mean['convergence_metric']['mean']:.3g}, mean lag {mean['lag_mean']['mean']:.1f}"
    )
    if "lag_statistics" in summary:
        print(
            f"  lags over groups (mean over seeds): mean {mean['lag_mean']['mean']:.2f}, tau2 "
            f"{mean['lag_tau2']['mean']:.2f}, tau4 {mean['lag_tau4']['mean']:.4g}, max "
            f"{mean['lag_max']['mean']:.1f}, within-batch std {mean['lag_spread_std']['mean']:.2f}"
        )
    return 0


def _set_threads(args: argparse.Namespace) -> None:
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)


def _run_experiments(
    configs: list, args: argparse.Namespace, draw_figures: DrawFigures | None
) -> int:
    """Run each experiment into `<out>/<name>/` and print its orderings."""
    from gmc_grpo.runlock import check_output_folder, run_lock

    root = args.out or Path("runs") / "toy_train"
    for config in configs:  # a file in the way is refused before torch loads
        check_output_folder(root / config.name)
    _set_threads(args)
    from toy_mdps.train.run import run_experiment

    for config in configs:
        out = root / config.name
        with run_lock(out):  # one writer: held across the experiment and its figures
            summary = run_experiment(
                config, out, fresh=args.fresh, progress=not args.no_progress, jobs=args.jobs
            )
            figures: list = []
            if draw_figures is not None and config.figures and not args.no_figures:
                if not args.no_progress:
                    print(f"drawing the figures of {out} ...", flush=True)
                figures = list(draw_figures("experiment", out))
        print(f"wrote {out}/results.csv, {out}/summary.json ({summary['num_points']} runs)")
        if figures:
            folders = sorted({str(Path(p).parent) for p in figures})
            print(f"wrote {len(figures)} figure files to {', '.join(folders)}")
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
