"""The learning-rate schedule of Appendix B.1: linear warm-up, then cosine decay.

"a cosine schedule with a 3% warmup" (Appendix B.1). Both learners use it: the toy learner calls
`cosine_lr` with its peak step size, the LLM learner wraps `CosineWithWarmup` (peak 1) in
`torch.optim.lr_scheduler.LambdaLR`, which multiplies the optimizer's base learning rate by it.
"""

from __future__ import annotations

import math


def warmup_steps_for(total_steps: int, warmup_ratio: float) -> int:
    """`ceil(warmup_ratio * total_steps)` (3% of the updates in Appendix B.1)."""
    return int(math.ceil(warmup_ratio * total_steps))


def cosine_lr(
    step: int, *, peak_lr: float, total_steps: int, warmup_steps: int, min_lr: float = 0.0
) -> float:
    """The step size of update `step` (0-based).

    Args:
        peak_lr: the step size at the end of the warm-up.
        total_steps: updates of the run; the cosine reaches `min_lr` there.
        warmup_steps: linear warm-up length (`warmup_steps_for`).
        min_lr: the floor the cosine decays to (0 in Appendix B.1).
    """
    # 1) warm-up: linear from peak/warmup at step 0 (not from 0, which would waste the first
    #    update) to the peak at the last warm-up step.
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    # 2) past the warm-up, the fraction of the decay done; held at 1 after `total_steps`, so a
    #    run continued past its plan stays at the floor instead of climbing back up.
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    # 3) half a cosine period from the peak down to the floor.
    return min_lr + (peak_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


class CosineWithWarmup:
    """`cosine_lr` with peak 1, as a `LambdaLR` factor.

    A plain object, not a closure: `LambdaLR.state_dict()` stores its `__dict__`, so a
    checkpoint records the schedule's settings.
    """

    def __init__(self, total_steps: int, warmup_steps: int, min_ratio: float = 0.0) -> None:
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.min_ratio = float(min_ratio)

    def __call__(self, step: int) -> float:
        return cosine_lr(
            step,
            peak_lr=1.0,
            total_steps=self.total_steps,
            warmup_steps=self.warmup_steps,
            min_lr=self.min_ratio,
        )
