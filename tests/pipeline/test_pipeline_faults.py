"""Fault injection (issue 15): `toy sweep`, `toy train`, `llm train` (tiny) and `llm eval` (tiny)
are killed (SIGKILL) at seeded random points, resumed, and must leave the records of an
uninterrupted run; a full disk or an unwritable folder stops a run with one clear line and leaves
the folder resumable.

Each job runs as `gmc-grpo ...` in a subprocess through `fault_driver.py`, which counts the
package's durable writes (record rows appended, atomic renames of summaries, tables, checkpoint
folders and per-problem outputs) and hits the chosen one: a kill before it, a kill after half of
a row reached the file (a torn line) or right after a rename, or an `OSError` (`ENOSPC`,
`EACCES`) raised there. A first, uninterrupted run counts the writes; the faults are drawn from
that count with a seeded generator, one after another on the same folder, each resume itself
liable to the next fault; a last rerun finishes the job. Records are compared field by field
(`bench/compare_records.py`'s readers), wall-clock fields excepted; per-problem outputs byte by
byte. One thread, CPU: the same seed gives the same records.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DRIVER = HERE / "fault_driver.py"
DATA = REPO / "tests" / "llm_runs" / "data"
_spec = importlib.util.spec_from_file_location("compare_records", REPO / "bench/compare_records.py")
compare_records = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_records)  # type: ignore[union-attr]

# Fields that measure time, not results (a narrower list than compare_records.IGNORED, which
# also skips anything named *version*, e.g. staleness/behavior_version).
WALL_CLOCK = re.compile(r"^perf/|seconds|^time_s$|wall_s")

TOY_SWEEP = {
    "name": "faults",
    "num_prompts": 2,
    "vocab_size": 3,
    "max_length": 3,
    "trajectory_steps": 8,
    "delays": [0, 4],
    "methods": ["grpo", "tic", "gmc"],
    "group_sizes": [2, 4],
    "num_groups": 2,
    "num_minibatches": 3,
    "seeds": [0, 1],
    "figures": False,
}
LLM_TRAIN = {
    "tiny_model": {"seed": 1, "num_layers": 1, "hidden_size": 64, "intermediate_size": 128},
    "task": "arithmetic",
    "reward": "exact",
    "arithmetic": {"max_operand": 5, "num_train": 24, "num_eval": 4},
    "sft_steps": 30,
    "sft_batch_size": 8,
    "num_groups": 3,
    "group_size": 3,
    "total_steps": 6,
    "lr": 3e-3,
    "max_prompt_tokens": 32,
    "max_completion_tokens": 6,
    "method": "gac",
    "delay": 2,
    "checkpoint_every": 2,
    "eval_every": 3,
    "eval_samples": 2,
    "optimizer": "adamw",
    "engine": "hf",
    "learner_device": "cpu",
    "progress": False,
}


def job_argv(job: str, out: Path, inputs: dict[str, Path], *, resume: bool) -> list[str]:
    """`gmc-grpo` argv of a job writing to `out` (`resume`: how a user continues it)."""
    if job == "toy_sweep":
        return ["toy", "sweep", "--config", str(inputs["sweep"]), "--out", str(out),
                "--no-progress"]  # fmt: skip
    if job == "toy_train":
        return ["toy", "train", "--method", "vcpo", "--schedule", "length_coupled", "--lam", "1",
                "--steps", "8", "--seeds", "0,1", "--num-prompts", "2", "--max-length", "3",
                "--group-size", "4", "--num-groups", "2", "--checkpoint-every", "2",
                "--out", str(out), "--no-progress"]  # fmt: skip
    if job == "llm_train":
        argv = ["llm", "train", "--config", str(inputs["llm"]), "--out", str(out), "--no-progress"]
        # --resume continues a run; a folder the kill left without config.json holds none
        return [*argv, "--resume"] if resume and (out / "config.json").exists() else argv
    assert job == "llm_eval"
    return ["llm", "eval", "--model", str(inputs["model"]), "--out", str(out),
            "--data-dir", str(DATA), "--engine", "hf", "--benchmarks", "math500,gsm8k,amc23",
            "--limit", "1", "--n", "2", "--max-prompt-tokens", "96",
            "--max-completion-tokens", "6", "--scorer-workers", "1",
            "--step", "0"]  # fmt: skip


def launch(argv: list[str], plan: dict[str, Any], workdir: Path) -> subprocess.CompletedProcess:
    plan_path = workdir / "plan.json"
    plan_path.write_text(json.dumps(plan))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("GMC_GRPO_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, str(DRIVER), str(plan_path), "--", *argv],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not WALL_CLOCK.search(str(k))}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def record_differences(want: Path, got: Path) -> list[str]:
    """Differences between the records of two run folders (wall-clock fields excepted)."""
    files = compare_records.record_files(want)
    assert files, f"no records in {want}"
    diffs = [] if files == compare_records.record_files(got) else [f"files differ: {files}"]
    for rel in files:
        a = _strip(compare_records._normalise_paths(compare_records._read(want / rel), want))
        b = _strip(compare_records._normalise_paths(compare_records._read(got / rel), got))
        if a != b:
            diffs.append(f"{rel} differs")
    for output in sorted(want.rglob("outputs/*.jsonl")):
        if output.read_bytes() != (got / output.relative_to(want)).read_bytes():
            diffs.append(f"{output.relative_to(want)} differs")
    return diffs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fault_inputs")
    (root / "sweep.json").write_text(json.dumps(TOY_SWEEP))
    (root / "llm.json").write_text(json.dumps(LLM_TRAIN))
    found = {"sweep": root / "sweep.json", "llm": root / "llm.json"}
    try:
        from llm_runs.tiny import build_tiny_qwen3
    except ImportError:
        return found
    found["model"] = build_tiny_qwen3(root / "model", num_layers=1, hidden_size=64)
    return found


# job -> the mode of its last fault (a full disk or an unwritable folder)
JOBS = {"toy_sweep": "enospc", "toy_train": "eacces", "llm_train": "enospc", "llm_eval": "eacces"}
MESSAGES = {"enospc": "No space left on device", "eacces": "Permission denied"}
# (job, seed of the fault draws, kills before the I/O fault): the default suite kills the toy
# jobs twice and the LLM jobs (a subprocess costs seconds of imports) once; `slow` adds more
CHAINS = [
    *[pytest.param(job, 0, 2 if job.startswith("toy") else 1, id=job) for job in JOBS],
    *[
        pytest.param(job, seed, 3, id=f"{job}-seed{seed}", marks=pytest.mark.slow)
        for job in JOBS
        for seed in (1, 2)
    ],
]


@pytest.mark.parametrize(("job", "seed", "kills"), CHAINS)
def test_faults_leave_the_records_of_an_uninterrupted_run(
    job: str, seed: int, kills: int, inputs, tmp_path
) -> None:
    if job.startswith("llm") and "model" not in inputs:
        pytest.skip("the LLM track needs transformers")
    count = tmp_path / "count"
    straight = tmp_path / "straight"
    done = launch(job_argv(job, straight, inputs, resume=False), {"count": str(count)}, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    writes = int(count.read_text())
    assert writes >= 8, writes

    rng = random.Random(f"issue-15/{job}/{seed}")
    broken = tmp_path / "broken"
    modes = [*(rng.choice(["kill", "torn"]) for _ in range(kills)), JOBS[job]]
    hits = []
    for index, mode in enumerate(modes):
        # the first fault anywhere in the run; later ones within a resumed run's first half
        at = rng.randint(1, writes if index == 0 else max(1, writes // 2))
        proc = launch(job_argv(job, broken, inputs, resume=index > 0), {"at": at, "mode": mode},
                      tmp_path)  # fmt: skip
        hits.append((mode, at, proc.returncode))
        if proc.returncode == 0:
            continue  # the resumed run finished before the chosen write
        if mode in ("kill", "torn"):
            assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
            continue
        lines = [line for line in proc.stderr.splitlines() if line.strip() and "%|" not in line]
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr
        assert MESSAGES[mode] in lines[-1] and "error:" in lines[-1], lines[-1]
        assert "rerun the same command" in lines[-1], lines[-1]
        assert str(broken) in lines[-1]  # names the file it could not write
    final = launch(job_argv(job, broken, inputs, resume=True), {}, tmp_path)
    assert final.returncode == 0, (hits, final.stderr[-3000:])
    assert record_differences(straight, broken) == [], hits
    assert any(code != 0 for _, _, code in hits), hits  # at least one fault did hit
