"""Group advantages from verifier rewards (`docs/METHODS.md`, "Advantages").

- `centered`: `A_i = r_i - r_bar` (vanilla GRPO in the paper, unnormalised; Appendix B.1).
- `loo`: leave-one-out, `A_i = r_i - (1/(G-1)) sum_{j != i} r_j = G/(G-1) (r_i - r_bar)`
  (TIC-GRPO and GMC-GRPO, Appendix B.1).
- `std`: `(r_i - r_bar) / (std_b + delta)` with the sample standard deviation of the group;
  groups whose std is below `std_floor` get zero advantages (the common GRPO default, and VCPO's
  code). Our choice of the sample (unbiased) std and of `delta = 1e-4` follows common practice;
  the paper does not use this kind.

`method_advantages` is the one dispatch both learners (toy and LLM) run: a method's baseline
hook (`MethodSpec.baseline`, VCPO's) or its advantage kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, get_args

import torch
from torch import Tensor

if TYPE_CHECKING:
    from gmc_grpo.methods import MethodSettings, MethodSpec

AdvantageKind = Literal["centered", "loo", "std"]
ADVANTAGE_KINDS: tuple[str, ...] = get_args(AdvantageKind)


def compute(
    rewards: Tensor,
    kind: AdvantageKind,
    *,
    std_delta: float = 1e-4,
    std_floor: float = 1e-6,
) -> Tensor:
    """Advantages of each response relative to its group.

    Args:
        rewards: `[B, G]` rewards (any leading dims `[..., G]`; the group is the last dim).
        kind: `"centered"`, `"loo"` or `"std"`.
        std_delta: added to the std in the `"std"` kind.
        std_floor: a group whose std is below this gets zero advantages (`"std"` only).
    Returns:
        `[B, G]` advantages (float), detached from any graph.
    """
    if kind not in ADVANTAGE_KINDS:
        raise ValueError(f"advantage kind must be one of {ADVANTAGE_KINDS}, got {kind!r}")
    rewards = rewards.detach()
    if not rewards.is_floating_point():
        rewards = rewards.float()
    group_size = rewards.shape[-1]
    if group_size < 2:
        raise ValueError(f"advantages need a group size G >= 2, got G={group_size}")
    centered = rewards - rewards.mean(dim=-1, keepdim=True)
    if kind == "centered":
        return centered
    if kind == "loo":
        return centered * (group_size / (group_size - 1))
    std = rewards.std(dim=-1, keepdim=True, unbiased=True)
    scaled = centered / (std + std_delta)
    return torch.where(std < std_floor, torch.zeros_like(scaled), scaled)


#: `(needs_score_norms) -> (log_ratio [..., B, G], score_norm_sq [..., B, G] | None)`: a learner's
#: trajectory log-ratios and, when asked, `||grad log pi(y_i | x)||^2` per trajectory.
TrajectoryScores = Callable[[bool], tuple[Tensor, Tensor | None]]


def method_advantages(
    spec: MethodSpec,
    choice: str,
    rewards: Tensor,
    settings: MethodSettings,
    scores: TrajectoryScores,
) -> Tensor:
    """The advantages a learner uses for `spec`'s method (the toy and the LLM learner alike).

    The method's baseline hook when it replaces the advantage (`spec.uses_baseline(choice)`:
    VCPO's minimum-variance baseline under `"paper"`), else `compute` with the kind
    `spec.advantage_kind(choice)`.

    Args:
        spec: the method's registry spec.
        choice: `"paper"` (the method's own kind, or its baseline) or one of `ADVANTAGE_KINDS`.
        rewards: `[..., B, G]`.
        settings: the methods' constants, passed to the baseline hook.
        scores: called only for a baseline, with its `needs_score_norms`: each learner computes
            the log-ratios (and the score norms when asked) its own way (`TrajectoryScores`).
    Returns:
        `[..., B, G]` detached advantages.
    """
    if not spec.uses_baseline(choice):
        return compute(rewards, spec.advantage_kind(choice))  # type: ignore[arg-type]
    baseline = spec.baseline
    assert baseline is not None
    log_ratio, norms = scores(baseline.needs_score_norms)
    return baseline.compute(rewards, log_ratio, norms, settings)
