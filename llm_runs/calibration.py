"""Calibrating the time unit of `L` in the simulated asynchronous pipeline (Appendix B.1).

The paper gives `tau_ready = tau_launch + lambda L` with `lambda = 28` and reports mean lags of
about 160 learner updates (Qwen3-1.7B) and 140 (4B, 8B), but not the unit of `L`. Our schedule
(`gmc_grpo.staleness.LengthCoupledSchedule`) advances its clock by one per launch, and the trainer
sets `L = (mean response length of the batch) / length_unit_tokens`.

A batch's lag in steady state is close to `lambda L`, but the run's *mean* lag is lower: the
first batch becomes visible only after `lambda L` launches, all from policy 0, so the first
`~lambda L` updates see lags ramping up from 0; and with lengths that vary from batch to batch,
short batches overtake long ones. Measured with this module (800 updates, cap 400): a constant
`L = 5.7` gives a mean lag of 143.1, not 160; exponentially distributed `L` with mean 5.7 gives
106.6. So the unit must be found by simulating the schedule with the run's own length
distribution: `calibrate_length_unit` does that by bisection. This is our inference; the paper
does not describe its units.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gmc_grpo.staleness import LengthCoupledSchedule


def simulate_mean_lag(
    batch_lengths_tokens: Sequence[float],
    length_unit_tokens: float,
    *,
    lam: float = 28.0,
    steps: int = 800,
    max_launches: int = 400,
    seed: int = 0,
) -> float:
    """Mean realised lag of the length-coupled schedule over `steps` updates.

    Each launched batch's mean response length (tokens) is drawn with replacement from
    `batch_lengths_tokens` (a seeded `torch.Generator`), and `L = length / length_unit_tokens`.
    """
    if not batch_lengths_tokens:
        raise ValueError("batch_lengths_tokens must hold at least one mean response length")
    if not length_unit_tokens > 0:
        raise ValueError(f"length_unit_tokens must be > 0, got {length_unit_tokens}")
    lengths = torch.tensor([float(x) for x in batch_lengths_tokens], dtype=torch.float64)
    if not bool(torch.isfinite(lengths).all()) or bool((lengths < 0).any()):
        raise ValueError("batch_lengths_tokens must be finite and >= 0")
    gen = torch.Generator().manual_seed(seed)

    def generate(_version: int) -> float:
        return float(lengths[int(torch.randint(len(lengths), (1,), generator=gen))])

    schedule: LengthCoupledSchedule[float] = LengthCoupledSchedule(
        lambda length: length / length_unit_tokens, lam=lam, max_launches=max_launches
    )
    for version in range(steps):
        schedule.next(version, generate)
    return sum(schedule.realised_lags) / len(schedule.realised_lags)


def calibrate_length_unit(
    batch_lengths_tokens: Sequence[float],
    target_mean_lag: float,
    *,
    lam: float = 28.0,
    steps: int = 800,
    max_launches: int = 400,
    seed: int = 0,
    iterations: int = 40,
) -> float:
    """The `length_unit_tokens` whose simulated mean lag is `target_mean_lag`.

    Bisection in log space (the mean lag falls as the unit grows). Use the mean response lengths
    of the batches of a short run of the same model (e.g. `response/length_mean` of a D = 0 run).
    Raises `ValueError` when the target is not reachable within a factor 1e4 of the median length.
    """
    if not target_mean_lag > 0:
        raise ValueError(f"target_mean_lag must be > 0, got {target_mean_lag}")
    median = float(torch.tensor([float(x) for x in batch_lengths_tokens]).median())
    if not median > 0:
        raise ValueError("the median response length must be > 0 to calibrate")
    low, high = math.log(median / 1e4), math.log(median * 1e4)

    def lag(log_unit: float) -> float:
        return simulate_mean_lag(
            batch_lengths_tokens,
            math.exp(log_unit),
            lam=lam,
            steps=steps,
            max_launches=max_launches,
            seed=seed,
        )

    if not lag(high) <= target_mean_lag <= lag(low):
        raise ValueError(
            f"a mean lag of {target_mean_lag} is out of reach for these lengths with lam={lam}, "
            f"steps={steps}, max_launches={max_launches}"
        )
    for _ in range(iterations):
        mid = 0.5 * (low + high)
        if lag(mid) > target_mean_lag:
            low = mid
        else:
            high = mid
    return math.exp(0.5 * (low + high))
