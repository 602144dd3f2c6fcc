"""llm_runs: the Qwen3 pipeline of Appendix B.1.

Data and prompts, answer scoring, rollout engines (vLLM and Hugging Face), the asynchronous trainer
assembled from parts (`llm_runs.train` lists them) for every registered method, evaluation and the
paper recipes (`gmc-grpo llm ...`). Runs on a GPU; every
part is tested on a CPU with tiny random-init Qwen3 models.
"""
