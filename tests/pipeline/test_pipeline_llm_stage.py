"""The Qwen3 stage of `gmc-grpo reproduce` (`pipeline.llm_stage`): its suite is valid, and its
report quotes the paired table over seeds (here from a synthetic analysis, not a training run)."""

from __future__ import annotations

import pytest

from llm_runs import suite
from llm_runs.recipes import config_from_values
from pipeline import llm_stage, reproduce


def test_the_stage_suite_is_valid_and_names_its_settings(tmp_path):
    config = llm_stage.llm_suite_config(tmp_path / "suite")
    runs = config.runs()
    assert len(runs) == len(llm_stage.LLM_SUITE_SEEDS) * len(llm_stage.LLM_SUITE_METHODS)
    assert len(llm_stage.LLM_SUITE_SEEDS) >= 2  # an interval, never one seed
    for run in runs:
        values = config.run_values(run)
        assert values["cache_dir"] == str(tmp_path / "suite" / "cache")
        config_from_values(values)  # every run's config is valid
    stage = next(s for s in reproduce.STAGES if s.name == "llm_tiny")
    assert stage.runner == "pipeline.llm_stage:llm_tiny_stage"
    assert dict(stage.settings)["seeds"] == list(llm_stage.LLM_SUITE_SEEDS)


def test_the_report_quotes_the_paired_intervals(tmp_path, monkeypatch):
    # GMC beats TIC by 0.10 +- 0.01 (holds); TIC and GRPO differ by -0.02, 0, +0.02 (not resolved)
    measures = {}
    for seed, noise in enumerate((-0.01, 0.0, 0.01)):
        measures[(16, "grpo", seed)] = {"final_reward": 0.30}
        measures[(16, "tic", seed)] = {"final_reward": 0.30 + 2 * noise}
        measures[(16, "gmc", seed)] = {"final_reward": 0.40 + 3 * noise}
    analysis = suite.analyse_records(measures)
    analysis.runs = [{"run": f"r{i}"} for i in range(9)]
    seen = []
    monkeypatch.setattr(suite, "run_suite", lambda config: seen.append(config) or analysis)
    result = llm_stage.llm_tiny_stage(tmp_path)
    assert seen and seen[0].out == str(tmp_path / "suite")
    gmc_tic = next(r for r in analysis.paired if (r["a"], r["b"]) == ("gmc", "tic"))
    assert gmc_tic["mean"] == pytest.approx(0.10) and gmc_tic["verdict"] == "holds"
    # the primary alone at 5% (p = 0.0033); the secondaries Holm-adjusted: GMC - GRPO (0.07, 0.10,
    # 0.13; raw p = 0.029) does not survive the factor 2
    headline = result["headline"]
    assert headline.startswith("3 seeds, D = 16, final reward: primary GMC - TIC +0.100 [")
    assert "+0.100 [+0.075, +0.125] holds; Holm-adjusted: GMC - GRPO +0.100 [" in headline
    assert "TIC - GRPO +0.000 [-0.050, +0.050] not resolved" in headline
    assert result["declared"]["primary"]["p"] == pytest.approx(0.00333, abs=1e-4)
    gmc_grpo = next(
        r for r in result["declared"]["secondary"] if r["b"] == "grpo" and r["a"] == "gmc"
    )
    assert gmc_grpo["p"] < 0.05 < gmc_grpo["p_holm"] and gmc_grpo["verdict"] == "not resolved"
    assert result["power"]["sd"] == pytest.approx(0.01) and "Power: " in result["markdown"]
    assert "**Primary**" in result["markdown"]
    markdown = result["markdown"]
    assert "$\\bar d \\pm t_{0.975,\\,n-1}" in markdown  # formulas as $...$
    assert "| 16 | final_reward | gmc - tic | +0.100 |" in markdown
    assert "Machine: " in markdown and "cores" in result["machine"]
    assert "half-widths" in markdown
