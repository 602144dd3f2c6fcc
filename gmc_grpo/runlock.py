"""One writer per run folder: an advisory lock that a command holds for its whole run.

Every command that writes records, checkpoints or reports (`toy train`, `toy sweep`, the toy
experiments, `llm train` and its suites, `llm eval`, `figures`, `reproduce`, `theory --out`)
enters `run_lock(folder)` before it reads what the folder holds and leaves it when it is done. A
second command aimed at the same folder while the first runs stops at once with `RunLockedError`
(a `ValueError`: the command lines exit with status 2 and one line naming the holder's process
id, host, start time and command line, and the fix).

How (`fcntl.flock`, chosen over the `filelock` package, which wraps the same call on POSIX):

- The lock is `flock(LOCK_EX | LOCK_NB)` on `<folder>/.gmc-grpo.lock`; the holder writes one
  JSON line there (`pid`, `host`, `started`, `command`) for the refusal message. The kernel
  releases a flock when the holder's last file descriptor closes, so a process killed with
  SIGKILL leaves no lock behind: the next command locks the same file at once. The file itself
  stays, with the dead holder's line in it; the next holder finds that line (a clean exit
  deletes the file), prints one note that it takes over from a writer that did not release the
  lock, and overwrites the line. The metadata never decides anything: only the flock does.
- A clean release deletes the file while still holding the lock, then unlocks. A process that
  opened the file just before and then wins the flock checks that the path still names the file
  it locked (same device and inode) and starts over otherwise, so two processes never both
  believe they hold the lock. Folders this lock created are removed again on release when the
  command left them empty (a command refused for bad input leaves nothing behind).
- The lock is re-entrant within one process (a toy experiment's folder is locked by the command
  line and by `run_experiment`; a suite's run folders sit inside the locked suite folder but
  are locked on their own). The descriptor is not inherited by programs a command starts
  (Python opens it close-on-exec); a process forked from the holder shares the lock, and while
  it lives the lock stays held: the refusal then says that the recorded holder has exited.
- NFS: Linux maps `flock` to NFS byte-range locks, which exclude writers on every client when
  the server supports locking (NFSv4, or NFSv3 with `lockd`). With the mount options `nolock` or
  `local_lock=flock|all` the lock only excludes processes on the same host, and a client that
  crashes holds its lock until the server's lease expires (NFSv4: about 90 s). A file system
  without locks makes the command fail with `OSError` (`ENOLCK`, naming the lock file) rather
  than run unguarded. docs/records.md says the same for users.

Python opens the lock file with mode 0o666, so it gets the user's umask like any other file.
Taking the lock is a command's first write, so an output folder that cannot hold one is refused
here, as bad input, before anything is written: a file where the folder should be
(`NotADirectoryError`) or a folder that cannot be created or written (`FolderNotWritableError`:
permissions, a read-only file system).
"""

from __future__ import annotations

import errno
import fcntl
import functools
import inspect
import json
import os
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
LOCK_NAME = ".gmc-grpo.lock"
# How long a refused command waits for a holder that has just taken the lock to write its line.
_HOLDER_LINE_WAIT_S = 1.0


class RunLockedError(ValueError):
    """Another process holds `folder`'s lock; `holder` is its recorded line (None if unknown)."""

    def __init__(self, folder: Path, holder: dict[str, Any] | None, detail: str) -> None:
        self.folder, self.holder = folder, holder
        super().__init__(
            f"{folder} is in use by another gmc-grpo command ({detail}); one command writes "
            "into a folder at a time: wait for it to finish or stop it, or choose another "
            "folder (--out)"
        )


# errno values that mean "this folder cannot be written": permission, or a read-only file system
_UNWRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


class FolderNotWritableError(ValueError):
    """The folder a command would write into cannot be created or written (permissions, a
    read-only file system); raised before anything is written, so it is bad input (exit status
    2), not a write refused halfway through a run (`gmc_grpo.errors`)."""

    def __init__(self, folder: Path, error: OSError) -> None:
        self.folder = folder
        super().__init__(
            f"cannot write into {folder}: {error.strerror or error} [errno {error.errno}]; "
            "nothing was written: make it writable or choose another output folder (--out)"
        )


@dataclass
class _Held:
    fd: int
    path: Path
    pid: int
    count: int = 1
    created: list[Path] = field(default_factory=list)


_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


def lock_path(folder: str | Path) -> Path:
    """The lock file of `folder`."""
    return Path(folder) / LOCK_NAME


@contextmanager
def run_lock(folder: str | Path, *, notice: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Hold `folder`'s lock for the block (the folder is created if missing); yields the folder.

    Raises `RunLockedError` when another process holds it. `notice` receives the one-line note
    printed when a stale lock (its holder killed) is taken over (default: stderr).
    """
    folder = Path(folder)
    created = _make_folder(folder)
    key = os.path.realpath(folder)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None and held.pid == os.getpid():
            held.count += 1
        else:
            held = None
    if held is None:
        held = _acquire(folder, created, notice or _print_notice)
        with _HELD_GUARD:
            _HELD[key] = held
    try:
        yield folder
    finally:
        with _HELD_GUARD:
            held.count -= 1
            last = held.count == 0
            if last:
                _HELD.pop(key, None)
        if last:
            _release(held)


def locks_folder(folder_of: str | Callable[[dict[str, Any]], str | Path]) -> Callable[[F], F]:
    """Decorator: the function runs inside `run_lock` of the folder it writes.

    `folder_of` names the argument that holds the folder (`"run_dir"`), or maps the call's
    arguments (a dict, defaults applied) to it (`lambda a: a["config"].out`).
    """

    def decorate(function: F) -> F:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def locked(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            folder = arguments[folder_of] if isinstance(folder_of, str) else folder_of(arguments)
            with run_lock(folder):
                return function(*args, **kwargs)

        return locked  # type: ignore[return-value]

    return decorate


def holds_lock(folder: str | Path) -> bool:
    """Whether this process holds `folder`'s lock (inside `run_lock(folder)`)."""
    held = _HELD.get(os.path.realpath(folder))
    return held is not None and held.pid == os.getpid()


def clear_folder(folder: str | Path) -> None:
    """Delete everything in `folder` but its lock file (a run started over inside a held lock;
    deleting the lock file would let another process lock a new one)."""
    import shutil

    for child in Path(folder).iterdir():
        if child.name == LOCK_NAME:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def check_output_folder(folder: str | Path) -> list[Path]:
    """The folders `run_lock(folder)` would create, innermost first; refuses with
    `NotADirectoryError` (one line naming the file and `--out`) a file where `folder` or one of
    its parents should be. Reads the file system only: the command lines call it on their
    output folder before they import torch (issue 36), `run_lock` again as it creates it."""
    folder = Path(folder)
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            if not candidate.is_dir():
                raise NotADirectoryError(
                    f"{candidate} is a file, not a folder"
                    + (f" (it would hold {folder})" if candidate != folder else "")
                    + ": choose another output folder (--out)"
                )
            break
        missing.append(candidate)
    return missing


def read_holder(folder: str | Path) -> dict[str, Any] | None:
    """The line the holder (or a killed holder) wrote into `folder`'s lock file, else None."""
    try:
        return _parse_holder(lock_path(folder).read_bytes())
    except OSError:
        return None


# -- internals ---------------------------------------------------------------------------------


def _make_folder(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; return the folders created, outermost first.

    A file where the folder (or one of its parents) should be raises `NotADirectoryError`
    (`check_output_folder`), a folder that cannot be created `FolderNotWritableError`: both bad
    input, before anything is written."""
    missing = check_output_folder(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        if error.errno not in _UNWRITABLE:
            raise
        raise FolderNotWritableError(folder, error) from None
    return list(reversed(missing))


def _acquire(folder: Path, created: list[Path], notice: Callable[[str], None]) -> _Held:
    path = lock_path(folder)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except FileNotFoundError:  # the folder was removed meanwhile (a holder's clean-up)
            created = _make_folder(folder) or created
            continue
        except OSError as error:  # a read-only folder or file system: refused before any write
            if error.errno not in _UNWRITABLE:
                raise
            _remove_empty(created)
            raise FolderNotWritableError(folder, error) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = _wait_for_holder_line(fd)
            finally:
                os.close(fd)
            raise RunLockedError(folder, holder, _describe(holder)) from None
        except OSError as error:  # e.g. ENOLCK: a file system without locks
            os.close(fd)
            if created:  # nobody else can be in a folder this call created: leave nothing
                path.unlink(missing_ok=True)
                _remove_empty(created)
            raise OSError(error.errno, error.strerror, str(path)) from None
        if _same_file(fd, path):
            break
        os.close(fd)  # the holder released and deleted the file after we opened it: again
    stale = _parse_holder(_read_fd(fd))
    if stale is not None:
        notice(
            f"note: {folder}: taking over its lock from a writer that ended without releasing "
            f"it ({_who(stale)}; killed?)"
        )
    line = json.dumps(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": _command_line(),
        }
    )
    os.ftruncate(fd, 0)
    os.pwrite(fd, (line + "\n").encode("utf-8"), 0)
    return _Held(fd=fd, path=path, pid=os.getpid(), created=created)


def _release(held: _Held) -> None:
    try:
        if _same_file(held.fd, held.path):
            held.path.unlink()
    finally:
        try:
            fcntl.flock(held.fd, fcntl.LOCK_UN)
        finally:
            os.close(held.fd)
    _remove_empty(held.created)


def _remove_empty(created: list[Path]) -> None:
    """Remove the folders of `created` (outermost first) that are empty, innermost first."""
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:
            break


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)


def _read_fd(fd: int) -> bytes:
    return os.pread(fd, 64 * 1024, 0)


def _parse_holder(data: bytes) -> dict[str, Any] | None:
    try:
        holder = json.loads(data.decode("utf-8").strip() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return holder if isinstance(holder, dict) else None


def _alive_here(holder: dict[str, Any]) -> bool | None:
    """Whether the recorded holder runs (None: another host, or no pid recorded)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return None
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError as error:
        return error.errno != errno.ESRCH
    return True


def _wait_for_holder_line(fd: int) -> dict[str, Any] | None:
    """The holder's line; a holder that has just taken the lock may not have written it yet, so
    an empty line or one naming a process that has exited is read again for up to a second."""
    deadline = time.monotonic() + _HOLDER_LINE_WAIT_S
    while True:
        holder = _parse_holder(_read_fd(fd))
        if holder is not None and _alive_here(holder) is not False:
            return holder
        if time.monotonic() >= deadline:
            return holder
        time.sleep(0.05)


def _who(holder: dict[str, Any]) -> str:
    text = f"pid {holder.get('pid')} on host {holder.get('host')}, started {holder.get('started')}"
    command = str(holder.get("command") or "")
    if command:
        text += f": {command if len(command) <= 160 else command[:157] + '...'}"
    return text


def _describe(holder: dict[str, Any] | None) -> str:
    if holder is None:
        return "a process that has not written its details yet"
    if _alive_here(holder) is False:
        return (
            f"its recorded holder, {_who(holder)}, has exited: a process it started still holds "
            "the lock, or a new command has just taken it"
        )
    return _who(holder)


def _command_line() -> str:
    """This process's command line, `python -m pipeline.cli ...` shown as `gmc-grpo ...`."""
    argv = list(sys.argv) or ["python"]
    program = Path(argv[0])
    name = "gmc-grpo" if program.parts[-2:] == ("pipeline", "cli.py") else program.name
    return shlex.join([name, *argv[1:]])


def _print_notice(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


__all__ = [
    "LOCK_NAME",
    "RunLockedError",
    "check_output_folder",
    "clear_folder",
    "holds_lock",
    "locks_folder",
    "read_holder",
    "run_lock",
]
