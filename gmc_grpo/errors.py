"""How the command lines report errors: one line, no traceback, an exit status that says which kind.

- **Bad input** (a config value, a missing or unreadable file, a refused resume, an output
  folder that is a file or cannot be written: `gmc_grpo.runlock.FolderNotWritableError`):
  `ValueError`, `FileNotFoundError`, `IsADirectoryError`, `NotADirectoryError`,
  `FileExistsError`, and a plugin module that cannot be imported
  (`gmc_grpo.plugins.PluginImportError`) -> exit status 2 and `"<prog>: error: <message>"`; the
  messages name the field or file and the fix (the range rules: `gmc_grpo.fieldchecks`).
- **The machine refused a write or a read during a run** (a full disk, a folder made
  unwritable meanwhile, an I/O error):
  any other `OSError` -> exit status 1 and a line naming the file, the reason and how to continue;
  records are appended line by line and summaries and checkpoints renamed into place, so the run
  folder keeps everything written before and the same command continues it.

  safetensors' `SafetensorError` for a full disk is turned into that `OSError` at the write
  sites (`write_site`); the line's fix fits the reason (a full disk: free space).
- **A name longer than the file system takes** (`ENAMETOOLONG`, e.g. an over-long `--out`):
  bad input, exit status 2, "choose a shorter --out".
- **Ctrl-C** (`KeyboardInterrupt`): exit status 130 (128 + SIGINT, the shell's convention) and
  one line, no traceback; what was written is kept as after a kill.

Set the environment variable `GMC_GRPO_TRACEBACK=1` to get the traceback instead (debugging).
"""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gmc_grpo.plugins import PluginImportError

BAD_INPUT = (
    ValueError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    FileExistsError,
    PluginImportError,
)
EXIT_BAD_INPUT = 2
EXIT_IO_FAILURE = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C
CONTINUE_HINT = "rerun the same command to continue"


@contextmanager
def write_site(path: str | Path) -> Iterator[None]:
    """Writes to `path` (a file or a folder being filled): a refused write leaves as an `OSError`
    naming `path`, so the command lines report it in one line (`report_error`: exit status 1,
    the file and the fix). safetensors reports a full disk as a `SafetensorError` ("I/O error:
    No space left on device (os error 28)"), not an `OSError`: it becomes one with that errno.
    The one helper every write site of checkpoints, model copies and the rollout cache uses."""
    try:
        yield
    except OSError as error:
        if error.filename is None:
            error.filename = str(path)
        raise
    except Exception as error:
        if type(error).__name__ != "SafetensorError":
            raise
        found = re.search(r"os error (\d+)", str(error))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code), str(path)) from None


@contextmanager
def removed_on_failure(folder: str | Path) -> Iterator[None]:
    """A command's output `folder`: when the block fails (any exception, Ctrl-C too), the
    folders it created there (`folder` and missing parents) are removed again if they are still
    empty, so a refused command leaves nothing behind (`llm bias --run /nonexistent --out o` used
    to leave `o/`). A folder with anything in it is kept: it may hold work a rerun continues."""
    folder = Path(folder)
    created = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        created.append(probe)
        probe = probe.parent
    try:
        yield
    except BaseException:
        for path in created:  # innermost first
            try:
                path.rmdir()  # only when empty
            except OSError:
                break
        raise


def one_line(error: BaseException) -> str:
    """The message of `error` on one line (newlines folded into spaces)."""
    text = str(error) or type(error).__name__
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


# errno -> the fix of a refused write, in the one line `io_failure_message` prints
_FIXES = {
    errno.ENOSPC: "free space on that disk (or choose another --out)",
    errno.EDQUOT: "free space within your disk quota (or choose another --out)",
    errno.EACCES: "make the folder writable (or choose another --out)",
    errno.EPERM: "make the folder writable (or choose another --out)",
    errno.EROFS: "the disk is read-only: choose another --out",
}


def io_failure_message(error: OSError, continue_hint: str = CONTINUE_HINT) -> str:
    """`cannot write or read <file>: <reason> [errno N]. ...` for a refused write or read, with
    the fix that fits the reason (`_FIXES`)."""
    where = error.filename if error.filename is not None else "a file of the run"
    reason = error.strerror or one_line(error)
    code = f" [errno {error.errno}]" if error.errno is not None else ""
    fix = _FIXES.get(
        error.errno, "free space or make the folder writable (or choose another --out)"
    )
    return (
        f"cannot write or read {cut(str(where))}: {reason}{code}. What was written before is "
        f"kept: {fix}, then {continue_hint}"
    )


def cut(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters for a message (the rest counted)."""
    return text if len(text) <= limit else f"{text[: limit - 3]}... ({len(text)} characters)"


def report_error(
    prog: str, error: BaseException, *, continue_hint: str = CONTINUE_HINT
) -> int | None:
    """Print the one-line report of `error` to stderr and return the exit status; None when the
    error is not one the command lines report (then the caller re-raises it)."""
    if os.environ.get("GMC_GRPO_TRACEBACK"):
        return None
    if isinstance(error, OSError) and error.errno == errno.ENAMETOOLONG:  # input, not the disk
        name = cut(str(error.filename or "a path"), 80)
        print(
            f"{prog}: error: {name}: a file or folder name is too long for the file system (at "
            "most 255 bytes a name): choose a shorter --out",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if isinstance(error, BAD_INPUT):
        print(f"{prog}: error: {one_line(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(error, OSError):
        print(f"{prog}: error: {io_failure_message(error, continue_hint)}", file=sys.stderr)
        return EXIT_IO_FAILURE
    return None


def run_reported(
    prog: str, command: Callable[[], int], *, continue_hint: str = CONTINUE_HINT
) -> int:
    """`command()`, with bad input and refused writes reported as one line (`report_error`)."""
    try:
        return command()
    except KeyboardInterrupt:
        if os.environ.get("GMC_GRPO_TRACEBACK"):
            raise
        print(f"{prog}: interrupted (Ctrl-C); {continue_hint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, OSError, PluginImportError) as error:
        code = report_error(prog, error, continue_hint=continue_hint)
        if code is None:
            raise
        return code
