"""The names a `LLMTrainConfig` field may take that the torch modules own, kept free of torch.

`llm_runs.config` checks its fields against these before anything loads torch, so that
`gmc-grpo llm train` and `llm eval` refuse a bad value in a fraction of a second (issues 32 and
36: a refusal used to wait 3-6 s for torch). The torch modules that act on them import them from
here and re-export them under their old names:

- `LEARNER_DTYPES`: `llm_runs.precision` (`resolve_precision`);
- `OPTIMIZER_KINDS`, `SCORE_NORM_MODES`: `llm_runs.learner` (`make_optimizer`, `LearnerSettings`).
"""

from __future__ import annotations

#: learner precisions a config can name (`LLMTrainConfig.learner_dtype`, `llm_runs.precision`)
LEARNER_DTYPES: tuple[str, ...] = ("auto", "float32", "mixed_bfloat16", "bfloat16", "float16")

#: the optimizers `llm_runs.learner.make_optimizer` builds (`LLMTrainConfig.optimizer`)
OPTIMIZER_KINDS: tuple[str, ...] = ("auto", "adamw", "adamw8bit")

#: how a baseline hook that needs `||grad log pi(y_i)||^2` gets them
#: (`LearnerSettings.score_norms`, `LLMTrainConfig.score_norms`)
SCORE_NORM_MODES: tuple[str, ...] = ("in_backward", "per_trajectory")
