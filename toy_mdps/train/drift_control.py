"""A negative control for the delay-regularity test (row 26, §2.2's condition; issue 31).

The test of `toy_mdps.train.workers_analysis` compares, per lag `t`, a seed's own drift
`D_n(t) = ||theta_n - theta_(n-t)||^2` at the steps where it consumed a group of lag `t` with the
other seeds' `D_n(t)` at the same steps. With generation times independent of the learner its two
sides agree by construction, so a pass says little unless the test also **rejects** a schedule
whose lag depends on the drift. This module builds the smallest such schedule from the
project's own worker schedule and runs it:

* the learner: per seed, `theta_(n+1) = theta_n + sigma_n xi_n` (`xi_n ~ N(0, I_P)`) whose step
  scale switches between `sigma_calm` and `sigma_fast` by a Markov chain that leaves its state
  with probability `switch` per step (phases of slow and fast movement, independent across seeds);
  nothing else of a learner matters to the condition, which only reads `theta`;
* the schedule: `gmc_grpo.staleness.WorkerSchedule` (`W` workers, `B = 1` group per update),
  each group carrying the learner's recent drift at launch `||theta_v - theta_(v-1)||^2`, and
  a generation time `SampledTime` (exponential of mean `base_time`) that is `slow_factor` times
  longer for a share `sensitive_share` of the groups when that recent drift is above `gate`
  (`"drift_gated"`), or `ExponentialTime` of the base mean (`"independent"`, the condition holds
  by construction). This is the smallest mechanism we found that makes the lag depend on the
  recent drift: a sensitive group launched while the learner moves fast arrives late while the
  others keep the learner stepping, and the fast phase persists, so long lags meet large drifts.
  (Slowing *every* group together does not do it: lags count learner steps, and a learner fed
  only slow groups steps slowly; a first version that did so was not rejected.)

`control_record(config, gated)` returns the `delay_regularity` record in `AsyncLearner`'s format
(`drift_summary`), which `workers_analysis.regularity_of_point` analyses as it does the toy runs;
`control_summary(config)` runs both schedules and returns the experiment summary that
`evidence.run_evidence.regularity_points` and the claims row read. Run it:
`python -m toy_mdps.train.drift_control` (`--help`).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gmc_grpo.seeding import numpy_generator, stream_seed
from gmc_grpo.staleness.workers import ExponentialTime, SampledTime, WorkerSchedule
from toy_mdps.train.workers_analysis import regularity_of_point


@dataclass(frozen=True)
class DriftControlConfig:
    """The negative control's learner and schedule (module docstring)."""

    seeds: int = 10
    """independent learners (the test's intervals are over seeds); >= 3"""
    steps: int = 3000
    """learner updates `N` per seed; > `max_lag`"""
    dim: int = 4
    """`P` parameters of the learner"""
    sigma_calm: float = 0.1
    """step scale in the slow phase"""
    sigma_fast: float = 0.5
    """step scale in the fast phase; > `sigma_calm`"""
    switch: float = 0.02
    """probability per step of leaving the current phase, in (0, 1)"""
    num_workers: int = 3
    """`W` rollout workers (mean lag `W / B = W` with `B = 1`)"""
    base_time: float = 1.0
    """mean generation time (exponential) of a group launched in a slow phase"""
    slow_factor: float = 20.0
    """drift-gated schedule: a group launched when the recent drift exceeds `gate` takes this
    many times longer; >= 1"""
    sensitive_share: float = 0.3
    """drift-gated schedule: the share of groups the gate applies to (the others take the base
    time): when every group slowed down together the lags, counted in learner steps, would not
    change"""
    gate: float = 0.1
    """drift-gated schedule: the recent-drift level `||theta_v - theta_(v-1)||^2` above which a
    group is slow (between the phases' means `P sigma_calm^2 = 0.04` and `P sigma_fast^2 = 1`
    at the defaults)"""
    max_lag: int = 12
    """`H`: lags `1..H` are recorded (longer ones counted as beyond)"""
    run_seed: int = 0
    """root of the streams: the learner's steps (`toy_learner`), the durations (`toy_schedule`)"""

    def __post_init__(self) -> None:
        checks = (
            ("seeds", self.seeds >= 3, "an integer >= 3 (intervals over seeds)"),
            ("steps", self.steps > self.max_lag, f"an integer > max_lag ({self.max_lag})"),
            ("dim", self.dim >= 1, "an integer >= 1"),
            ("sigma_calm", self.sigma_calm > 0, "a number > 0"),
            ("sigma_fast", self.sigma_fast > self.sigma_calm, "a number > sigma_calm"),
            ("switch", 0 < self.switch < 1, "a probability in (0, 1)"),
            ("num_workers", self.num_workers >= 1, "an integer >= 1"),
            ("base_time", self.base_time > 0, "a number > 0"),
            ("slow_factor", self.slow_factor >= 1, "a number >= 1"),
            ("sensitive_share", 0 < self.sensitive_share <= 1, "a share in (0, 1]"),
            ("gate", self.gate > 0, "a number > 0"),
            ("max_lag", self.max_lag >= 1, "an integer >= 1"),
            ("run_seed", self.run_seed >= 0, "an integer >= 0"),
        )
        for name, ok, what in checks:
            if not ok:
                raise ValueError(
                    f"DriftControlConfig.{name} must be {what}, got {getattr(self, name)!r}"
                )


def learner_paths(config: DriftControlConfig) -> np.ndarray:
    """`theta [S, N + 1, P]`: every seed's parameters, `theta_0 = 0` (module docstring)."""
    paths = np.zeros((config.seeds, config.steps + 1, config.dim))
    for s in range(config.seeds):
        rng = numpy_generator(config.run_seed, "toy_learner", s)
        fast = bool(rng.random() < 0.5)
        for n in range(config.steps):
            if rng.random() < config.switch:
                fast = not fast
            sigma = config.sigma_fast if fast else config.sigma_calm
            paths[s, n + 1] = paths[s, n] + sigma * rng.normal(size=config.dim)
    return paths


def _schedule(config: DriftControlConfig, seed: int, gated: bool) -> WorkerSchedule:
    base, slow, gate = config.base_time, config.base_time * config.slow_factor, config.gate

    def drift_gated(rng: np.random.Generator, group: dict[str, float]) -> float:
        sensitive = rng.random() < config.sensitive_share
        return float(rng.exponential(slow if sensitive and group["recent_drift"] > gate else base))

    model = (
        SampledTime(drift_gated, takes_group=True, name="drift_gated")
        if gated
        else ExponentialTime(mean=base)
    )
    return WorkerSchedule(
        num_workers=config.num_workers,
        groups_per_update=1,
        generation_time=model,
        seed=stream_seed(config.run_seed, "toy_schedule", seed),
    )


def consumed_lags(config: DriftControlConfig, paths: np.ndarray, gated: bool) -> np.ndarray:
    """`lags [S, N]`: the lag of the group each seed consumes at each step, from the worker
    schedule (each launch carries `||theta_v - theta_(v-1)||^2`, 0 at `v = 0`)."""
    lags = np.zeros((config.seeds, config.steps), dtype=np.int64)
    for s in range(config.seeds):
        schedule = _schedule(config, s, gated)

        def generate(version: int, s: int = s) -> dict[str, float]:
            step = paths[s, version] - paths[s, max(version - 1, 0)]
            return {"recent_drift": float(step @ step)}

        for n in range(config.steps):
            (entry,) = schedule.next(n, generate)
            lags[s, n] = entry.lag
    return lags


def control_record(config: DriftControlConfig, gated: bool) -> dict[str, Any]:
    """The `delay_regularity` record (`AsyncLearner.drift_summary`'s format) of one schedule:
    per seed and lag `t = 0..H`, the groups of lag `t`, the sums of their own `D_n(t)`, of the
    other seeds' mean `D_n(t)` at the same step, and the time sums (`AsyncLearner._record_drift`)."""
    paths = learner_paths(config)
    lags = consumed_lags(config, paths, gated)
    S, H = config.seeds, config.max_lag
    groups, own, others = np.zeros((S, H + 1)), np.zeros((S, H + 1)), np.zeros((S, H + 1))
    time_sum, time_count = np.zeros((S, H + 1)), np.zeros(H + 1)
    beyond = np.zeros(S)
    for n in range(config.steps):
        reach = min(n, H)
        if reach == 0:
            beyond += lags[:, n] > H
            continue
        back = paths[:, n - np.arange(1, reach + 1)]  # [S, reach]: theta_(n-t)
        dist = np.sum((paths[:, n : n + 1] - back) ** 2, axis=-1)  # [S, reach]
        time_sum[:, 1 : reach + 1] += dist
        time_count[1 : reach + 1] += 1
        mean_others = (dist.sum(axis=0, keepdims=True) - dist) / (S - 1)
        for s in range(S):
            t = int(lags[s, n])
            if 1 <= t <= reach:
                groups[s, t] += 1
                own[s, t] += dist[s, t - 1]
                others[s, t] += mean_others[s, t - 1]
            elif t > H:
                beyond[s] += 1
    return {
        "max_lag": H,
        "time_count": time_count.tolist(),
        "per_seed": {
            str(s): {
                "groups": groups[s].tolist(),
                "own_sum": own[s].tolist(),
                "others_sum": others[s].tolist(),
                "time_sum": time_sum[s].tolist(),
                "beyond_max_lag": float(beyond[s]),
                "corr_lag_length": None,
            }
            for s in range(S)
        },
        "lag_mean": float(lags.mean()),
    }


def control_summary(config: DriftControlConfig | None = None) -> dict[str, Any]:
    """Both schedules run and analysed: the experiment summary `evidence.run_evidence.
    regularity_points` reads (`delay_regularity.points.{drift_gated, independent}`)."""
    config = config or DriftControlConfig()
    points = {}
    for name, gated in (("drift_gated", True), ("independent", False)):
        record = control_record(config, gated)
        points[name] = {
            "method": "control",
            "generation_time": name,
            "lag_mean": record["lag_mean"],
            "regularity": regularity_of_point({"delay_regularity": record}),
        }
    return {"name": "drift_control", "delay_regularity": {"points": points}}


def _format(summary: dict[str, Any]) -> str:
    lines = []
    for name, point in summary["delay_regularity"]["points"].items():
        reg = point["regularity"]
        ratio = reg["pooled"]["ratio"]
        lines.append(
            f"{name}: mean lag {point['lag_mean']:.2f}; pooled own/others drift "
            f"{ratio['mean']:.3f} [{ratio['lo']:.3f}, {ratio['hi']:.3f}]"
        )
        per = reg["per_lag"]
        for t, rel, lo, hi, rhs in zip(
            per["lag"],
            per["relative"],
            per["difference_lo"],
            per["difference_hi"],
            per["rhs"],
            strict=True,
        ):
            rel_lo, rel_hi = (lo / rhs, hi / rhs) if rhs > 0 else (math.nan, math.nan)
            lines.append(
                f"  t = {t:>2}: relative difference {rel:+.3f} [{rel_lo:+.3f}, {rel_hi:+.3f}]"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m toy_mdps.train.drift_control`: run the control and print both schedules'
    pooled ratio and per-lag relative differences (95% t-intervals over seeds)."""
    parser = argparse.ArgumentParser(
        prog="python -m toy_mdps.train.drift_control",
        description="Negative control of the delay-regularity test (row 26): a worker schedule "
        "whose generation time is longer when the learner's recent drift is large, beside one "
        "with independent exponential times. The test must reject the first.",
    )
    parser.add_argument("--seeds", type=int, default=DriftControlConfig.seeds, help="learners")
    parser.add_argument("--steps", type=int, default=DriftControlConfig.steps, help="updates")
    parser.add_argument(
        "--slow-factor",
        type=float,
        default=DriftControlConfig.slow_factor,
        help="how many times longer a group launched during fast drift takes (1: no coupling)",
    )
    parser.add_argument("--run-seed", type=int, default=0, help="root of the random streams")
    args = parser.parse_args(argv)
    try:
        config = DriftControlConfig(
            seeds=args.seeds,
            steps=args.steps,
            slow_factor=args.slow_factor,
            run_seed=args.run_seed,
        )
    except ValueError as err:
        parser.exit(2, f"error: {err}\n")
    print(_format(control_summary(config)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
