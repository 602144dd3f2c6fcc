"""Answer scoring of the Qwen3 track (docs/scoring.md).

- `answers`: pure extraction and comparison of answers (the last complete `\\boxed{}`, the
  rewrites that are provably equivalent, numbers compared exactly); no processes.
- `pool`: `Scorer`, math-verify's symbolic comparisons in a pool of killable worker processes
  with a CPU-time limit, and the batch API (`score_batch`, `is_correct`).
- `worker`: the worker process (`python -m llm_runs.scoring.worker`).
"""
