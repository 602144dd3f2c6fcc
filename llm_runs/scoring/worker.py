"""The scoring worker process: math-verify equivalence of answer pairs, one at a time.

Started by `llm_runs.scoring.pool.Scorer` as

    python -m llm_runs.scoring.worker REQUEST_FD REPLY_FD PARENT_PID MEMORY_MB

so nothing re-imports the caller's `__main__` (multiprocessing's spawn start method does, and
fails in a script without an `if __name__ == "__main__":` guard). The two file descriptors are
the ends of two pipes inherited from the parent; messages are length-prefixed JSON
(`multiprocessing.connection.Connection.send_bytes`), never pickles:

- request `[key, reference, prediction, tolerance, cpu_limit_s]` -> reply
  `[key, verdict, timed_out]` (`tolerance`: null, or the relative tolerance of
  `Scorer.decimal_rel_tol`; `timed_out`: the comparison used up `cpu_limit_s` seconds of this
  process's CPU time, and `verdict` is then false); request `null` -> exit;
- at start-up the worker sends `["ready", null]` or `["error", message]`.

**The limit is CPU time, not wall-clock time** (issue 36): a busy machine slows a comparison
down but does not make it use more CPU, so a verdict does not depend on the machine's load.
Two mechanisms count it: an interval timer on the process's CPU time (`ITIMER_PROF`, whose
`SIGPROF` stops a comparison running Python code at `cpu_limit_s`) and, for a comparison stuck
in C code that no signal handler interrupts (a power tower in GMP), the kernel's `RLIMIT_CPU`,
set before each comparison to the CPU seconds used so far plus `cpu_limit_s` plus one (whole
seconds): past it the kernel kills the process with `SIGXCPU`, which the parent counts as a
timeout. math-verify's own wall-clock alarms (`signal.alarm`) are switched off.

The worker exits when its parent dies: `PR_SET_PDEATHSIG` (Linux) has the kernel send it SIGKILL
even while it is stuck in C code, and a watchdog thread that polls the parent id covers other
platforms (and the window before `prctl` runs). It also exits when the request pipe closes.
Model text is only parsed (math-verify's LaTeX grammar into sympy), never executed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import signal
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


class CPULimitReached(BaseException):
    """The comparison used up its CPU time (`SIGPROF`). A `BaseException`, so that math-verify's
    and sympy's `except Exception` clauses do not turn it into an ordinary false verdict."""


def _on_cpu_limit(signum: int, frame: object) -> None:
    raise CPULimitReached


def cpu_seconds() -> float:
    """CPU time (user + system) this process has used, in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def verify_within(
    reference: str, prediction: str, cpu_limit_s: float, tolerance: float | None = None
) -> tuple[bool, bool]:
    """`(verdict, timed_out)`: `verify_equivalent` stopped after `cpu_limit_s` seconds of this
    process's CPU time (module docstring: `ITIMER_PROF`, and `RLIMIT_CPU` for C code). Call it in
    the main thread (signal handlers run there)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    # one whole second past the timer's limit (module docstring): without it the kernel's limit
    # could fall a few milliseconds after the timer's and kill the process while it handles the
    # timer (found in the full test suite: pytest killed by SIGXCPU, exit 152)
    ceiling = math.ceil(cpu_seconds() + cpu_limit_s) + 1
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    previous = signal.signal(signal.SIGPROF, _on_cpu_limit)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (ceiling, hard))
        signal.setitimer(signal.ITIMER_PROF, cpu_limit_s)
        return verify_equivalent(reference, prediction, tolerance), False
    except CPULimitReached:
        return False, True
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        signal.signal(signal.SIGPROF, previous)


def verify_equivalent(reference: str, prediction: str, tolerance: float | None = None) -> bool:
    """math-verify equivalence of two answers, gold (reference) first.

    The parent hands decimals over as exact fractions (`llm_runs.scoring.answers.exact_decimals`), so
    math-verify's float rounding does not apply. `tolerance` (the parent sets it only when one
    whole answer is a decimal): when they are not equal, two single real numbers within that
    relative difference, `|a - b| <= tolerance * max(|a|, |b|)`, also count as equal.

    Both are wrapped in `\\boxed{}` so math-verify's extraction takes exactly them. math-verify's
    own unit stripping is switched off (`units=False`): its list holds single letters (`m`, `s`,
    `t`, `h`, `c`, ...), so `2m` would equal `2`; `llm_runs.scoring` strips units itself, only
    where that is safe. math-verify's wall-clock timeouts are off (`parsing_timeout=None`,
    `timeout_seconds=None`): `verify_within` bounds the comparison's CPU time instead.
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
    gold = parse(f"\\boxed{{{reference}}}", extraction_config=config, parsing_timeout=None)
    if not gold:
        return False
    pred = parse(f"\\boxed{{{prediction}}}", extraction_config=config, parsing_timeout=None)
    if not pred:
        return False
    if verify(gold, pred, timeout_seconds=None):
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


def serve(requests: Connection, replies: Connection) -> None:
    """Answer requests until `null` or a closed pipe (module docstring for the messages)."""
    while True:
        try:
            message = json.loads(requests.recv_bytes())
        except (EOFError, OSError, ValueError):
            return
        if message is None:
            return
        key, reference, prediction, tolerance, cpu_limit_s = message
        tolerance = float(tolerance) if tolerance is not None else None
        try:
            verdict, timed_out = verify_within(
                str(reference), str(prediction), float(cpu_limit_s), tolerance
            )
        except BaseException:  # MemoryError, RecursionError, ...
            verdict, timed_out = False, False
        try:
            _send(replies, [key, verdict, timed_out])
        except (OSError, ValueError):
            return


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m llm_runs.scoring.worker` (arguments: module docstring)."""
    args = sys.argv[1:] if argv is None else argv
    request_fd, reply_fd, parent_pid, memory_mb = (int(a) for a in args)
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
    serve(requests, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
