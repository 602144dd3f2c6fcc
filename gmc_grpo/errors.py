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

Set the environment variable `GMC_GRPO_TRACEBACK=1` to get the traceback instead (debugging).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

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
CONTINUE_HINT = "rerun the same command to continue"


def one_line(error: BaseException) -> str:
    """The message of `error` on one line (newlines folded into spaces)."""
    text = str(error) or type(error).__name__
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def io_failure_message(error: OSError, continue_hint: str = CONTINUE_HINT) -> str:
    """`cannot use <file>: <reason> [errno N]; ...` for a refused write or read."""
    where = error.filename if error.filename is not None else "a file of the run"
    reason = error.strerror or one_line(error)
    code = f" [errno {error.errno}]" if error.errno is not None else ""
    return (
        f"cannot write or read {where}: {reason}{code}. What was written before is kept: free "
        f"space or make the folder writable (or choose another --out), then {continue_hint}"
    )


def report_error(
    prog: str, error: BaseException, *, continue_hint: str = CONTINUE_HINT
) -> int | None:
    """Print the one-line report of `error` to stderr and return the exit status; None when the
    error is not one the command lines report (then the caller re-raises it)."""
    if os.environ.get("GMC_GRPO_TRACEBACK"):
        return None
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
    except (ValueError, OSError, PluginImportError) as error:
        code = report_error(prog, error, continue_hint=continue_hint)
        if code is None:
            raise
        return code
