"""The worker experiments' analysis: tau4 interpolation, mixed vs uniform, delay regularity."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from gmc_grpo import stats
from toy_mdps.train.config import ExperimentConfig
from toy_mdps.train.run import run_experiment
from toy_mdps.train.workers_analysis import interpolate_in_log_tau4, regularity_of_point

torch.set_num_threads(1)


def test_interpolation_in_log_tau4_by_hand() -> None:
    # log-midway between 1e2 and 1e4 is 1e3: the mean of the two values
    value, outside = interpolate_in_log_tau4([1e2, 1e4, 1e6], [1.0, 3.0, 4.0], 1e3)
    assert math.isclose(value, 2.0) and not outside
    value, outside = interpolate_in_log_tau4([1e2, 1e4, 1e6], [1.0, 3.0, 4.0], 1e5)
    assert math.isclose(value, 3.5) and not outside
    # outside the range: the end segment extended, and flagged
    value, outside = interpolate_in_log_tau4([1e2, 1e4], [1.0, 3.0], 1e6)
    assert math.isclose(value, 5.0) and outside


def _record(own_factor: list[float], H: int = 3) -> dict:
    """A run with 4 seeds; seed s's own drifts are `own_factor[s]` times the others' drifts."""
    per_seed = {}
    for s, factor in enumerate(own_factor):
        groups = [0.0] + [20.0 * t for t in range(1, H + 1)]
        others = [0.0] + [g * 2.0 * t for t, g in enumerate(groups) if t]
        per_seed[str(s)] = {
            "groups": groups,
            "own_sum": [factor * o for o in others],
            "others_sum": others,
            "time_sum": [0.0] + [10.0 * 2.0 * t for t in range(1, H + 1)],
            "beyond_max_lag": 5.0,
            "corr_lag_length": 0.5 + 0.1 * s,
        }
    return {
        "delay_regularity": {
            "max_lag": H,
            "time_count": [0.0] + [10.0] * H,
            "per_seed": per_seed,
        }
    }


def test_regularity_detects_a_planted_violation_and_passes_a_null() -> None:
    violated = regularity_of_point(_record([1.10, 1.12, 1.08, 1.11]), min_groups=10)
    ratio = violated["pooled"]["ratio"]
    want = stats.t_interval([math.log(f) for f in (1.10, 1.12, 1.08, 1.11)])
    assert math.isclose(ratio["mean"], math.exp(want["mean"]))
    assert math.isclose(ratio["lo"], math.exp(want["lo"]))
    assert not violated["pooled"]["holds"]
    # per lag: LHS = factor x 2t (own sums / groups), RHS = 2t; all three lags kept
    per_lag = violated["per_lag"]
    assert per_lag["lag"] == [1, 2, 3]
    assert per_lag["groups"] == [80.0, 160.0, 240.0]
    assert math.isclose(per_lag["rhs"][1], 4.0)
    assert math.isclose(per_lag["lhs"][1], 4.0 * (1.10 + 1.12 + 1.08 + 1.11) / 4)
    assert math.isclose(violated["corr_lag_length"], 0.65)
    assert math.isclose(violated["beyond_max_lag_fraction"], 20.0 / (20.0 + 4 * 120.0))
    # the time-average right side: sum_t groups(t) * time_sum(t) / time_count(t)
    time_ratio = violated["pooled_time"]["ratio"]["mean"]
    assert math.isclose(time_ratio, math.exp(want["mean"]))  # time mean 2t = the others' here
    null = regularity_of_point(_record([1.02, 0.98, 1.01, 0.99]), min_groups=10)
    assert null["pooled"]["holds"]
    # lags with too few groups are left out of the table
    assert regularity_of_point(_record([1.0] * 4), min_groups=100)["per_lag"]["lag"] == [2, 3]


TINY = dict(
    num_prompts=2,
    vocab_size=3,
    max_length=3,
    num_groups=2,
    group_size=4,
    total_steps=20,
    seeds=[0, 1, 2],
    checkpoint_every=1000,
)


def test_mixed_delay_experiment_pairs_seeds_by_hand(tmp_path: Path) -> None:
    config = ExperimentConfig.from_dict(
        {
            "name": "mixed_tiny",
            "kind": "mixed_delay",
            "base": TINY,
            "variants": {
                "mixed": {
                    "schedule": "workers",
                    "num_workers": 6,
                    "generation_time": "exponential",
                },
                "D2": {"schedule": "fixed_delay", "delay": 2},
                "D4": {"schedule": "fixed_delay", "delay": 4},
                "D8": {"schedule": "fixed_delay", "delay": 8},
            },
            "grid": {"method": ["gmc", "tic"]},
        }
    )
    summary = run_experiment(config, tmp_path, progress=False)
    analysis = summary["mixed_delay"]
    assert {e["variant"] for e in analysis["methods"]["gmc"]["uniform"]} == {"D2", "D4", "D8"}

    # recompute GMC's "mixed - uniform at the same tau4" on final J by hand
    def seeds_of(point: str, key: str) -> dict[str, float]:
        data = json.loads((tmp_path / point / "summary.json").read_text())
        return {s: v[key] for s, v in data["per_seed"].items()}

    mixed = seeds_of("variant=mixed_method=gmc", "final_objective")
    tau4 = seeds_of("variant=mixed_method=gmc", "lag_tau4")
    uniform = {d: seeds_of(f"variant=D{d}_method=gmc", "final_objective") for d in (2, 4, 8)}
    taus = {d: seeds_of(f"variant=D{d}_method=gmc", "lag_tau4")["0"] for d in (2, 4, 8)}
    diffs = []
    for seed, value in mixed.items():
        x = math.log(tau4[seed])
        lo, hi = (2, 4) if x <= math.log(taus[4]) else (4, 8)
        w = (x - math.log(taus[lo])) / (math.log(taus[hi]) - math.log(taus[lo]))
        diffs.append(value - ((1 - w) * uniform[lo][seed] + w * uniform[hi][seed]))
    want = stats.t_interval(diffs)
    got = next(
        c
        for c in analysis["comparisons"]
        if c["method"] == "gmc" and c["kind"] == "same_tau4" and c["metric"] == "final_objective"
    )
    assert math.isclose(got["difference"]["mean"], want["mean"], rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(got["difference"]["hi"], want["hi"], rel_tol=1e-9, abs_tol=1e-12)
    gaps = {(g["variant"], g["metric"]) for g in analysis["gaps"]}
    assert ("mixed", "final_objective") in gaps and ("D8", "convergence_metric") in gaps
    assert summary["orderings"]  # the CLI prints them


def test_experiment_variants_name_points_and_reject_unknown_fields() -> None:
    config = ExperimentConfig.from_dict(
        {"name": "v", "base": TINY, "variants": {"a": {"delay": 1}, "b": {"delay": 2}}}
    )
    assert [label for label, _, _ in config.points()] == ["variant=a", "variant=b"]
    assert [cfg.delay for _, cfg, _ in config.points()] == [1, 2]
    with pytest.raises(ValueError, match=r"variants\['a'\]"):
        ExperimentConfig.from_dict({"name": "v", "base": TINY, "variants": {"a": {"dely": 1}}})
    with pytest.raises(ValueError, match=r"variants\['a'\]"):
        ExperimentConfig.from_dict({"name": "v", "base": TINY, "variants": {"a": {}}})
