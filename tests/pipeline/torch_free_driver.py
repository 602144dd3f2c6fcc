"""Run `gmc-grpo ARGV...` in this process and report whether torch was imported by its exit.

    python torch_free_driver.py SHM_FREE_BYTES -- llm train --recipe tiny --set lr=-1 ...

Prints one JSON line on stdout, `{"code": <exit status>, "torch": <torch in sys.modules>}`; the
command's own output goes to stderr as usual (its stdout too, so the last stdout line is the
report). `SHM_FREE_BYTES` ("-" for none) replaces the free space the preflight reads for the
shared-memory folder (`llm_runs.preflight.free_bytes_of`), so that a too-small `/dev/shm` is
tested on any machine. Used by `test_refusals_before_torch.py`.
"""

from __future__ import annotations

import contextlib
import json
import sys


def main() -> int:
    shm_free, separator, *argv = sys.argv[1:]
    assert separator == "--", "usage: torch_free_driver.py SHM_FREE_BYTES -- ARGV..."
    if shm_free != "-":
        from llm_runs import preflight

        preflight.free_bytes_of = lambda folder: int(shm_free)
    from pipeline.cli import main as gmc_grpo

    with contextlib.redirect_stdout(sys.stderr):
        try:
            code = gmc_grpo(argv)
        except SystemExit as stop:  # argparse's own refusals
            code = stop.code if isinstance(stop.code, int) else 2
    print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
