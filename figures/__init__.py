"""figures: one function per paper figure or table, built from saved run records (and `theory`).

Reads only run-record files (`metrics.jsonl`, `evals.jsonl`, result tables); imports no track's
internals (`gmc-grpo figures ...`).
"""
