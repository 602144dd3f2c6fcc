"""Evaluation of the Qwen3 track: `gmc-grpo llm eval` and the evaluations during training.

- `config`: `EvalConfig`, every field of `gmc-grpo llm eval` documented beside it.
- `protocol`: the evaluation protocol of the paper's tables (Appendix B.1), `run_eval`.
- `cli`: the command line of `gmc-grpo llm eval`.
- `during_training`: `Evaluator`, the trainer's periodic evaluations under the same protocol.
"""
