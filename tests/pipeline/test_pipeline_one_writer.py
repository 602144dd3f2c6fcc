"""Two commands started together into one folder (issue 26): one runs, the other exits with
status 2 and one line naming the holder (pid, host, start time), and the folder ends with the
records of a single run. For `toy train`, `toy sweep`, `llm train` (tiny), `llm eval` (tiny),
`figures` and `reproduce --only figures`.

Both contenders run through `lock_driver.py`: the one that gets the lock waits on a barrier file
until the test releases it, which the test does once the other has exited, so the outcome does
not depend on how a loaded machine schedules the two. A third, uncontested run of the same
command into another folder (started at the same time, with umask 022) gives the records to
compare with, wall-clock fields excepted, and shows that its files get the umask's mode (0644) and
that `--no-progress` also silences transformers' weight-loading bars.
"""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_pipeline_faults import (  # noqa: F401  (`inputs` is a fixture)
    inputs,
    job_argv,
    record_differences,
)

from gmc_grpo.runlock import LOCK_NAME

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "lock_driver.py"
TIMEOUT_S = 900


def start(argv: list[str], workdir: Path, *, barrier: Path | None = None, folder: Path | None = None,
          umask: int = 0o022) -> subprocess.Popen:  # fmt: skip
    """`gmc-grpo ARGV` in a subprocess: through the lock driver when `barrier` is given."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("GMC_GRPO_TRACEBACK", None)
    if barrier is not None:
        command = [sys.executable, str(DRIVER), str(barrier), str(folder), "--", *argv]
    else:
        command = [sys.executable, "-m", "pipeline.cli", *argv]
    return subprocess.Popen(
        command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, umask=umask,
    )  # fmt: skip


def finish(process: subprocess.Popen) -> tuple[int, str]:
    _, err = process.communicate(timeout=TIMEOUT_S)
    return process.returncode, err


def contest(argv_into, folder: Path, reference: Path, tmp_path: Path) -> dict[str, object]:
    """Start two commands into `folder` and one into `reference`; return what happened."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    straight = start(argv_into(reference), tmp_path)
    rivals = [start(argv_into(folder), tmp_path, barrier=barrier, folder=folder) for _ in range(2)]
    deadline = time.monotonic() + TIMEOUT_S
    while all(p.poll() is None for p in rivals):  # the holder waits: the other ends first
        assert time.monotonic() < deadline, "neither contender finished"
        assert len(list(barrier.glob("held.*"))) < 2, "both contenders took the lock"
        time.sleep(0.05)
    refused = next(p for p in rivals if p.poll() is not None)
    holder = next(p for p in rivals if p is not refused)
    refused_code, refused_err = finish(refused)
    (barrier / "release").touch()
    holder_code, holder_err = finish(holder)
    straight_code, straight_err = finish(straight)
    assert straight_code == 0, straight_err[-3000:]
    assert holder_code == 0, holder_err[-3000:]
    lines = [line for line in refused_err.splitlines() if line.strip()]
    assert refused_code == 2, refused_err[-3000:]
    assert len(lines) == 1 and "Traceback" not in refused_err, lines
    assert "is in use by another gmc-grpo command" in lines[0], lines[0]
    assert f"pid {holder.pid} on host {socket.gethostname()}, started 20" in lines[0], lines[0]
    assert sorted(p.name for p in barrier.glob("held.*")) == [f"held.{holder.pid}"]
    assert not (folder / LOCK_NAME).exists()  # released cleanly
    return {"straight_err": straight_err}


def file_modes(folder: Path) -> dict[str, str]:
    """`{relative path: octal mode}` of every file below `folder` whose mode is not 0644."""
    return {
        str(p.relative_to(folder)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and stat.S_IMODE(p.stat().st_mode) != 0o644
    }


@pytest.mark.parametrize("job", ["toy_train", "toy_sweep", "llm_train", "llm_eval"])
def test_two_runs_into_one_folder(job: str, inputs, tmp_path: Path) -> None:  # noqa: F811
    if job.startswith("llm") and "model" not in inputs:
        pytest.skip("the LLM track needs transformers")
    folder, reference = tmp_path / "contested", tmp_path / "straight"
    seen = contest(
        lambda out: job_argv(job, out, inputs, resume=False), folder, reference, tmp_path
    )
    assert record_differences(reference, folder) == []
    assert file_modes(reference) == {}  # umask 022: every file 0644, checkpoints included
    if job == "llm_train":  # --no-progress: no bar of ours, none of transformers'
        err = str(seen["straight_err"])
        assert "Loading weights" not in err and "Writing model shards" not in err, err[-2000:]


def test_two_figure_commands_into_one_folder(inputs, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "runs"
    made = start(job_argv("toy_train", runs / "toy", inputs, resume=False), tmp_path)
    assert finish(made)[0] == 0
    folder, reference = tmp_path / "contested", tmp_path / "straight"

    def argv(out: Path) -> list[str]:
        return ["figures", str(runs), "--out", str(out), "--formats", "png"]

    contest(argv, folder, reference, tmp_path)
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    assert names == sorted(str(p.relative_to(reference)) for p in reference.rglob("*"))
    assert "bounds_toy.png" in names
    assert (folder / "INDEX.md").read_text() == (reference / "INDEX.md").read_text()
    assert file_modes(reference) == {}


def test_two_reproduce_commands_into_one_folder(tmp_path: Path) -> None:
    folder, reference = tmp_path / "contested", tmp_path / "straight"

    def argv(out: Path) -> list[str]:
        return ["reproduce", "--out", str(out), "--only", "figures"]

    contest(argv, folder, reference, tmp_path)

    def report(root: Path) -> str:  # the stage table without its seconds
        return re.sub(r"\| \d+\.\d \|", "| s |", (root / "REPORT.md").read_text())

    assert report(folder) == report(reference)
    assert report(folder).count("| [Figures and tables from the run records") == 1  # one row

    def stage(root: Path) -> dict[str, object]:  # the stage's record without its times
        record = json.loads((root / "figures" / "stage.json").read_text())
        return {k: v for k, v in record.items() if k not in ("seconds", "finished_at")}

    assert stage(folder) == stage(reference) and stage(folder)["status"] == "ok"
    assert file_modes(reference) == {}
