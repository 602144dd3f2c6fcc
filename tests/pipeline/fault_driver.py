"""Run `gmc-grpo ARGV...` with a fault injected at the k-th durable write (used by the fault tests).

    python fault_driver.py PLAN.json -- toy train --out runs/x ...

The events are the two ways the package makes anything durable: a record row appended
(`gmc_grpo.run_writer.RunWriter._append`) and an atomic rename (`os.replace`: summaries, tables,
checkpoint folders, per-problem outputs). `PLAN.json` holds:

- `"count"`: a path; every event is counted and the total written there at exit (baseline run);
- `"at"`: the 1-based event to hit, and `"mode"`:
  - `"kill"`: SIGKILL before the event (a row not written, a rename not done);
  - `"torn"`: rows: write the first half of the line, flush, then SIGKILL (a torn last line);
    renames: SIGKILL right after the rename;
  - `"enospc"` / `"eacces"`: raise `OSError(ENOSPC)` / `PermissionError(EACCES)` at the event
    (rows: after writing half of the line), as a full disk or an unwritable folder would.

Every job runs on one thread (`torch.set_num_threads(1)`), like `bench/compare_records.py`.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import signal
import sys
from pathlib import Path


def main() -> int:
    plan_path, separator, *argv = sys.argv[1:]
    assert separator == "--", "usage: fault_driver.py PLAN.json -- ARGV..."
    plan = json.loads(Path(plan_path).read_text())
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from gmc_grpo import json_files, run_writer

    count = {"n": 0}
    at, mode = plan.get("at"), plan.get("mode", "kill")
    if plan.get("count"):
        atexit.register(lambda: Path(plan["count"]).write_text(str(count["n"])))

    def is_hit() -> bool:
        count["n"] += 1
        return count["n"] == at

    def fail(path: object) -> None:
        if mode == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        if mode == "eacces":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        os.kill(os.getpid(), signal.SIGKILL)

    original_append = run_writer.RunWriter._append
    original_replace = os.replace

    def append(self, name, row):  # noqa: ANN001
        if is_hit():
            if mode != "kill":  # a torn line: half of it reaches the file
                text = json_files.to_json(row) + "\n"
                with open(self.path / name, "a", encoding="utf-8") as handle:
                    handle.write(text[: len(text) // 2])
            fail(self.path / name)
        original_append(self, name, row)

    def replace(src, dst, *args, **kwargs):  # noqa: ANN001
        if is_hit():
            if mode == "torn":  # killed right after the rename
                original_replace(src, dst, *args, **kwargs)
            fail(dst)
        return original_replace(src, dst, *args, **kwargs)

    run_writer.RunWriter._append = append
    os.replace = replace
    from pipeline.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
