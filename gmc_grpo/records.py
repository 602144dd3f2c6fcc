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
refused. Trainers start a run with `gmc_grpo.run_writer.RunWriter.fresh` (refuses a folder that
holds records) or `RunWriter.resume` (appends a history segment); the JSON files themselves are
written and read by `gmc_grpo.json_files`.

This module holds the format: the schema and its upgrades, `METRIC_NAMES`, the readers
(`read_run`, `RunRecord`, `read_run_config`) and the checks of gaps in the rows
(`check_records_reach`, `record_gaps`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmc_grpo.json_files import (
    read_json_object,
    read_jsonl,
)

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
    # toy learners with `bound_every > 0` (`toy_mdps.train.bound_measurement`; compared with the
    # bounds by `evidence.measured`); the estimator statistics come with `<name>_lo` / `<name>_hi`
    # (95%). The two LLM descriptions below still say `llm_runs.bounds` (now
    # `llm_runs.bound_tracking`): the LLM trainer writes these texts into `config.json`.
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
    schema = check_schema(config, run_dir)
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


def check_schema(config_json: Mapping[str, Any], run_dir: Path) -> int:
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
    if check_schema(payload, Path(run_dir)) == 1:
        payload = upgrade_legacy_values(payload)
    return payload
