"""One writer per run folder (`gmc_grpo.runlock`, issue 26): a held folder is refused with the
holder's pid, host, start time and command; every writing command takes the lock before it
writes; a holder killed with SIGKILL leaves a lock that the next command takes over (with a note),
a process it forked keeps the lock; the lock is re-entrant in one process, survives a race with
a releasing holder and leaves nothing behind when the command wrote nothing.

A lock is held by a child process that waits on a barrier file (no sleeps that assume timing)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gmc_grpo import runlock
from gmc_grpo.run_writer import RunWriter
from gmc_grpo.runlock import (
    LOCK_NAME,
    RunLockedError,
    clear_folder,
    holds_lock,
    read_holder,
    run_lock,
)
from pipeline import cli

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 300.0

# argv[1:]: the folders to lock (nested), then the barrier folder. With FORK=1 the holder forks a
# child that inherits the lock and waits for `release` too; the holder itself then waits forever.
HOLDER = """
import os, sys, time
from contextlib import ExitStack
from pathlib import Path
from gmc_grpo.runlock import run_lock
*folders, barrier = sys.argv[1:]
barrier = Path(barrier)
with ExitStack() as stack:
    for folder in folders:
        stack.enter_context(run_lock(folder))
    if os.environ.get("FORK") == "1" and os.fork() == 0:
        (barrier / "child").write_text(str(os.getpid()))
        while not (barrier / "release").exists():
            time.sleep(0.02)
        os._exit(0)
    (barrier / "held").write_text(str(os.getpid()))
    while not (barrier / "release").exists():
        time.sleep(0.02)
"""


def wait_for(path: Path, process: subprocess.Popen | None = None) -> None:
    """Poll until `path` exists (the holder's barrier file); fail if `process` died first."""
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if process is not None and process.poll() is not None:
            pytest.fail(f"the holder exited with {process.returncode}: {process.stderr.read()}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def hold(folders: list[Path], barrier: Path, fork: bool = False) -> subprocess.Popen:
    """A child process that holds the locks of `folders` until `barrier/release` exists."""
    barrier.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FORK": "1" if fork else "0"}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *map(str, folders), str(barrier)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(barrier / "held", process)
    return process


def release(process: subprocess.Popen, barrier: Path) -> None:
    (barrier / "release").touch()
    process.wait(timeout=WAIT_S)


def test_a_held_folder_is_refused_naming_the_holder(tmp_path: Path) -> None:
    folder, barrier = tmp_path / "run", tmp_path / "barrier"
    holder = hold([folder], barrier)
    try:
        with pytest.raises(RunLockedError) as refused, run_lock(folder):
            pytest.fail("the lock was taken twice")
        message = str(refused.value)
        assert f"pid {holder.pid} on host {socket.gethostname()}, started 20" in message
        assert "is in use by another gmc-grpo command" in message and "--out" in message
        assert refused.value.holder["pid"] == holder.pid
        assert read_holder(folder)["pid"] == holder.pid
        assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]  # nothing else written
    finally:
        release(holder, barrier)
    assert not folder.exists()  # the holder created it, wrote nothing: removed on release
    with run_lock(folder):  # free again
        assert holds_lock(folder)


TOY_RUN = ["toy", "train", "--steps", "4", "--delay", "1", "--no-progress", "--out"]
TINY_TRAIN = ["llm", "train", "--recipe", "tiny", "--steps", "2", "--no-progress", "--out"]
# (case, argv with {folder} for the locked folder, the folder locked below tmp_path)
COMMANDS = [
    ("toy-train", [*TOY_RUN, "{folder}"], "run"),
    ("toy-experiment", ["toy", "train", "--experiment", "delay_quick", "--out", "{tmp}", "--no-progress"], "delay_quick"),
    ("toy-sweep", ["toy", "sweep", "--quick", "--out", "{folder}", "--no-progress"], "run"),
    ("llm-train", [*TINY_TRAIN, "{folder}"], "run"),
    ("llm-suite", [*TINY_TRAIN, "{folder}", "--seeds", "0,1"], "run"),
    ("llm-eval", ["llm", "eval", "--model", "{tmp}", "--out", "{folder}", "--engine", "hf"], "run"),
    ("figures", ["figures", "{tmp}", "--out", "{folder}"], "run"),
    ("reproduce", ["reproduce", "--out", "{folder}", "--only", "theory"], "run"),
    ("theory", ["theory", "--out", "{folder}"], "run"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "locked"), [c[1:] for c in COMMANDS], ids=[c[0] for c in COMMANDS]
)
def test_every_writing_command_takes_the_lock_before_it_writes(
    argv: list[str], locked: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, barrier = tmp_path / locked, tmp_path / "barrier"
    with RunWriter(tmp_path / "some_run", {"method": "gmc"}) as writer:  # for `figures` to read
        writer.log_metrics({"step": 0, "policy/objective": 0.5})
    holder = hold([folder], barrier)
    try:
        words = [w.format(folder=folder, tmp=tmp_path) for w in argv]
        code = cli.main(words)
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2, lines
        assert len(lines) == 1 and "is in use by another gmc-grpo command" in lines[-1], lines
        assert f"pid {holder.pid} on host" in lines[-1]
        assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]
    finally:
        release(holder, barrier)


def test_a_killed_holders_lock_is_taken_over(tmp_path: Path) -> None:
    folder, barrier = tmp_path / "run", tmp_path / "barrier"
    folder.mkdir()
    (folder / "metrics.jsonl").write_text('{"step": 0}\n')
    holder = hold([folder], barrier)
    os.kill(holder.pid, signal.SIGKILL)  # no clean-up runs: the lock file keeps its line
    holder.wait(timeout=WAIT_S)
    assert read_holder(folder)["pid"] == holder.pid  # stale details, but no flock held
    notes: list[str] = []
    with run_lock(folder, notice=notes.append):
        assert read_holder(folder)["pid"] == os.getpid()
        (folder / "summary.json").write_text("{}")
    assert len(notes) == 1 and f"pid {holder.pid}" in notes[0] and "killed?" in notes[0]
    assert not (folder / LOCK_NAME).exists()  # a clean release deletes the file
    assert sorted(p.name for p in folder.iterdir()) == ["metrics.jsonl", "summary.json"]


def test_a_process_the_killed_holder_forked_still_holds_the_lock(tmp_path: Path) -> None:
    folder, barrier = tmp_path / "run", tmp_path / "barrier"
    holder = hold([folder], barrier, fork=True)
    wait_for(barrier / "child")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=WAIT_S)
    try:
        with pytest.raises(RunLockedError, match=r"has exited: a process it started"):
            with run_lock(folder):
                pytest.fail("the forked child's lock was ignored")
    finally:
        (barrier / "release").touch()
    deadline = time.monotonic() + WAIT_S
    while True:  # the forked child exits once released (it is not ours to wait for)
        try:
            with run_lock(folder, notice=lambda _text: None):
                assert holds_lock(folder)
            break
        except RunLockedError:
            assert time.monotonic() < deadline, "the forked child never let go"
            time.sleep(0.05)


def test_the_lock_is_reentrant_in_one_process_and_cleans_up(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    with run_lock(folder) as locked:
        assert locked == folder and holds_lock(folder)
        with run_lock(folder), run_lock(folder / "inner"):
            assert holds_lock(folder / "inner")
        assert holds_lock(folder) and (folder / LOCK_NAME).is_file()
        (folder / "old").mkdir()
        (folder / "old" / "x").write_text("x")
        (folder / "y").write_text("y")
        clear_folder(folder)  # a suite's run started over: the lock file stays
        assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]
    assert not holds_lock(folder) and not (tmp_path / "a").exists()  # created, left empty
    with run_lock(folder):
        (folder / "config.json").write_text("{}")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"]  # written: kept


def test_a_lock_file_deleted_by_a_releasing_holder_is_not_trusted(tmp_path, monkeypatch) -> None:
    """The race: this process opens the lock file, the holder deletes it on release, this process
    wins the flock on the deleted file. It must start over on the path's new file, or a third
    process could lock that one too."""
    folder = tmp_path / "run"
    folder.mkdir()
    calls: list[int] = []
    real_flock = runlock.fcntl.flock

    def flock(fd: int, operation: int) -> None:
        if operation & runlock.fcntl.LOCK_EX and not calls:
            os.unlink(folder / LOCK_NAME)  # what a releasing holder does
        calls.append(operation)
        real_flock(fd, operation)

    monkeypatch.setattr(runlock.fcntl, "flock", flock)
    with run_lock(folder):
        exclusive = [c for c in calls if c & runlock.fcntl.LOCK_EX]
        assert len(exclusive) == 2  # the first, on the deleted file, was given up
        assert json.loads((folder / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_the_holder_line_names_the_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", [str(ROOT / "pipeline" / "cli.py"), "toy", "train"])
    with run_lock(tmp_path / "run"):
        holder = read_holder(tmp_path / "run")
    assert holder["command"] == "gmc-grpo toy train"
    assert holder["host"] == socket.gethostname() and holder["started"].endswith("+00:00")


def test_a_file_system_without_locks_stops_the_command(tmp_path, monkeypatch, capsys) -> None:
    import errno

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(runlock.fcntl, "flock", no_locks)
    code = cli.main([*TOY_RUN, str(tmp_path / "run")])
    line = capsys.readouterr().err.strip()
    assert code == 1 and "No locks available" in line and LOCK_NAME in line, line
    assert not (tmp_path / "run").exists()
