"""Evaluations during training: greedy and/or sampled Pass@1 of the current policy.

Every `eval_every` updates (and at 0 and at the end) the trainer calls `Evaluator.evaluate`,
which writes one `evals.jsonl` row per (eval set, decoding). The protocol is the one of
`gmc-grpo llm eval` (`llm_runs.evaluation.protocol`: `sampling_config`, `evaluate_one`,
`summarize_benchmark`), run on the training engine: task "math" scores with math-verify in
chunks of `EVAL_BATCH_SIZE` prompts (chunk `i` of eval set `k` samples from stream
`llm_evaluation` of `seed` at path `(k, i)`, `gmc_grpo.seeding`, as `llm eval` does); task
"arithmetic" scores by exact match in one engine call (path `(k, 0)`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from gmc_grpo.run_writer import RunWriter
from gmc_grpo.seeding import base_seed
from llm_runs.config import EvaluationSettings
from llm_runs.evaluation.config import EVAL_BATCH_SIZE
from llm_runs.evaluation.protocol import evaluate_one, sampling_config, summarize_benchmark
from llm_runs.rollouts import Task


class Evaluator:
    """Evaluates the engine's policy on the run's eval sets (the engine must hold it)."""

    def __init__(
        self,
        settings: EvaluationSettings,
        eval_sets: Mapping[str, Sequence[Any]],
        engine: Any,
        task: Task,
        scorer: Any = None,
    ) -> None:
        self.settings = settings
        self.eval_sets = eval_sets
        self.engine = engine
        self.task = task
        self.scorer = scorer

    def evaluate(self, step: int, writer: RunWriter) -> None:
        """One row per (eval set, decoding) into `writer`'s `evals.jsonl`."""
        for index, (name, problems) in enumerate(self.eval_sets.items()):
            prompts = [self.task.prompt(p.problem) for p in problems]
            for decoding in self.settings.eval_decodings:
                t0 = time.time()
                if self.settings.task == "math":
                    row = self._math(name, problems, prompts, decoding, index)
                else:
                    row = self._exact(problems, prompts, decoding, index)
                writer.log_eval(
                    {"step": step, "benchmark": name, **row, "time_s": time.time() - t0}
                )

    def _sampling(self, decoding: str, seed: int):
        settings = self.settings
        return sampling_config(
            decoding,
            n=settings.eval_samples,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_completion_tokens,
            stop=self.task.stop,
            seed=seed,
        )

    def _exact(self, problems, prompts, decoding: str, index: int) -> dict[str, Any]:
        from llm_runs.arithmetic import exact_reward

        sampling = self._sampling(
            decoding, base_seed(self.settings.run_seed, "llm_evaluation", index, 0)
        )
        samples = self.engine.generate(prompts, sampling)
        correct = [
            [exact_reward(s.text, p.answer) > 0 for s in outs]
            for p, outs in zip(problems, samples, strict=True)
        ]
        return summarize_benchmark(
            correct,
            decoding,
            finish_reasons=[[s.finish_reason for s in outs] for outs in samples],
            num_tokens=[[len(s.token_ids) for s in outs] for outs in samples],
        )

    def _math(self, name: str, problems, prompts, decoding: str, index: int) -> dict[str, Any]:
        seed = self.settings.run_seed
        row, _outputs = evaluate_one(
            self.engine,
            self.scorer,
            problems,
            prompts,
            [False] * len(prompts),  # training prompts are cut silently by `Task.prompt`
            decoding,
            sampling_for_chunk=lambda i: self._sampling(
                decoding, base_seed(seed, "llm_evaluation", index, i)
            ),
            batch_size=EVAL_BATCH_SIZE,
            description=f"{name} {decoding}",
        )
        return row
