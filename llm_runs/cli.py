"""`gmc-grpo llm ...`: the Qwen3 track's command line.

Each subcommand lives in its own module exposing `add_arguments(parser)` and `run(args) -> int`;
it is registered by one line in `SUBCOMMANDS`. A subcommand that writes a Markdown report takes
its renderer as `run(args, render)`, handed in from above (`main(argv, renderers=...)`: the
`gmc-grpo` command goes through `pipeline.llm`, which hands `llm bias` and `llm train` (a suite's
summary) their reports' renderers; this track formats no report). Modules are imported only when their subcommand
runs (or prints its help), so `gmc-grpo llm --help` imports neither torch nor transformers.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

from gmc_grpo.determinism import pin_at_entry
from gmc_grpo.errors import report_error, run_reported

# subcommand -> (module with `add_arguments(parser)` and `run(args) -> int`, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "eval": (
        "llm_runs.evaluation.cli",
        "evaluate a model or checkpoint on the six benchmarks (greedy, avg@n, pass@k, macro)",
    ),
    "train": (
        "llm_runs.train_cli",
        "train with GRPO/TIC/GMC/VCPO/GAC/A-3PO under fixed or simulated delays (recipes: --recipe)",
    ),
    "bias": (
        "llm_runs.bias_cli",
        "measure each estimator's bias on the LM at checkpoints of a delayed run (IS, TIC, GMC, ...)",
    ),
    "data": (
        "llm_runs.data_cli",
        "download the datasets from the hub into a local folder for --data-dir (needs network)",
    ),
}

PROG = "gmc-grpo llm"

EPILOG = """examples:
  gmc-grpo llm eval --help
  gmc-grpo llm eval --model DIR --out runs/eval --engine vllm
  gmc-grpo llm data --out data/
  gmc-grpo llm bias --recipe tiny_delay --out runs/lm_bias

Run `gmc-grpo llm <subcommand> --help` for the options of each subcommand.
"""


def build_parser() -> argparse.ArgumentParser:
    """The top-level `gmc-grpo llm` parser (subcommand names and one-line help only)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="The Qwen3 pipeline of Appendix B.1: data, prompts, scoring, evaluation.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="<subcommand>")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def build_subparser(name: str) -> tuple[argparse.ArgumentParser, object]:
    """The full parser of subcommand `name` and its module (imported here)."""
    module_name, help_text = SUBCOMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(
        prog=f"{PROG} {name}",
        description=getattr(module, "DESCRIPTION", help_text),
        epilog=getattr(module, "EPILOG", None),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    module.add_arguments(parser)
    return parser, module


def main(
    argv: list[str] | None = None,
    *,
    renderers: Mapping[str, Callable[[Any], str]] | None = None,
) -> int:
    """Route `gmc-grpo llm <subcommand> ...`; return the exit status.

    renderers: subcommand -> the function rendering its results (a `bias_of_run` dict, a suite's
    `SuiteAnalysis`) as Markdown, passed to its `run(args, render)` (`pipeline.llm`); a
    subcommand without one writes its numbers (JSON) only.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    pinned = pin_at_entry(PROG)  # before a subcommand imports torch (gmc_grpo.determinism)
    if pinned is not None:
        return pinned
    parser = build_parser()
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        parser.error(f"unknown subcommand {name!r}; choose one of {', '.join(SUBCOMMANDS)}")
    subparser, module = build_subparser(name)
    args = subparser.parse_args(rest)
    prog = f"{PROG} {name}"
    hint = (
        "rerun the same command with --resume to continue"
        if name == "train"
        else "rerun the same command to continue"
    )
    try:
        render = (renderers or {}).get(name)
        call = (lambda: module.run(args)) if render is None else (lambda: module.run(args, render))
        return run_reported(prog, lambda: int(call() or 0), continue_hint=hint)
    except RuntimeError as exc:
        # e.g. an engine that cannot start: one clear line, no traceback (`docs/DESIGN.md`)
        if report_error(prog, ValueError(str(exc))) is None:
            raise
        return 2


if __name__ == "__main__":
    sys.exit(main())
