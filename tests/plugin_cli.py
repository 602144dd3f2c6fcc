"""Run `gmc-grpo` in a fresh process with a plugin module named in an environment variable
(`GMC_GRPO_METHODS`, `GMC_GRPO_SCHEDULES`): what a user's own method or schedule goes through."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli_with_plugin(variable: str, module: str, argv: list[str]) -> subprocess.CompletedProcess:
    """`gmc-grpo ARGV` with `variable=module` (the repository on `PYTHONPATH`), output captured."""
    env = {**os.environ, variable: module, "PYTHONPATH": str(ROOT)}
    code = "import sys; from pipeline.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
