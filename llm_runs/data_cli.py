"""`gmc-grpo llm data`: write the hub datasets into the local layout that `--data-dir` reads."""

from __future__ import annotations

import argparse

from llm_runs.data import BENCHMARKS, export_to_dir

DESCRIPTION = """Download MATH train (seven subjects) and the six benchmarks from the Hugging Face
hub and write them as JSONL under OUT (OUT/math_train/<subject>.jsonl, OUT/<benchmark>.jsonl).
Run it once on a machine with network access; then pass --data-dir OUT to `gmc-grpo llm eval`."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `gmc-grpo llm data`."""
    parser.add_argument("--out", required=True, help="folder to write")
    parser.add_argument(
        "--datasets",
        default=None,
        help=f"comma-separated subset of math_train,{','.join(BENCHMARKS)} (default: all)",
    )


def run(args: argparse.Namespace) -> int:
    """Entry point of `gmc-grpo llm data`."""
    names = [n.strip() for n in args.datasets.split(",")] if args.datasets else None
    written = export_to_dir(args.out, names)
    for name, count in written.items():
        print(f"{name}: {count} rows")
    print(f"wrote {len(written)} datasets to {args.out}")
    return 0
