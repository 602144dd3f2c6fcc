"""`gmc-grpo toy ...`: the toy-MDP track's command line (imports torch only when a command runs).

Subcommands are registered in `COMMANDS`: a name maps to a help line, a function that adds its
arguments to an argparse parser, and a function that runs it (`sweep` here, `train` in
`toy_mdps.train_cli`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toy_mdps import train_cli


@dataclass(frozen=True)
class Command:
    """One subcommand: `help`, `add_arguments(parser)`, `run(args) -> exit code`."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _float_list(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


# flag -> (SweepConfig field, parser of the value, help)
_SWEEP_OVERRIDES: dict[str, tuple[str, Callable[[str], object], str]] = {
    "--methods": ("methods", _str_list, "comma-separated methods (is,tic,gmc,vcpo,grpo,a3po)"),
    "--delays": ("delays", _int_list, "comma-separated delays (trajectory mode)"),
    "--target-kls": ("target_kls", _float_list, "comma-separated target KLs (direct mode)"),
    "--eps": ("eps_values", _float_list, "comma-separated eps values (cap 1+eps)"),
    "--group-sizes": ("group_sizes", _int_list, "comma-separated group sizes G"),
    "--seeds": ("seeds", _int_list, "comma-separated replicate seeds"),
    "--num-minibatches": ("num_minibatches", int, "M, minibatches per grid point"),
    "--num-groups": ("num_groups", int, "B, groups per minibatch"),
    "--behavior": ("behavior", str, "trajectory or direct"),
    "--policy": ("policy", str, "tabular or loglinear"),
    "--advantage": ("advantage", str, "loo, centered, std or paper"),
}


def _add_sweep_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="JSON config (default: toy_mdps/configs/quick.json); see SweepConfig",
    )
    parser.add_argument(
        "--quick", action="store_true", help="the default small grid (configs/quick.json)"
    )
    parser.add_argument("--full", action="store_true", help="the full grid (configs/full.json)")
    parser.add_argument(
        "--out", type=Path, default=None, help="run directory (default: runs/toy_sweep_<name>)"
    )
    parser.add_argument("--fresh", action="store_true", help="discard rows already in --out")
    parser.add_argument("--no-figures", action="store_true", help="do not write figures")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    for flag, (_, kind, text) in _SWEEP_OVERRIDES.items():
        parser.add_argument(flag, type=kind, default=None, help=f"override: {text}")


def _run_sweep(args: argparse.Namespace) -> int:
    from toy_mdps.config import SweepConfig, shipped_config

    if sum(bool(x) for x in (args.config, args.quick, args.full)) > 1:
        raise SystemExit("gmc-grpo toy sweep: give at most one of --config, --quick, --full")
    path = args.config or shipped_config("full" if args.full else "quick")
    base = SweepConfig.from_file(path).to_dict()
    for flag, (name, _, _) in _SWEEP_OVERRIDES.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            base[name] = value
    if args.no_figures:
        base["figures"] = False
    try:
        config = SweepConfig.from_dict(base)
    except ValueError as err:
        raise SystemExit(f"gmc-grpo toy sweep: {err}") from None
    out = args.out or Path("runs") / f"toy_sweep_{config.name}"

    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    from toy_mdps.sweep import run_sweep

    try:
        run_sweep(config, out, fresh=args.fresh, progress=not args.no_progress)
    except ValueError as err:
        raise SystemExit(f"gmc-grpo toy sweep: {err}") from None
    from gmc_grpo.records import read_json

    summary = read_json(out / "summary.json")
    print(f"wrote {out}/results.csv, {out}/summary.json ({summary['num_rows']} rows)")
    for name, claim in summary["claims"].items():
        if "fraction" in claim:
            print(f"  {name}: {claim['holds']}/{claim['of']}  ({claim['claim']})")
        else:
            print(f"  {name}: {claim.get('exceeds')}/{claim.get('of')}  ({claim['claim']})")
    return 0


COMMANDS: dict[str, Command] = {
    "sweep": Command(
        help="bias and second moment of every estimator vs delay, eps and G (exact gradients)",
        add_arguments=_add_sweep_args,
        run=_run_sweep,
    ),
    "train": Command(
        help="asynchronous learners (fixed delay or length-coupled) with exact metrics every step",
        add_arguments=train_cli.add_arguments,
        run=train_cli.run,
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo toy",
        description="Token MDPs with exact J, grad J and KL: measured bias and second moment of "
        "the GRPO-style estimators (IS, GRPO, TIC, GMC, VCPO, A-3PO).",
        epilog="examples:\n  gmc-grpo toy sweep --quick\n  gmc-grpo toy sweep --full --out runs/full\n"
        "  gmc-grpo toy sweep --quick --methods gmc,tic --group-sizes 2,8,32,128\n"
        "  gmc-grpo toy train --quick\n  gmc-grpo toy train --experiment delay_full\n"
        "  gmc-grpo toy train --method gmc --delay 32 --seeds 5",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(name, help=command.help, description=command.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `gmc-grpo toy`; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        parser.print_help()
        return 0
    return int(COMMANDS[args.command].run(args))


if __name__ == "__main__":
    sys.exit(main())
