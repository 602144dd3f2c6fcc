"""toy_mdps.train.analysis: the statistics take per-seed numbers (no files), the dispatch on the
experiment kind is one table, and the orderings' intervals and verdicts equal a hand computation."""

from __future__ import annotations

import math

import pytest

from toy_mdps.train.analysis import (
    ANALYSES,
    ExperimentRecords,
    analyse_records,
    delay_orderings,
)
from toy_mdps.train.config import EXPERIMENT_KINDS, ExperimentConfig

T_975_2 = 4.302652729911275  # Student t quantile 0.975 with 2 degrees of freedom (tables: 4.303)

# three seeds per point: final J and the convergence metric
FINAL = {
    ("gmc", 0): [0.95, 0.94, 0.96],
    ("tic", 0): [0.95, 0.94, 0.96],
    ("grpo", 0): [0.951, 0.939, 0.96],
    ("gmc", 8): [0.9, 0.8, 0.85],
    ("tic", 8): [0.7, 0.6, 0.68],
    ("grpo", 8): [0.5, 0.45, 0.3],
}
CONVERGENCE = {
    ("gmc", 8): [0.1, 0.2, 0.15],
    ("tic", 8): [0.3, 0.4, 0.35],
    ("grpo", 8): [0.5, 0.6, 0.55],
}


def _per_seed() -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (method, delay), values in FINAL.items():
        conv = CONVERGENCE.get((method, delay), [1.0, 1.0, 1.0])
        out[f"{method}_{delay}"] = {
            str(s): {"final_objective": f, "convergence_metric": c}
            for s, (f, c) in enumerate(zip(values, conv, strict=True))
        }
    return out


def _rows() -> list[dict]:
    return [
        {"method": m, "delay": d, "point": f"{m}_{d}", "final_objective": sum(v) / 3}
        for (m, d), v in FINAL.items()
    ]


def _hand_interval(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """mean, lo, hi of the per-seed differences a - b: Student t over 3 seeds."""
    d = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    half = T_975_2 * sd / math.sqrt(3)
    return mean, mean - half, mean + half


def test_delay_orderings_equal_a_hand_computation() -> None:
    by_claim = {o["claim"]: o for o in delay_orderings(_rows(), _per_seed(), 0.95)}
    assert list(by_claim) == [
        "GMC >= TIC >= GRPO, final J, D = 8",
        "GMC <= TIC <= GRPO, (1/N) sum ||grad J||^2, D = 8",
        "GMC, TIC, GRPO similar at D = 0 (final J)",
        "GRPO degrades from D = 0 to D = 8 (final J)",
    ]
    final = by_claim["GMC >= TIC >= GRPO, final J, D = 8"]
    gmc_tic, tic_grpo = final["differences"]
    # gmc - tic per seed: 0.2, 0.2, 0.17: mean 0.19, sd sqrt(3e-4), half 4.3027 x 0.01
    assert (gmc_tic["mean"], gmc_tic["lo"], gmc_tic["hi"]) == pytest.approx(
        (0.19, 0.19 - T_975_2 * 0.01, 0.19 + T_975_2 * 0.01)
    )
    assert (tic_grpo["mean"], tic_grpo["lo"], tic_grpo["hi"]) == pytest.approx(
        _hand_interval(FINAL[("tic", 8)], FINAL[("grpo", 8)])
    )
    # tic - grpo = 0.2, 0.15, 0.38: its interval holds 0, so the chain is not significant
    assert tic_grpo["lo"] < 0 < gmc_tic["lo"] and final["verdict"] == "not significant"
    # smaller is better: every difference is exactly -0.2 (no spread), the chain holds
    conv = by_claim["GMC <= TIC <= GRPO, (1/N) sum ||grad J||^2, D = 8"]
    assert [d["mean"] for d in conv["differences"]] == pytest.approx([-0.2, -0.2])
    assert conv["verdict"] == "holds"
    similar = by_claim["GMC, TIC, GRPO similar at D = 0 (final J)"]
    assert similar["verdict"] == "holds"  # every interval inside +-0.01
    # gmc - grpo at D = 0: -0.001, 0.001, 0: mean 0, sd 0.001
    assert similar["differences"][1]["hi"] == pytest.approx(T_975_2 * 0.001 / math.sqrt(3))
    degrades = by_claim["GRPO degrades from D = 0 to D = 8 (final J)"]
    assert (degrades["differences"][0]["mean"], degrades["differences"][0]["lo"]) == pytest.approx(
        _hand_interval(FINAL[("grpo", 0)], FINAL[("grpo", 8)])[:2]
    )
    assert degrades["verdict"] == "holds"


def test_one_table_dispatches_every_kind_on_records_in_memory() -> None:
    """`ANALYSES` has one analysis per experiment kind; `analyse_records` reads no file: the
    records here exist only in memory."""
    assert set(ANALYSES) == set(EXPERIMENT_KINDS)
    config = ExperimentConfig.from_dict(
        {"name": "hand", "kind": "delay_sweep", "base": {}, "grid": {"method": ["gmc"]}}
    )
    summaries = {point: {"per_seed": seeds} for point, seeds in _per_seed().items()}
    records = ExperimentRecords(config=config, rows=_rows(), summaries=summaries)
    summary = analyse_records(records)
    assert summary["kind"] == "delay_sweep" and summary["num_points"] == 6
    assert summary["orderings"] == delay_orderings(_rows(), _per_seed(), config.confidence)
    plain = ExperimentRecords(
        config=ExperimentConfig.from_dict({"name": "plain", "base": {}}),
        rows=_rows(),
        summaries=summaries,
    )
    assert analyse_records(plain)["orderings"] == []  # kind "runs": the table only
