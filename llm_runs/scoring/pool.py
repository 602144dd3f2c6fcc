"""The scoring pool: math-verify's symbolic comparisons of answers in killable worker processes.

`Scorer.score` takes completions and reference answers: the last complete box of each completion
(`llm_runs.scoring.answers.extract_last_boxed`) is compared with its reference by the string
rules (`answers.compare_locally`) where they suffice, else by math-verify (LaTeX parsed by an
ANTLR grammar into sympy; plain expressions only when they consist of digits and arithmetic
operators) in a worker process; nothing is ever evaluated as code. `Scorer(decimal_rel_tol=...)`
is the documented tolerance option (docs/scoring.md).

- Every symbolic comparison runs in a worker process that can be killed, with a limit on the
  comparison's own **CPU time** (`Scorer.timeout_s`; `llm_runs.scoring.worker`: an interval
  timer on the process's CPU time, and the kernel's `RLIMIT_CPU` for code stuck in C), so a
  verdict does not depend on how busy the machine is. A comparison that reaches its limit is
  retried once with `RETRY_FACTOR` times the limit; one that reaches that too counts as
  incorrect and is counted (`ScoreStats.timeouts`), and the trainer and the evaluation report
  the count beside every reward mean and Pass@1. A wall-clock limit far above the CPU limit
  (`wall_limit_s`) is kept only as a backstop. Each worker also has an address-space limit
  (`RLIMIT_AS`). Workers are started as `python -m llm_runs.scoring.worker` (nothing
  re-imports the caller's `__main__`) and exit when the parent dies.
- Answers longer than `answers.MAX_ANSWER_CHARS` are never handed to sympy (only compared as
  strings).

Public API: `Scorer` (the batch API that uses all cores), `score_batch`, `is_correct` (one pair,
on a shared scorer), `ScoreStats`, `check_decimal_rel_tol`.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from gmc_grpo.fieldchecks import MAX_SCORER_TIMEOUT_S, number_problem
from llm_runs.scoring.answers import (
    MAX_ANSWER_CHARS,
    decide_locally,
    exact_decimals,
    extract_last_boxed,
    is_decimal_number,
)

# A comparison that used up its CPU limit is tried once more with this many times the limit
# (a rare slow but finite comparison then gets its verdict; one that does not end is cut
# twice). Ours: 2 keeps the worst case of an adversarial answer at 3 x the limit.
RETRY_FACTOR = 2.0
# The wall-clock backstop of one comparison, `WALL_FACTOR * cpu limit + WALL_SLACK_S`: only for
# a worker that stops using CPU without answering. 20 x: a worker on a 2-core machine among 24
# busy processes gets about 1/12 of a core (the load of the issue 36 measurement); the slack
# covers a worker's start-up and the pipe.
WALL_FACTOR = 20.0
WALL_SLACK_S = 10.0


def wall_limit_s(cpu_limit_s: float) -> float:
    """The wall-clock backstop of a comparison with `cpu_limit_s` seconds of CPU time."""
    return WALL_FACTOR * cpu_limit_s + WALL_SLACK_S


# --------------------------------------------------------------------------------------------
# The killable pool and the batch API
# --------------------------------------------------------------------------------------------


@dataclass
class ScoreStats:
    """Counters of one `Scorer`: items decided by string rules, by a worker, by timeout/crash.

    `retried`: comparisons that reached their CPU limit once and were tried again with
    `RETRY_FACTOR` times it; `timeouts`: those that reached the longer limit too (scored
    incorrect: the number reported beside rewards and Pass@1)."""

    string_match: int = 0
    rule_rejected: int = 0
    verified: int = 0
    retried: int = 0
    timeouts: int = 0
    crashes: int = 0
    too_long: int = 0
    no_answer: int = 0


# The folder that holds the `llm_runs` package: workers start there so `python -m` finds the
# same copy of the package as the parent, installed or not.
_PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent


class _Launcher:
    """Starts worker processes from one long-lived thread.

    Linux delivers `PR_SET_PDEATHSIG` when the *thread* that started a process exits, not the
    process: a worker started from a short-lived thread (a thread pool's) would be killed early.
    This thread lives as long as the process.
    """

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, args: list[str], pass_fds: tuple[int, ...]) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="scoring-launcher", daemon=True
                )
                self._thread.start()
        done: Future = Future()
        self._requests.put((args, pass_fds, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            args, pass_fds, done = self._requests.get()
            try:
                process = subprocess.Popen(
                    args,
                    pass_fds=pass_fds,
                    cwd=_PACKAGE_ROOT,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            except BaseException as exc:  # handed to the caller
                done.set_exception(exc)
            else:
                done.set_result(process)


_LAUNCHER = _Launcher()


class _Worker:
    """One worker process (`python -m llm_runs.scoring.worker`) and the parent's pipe ends."""

    def __init__(self, memory_mb: int, start_timeout: float) -> None:
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        args = [
            sys.executable,
            "-m",
            "llm_runs.scoring.worker",
            str(request_read),
            str(reply_write),
            str(os.getpid()),
            str(memory_mb),
        ]
        try:
            self.process = _LAUNCHER.popen(args, pass_fds=(request_read, reply_write))
        except BaseException:
            os.close(request_write)
            os.close(reply_read)
            raise
        finally:  # the child's ends: the worker holds its own copies
            os.close(request_read)
            os.close(reply_write)
        self.requests = Connection(request_write, readable=False)
        self.conn = Connection(reply_read, writable=False)  # what `wait()` watches
        self.task: tuple[int, float] | None = None  # (key, wall-clock backstop)
        status = detail = None
        if self.conn.poll(start_timeout):
            try:
                status, detail = json.loads(self.conn.recv_bytes())
            except (EOFError, OSError, ValueError):
                status, detail = "error", "the worker exited while starting"
        if status != "ready":
            self.kill()
            if status is None:
                raise RuntimeError(
                    f"a scoring worker did not start within {start_timeout:.0f} s "
                    "(is the machine overloaded?)"
                )
            raise RuntimeError(f"scoring worker failed to start: {detail}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(
        self,
        key: int,
        pair: tuple[str, str, float | None],
        cpu_limit_s: float,
    ) -> None:
        message = [key, *pair, cpu_limit_s]
        self.requests.send_bytes(json.dumps(message).encode("utf-8"))

    def receive(self) -> tuple[int, bool, bool]:
        """`(key, verdict, timed_out)` of the comparison the worker finished."""
        key, verdict, timed_out = json.loads(self.conn.recv_bytes())
        return int(key), bool(verdict), bool(timed_out)

    def killed_by_cpu_limit(self) -> bool:
        """Whether the process ended from `RLIMIT_CPU` (`SIGXCPU`: a comparison stuck in C code
        past its CPU limit; `llm_runs.scoring.worker`)."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return False
        return code == -signal.SIGXCPU

    def kill(self) -> None:
        """Kill the process (SIGKILL), reap it and release the pipes."""
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.requests.close()
        self.conn.close()

    def stop(self) -> None:
        """Ask the worker to exit; kill it if it does not."""
        try:
            self.requests.send_bytes(b"null")
        except (OSError, ValueError):
            pass
        try:
            self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


class Scorer:
    """Scores completions against references with a pool of killable worker processes.

    num_workers: worker processes (default: all cores, `os.cpu_count()`).
    timeout_s: limit on the CPU time (seconds) of one symbolic comparison, counted in its
        worker (not wall-clock: a busy machine does not change a verdict). A comparison that
        reaches it is retried once with `RETRY_FACTOR` times it; one that reaches that too
        counts as incorrect and in `stats.timeouts`. `wall_limit_s(limit)` is a wall-clock
        backstop only.
    memory_mb: address-space limit (`RLIMIT_AS`) of each worker; 0 disables it.
    decimal_rel_tol: None (default): a decimal equals a fraction or a constant only when it is
        exactly that value (`0.5` = `\\frac{1}{2}`; `0.333333` != `\\frac{1}{3}`, `3.1415926` !=
        `\\pi`). A number in (0, 1): a whole answer written as a decimal also matches a single
        number within that relative difference, `|a - b| <= tol * max(|a|, |b|)` (e.g. 1e-5
        accepts all three). Two plain decimals are always compared exactly (docs/scoring.md).

    Workers are separate Python processes (`python -m llm_runs.scoring.worker`), so a script
    needs no `if __name__ == "__main__":` guard, and they exit when this process dies. Use as a
    context manager, or call `close()`. Thread-safe (one batch at a time).
    """

    def __init__(
        self,
        num_workers: int | None = None,
        timeout_s: float = 5.0,
        memory_mb: int = 2048,
        decimal_rel_tol: float | None = None,
    ) -> None:
        check_decimal_rel_tol(decimal_rel_tol, "Scorer.decimal_rel_tol")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"Scorer.num_workers must be >= 1, got {num_workers}")
        problem = number_problem(timeout_s, above=0.0, at_most=MAX_SCORER_TIMEOUT_S)
        if problem:  # the rule of `EvalConfig.scorer_timeout_s` (`gmc_grpo.fieldchecks`)
            raise ValueError(f"Scorer.timeout_s={timeout_s!r}: {problem} (seconds)")
        if memory_mb < 0:
            raise ValueError(f"Scorer.memory_mb must be >= 0, got {memory_mb}")
        self.num_workers = num_workers or max(1, os.cpu_count() or 1)
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        self.decimal_rel_tol = None if decimal_rel_tol is None else float(decimal_rel_tol)
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.stats = ScoreStats()

    # -- lifecycle ---------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        return _Worker(self.memory_mb, start_timeout=120.0)

    def _ensure_workers(self, count: int) -> None:
        while len(self._workers) < count:
            self._workers.append(self._spawn())

    def worker_pids(self) -> list[int]:
        """Process ids of the running workers (started on demand by `score`)."""
        return [w.pid for w in self._workers]

    def close(self) -> None:
        """Stop every worker process."""
        with self._lock:
            for worker in self._workers:
                worker.stop()
            self._workers.clear()

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- scoring -----------------------------------------------------------------------------

    def score(self, completions: Sequence[str], references: Sequence[str]) -> list[bool]:
        """Correctness of each completion against its reference (same length sequences).

        The answer is the completion's last complete box; no box means incorrect. Pairs that the
        string rules decide (`compare_locally`) need no worker; the others go to the pool
        (identical pairs are decided once). `score_counted` also says which timed out.
        """
        return self.score_counted(completions, references)[0]

    def score_counted(
        self, completions: Sequence[str], references: Sequence[str]
    ) -> tuple[list[bool], list[bool]]:
        """`(verdicts, timed_out)` of each completion (`score`): `timed_out[i]` when item `i`
        is incorrect only because its comparison reached the CPU limit twice (the count callers
        report beside rewards and Pass@1)."""
        if len(completions) != len(references):
            raise ValueError(
                f"completions ({len(completions)}) and references ({len(references)}) "
                "must have the same length"
            )
        verdicts: list[bool] = [False] * len(completions)
        timed_out: list[bool] = [False] * len(completions)
        pending: dict[tuple[str, str, float | None], list[int]] = {}
        for index, (completion, reference) in enumerate(zip(completions, references, strict=True)):
            predicted = extract_last_boxed(completion)
            if not predicted:  # no complete box, or an empty one
                self.stats.no_answer += 1
                continue
            reference = str(reference).strip()
            if len(predicted) > MAX_ANSWER_CHARS or len(reference) > MAX_ANSWER_CHARS:
                verdicts[index] = predicted.strip() == reference
                self.stats.too_long += 1
                continue
            decided = decide_locally(predicted, reference)
            if isinstance(decided, bool):
                verdicts[index] = decided
                if decided:
                    self.stats.string_match += 1
                else:
                    self.stats.rule_rejected += 1
                continue
            reference_form, prediction_form = decided
            decimal = is_decimal_number(reference_form) or is_decimal_number(prediction_form)
            tolerance = self.decimal_rel_tol if decimal else None
            pair = (exact_decimals(reference_form), exact_decimals(prediction_form), tolerance)
            pending.setdefault(pair, []).append(index)
        if pending:
            results, out_of_time = self._verify_many(list(pending))
            for pair, verdict, late in zip(pending, results, out_of_time, strict=True):
                for index in pending[pair]:
                    verdicts[index] = verdict
                    timed_out[index] = late
        return verdicts, timed_out

    def _verify_many(
        self, pairs: list[tuple[str, str, float | None]]
    ) -> tuple[list[bool], list[bool]]:
        """math-verify verdicts of `(reference, prediction, tolerance)` triples, in the pool, and
        which of them timed out twice.

        Each comparison gets `timeout_s` CPU seconds; one that uses them up (the worker says
        so, or the kernel killed it with `SIGXCPU`, or it passed the wall-clock backstop) goes
        back into the queue once with `RETRY_FACTOR * timeout_s`, then counts as incorrect.
        """
        with self._lock:
            self._ensure_workers(min(self.num_workers, len(pairs)))
            results: list[bool] = [False] * len(pairs)
            limits = [self.timeout_s] * len(pairs)  # the CPU limit of each item's next try
            late = [False] * len(pairs)
            queue_ = list(range(len(pairs) - 1, -1, -1))  # pop() takes the next index
            busy: dict[Connection, _Worker] = {}
            idle = list(self._workers)

            def timed_out(key: int) -> None:
                if limits[key] == self.timeout_s:
                    self.stats.retried += 1
                    limits[key] = self.timeout_s * RETRY_FACTOR
                    queue_.append(key)
                else:
                    self.stats.timeouts += 1
                    late[key] = True

            while queue_ or busy:
                while queue_ and idle:
                    worker = idle.pop()
                    key = queue_.pop()
                    try:
                        worker.send(key, pairs[key], limits[key])
                    except (OSError, ValueError):
                        self.stats.crashes += 1
                        idle.append(self._replace(worker))
                        continue
                    worker.task = (key, time.monotonic() + wall_limit_s(limits[key]))
                    busy[worker.conn] = worker
                if not busy:
                    continue
                deadline = min(w.task[1] for w in busy.values() if w.task is not None)
                ready = wait(list(busy), timeout=max(0.0, deadline - time.monotonic()))
                for conn in ready:
                    worker = busy.pop(conn)  # type: ignore[arg-type]
                    key = worker.task[0] if worker.task is not None else -1
                    try:
                        key, verdict, out_of_time = worker.receive()
                    except (EOFError, OSError, ValueError):  # the worker died
                        if worker.killed_by_cpu_limit():  # stuck in C code past its limit
                            timed_out(key)
                        else:  # out of memory, or another crash
                            self.stats.crashes += 1
                        idle.append(self._replace(worker))
                        continue
                    worker.task = None
                    idle.append(worker)
                    if out_of_time:
                        timed_out(key)
                    else:
                        results[key] = verdict
                        self.stats.verified += 1
                now = time.monotonic()
                for conn, worker in list(busy.items()):
                    if worker.task is not None and worker.task[1] <= now:
                        del busy[conn]
                        timed_out(worker.task[0])
                        idle.append(self._replace(worker))
            return results, late

    def _replace(self, worker: _Worker) -> _Worker:
        """Kill `worker` and start a fresh one in its slot."""
        worker.kill()
        fresh = self._spawn()
        self._workers[self._workers.index(worker)] = fresh
        return fresh


# --------------------------------------------------------------------------------------------
# Convenience functions over a shared, lazily started scorer
# --------------------------------------------------------------------------------------------

_DEFAULT: Scorer | None = None
_DEFAULT_LOCK = threading.Lock()


def check_decimal_rel_tol(value: float | None, field: str) -> None:
    """Refuse a tolerance that is not None or a number in (0, 1) (`field` names the setting)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(
            f"{field}={value!r}: must be None (exact comparison) or a relative tolerance in "
            "(0, 1), e.g. 1e-5"
        )


def default_scorer() -> Scorer:
    """The process-wide scorer used by `is_correct` (started on first use, closed at exit)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = Scorer()
            atexit.register(_DEFAULT.close)
        return _DEFAULT


def is_correct(completion: str, reference: str) -> bool:
    """Whether the completion's last complete box is equivalent to `reference`.

    String rules first (`compare_locally`), else math-verify symbolic/numeric equivalence (gold
    first) in a killable worker with a time and memory bound; no box, a timeout or a crash give
    False. Works from a plain script (no `__main__` guard needed).
    """
    return default_scorer().score([completion], [reference])[0]


def score_batch(
    completions: Sequence[str],
    references: Sequence[str],
    *,
    num_workers: int | None = None,
    timeout_s: float = 5.0,
    memory_mb: int = 2048,
    decimal_rel_tol: float | None = None,
) -> list[bool]:
    """Score many completions with a fresh pool of `num_workers` processes (all cores default)."""
    with Scorer(
        num_workers=num_workers,
        timeout_s=timeout_s,
        memory_mb=memory_mb,
        decimal_rel_tol=decimal_rel_tol,
    ) as scorer:
        return scorer.score(completions, references)
