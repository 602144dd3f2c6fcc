"""`llm_runs.comparisons`: the declared primary, Holm-adjusted secondaries and the design power
of a suite analysis, on hand-made per-seed measures."""

from __future__ import annotations

import math

import pytest
from hand_suite import SEEDS, hand_made_analysis

from gmc_grpo.stats import holm_adjust, paired_t_test
from llm_runs.comparisons import IDENTICAL, declared_comparisons, design_power, identical_runs
from llm_runs.suite import analyse_records


def test_primary_is_gmc_minus_tic_at_the_largest_delay_and_the_rest_are_holm_adjusted():
    declared = declared_comparisons(hand_made_analysis())
    primary = declared["primary"]
    assert (primary["delay"], primary["a"], primary["b"], primary["measure"]) == (
        16,
        "gmc",
        "tic",
        "consumed_reward_final",
    )
    assert primary["mean"] == pytest.approx(0.25)
    assert primary["p"] == pytest.approx(0.030466, abs=1e-5)
    assert primary["verdict"] == "holds" and primary["role"] == "primary"
    secondary = declared["secondary"]
    # 2 delays x 3 pairs x 2 measures, less the primary
    assert len(secondary) == 11 and declared["family_size"] == 11
    assert [r["p_holm"] for r in secondary] == pytest.approx(
        holm_adjust([r["p"] for r in secondary])
    )
    by = {(r["delay"], r["a"], r["b"], r["measure"]): r for r in secondary}
    # the same differences as the primary, but adjusted over 11 tests: 0.0305 * 11 > 0.05
    mean_gmc_tic = by[(16, "gmc", "tic", "mean_reward")]
    assert mean_gmc_tic["p"] == pytest.approx(primary["p"])
    assert mean_gmc_tic["verdict"] == "not resolved"
    assert by[(16, "tic", "grpo", "consumed_reward_final")]["verdict"] == "not resolved"
    assert by[(0, "gmc", "tic", "consumed_reward_final")]["prediction"].endswith(
        "(similar at D = 0)"
    )
    assert by[(0, "tic", "grpo", "consumed_reward_final")]["verdict"] in (
        "differs",
        "no difference resolved",
    )
    # its Markdown: tests/pipeline/test_pipeline_llm_report.py


def test_comparisons_between_identical_runs_are_listed_apart_and_not_counted():
    # at D = 0 GMC and TIC are one computation: equal values on every seed
    measures = {}
    for seed in SEEDS:
        grpo0 = 0.3 + 0.01 * seed
        measures[(0, "grpo", seed)] = {"consumed_reward_final": grpo0}
        measures[(0, "tic", seed)] = {"consumed_reward_final": grpo0 + 0.002 * seed}
        measures[(0, "gmc", seed)] = {"consumed_reward_final": grpo0 + 0.002 * seed}
        measures[(16, "grpo", seed)] = {"consumed_reward_final": 0.3 + 0.01 * seed}
        measures[(16, "tic", seed)] = {"consumed_reward_final": 0.3 + 0.02 * seed}
        measures[(16, "gmc", seed)] = {"consumed_reward_final": 0.4 + 0.03 * seed}
    declared = declared_comparisons(analyse_records(measures))
    identical = declared["identical"]
    assert [(r["delay"], r["a"], r["b"]) for r in identical] == [(0, "gmc", "tic")]
    assert identical[0]["verdict"] == IDENTICAL and identical[0]["role"] == "identical"
    # 2 delays x 3 pairs, less the primary, less the identical pair: Holm over 4, not 5
    secondary = declared["secondary"]
    assert len(secondary) == 4 and declared["family_size"] == 4
    assert [r["p_holm"] for r in secondary] == pytest.approx(
        holm_adjust([r["p"] for r in secondary])
    )
    assert identical_runs({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.0, 2: 5.0})
    assert not identical_runs({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.5})
    assert not identical_runs({0: 1.0}, {1: 1.0})  # no shared seed: nothing to call identical


def test_a_missing_primary_is_refused():
    with pytest.raises(ValueError, match="no gmc - vcpo"):
        declared_comparisons(hand_made_analysis(), primary=("gmc", "vcpo", "consumed_reward_final"))


def test_design_power_from_the_seed_spread():
    differences = [0.1, 0.2, 0.3, 0.4]  # sd = sqrt(5/3) / 10 = 0.1291
    out = design_power(differences, detectable=0.25)
    assert out["sd"] == pytest.approx(math.sqrt(5 / 3) / 10)
    assert out["spread_from_seeds"] == 4 and out["seeds"] == 4
    # effect 0.25 / 0.1291 = 1.94: 5 seeds reach 80% power (4 seeds: 0.69 by the same formula)
    assert out["seeds_needed"] == 5
    assert out["power_of_design"] < 0.8
    assert out["minimum_detectable"] > 0.25
    more = design_power(differences, detectable=0.25, seeds=out["seeds_needed"])
    assert more["power_of_design"] >= 0.8 and more["minimum_detectable"] <= 0.25
    assert paired_t_test(differences)["sd"] == pytest.approx(out["sd"])
