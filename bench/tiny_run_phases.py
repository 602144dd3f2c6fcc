"""One `gmc-grpo llm train` run with its CPU and wall seconds split by phase (for `bench_tiny_run`).

    PYTHONPATH=CODE python bench/tiny_run_phases.py RESULT.json -- llm train --recipe ...

runs the command line after `--` through `pipeline.cli.main` in this process, with the code that
`PYTHONPATH` selects (this version, or an older checkout: only names that exist in both are
used), and writes `RESULT.json`: per phase the process CPU seconds (`time.process_time`, all
threads) and the wall seconds, plus the whole process's. Phases:

- `imports`: torch, transformers, the Qwen3 model code and the trainer's modules, imported
  before anything runs (what every process of a suite pays once);
- `warmup`: building the initial policy (tiny model + supervised warm-up;
  `llm_runs.models._build_initial_policy`; cached across a suite);
- `rollouts`: rollout generation and scoring (`RolloutProducer._produce`);
- `learner`: the optimizer updates (`Learner.step`);
- `evaluation`: the periodic evaluations (`Evaluator.evaluate`);
- `checkpoint`: writing checkpoints (`Trainer.save`);
- `other`: everything else (start-up, the loop, records, loading models).

Phases do not nest (a phase entered inside another is counted in the outer one only).
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

START_CPU, START_WALL = time.process_time(), time.perf_counter()

PHASES = ("imports", "warmup", "rollouts", "learner", "evaluation", "checkpoint")
_totals = {name: [0.0, 0.0] for name in PHASES}
_active: list[str] = []


def _timed(phase: str, function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if _active:  # nested: counted in the outer phase
            return function(*args, **kwargs)
        _active.append(phase)
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _totals[phase][0] += time.process_time() - cpu
            _totals[phase][1] += time.perf_counter() - wall
            _active.pop()

    return wrapper


def main() -> int:
    result_path = Path(sys.argv[1])
    if sys.argv[2] != "--":
        raise SystemExit("usage: tiny_run_phases.py RESULT.json -- ARGS...")
    argv = sys.argv[3:]
    cpu, wall = time.process_time(), time.perf_counter()
    import torch  # noqa: F401
    import transformers  # noqa: F401
    from transformers.models.qwen3 import modeling_qwen3  # noqa: F401

    import llm_runs.arithmetic
    import llm_runs.engines.hf  # noqa: F401
    import llm_runs.evaluation.during_training
    import llm_runs.learner
    import llm_runs.models
    import llm_runs.rollouts
    import llm_runs.train
    from pipeline.cli import main as cli_main

    _totals["imports"] = [time.process_time() - cpu, time.perf_counter() - wall]
    llm_runs.models._build_initial_policy = _timed("warmup", llm_runs.models._build_initial_policy)
    producer = llm_runs.rollouts.RolloutProducer
    producer._produce = _timed("rollouts", producer._produce)
    llm_runs.learner.Learner.step = _timed("learner", llm_runs.learner.Learner.step)
    evaluator = llm_runs.evaluation.during_training.Evaluator
    evaluator.evaluate = _timed("evaluation", evaluator.evaluate)
    llm_runs.train.Trainer.save = _timed("checkpoint", llm_runs.train.Trainer.save)
    code = cli_main(argv)
    total_cpu = time.process_time() - START_CPU
    total_wall = time.perf_counter() - START_WALL
    phases = {name: {"cpu": c, "wall": w} for name, (c, w) in _totals.items()}
    phases["other"] = {
        "cpu": total_cpu - sum(c for c, _ in _totals.values()),
        "wall": total_wall - sum(w for _, w in _totals.values()),
    }
    result = {"argv": argv, "exit": code, "total": {"cpu": total_cpu, "wall": total_wall}}
    result["phases"] = phases
    result_path.write_text(json.dumps(result, indent=1) + "\n")
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
