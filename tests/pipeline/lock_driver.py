"""Run `gmc-grpo ARGV...`, holding FOLDER's lock until told to let go (the one-writer tests).

    python lock_driver.py BARRIER FOLDER -- toy train --out FOLDER ...

When this process has taken the lock of FOLDER (`gmc_grpo.runlock`), it writes
`BARRIER/held.<pid>` and waits until `BARRIER/release` exists, then runs on. A process refused the
lock exits with status 2 as it would without the driver. Of two drivers started together into
one folder, one therefore holds the lock while the other is refused, whatever the order in which
a loaded machine runs them, and the test releases the holder once the other has exited.
Every job runs on one thread, like `fault_driver.py`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

WAIT_S = 900.0  # a holder that is never released gives up (exit 3) instead of hanging a test


def main() -> int:
    barrier, folder, separator, *argv = sys.argv[1:]
    assert separator == "--", "usage: lock_driver.py BARRIER FOLDER -- ARGV..."
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from gmc_grpo import runlock

    target = os.path.realpath(folder)
    original = runlock._acquire

    def acquire(path, created, notice):  # noqa: ANN001, ANN202
        held = original(path, created, notice)
        if os.path.realpath(path) == target:
            (Path(barrier) / f"held.{os.getpid()}").touch()
            deadline = time.monotonic() + WAIT_S
            while not (Path(barrier) / "release").exists():
                if time.monotonic() > deadline:
                    os._exit(3)
                time.sleep(0.02)
        return held

    runlock._acquire = acquire
    from pipeline.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
