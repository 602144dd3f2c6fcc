"""`gmc-grpo toy ...`: the toy-MDP track's command line (imports torch only when a command runs).

Each subcommand is a module with `HELP`, `add_arguments(parser)` and
`run(args, draw_figures=None) -> exit code`: `sweep` (`toy_mdps.sweep.cli`) and `train`
(`toy_mdps.train.cli`). `draw_figures(kind, run_dir)` is the figure step: this track imports no
`figures`, so `gmc-grpo toy` (`pipeline.toy`) passes one; `python -m toy_mdps.cli` draws none.
A bad config or flag (or an output folder that is a file or cannot be written) exits with status
2 and one line naming the field; a write refused during a run (a full disk) with status 1 and one
line (`gmc_grpo.errors`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from gmc_grpo.determinism import pin_at_entry
from gmc_grpo.errors import run_reported

# subcommand -> module with HELP, add_arguments(parser), run(args, draw_figures)
COMMANDS: dict[str, str] = {"sweep": "toy_mdps.sweep.cli", "train": "toy_mdps.train.cli"}
DrawFigures = Callable[[str, Path], list[Path]]

EPILOG = """examples:
  gmc-grpo toy sweep --quick
  gmc-grpo toy sweep --full --out runs/full
  gmc-grpo toy sweep --quick --methods gmc,tic --group-sizes 2,8,32,128
  gmc-grpo toy train --quick
  gmc-grpo toy train --experiment delay_full
  gmc-grpo toy train --method gmc --delay 32 --seeds 0,1,2,3,4
  gmc-grpo toy train --method gmc --delay 32 --seeds 0,1,2,3,4 --extend-to 400
  gmc-grpo toy train --schedule workers --workers 64 --generation-time exponential
  gmc-grpo toy train --experiment mixed_quick"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo toy",
        description="Token MDPs with exact J, grad J and KL: measured bias and second moment of "
        "the GRPO-style estimators (IS, GRPO, TIC, GMC, VCPO, A-3PO) and asynchronous learners.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.HELP))
    return parser


def main(argv: list[str] | None = None, *, draw_figures: DrawFigures | None = None) -> int:
    """Entry point of `gmc-grpo toy`; returns the exit code."""
    pinned = pin_at_entry("gmc-grpo toy")  # before a command imports torch (gmc_grpo.determinism)
    if pinned is not None:
        return pinned
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        parser.print_help()
        return 0
    module = importlib.import_module(COMMANDS[args.command])
    prog = f"gmc-grpo toy {args.command}"
    try:
        return run_reported(prog, lambda: int(module.run(args, draw_figures)))
    except SystemExit as stop:
        if isinstance(stop.code, str):  # a one-line error from the command
            print(stop.code, file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
