"""`gmc-grpo toy sweep`: the estimator sweep's command line (registered in `toy_mdps.cli`).

Reads a `SweepConfig` (default `toy_mdps/configs/quick.json`), applies the flags, runs (or
resumes) the sweep and prints its headline checks. The figures are drawn by the `draw_figures`
callback when one is given (`pipeline.toy`; this track imports no `figures`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from gmc_grpo.fieldchecks import (
    check_threads,
    flag_type,
    flag_value,
    parse_float_list,
    parse_int_list,
    parse_name_list,
    parse_whole_number,
)

HELP = "bias and second moment of every estimator vs delay, eps and G (exact gradients)"
# `(kind, run directory) -> written figure paths`; kind is "sweep" or "experiment"
DrawFigures = Callable[[str, Path], list[Path]]


# flag -> (SweepConfig field, parser of the value, help)
_OVERRIDES: dict[str, tuple[str, Callable[[str], object], str]] = {
    "--methods": (
        "methods",
        parse_name_list,
        "comma-separated methods (is,grpo,tic,gmc,vcpo,a3po)",
    ),
    "--delays": ("delays", parse_int_list, "comma-separated delays (trajectory mode)"),
    "--target-kls": ("target_kls", parse_float_list, "comma-separated target KLs (direct mode)"),
    "--eps": ("eps_values", parse_float_list, "comma-separated eps values (cap 1+eps)"),
    "--group-sizes": ("group_sizes", parse_int_list, "comma-separated group sizes G"),
    "--seeds": ("seeds", parse_int_list, "comma-separated replicate seeds"),
    "--num-minibatches": ("num_minibatches", parse_whole_number, "M, minibatches per grid point"),
    "--num-groups": ("num_groups", parse_whole_number, "B, groups per minibatch"),
    "--behavior": ("behavior", str, "trajectory or direct"),
    "--policy": ("policy", str, "tabular or loglinear"),
    "--advantage": ("advantage", str, "loo, centered, std or paper"),
    "--mdp-seed": (
        "mdp_seed",
        parse_whole_number,
        "seed of the MDP (each prompt's target pattern)",
    ),
    "--init-seed": (
        "init_seed",
        parse_whole_number,
        "seed of the learning problems: replicate s draws theta_0, the direct mode's direction "
        "and the trajectory noise from three streams of this seed (gmc_grpo.seeding)",
    ),
    "--seed": (
        "run_seed",
        parse_whole_number,
        "sampling seed: the root of every cell's minibatch stream (gmc_grpo.seeding)",
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `sweep` subcommand's arguments to `parser`."""
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="JSON config (default: toy_mdps/configs/quick.json); see SweepConfig",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the default small grid (configs/quick.json); with --config or --full: that grid "
        "at the quick sweep's sizes (its first seeds, M and B)",
    )
    parser.add_argument("--full", action="store_true", help="the full grid (configs/full.json)")
    parser.add_argument(
        "--out", type=Path, default=None, help="run directory (default: runs/toy_sweep_<name>)"
    )
    parser.add_argument(
        "--fresh", action="store_true", help="start over, erasing the rows already in --out"
    )
    parser.add_argument("--no-figures", action="store_true", help="do not write figures")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="grid cells computed at once in worker processes, one torch thread each (e.g. 2 on "
        "a 2-core machine); the rows equal those of --jobs 1 --threads 1",
    )
    for flag, (_, kind, text) in _OVERRIDES.items():
        # a list is parsed in `run`, so that its error is one line naming the flag
        parser.add_argument(flag, type=flag_type(kind), default=None, help=f"override: {text}")


def run(args: argparse.Namespace, draw_figures: DrawFigures | None = None) -> int:
    """Run the sweep `args` describe; returns the exit code (bad configs exit with 2)."""
    from gmc_grpo.runlock import check_output_folder
    from toy_mdps.jobs import check_jobs
    from toy_mdps.sweep.config import SweepConfig, shipped_config

    if args.config and args.full:
        raise SystemExit("gmc-grpo toy sweep: give at most one of --config, --full")
    check_threads(args.threads)
    check_jobs(args.jobs)
    path = args.config or shipped_config("full" if args.full else "quick")
    loaded = SweepConfig.from_file(path)
    base = (loaded.quick_sizes() if args.quick else loaded).to_dict()
    for flag, (name, kind, _) in _OVERRIDES.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            base[name] = flag_value(kind, value, flag)
    if args.no_figures:
        base["figures"] = False
    config = SweepConfig.from_dict(base)
    out = args.out or Path("runs") / f"toy_sweep_{config.name}"
    check_output_folder(out)  # a file in the way is refused before torch loads

    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    from gmc_grpo.json_files import read_json
    from gmc_grpo.runlock import run_lock
    from toy_mdps.sweep.run import run_sweep

    figures: list = []
    with run_lock(out):  # one writer: held across the sweep and its figures
        run_sweep(config, out, fresh=args.fresh, progress=not args.no_progress, jobs=args.jobs)
        if draw_figures is not None and config.figures:
            if not args.no_progress:
                print(f"drawing the figures into {out}/figures (PNG and PDF) ...", file=sys.stderr)
            figures = list(draw_figures("sweep", out))
        summary = read_json(out / "summary.json")
    print(f"wrote {out}/results.csv, {out}/summary.json ({summary['num_rows']} rows)")
    if figures:
        folders = sorted({str(Path(p).parent) for p in figures})
        print(f"wrote {len(figures)} figure files to {', '.join(folders)}")
    for name, claim in summary["claims"].items():
        if "fraction" in claim:
            print(f"  {name}: {claim['holds']}/{claim['of']}  ({claim['claim']})")
        else:
            print(f"  {name}: {claim.get('exceeds')}/{claim.get('of')}  ({claim['claim']})")
    return 0
