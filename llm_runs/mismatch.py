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
| `mismatch/<m>_capped_group_frac`    | the same for every other registered method `m` with a cap  |
|                                     | `1 + eps` (its spec's `uses_eps`)                          |

The methods are those whose spec says the cap `1 + eps` changes them (`MethodSpec.uses_eps`;
the group-mass caps first, `caps_group_mass`, then the others in registry order: GMC, then TIC,
for the paper's), and the capped fractions go through each spec's loss config (its `eps` and a
user's coefficient rule) and the core's `group_diagnostics`: exactly what the update would do
with these log-ratios at lag 0. A nonzero fraction means on-policy groups lose
gradient to numerics. The remedy is `behavior_logprobs="learner"`: the ratio's `mu` becomes the
learner's own log-probs at the behavior version (one extra forward pass per batch), so at lag 0
the ratio is exactly 1 and at lag `D` it measures the policy change only.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gmc_grpo.estimators import group_diagnostics
from gmc_grpo.methods import MethodSettings, MethodSpec, get_method, method_names

#: the percentile of `mismatch/trajectory_abs_p99`
PERCENTILE = 0.99


def mismatch_methods() -> tuple[MethodSpec, ...]:
    """The registered methods whose lag-0 caps are reported: those with a cap `1 + eps`
    (`MethodSpec.uses_eps`), the group-mass caps first (`caps_group_mass`), each part in
    registry order (the paper's: GMC, TIC)."""
    capped = [spec for spec in map(get_method, method_names()) if spec.uses_eps]
    return tuple(sorted(capped, key=lambda spec: not spec.caps_group_mass))


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
    for spec in mismatch_methods():
        loss = spec.loss_config(settings)
        capped = group_diagnostics(
            loss.method,
            s,
            loss.eps,
            truncation=loss.truncation,
            rule=loss.coefficient_rule,
        )["capped"]
        metrics[f"mismatch/{spec.name}_capped_group_frac"] = float(
            capped.any(dim=-1).double().mean()
        )
    return metrics
