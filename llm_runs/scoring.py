"""Answer scoring: the last complete `\\boxed{...}` of a completion against a reference answer.

Model text is untrusted. The rules this module keeps:

- Nothing is ever evaluated as code. Extraction and normalisation are linear-time string scans;
  symbolic equivalence uses math-verify (LaTeX parsed by an ANTLR grammar into sympy; plain
  expressions only when they consist of digits and arithmetic operators).
- Every symbolic comparison runs in a worker process that can be killed: a per-item wall-clock
  timeout (the worker is killed and replaced, the item counts as incorrect) and an address-space
  limit (`RLIMIT_AS`) on each worker. math-verify's own `signal.alarm` timeouts are kept as a first,
  cheaper line, but they cannot interrupt a computation stuck in C code (a power tower), hence the
  kill.
- Answers longer than `MAX_ANSWER_CHARS` are never handed to sympy (only compared as strings).

Public API: `extract_last_boxed`, `normalize_answer`, `is_correct`, `Scorer` (the batch API that
uses all cores) and `score_batch`.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing as mp
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

# Boxed answers longer than this are judged by string comparison only (no parser, no sympy):
# every reference answer of the seven datasets is far shorter.
MAX_ANSWER_CHARS = 1000

# Box commands recognised by `extract_last_boxed`, longest first so `\boxed` is not read as a
# prefix of a longer command name.
_BOX_COMMANDS = ("\\boxed", "\\fbox")


# --------------------------------------------------------------------------------------------
# Extraction (pure, linear time)
# --------------------------------------------------------------------------------------------


_BRACE_TOKENS = re.compile(r"\\[{}\\]|[{}]")


def _match_braces(text: str, start: int = 0) -> dict[int, int]:
    """Map the index of every `{` at or after `start` to the index of its matching `}`.

    One left-to-right pass over brace tokens only. Escaped braces `\\{` and `\\}` are literal
    characters and take no part in matching; `\\\\` (a LaTeX line break) is skipped as a unit so
    `\\\\{` opens a group. Unmatched `{` are absent from the result.
    """
    matches: dict[int, int] = {}
    stack: list[int] = []
    for token in _BRACE_TOKENS.finditer(text, start):
        ch = token.group()
        if ch == "{":
            stack.append(token.start())
        elif ch == "}" and stack:
            matches[stack.pop()] = token.start()
    return matches


def _box_starts(text: str) -> list[tuple[int, int]]:
    """Positions `(start, end_of_command)` of every `\\boxed` / `\\fbox` command, in text order.

    A command must not continue with a letter (`\\boxedfoo` is another command).
    """
    starts: list[tuple[int, int]] = []
    for command in _BOX_COMMANDS:
        pos = text.find(command)
        while pos != -1:
            end = pos + len(command)
            if end >= len(text) or not text[end].isalpha():
                starts.append((pos, end))
            pos = text.find(command, end)
    starts.sort()
    return starts


def _unbraced_argument(text: str, pos: int) -> str | None:
    """The argument of `\\boxed 5`: after at least one space, up to whitespace, `$` or end."""
    if pos >= len(text) or text[pos] != " ":
        return None
    while pos < len(text) and text[pos] == " ":
        pos += 1
    end = pos
    while end < len(text) and not text[end].isspace() and text[end] != "$":
        end += 1
    token = text[pos:end]
    return token if token and token[0] not in "{}" else None


def extract_last_boxed(text: str) -> str | None:
    """Content of the last complete `\\boxed{...}` (or `\\fbox{...}`, or `\\boxed 5`) in `text`.

    Braces are matched (nested groups are kept, escaped `\\{ \\}` are literal). A box whose brace is
    never closed is not complete and is skipped; if no complete box exists the result is `None`.
    Whitespace around the content is stripped. Runs in time linear in `len(text)`.
    Call it on the completion only, never on prompt + completion (the demonstrations are boxed).
    """
    starts = _box_starts(text)
    if not starts:
        return None
    # Braces before the first box cannot change how braces after it are matched.
    matches = _match_braces(text, starts[0][0])
    for _, end in reversed(starts):
        brace = end
        while brace < len(text) and text[brace] in " \t":
            brace += 1
        if brace < len(text) and text[brace] == "{":
            close = matches.get(brace)
            if close is not None:
                return text[brace + 1 : close].strip()
            continue
        token = _unbraced_argument(text, end)
        if token is not None:
            return token.strip()
    return None


# --------------------------------------------------------------------------------------------
# Normalisation (pure string rules, applied before any symbolic comparison)
# --------------------------------------------------------------------------------------------

_TEXT_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|rm)\s*\{([^{}]*)\}")
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_CHOICE = re.compile(r"^\(?([A-Ea-e])\)?$")
_UNIT_WORDS = (
    "units",
    "unit",
    "square",
    "sq",
    "cubic",
    "inches",
    "inch",
    "feet",
    "foot",
    "ft",
    "cm",
    "mm",
    "km",
    "meters",
    "meter",
    "miles",
    "mile",
    "mph",
    "hours",
    "hour",
    "minutes",
    "minute",
    "seconds",
    "second",
    "degrees",
    "degree",
    "dollars",
    "dollar",
    "cents",
    "cent",
    "pounds",
    "pound",
    "days",
    "day",
)
_TRAILING_UNITS = re.compile(
    r"^(.*?\d)\s*(?:" + "|".join(_UNIT_WORDS) + r")(?:\^?\{?[23]\}?)?$", re.IGNORECASE
)


def normalize_answer(answer: str) -> str:
    """Canonical string form of an answer, for a cheap exact comparison.

    Removes spacing commands and spaces, `\\left`/`\\right`, `\\$`, `^\\circ`, `\\%`, a trailing
    period, `\\text{...}`-style wrappers (keeping their content), trailing unit words after a
    number, `{,}` and thousands separators in plain numbers; `\\dfrac`/`\\tfrac` become `\\frac`;
    a multiple-choice letter `(C)` becomes `C`. Idempotent; linear time on bounded input.
    """
    s = answer.strip()
    s = s.replace("\\!", "").replace("\\,", "").replace("\\;", "").replace("\\:", "")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("\\$", "").replace("$", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\circ", "")
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace("{,}", ",")
    for _ in range(3):  # nested wrappers such as \text{\textbf{C}}
        s = _TEXT_WRAPPERS.sub(r"\1", s)
    s = s.strip()
    unit_match = _TRAILING_UNITS.match(s)
    if unit_match:
        s = unit_match.group(1)
    s = "".join(s.split())
    s = s.rstrip(".")
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    choice = _CHOICE.match(s)
    if choice:
        s = choice.group(1).upper()
    return s


# --------------------------------------------------------------------------------------------
# Symbolic equivalence (runs only inside a worker process)
# --------------------------------------------------------------------------------------------


def _verify_in_worker(reference: str, prediction: str, inner_timeout: int) -> bool:
    """math-verify equivalence of two extracted answers, gold (reference) first.

    Both answers are wrapped in `\\boxed{}` so math-verify's extraction takes exactly them.
    Runs inside a scoring worker (main thread, so math-verify's `signal.alarm` works).
    """
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    gold = parse(f"\\boxed{{{reference}}}", extraction_config=config, parsing_timeout=inner_timeout)
    if not gold:
        return False
    pred = parse(
        f"\\boxed{{{prediction}}}", extraction_config=config, parsing_timeout=inner_timeout
    )
    if not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=inner_timeout))


def _worker_main(conn: Connection, memory_mb: int, inner_timeout: int) -> None:
    """Scoring worker: limit memory, import math-verify, then answer `(key, ref, pred)` requests."""
    import resource

    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):
            pass
    # math-verify logs the whole input on a timeout; model text can be megabytes.
    logging.disable(logging.CRITICAL)
    try:
        import math_verify  # noqa: F401  (warm the import before declaring readiness)
    except ImportError as exc:
        conn.send(("error", f"math-verify is not installed: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        key, reference, prediction = message
        try:
            verdict = _verify_in_worker(reference, prediction, inner_timeout)
        except BaseException:  # MemoryError, RecursionError, math-verify's TimeoutException, ...
            verdict = False
        try:
            conn.send((key, verdict))
        except (OSError, ValueError):
            return


# --------------------------------------------------------------------------------------------
# The killable pool and the batch API
# --------------------------------------------------------------------------------------------


@dataclass
class ScoreStats:
    """Counters of one `Scorer`: items decided by string match, by a worker, by timeout/crash."""

    string_match: int = 0
    verified: int = 0
    timeouts: int = 0
    crashes: int = 0
    too_long: int = 0
    no_answer: int = 0


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, ctx, memory_mb: int, inner_timeout: int, start_timeout: float) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(
            target=_worker_main, args=(child, memory_mb, inner_timeout), daemon=True
        )
        self.process.start()
        child.close()
        if not self.conn.poll(start_timeout):
            self.kill()
            raise RuntimeError(
                f"a scoring worker did not start within {start_timeout:.0f} s "
                "(is the machine overloaded?)"
            )
        status, detail = self.conn.recv()
        if status != "ready":
            self.kill()
            raise RuntimeError(f"scoring worker failed to start: {detail}")
        self.task: tuple[int, float] | None = None  # (key, deadline)

    def kill(self) -> None:
        """Kill the process (SIGKILL) and release the pipe."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        """Ask the worker to exit; kill it if it does not."""
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(timeout=1)
        self.kill()


class Scorer:
    """Scores completions against references with a pool of killable worker processes.

    num_workers: worker processes (default: all cores, `os.cpu_count()`).
    timeout_s: wall-clock limit per symbolic comparison; past it the worker is killed and
        replaced and the item counts as incorrect.
    memory_mb: address-space limit (`RLIMIT_AS`) of each worker; 0 disables it.
    start_method: multiprocessing start method for workers ("spawn" default: safe next to a
        process that holds threads, e.g. torch or vLLM).

    Use as a context manager, or call `close()`. Thread-safe (one batch at a time).
    """

    def __init__(
        self,
        num_workers: int | None = None,
        timeout_s: float = 5.0,
        memory_mb: int = 2048,
        start_method: str = "spawn",
    ) -> None:
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"Scorer.num_workers must be >= 1, got {num_workers}")
        if timeout_s <= 0:
            raise ValueError(f"Scorer.timeout_s must be > 0, got {timeout_s}")
        if memory_mb < 0:
            raise ValueError(f"Scorer.memory_mb must be >= 0, got {memory_mb}")
        self.num_workers = num_workers or max(1, os.cpu_count() or 1)
        self.timeout_s = float(timeout_s)
        self.memory_mb = int(memory_mb)
        # math-verify's own alarm fires first (whole seconds, at least 1) for interruptible work.
        self._inner_timeout = max(1, int(self.timeout_s * 0.6))
        self._ctx = mp.get_context(start_method)
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.stats = ScoreStats()

    # -- lifecycle ---------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        return _Worker(self._ctx, self.memory_mb, self._inner_timeout, start_timeout=120.0)

    def _ensure_workers(self, count: int) -> None:
        while len(self._workers) < count:
            self._workers.append(self._spawn())

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

        The answer is the completion's last complete box; no box means incorrect. Pairs with
        equal normalised strings are correct without a worker; the others go to the pool
        (identical pairs are decided once).
        """
        if len(completions) != len(references):
            raise ValueError(
                f"completions ({len(completions)}) and references ({len(references)}) "
                "must have the same length"
            )
        verdicts: list[bool] = [False] * len(completions)
        pending: dict[tuple[str, str], list[int]] = {}
        for index, (completion, reference) in enumerate(zip(completions, references, strict=True)):
            predicted = extract_last_boxed(completion)
            if not predicted:  # no complete box, or an empty one
                self.stats.no_answer += 1
                continue
            decided = _string_verdict(predicted, str(reference))
            if decided is not None:
                verdicts[index] = decided
                if decided:
                    self.stats.string_match += 1
                else:
                    self.stats.too_long += 1
                continue
            pending.setdefault((str(reference).strip(), predicted), []).append(index)
        if pending:
            results = self._verify_many(list(pending))
            for pair, verdict in zip(pending, results, strict=True):
                for index in pending[pair]:
                    verdicts[index] = verdict
        return verdicts

    def _verify_many(self, pairs: list[tuple[str, str]]) -> list[bool]:
        with self._lock:
            self._ensure_workers(min(self.num_workers, len(pairs)))
            results: list[bool] = [False] * len(pairs)
            queue = list(range(len(pairs) - 1, -1, -1))  # pop() takes the next index
            busy: dict[Connection, _Worker] = {}
            idle = list(self._workers)
            while queue or busy:
                while queue and idle:
                    worker = idle.pop()
                    key = queue.pop()
                    reference, prediction = pairs[key]
                    try:
                        worker.conn.send((key, reference, prediction))
                    except (OSError, ValueError):
                        self.stats.crashes += 1
                        idle.append(self._replace(worker))
                        continue
                    worker.task = (key, time.monotonic() + self.timeout_s)
                    busy[worker.conn] = worker
                if not busy:
                    continue
                deadline = min(w.task[1] for w in busy.values() if w.task is not None)
                ready = wait(list(busy), timeout=max(0.0, deadline - time.monotonic()))
                for conn in ready:
                    worker = busy.pop(conn)  # type: ignore[arg-type]
                    try:
                        key, verdict = conn.recv()  # type: ignore[union-attr]
                        results[key] = bool(verdict)
                        self.stats.verified += 1
                        worker.task = None
                        idle.append(worker)
                    except (EOFError, OSError):  # the worker died (e.g. out of memory)
                        self.stats.crashes += 1
                        idle.append(self._replace(worker))
                now = time.monotonic()
                for conn, worker in list(busy.items()):
                    if worker.task is not None and worker.task[1] <= now:
                        del busy[conn]
                        self.stats.timeouts += 1
                        idle.append(self._replace(worker))
            return results

    def _replace(self, worker: _Worker) -> _Worker:
        """Kill `worker` and start a fresh one in its slot."""
        worker.kill()
        fresh = self._spawn()
        self._workers[self._workers.index(worker)] = fresh
        return fresh


def _string_verdict(predicted: str, reference: str) -> bool | None:
    """Decide by strings when possible: True on a normalised match, False when too long to parse.

    `None` means "ask math-verify".
    """
    if len(predicted) > MAX_ANSWER_CHARS or len(reference) > MAX_ANSWER_CHARS:
        return predicted.strip() == reference.strip()
    if normalize_answer(predicted) == normalize_answer(reference):
        return True
    return None


# --------------------------------------------------------------------------------------------
# Convenience functions over a shared, lazily started scorer
# --------------------------------------------------------------------------------------------

_DEFAULT: Scorer | None = None
_DEFAULT_LOCK = threading.Lock()


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

    Exact after normalisation, else math-verify symbolic/numeric equivalence (gold first) in a
    killable worker with a time and memory bound; no box, a timeout or a crash give False.
    """
    return default_scorer().score([completion], [reference])[0]


def score_batch(
    completions: Sequence[str],
    references: Sequence[str],
    *,
    num_workers: int | None = None,
    timeout_s: float = 5.0,
    memory_mb: int = 2048,
) -> list[bool]:
    """Score many completions with a fresh pool of `num_workers` processes (all cores default)."""
    with Scorer(num_workers=num_workers, timeout_s=timeout_s, memory_mb=memory_mb) as scorer:
        return scorer.score(completions, references)
