"""The train-inference mismatch at lag 0, per trajectory, and what it would cap.

At lag 0 the behavior policy is the current policy, so the trajectory log-ratio the learner
computes with the engine's log-probs (`behavior_logprobs="engine"`, the default) is mismatch
alone: the engine (vLLM in bfloat16, its own kernels) and the learner (float32 parameters under
bfloat16 autocast) give the same weights slightly different log-probs. Per trajectory,

    s_i = sum_t (log pi_learner(y_t | ...) - log mu_engine(y_t | ...))     (over the response)

is what GMC's group mass and TIC's cap compare with `log(1 + eps) = log 1.28 = 0.247` nats
(B.1). A per-token gap of 1e-3 is harmless for one token and 4 nats summed over 4,096 of them.
`mismatch_metrics` gives, for one lag-0 batch of `B` groups of `G` (`LLMTrainConfig.mismatch_every`):

| metric                              | what                                                       |
|-------------------------------------|------------------------------------------------------------|
| `mismatch/trajectory_abs_mean`      | mean over the `B G` trajectories of `|s_i|`                |
| `mismatch/trajectory_abs_p99`       | 99th percentile of `|s_i|` (linear interpolation)          |
| `mismatch/trajectory_abs_max`       | largest `|s_i|`                                            |
| `mismatch/gmc_capped_group_frac`    | fraction of the `B` groups GMC would scale down (`w < 1`)  |
| `mismatch/tic_capped_group_frac`    | fraction of the groups in which TIC would drop a trajectory|

The capped fractions go through the method registry (`gmc_grpo.methods`: each spec's loss config,
so its `eps` and a user's coefficient rule) and the core's `group_diagnostics`: exactly what the
update would do with these log-ratios at lag 0. A nonzero fraction means on-policy groups lose
gradient to numerics. The remedy is `behavior_logprobs="learner"`: the ratio's `mu` becomes the
learner's own log-probs at the behavior version (one extra forward pass per batch), so at lag 0
the ratio is exactly 1 and at lag `D` it measures the policy change only.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gmc_grpo.estimators import group_diagnostics
from gmc_grpo.methods import MethodSettings, get_method

#: the methods whose lag-0 caps are reported (the paper's two group/trajectory caps)
MISMATCH_METHODS: tuple[str, ...] = ("gmc", "tic")
#: the percentile of `mismatch/trajectory_abs_p99`
PERCENTILE = 0.99


def trajectory_log_ratios(
    engine_logprobs: Tensor, learner_logprobs: Tensor, mask: Tensor
) -> Tensor:
    """`s_i = sum_t (learner - engine)` over each response: `[B, G]` float64.

    engine_logprobs, learner_logprobs: `[B, G, T]` per-token log-probs; mask: `[B, G, T]` bool,
    True on response tokens (the padding is ignored whatever it holds).
    """
    gap = learner_logprobs.double() - engine_logprobs.double()
    return torch.where(mask, gap, torch.zeros((), dtype=torch.float64)).sum(-1)


def mismatch_metrics(
    engine_logprobs: Tensor,
    learner_logprobs: Tensor,
    mask: Tensor,
    settings: MethodSettings | None = None,
) -> dict[str, float]:
    """The lag-0 mismatch metrics of one batch (the table of the module docstring).

    engine_logprobs, learner_logprobs, mask: `[B, G, T]` (`trajectory_log_ratios`); settings:
    the methods' constants (`eps`; default: the paper's).
    """
    settings = settings or MethodSettings()
    s = trajectory_log_ratios(engine_logprobs, learner_logprobs, mask)
    size = s.abs().flatten()
    metrics = {
        "mismatch/trajectory_abs_mean": float(size.mean()),
        "mismatch/trajectory_abs_p99": float(torch.quantile(size, PERCENTILE)),
        "mismatch/trajectory_abs_max": float(size.max()),
    }
    for name in MISMATCH_METHODS:
        loss = get_method(name).loss_config(settings)
        capped = group_diagnostics(
            loss.method,
            s,
            loss.eps,
            truncation=loss.truncation,
            rule=loss.coefficient_rule,
        )["capped"]
        metrics[f"mismatch/{name}_capped_group_frac"] = float(capped.any(dim=-1).double().mean())
    return metrics
