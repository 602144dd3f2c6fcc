"""The scoring worker process: math-verify equivalence of answer pairs, one at a time.

Started by `llm_runs.scoring.Scorer` as

    python -m llm_runs.scoring_worker REQUEST_FD REPLY_FD PARENT_PID MEMORY_MB INNER_TIMEOUT

so nothing re-imports the caller's `__main__` (multiprocessing's spawn start method does, and
fails in a script without an `if __name__ == "__main__":` guard). The two file descriptors are
the ends of two pipes inherited from the parent; messages are length-prefixed JSON
(`multiprocessing.connection.Connection.send_bytes`), never pickles:

- request `[key, reference, prediction, tolerance]` -> reply `[key, verdict]` (`tolerance`:
  null, or the relative tolerance of `Scorer.decimal_rel_tol`); request `null` -> exit;
- at start-up the worker sends `["ready", null]` or `["error", message]`.

The worker exits when its parent dies: `PR_SET_PDEATHSIG` (Linux) has the kernel send it SIGKILL
even while it is stuck in C code, and a watchdog thread that polls the parent id covers other
platforms (and the window before `prctl` runs). It also exits when the request pipe closes.
Model text is only parsed (math-verify's LaTeX grammar into sympy), never executed.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from multiprocessing.connection import Connection

# Seconds between two checks of the parent's id by the watchdog thread.
PARENT_POLL_S = 0.5


def _die_with_parent(parent_pid: int) -> None:
    """Exit when `parent_pid` is no longer this process's parent (see the module docstring)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl ran
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _limit_memory(memory_mb: int) -> None:
    """Cap the address space (`RLIMIT_AS`) at `memory_mb` MiB; 0 leaves it unlimited."""
    if memory_mb <= 0:
        return
    import resource

    limit = memory_mb * 1024 * 1024
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass


def verify_equivalent(
    reference: str, prediction: str, inner_timeout: int, tolerance: float | None = None
) -> bool:
    """math-verify equivalence of two answers, gold (reference) first.

    The parent hands decimals over as exact fractions (`llm_runs.scoring.exact_decimals`), so
    math-verify's float rounding does not apply. `tolerance` (the parent sets it only when one
    whole answer is a decimal): when they are not equal, two single real numbers within that
    relative difference, `|a - b| <= tolerance * max(|a|, |b|)`, also count as equal.

    Both are wrapped in `\\boxed{}` so math-verify's extraction takes exactly them. math-verify's
    own unit stripping is switched off (`units=False`): its list holds single letters (`m`, `s`,
    `t`, `h`, `c`, ...), so `2m` would equal `2`; `llm_runs.scoring` strips units itself, only
    where that is safe. Call it in the main thread (math-verify's timeouts use `signal.alarm`).
    """
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    normalization = NormalizationConfig(
        basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all"
    )
    config = [
        LatexExtractionConfig(boxed_match_priority=0, normalization_config=normalization),
        ExprExtractionConfig(),
    ]
    gold = parse(f"\\boxed{{{reference}}}", extraction_config=config, parsing_timeout=inner_timeout)
    if not gold:
        return False
    pred = parse(
        f"\\boxed{{{prediction}}}", extraction_config=config, parsing_timeout=inner_timeout
    )
    if not pred:
        return False
    if verify(gold, pred, timeout_seconds=inner_timeout):
        return True
    return tolerance is not None and numbers_within(gold[0], pred[0], tolerance)


def numbers_within(gold: object, pred: object, tolerance: float) -> bool:
    """Whether two parsed answers are single finite real numbers within `tolerance` (relative)."""
    import sympy

    if not isinstance(gold, sympy.Basic) or not isinstance(pred, sympy.Basic):
        return False
    try:
        a, b = sympy.N(gold, 30), sympy.N(pred, 30)
    except Exception:  # an expression sympy cannot evaluate
        return False
    if not (a.is_Number and b.is_Number and a.is_finite and b.is_finite):
        return False  # a symbol, a tuple, a complex number, infinity
    return bool(abs(a - b) <= sympy.Float(tolerance, 30) * max(abs(a), abs(b)))


def _send(conn: Connection, message: object) -> None:
    conn.send_bytes(json.dumps(message).encode("utf-8"))


def serve(requests: Connection, replies: Connection, inner_timeout: int) -> None:
    """Answer requests until `null` or a closed pipe (module docstring for the messages)."""
    while True:
        try:
            message = json.loads(requests.recv_bytes())
        except (EOFError, OSError, ValueError):
            return
        if message is None:
            return
        key, reference, prediction, *rest = message
        tolerance = float(rest[0]) if rest and rest[0] is not None else None
        try:
            verdict = verify_equivalent(str(reference), str(prediction), inner_timeout, tolerance)
        except BaseException:  # MemoryError, RecursionError, math-verify's TimeoutException, ...
            verdict = False
        try:
            _send(replies, [key, verdict])
        except (OSError, ValueError):
            return


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m llm_runs.scoring_worker` (arguments: module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    request_fd, reply_fd, parent_pid, memory_mb, inner_timeout = (int(a) for a in args)
    _die_with_parent(parent_pid)
    _limit_memory(memory_mb)
    # math-verify logs the whole input on a timeout; model text can be megabytes.
    logging.disable(logging.CRITICAL)
    requests = Connection(request_fd, writable=False)
    replies = Connection(reply_fd, readable=False)
    try:
        import math_verify  # noqa: F401  (warm the import before declaring readiness)
    except ImportError as exc:
        _send(replies, ["error", f"math-verify is not installed: {exc}"])
        return 1
    _send(replies, ["ready", None])
    serve(requests, replies, inner_timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
