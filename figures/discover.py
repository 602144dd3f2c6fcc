"""Find run directories and say what each holds (reads `config.json` and the JSONL records only).

A run directory is one with a `config.json` of the form `{"config": {...}, "environment": {...}}`
(`gmc_grpo.run_writer.RunWriter`); Hugging Face model folders (also with a `config.json`) and the
`checkpoints/`, `outputs/`, `base_model/` and `cache/` subtrees are skipped.

Kinds:
- `llm_train`: `gmc-grpo llm train` (config has `method` and `rollout_prompts`).
- `llm_eval`: `gmc-grpo llm eval` (config has `benchmarks` and `decodings`); attached to the
  training run whose folder holds it or whose checkpoint it evaluated.
- `toy_sweep`: `gmc-grpo toy sweep` (config has `delays`/`target_kls`, or a `results.csv`).
- `toy_train`: toy learners (metrics rows with `policy/objective` or `ratio/kl_exact`).
- `other`: anything else (listed, not drawn).

A toy training directory whose metrics rows carry `method` (and/or `delay`) columns is split into
one `Run` per value, so every run below is one (method, setting) curve.

A run whose records cannot be read (a corrupt line in `metrics.jsonl`, a damaged `config.json` or
`summary.json`, a newer record schema) is skipped and reported as a `DamagedRun` (file, line,
reason); the other runs are read as usual.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmc_grpo.json_files import RecordFileError, read_json
from gmc_grpo.records import (
    RECORD_FILES,
    RunRecord,
    describe_missing,
    missing_metric_rows,
    read_run,
)

SKIP_DIRS = frozenset(
    {
        "checkpoints",
        "outputs",
        "base_model",
        "initial_model",
        "figures",
        "cache",  # a suite's shared initial policies and rollouts (`llm_runs.cache`)
        ".git",
        "__pycache__",
    }
)
KINDS: tuple[str, ...] = ("llm_train", "llm_eval", "toy_train", "toy_sweep", "other")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


@dataclass
class Run:
    """One run (or one method's slice of a toy training run) and what it is.

    `evals`: the run's own evaluation rows plus those of the eval runs attached to it, one row per
    `(step, benchmark, decoding)` (a later row replaces an earlier one).
    """

    record: RunRecord
    kind: str
    method: str | None = None
    schedule: str | None = None
    delay: int | None = None
    group_size: int | None = None
    model: str | None = None
    eps: float | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    eval_runs: list[Path] = field(default_factory=list)
    train_run: Path | None = None
    experiment: str | None = None
    """toy training runs: the `kind` of the experiment whose folder holds the run (its parent's
    `experiment.json`), None outside an experiment"""

    @property
    def path(self) -> Path:
        return self.record.path

    @property
    def config(self) -> dict[str, Any]:
        return inner_config(self.record)

    @property
    def name(self) -> str:
        suffix = f"[{self.method}]" if self.kind == "toy_train" and self.method else ""
        return self.path.name + suffix

    @property
    def torn(self) -> dict[str, int]:
        """Record file -> line number of its torn last line, left out (`RunRecord.torn`)."""
        return self.record.torn

    @property
    def eval_steps(self) -> list[int]:
        return sorted({int(r["step"]) for r in self.evals if r.get("step") is not None})

    @property
    def benchmarks(self) -> list[str]:
        return sorted({str(r["benchmark"]) for r in self.evals if "benchmark" in r})

    def describe(self, root: Path | None = None) -> str:
        """One line: path (relative to `root` when under it), kind, method, schedule, delay, G,
        model, steps, evaluations."""
        parts = [self.kind]
        for key in ("method", "schedule", "delay", "group_size", "model"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key}={value}")
        parts.append(f"steps={len(self.metrics)}")
        if self.torn:
            parts.append("(torn last line left out: " + ", ".join(sorted(self.torn)) + ")")
        missing = missing_metric_rows(self.record)
        if missing:
            parts.append(f"(missing rows: {describe_missing(missing)})")
        if self.evals:
            steps = self.eval_steps
            span = f"{steps[0]}..{steps[-1]}" if steps else "-"
            parts.append(f"evals={len(self.evals)} (steps {span}; {','.join(self.benchmarks)})")
        return f"{_relative(self.path, root)}: " + " ".join(parts)


@dataclass(frozen=True)
class DamagedRun:
    """A run directory that was skipped: the file that could not be read, the line (None when
    the whole file is at fault) and why."""

    run_dir: Path
    file: Path
    line: int | None
    reason: str

    def describe(self, root: Path | None = None) -> str:
        """`path: line N: reason` (path relative to `root` when under it)."""
        path = _relative(self.file, root)
        where = f"{path}: line {self.line}" if self.line is not None else str(path)
        return f"{where}: {self.reason}"


def _damage(run_dir: Path, error: Exception) -> DamagedRun:
    if isinstance(error, RecordFileError):
        return DamagedRun(run_dir, error.path.resolve(), error.line, error.reason)
    return DamagedRun(run_dir, run_dir / "config.json", None, str(error))


def inner_config(record: RunRecord) -> dict[str, Any]:
    """The resolved config of a run (`config.json`'s `config`)."""
    cfg = record.config.get("config", record.config)
    return cfg if isinstance(cfg, dict) else {}


def is_run_dir(path: str | Path) -> bool:
    """True for a folder whose `config.json` is a run record's (has a `config` object)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        data = read_json(config)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("config"), dict)


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Every run directory at or below `paths` (sorted, without duplicates)."""
    return scan_runs(paths)[0]


def scan_runs(paths: Iterable[str | Path]) -> tuple[list[Path], list[DamagedRun]]:
    """Run directories below `paths`, and folders whose `config.json` does not parse but that
    hold run records (`metrics.jsonl`, `evals.jsonl`, `summary.json`): damaged runs.

    A path that does not exist raises `FileNotFoundError`, a file `NotADirectoryError` (a file
    used to stand for its whole parent folder, so `figures runs/notes.txt` read every run of
    `runs/`)."""
    found: set[Path] = set()
    damaged: dict[Path, DamagedRun] = {}
    for root in paths:
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(f"{root} does not exist (give run directories or a runs root)")
        if not root.is_dir():
            raise NotADirectoryError(
                f"{root} is a file, not a folder: give the run directory that holds it "
                f"({root.parent}) or a folder of run directories"
            )
        for current, dirs, _files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            folder = Path(current).resolve()
            if is_run_dir(folder):
                found.add(folder)
            elif (folder / "config.json").is_file() and any(
                (folder / name).is_file() for name in RECORD_FILES
            ):
                try:
                    data = read_json(folder / "config.json")
                    problem = DamagedRun(
                        folder,
                        folder / "config.json",
                        1,
                        f"not a run record (a JSON {type(data).__name__} without a 'config' object)",
                    )
                except (OSError, ValueError) as error:
                    problem = _damage(folder, error)
                damaged[folder] = problem
    return sorted(found), [damaged[k] for k in sorted(damaged)]


def classify(record: RunRecord) -> str:
    """The kind of a run (see the module docstring)."""
    cfg = inner_config(record)
    if "benchmarks" in cfg and "decodings" in cfg and "method" not in cfg:
        return "llm_eval"
    if "method" in cfg and ("rollout_prompts" in cfg or "tiny_model" in cfg):
        return "llm_train"
    if "delays" in cfg or "target_kls" in cfg or (record.path / "results.csv").exists():
        return "toy_sweep"
    keys = set().union(*(row.keys() for row in record.metrics[:5])) if record.metrics else set()
    if keys & {"policy/objective", "ratio/kl_exact", "policy/grad_norm_sq"}:
        return "toy_train"
    return "other"


def model_label(cfg: dict[str, Any]) -> str | None:
    """ "tiny" for the CPU demonstration model, "Qwen3-1.7B" style for a Qwen3 path, else the
    model folder's name."""
    if cfg.get("tiny_model"):
        return "tiny"
    model = cfg.get("model")
    if not model:
        return None
    text = str(model)
    match = _SIZE.search(Path(text).name) or _SIZE.search(text)
    if match and "qwen" in text.lower():
        return f"Qwen3-{match.group(1)}B"
    return Path(text.rstrip("/")).name or text


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _describe(record: RunRecord, kind: str) -> list[Run]:
    cfg = inner_config(record)
    eps = _float(cfg.get("eps_high", cfg.get("eps")))
    base = {
        "schedule": cfg.get("schedule"),
        "delay": _int(cfg.get("delay")),
        "group_size": _int(cfg.get("group_size")),
        "model": model_label(cfg),
        "eps": eps,
    }
    if kind == "toy_train":
        return _split_toy(record, cfg, base)
    return [
        Run(
            record=record,
            kind=kind,
            method=cfg.get("method"),
            metrics=list(record.metrics),
            evals=_dedup(record.evals),
            **base,
        )
    ]


def _split_toy(record: RunRecord, cfg: dict[str, Any], base: dict[str, Any]) -> list[Run]:
    """One Run per (method, delay) found in the rows (or the config when rows do not say); rows
    of several seeds (`seed` column) are averaged per step (`seed_mean_rows`)."""
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in record.metrics:
        key = (row.get("method", cfg.get("method")), row.get("delay", cfg.get("delay")))
        groups.setdefault(key, []).append(row)
    if not groups:
        groups[(cfg.get("method"), cfg.get("delay"))] = []
    experiment = experiment_kind(record.path)
    runs = []
    for (method, delay), rows in sorted(
        groups.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))
    ):
        fields_ = dict(base, delay=_int(delay))
        rows = seed_mean_rows(rows)
        runs.append(
            Run(
                record=record,
                kind="toy_train",
                method=method,
                metrics=rows,
                experiment=experiment,
                **fields_,
            )
        )
    return runs


def experiment_kind(run_dir: Path) -> str | None:
    """The `kind` of the toy experiment whose folder holds `run_dir` (`experiment.json` beside
    it, as `ExperimentConfig.to_dict()` writes it), or None for a run outside any experiment."""
    path = run_dir.parent / "experiment.json"
    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return str(kind) if kind is not None else None


def seed_mean_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with a `seed` column averaged per step over seeds (numbers only; a value missing or
    non-finite in some seed is averaged over the others); rows without `seed` are returned as is."""
    if not any("seed" in row for row in rows):
        return list(rows)
    by_step: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        by_step.setdefault(row.get("step"), []).append(row)
    out = []
    for step, group in sorted(by_step.items(), key=lambda kv: (kv[0] is None, kv[0])):
        merged: dict[str, Any] = {"step": step, "seeds": len(group)}
        keys = [k for k in group[0] if k not in ("step", "seed")]
        for key in keys:
            values = [r.get(key) for r in group]
            numbers = [
                float(v)
                for v in values
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            ]
            if numbers:
                merged[key] = sum(numbers) / len(numbers)
            elif values and not isinstance(values[0], (int, float)):
                merged[key] = values[0]
        out.append(merged)
    return out


def _dedup(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (step, benchmark, decoding): the last one written wins."""
    keyed: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for row in rows:
        if "benchmark" not in row:
            continue
        keyed[(row.get("step"), row.get("benchmark"), row.get("decoding"))] = row
    return list(keyed.values())


def _eval_targets(run: Run) -> list[Path]:
    """Paths an eval run points at: its config's model, its rows' models, and itself."""
    targets = [run.path]
    for value in [run.config.get("model")] + [r.get("model") for r in run.evals]:
        if not value:
            continue
        path = Path(str(value))
        targets.append(path if path.is_absolute() else (Path.cwd() / path))
    return [t.resolve() for t in targets]


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def attach_evals(runs: list[Run]) -> None:
    """Give each training run the rows of the eval runs that evaluated one of its checkpoints."""
    trains = [r for r in runs if r.kind == "llm_train"]
    for run in runs:
        if run.kind != "llm_eval":
            continue
        targets = _eval_targets(run)
        owners = [t for t in trains if any(_inside(p, t.path.resolve()) for p in targets)]
        if not owners:
            continue
        owner = max(owners, key=lambda t: len(t.path.parts))  # the innermost match
        run.train_run = owner.path
        for attr in ("method", "schedule", "delay", "group_size", "model", "eps"):
            setattr(run, attr, getattr(owner, attr))
        owner.eval_runs.append(run.path)
        owner.evals = _dedup(owner.evals + run.evals)


def discover(paths: Iterable[str | Path], *, damaged: list[DamagedRun] | None = None) -> list[Run]:
    """Read every run below `paths`, classify it and attach eval runs to training runs.

    A run whose records cannot be read is skipped: appended to `damaged` when a list is given,
    else reported with a warning. The other runs are returned as usual.
    """
    run_dirs, problems = scan_runs(paths)
    runs: list[Run] = []
    for path in run_dirs:
        try:
            record = read_run(path)
        except (OSError, ValueError) as error:  # RecordFileError, RecordSchemaError, ...
            problems.append(_damage(path, error))
            continue
        runs.extend(_describe(record, classify(record)))
    attach_evals(runs)
    problems.sort(key=lambda d: d.run_dir)
    if damaged is not None:
        damaged.extend(problems)
    else:
        for problem in problems:
            warnings.warn(f"skipped a damaged run: {problem.describe()}", stacklevel=2)
    return runs


def select(runs: Iterable[Run], **match: Any) -> list[Run]:
    """The runs whose attributes equal every given value (None values are ignored)."""
    out = []
    for run in runs:
        if all(v is None or getattr(run, k) == v for k, v in match.items()):
            out.append(run)
    return out


def _relative(path: Path, root: Path | None) -> Path:
    """`path` relative to `root` when it lies below it, else as it is."""
    if root is not None and _inside(path, root.resolve()):
        return path.relative_to(root.resolve())
    return path


def inventory_markdown(runs: Sequence[Run], root: str | Path | None = None) -> str:
    """The runs found, for a Markdown report: one line of counts per kind, then a table with one
    row per run (path relative to `root`, kind, method, schedule, delay, G, model, steps,
    evaluations: count, benchmarks, first..last step) collapsed in a `<details>` element."""
    if not runs:
        return "No run directories found.\n"
    base = Path(root) if root is not None else None
    counts = {kind: sum(run.kind == kind for run in runs) for kind in KINDS}
    lines = [
        f"{len(runs)} run{'s' if len(runs) > 1 else ''}: "
        + ", ".join(f"{n} `{kind}`" for kind, n in counts.items() if n)
        + ".",
        "",
        f"<details><summary>Every run found ({len(runs)})</summary>",
        "",
        "| run | kind | method | schedule | $D$ | $G$ | model | steps | evaluations |",
        "| --- | --- | --- | --- | ---: | ---: | --- | ---: | --- |",
    ]
    for run in runs:
        cells = [f"`{_relative(run.path, base)}`", run.kind]
        cells += ["-" if v is None else str(v) for v in (run.method, run.schedule)]
        cells += ["-" if v is None else str(v) for v in (run.delay, run.group_size, run.model)]
        cells.append(str(len(run.metrics)) + (" (torn line left out)" if run.torn else ""))
        evals = "-"
        if run.evals:
            steps = run.eval_steps
            span = f", {steps[0]}..{steps[-1]}" if steps else ""
            evals = f"{len(run.evals)} ({', '.join(run.benchmarks)}{span})"
        cells.append(evals)
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


TORN_NOTE = (
    "a torn last line (the run was stopped while it wrote that row) was left out; the run is "
    "read from the rows before it, and a resumed run rewrites the file without it"
)


GAP_NOTE = (
    "drawn with the gap (a run stopped before it wrote them, or rows deleted); resuming the run "
    "refuses it or computes them again"
)


def torn_records(runs: Sequence[Run], root: str | Path | None = None) -> list[str]:
    """One line per record file whose torn last line was left out (`path: line N: why`) and
    one per run whose metrics lack rows (`path: missing rows (seed 1: step 19): why`,
    `gmc_grpo.records.missing_metric_rows`); paths relative to `root`, each file once (a toy
    run split into several `Run`s shares its records)."""
    base = Path(root) if root is not None else None
    seen: dict[tuple[Path, str], str] = {}
    for run in runs:
        for name, line in run.torn.items():
            path = run.path / name
            seen.setdefault((path, "torn"), f"{_relative(path, base)}: line {line}: {TORN_NOTE}")
        path = run.path / "metrics.jsonl"
        if (path, "gap") not in seen:
            missing = missing_metric_rows(run.record)
            if missing:
                seen[(path, "gap")] = (
                    f"{_relative(path, base)}: missing rows ({describe_missing(missing)}): "
                    f"{GAP_NOTE}"
                )
    return [seen[key] for key in sorted(seen)]


def inventory(
    runs: Sequence[Run], root: str | Path | None = None, damaged: Sequence[DamagedRun] = ()
) -> str:
    """A Markdown list of what was found, one line per run (paths relative to `root`), then one
    line per damaged run that was skipped."""
    base = Path(root) if root is not None else None
    lines = [f"- {run.describe(base)}\n" for run in runs]
    if not runs:
        lines.append(
            "No readable run directories found.\n" if damaged else "No run directories found.\n"
        )
    lines += [f"- damaged, skipped: {d.describe(base)}\n" for d in damaged]
    return "".join(lines)
