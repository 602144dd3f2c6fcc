"""Run one row of a bad-input table: `gmc-grpo ARGV` in process, its `{name}` placeholders filled.

Shared by the bad-input table (`test_pipeline_bad_input.py`) and the probe table
(`test_pipeline_probes.py`).
"""

from __future__ import annotations

from pipeline import cli


def fill(argv: list[str], names: dict[str, str]) -> list[str]:
    """`argv` with every `{name}` replaced by `names[name]`."""
    filled = []
    for arg in argv:
        for name, value in names.items():
            arg = arg.replace("{" + name + "}", value)
        filled.append(arg)
    return filled


def run_in_process(argv: list[str], names: dict[str, str], capsys) -> tuple[int, object, list[str]]:
    """`(exit status, captured output, non-blank stderr lines)` of `gmc-grpo ARGV` (filled);
    argparse's own errors exit through SystemExit."""
    try:
        code = cli.main(fill(argv, names))
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured, [line for line in captured.err.splitlines() if line.strip()]
