"""The one command-line entry point, `gmc-grpo`, with a subcommand per track.

Each track owns its own parser in `<track>/cli.py` exposing `main(argv: list[str]) -> int`; this
module only routes to it, and imports the track lazily so that `gmc-grpo theory` never imports
torch or transformers. `gmc-grpo toy` goes through `pipeline.toy`, which adds the figure step
(the toy track itself imports no `figures`); `gmc-grpo llm` through `pipeline.llm`, which hands
the track its reports' renderers (the track formats no report); `gmc-grpo theory` goes through
`evidence.theory_runs`, which hands `theory.cli` the reader of `--runs` (`theory` reads no run).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from gmc_grpo.determinism import pin_at_entry
from gmc_grpo.errors import EXIT_INTERRUPTED

# subcommand -> (module with `main(argv)`, one-line description for `gmc-grpo --help`)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "theory": (
        "evidence.theory_runs",
        "derive and check the paper's constants and rates; print the claims table (no torch)",
    ),
    "toy": (
        "pipeline.toy",
        "token MDPs with exact gradients: estimator bias sweeps (`toy sweep`) and async learners",
    ),
    "llm": (
        "pipeline.llm",
        "the Qwen3 pipeline: `llm train` (async RL, six methods) and `llm eval` (six benchmarks)",
    ),
    "figures": (
        "figures.cli",
        "regenerate the paper's figures and tables from run directories",
    ),
    "reproduce": (
        "pipeline.reproduce",
        "run everything that runs on a CPU on embedded defaults and write results/REPORT.md",
    ),
}

EPILOG = """examples:
  gmc-grpo theory                 # claims table of the paper's constants and rates
  gmc-grpo theory --json          # the same as JSON
  gmc-grpo toy sweep --quick      # empirical bias / second moment of every estimator
  gmc-grpo llm eval --help        # evaluation on the six benchmarks
  gmc-grpo reproduce --out results

Run `gmc-grpo <subcommand> --help` for the options of each subcommand.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo",
        description=(
            "GMC-GRPO: Group-Mass Capping for asynchronous LLM post-training. "
            "Theory checks, exact toy token MDPs and the Qwen3 training pipeline."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the package version and exit")
    sub = parser.add_subparsers(dest="command", metavar="<subcommand>")
    for name, (_, help_text) in SUBCOMMANDS.items():
        # add_help=False: `gmc-grpo toy --help` is answered by the track's own parser.
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pinned = pin_at_entry("gmc-grpo")  # before any track imports torch (gmc_grpo.determinism)
    if pinned is not None:
        return pinned
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    if argv[0] == "--version":
        from gmc_grpo import __version__

        print(__version__)
        return 0
    command, rest = argv[0], argv[1:]
    if command not in SUBCOMMANDS:
        parser.error(f"unknown subcommand {command!r}; choose one of {', '.join(SUBCOMMANDS)}")
    module_name = SUBCOMMANDS[command][0]
    try:
        module = importlib.import_module(module_name)
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handler (gmc_grpo.errors)
        if os.environ.get("GMC_GRPO_TRACEBACK"):
            raise
        print(f"gmc-grpo {command}: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
