"""The Qwen3 stage of `gmc-grpo reproduce` (`pipeline.llm_stage`): its designs are valid, and its
report quotes the declared comparisons, the bounds' quantities per delay with the two-delay
checks, and the figures (here from synthetic records, not a training run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "figures"))
from fig_records import write_train_run  # noqa: E402

from llm_runs import suite  # noqa: E402
from llm_runs.recipes import config_from_values  # noqa: E402
from pipeline import llm_bias_stage, llm_stage, reproduce  # noqa: E402


@pytest.mark.parametrize("full", [False, True])
def test_the_stage_designs_are_valid_and_name_their_settings(tmp_path, full):
    config = llm_stage.llm_suite_config(tmp_path / "suite", full)
    runs = config.runs()
    design = llm_stage.design(full)
    seeds, delays = design.seeds, design.delays
    assert len(runs) == len(seeds) * len(design.methods) * len(delays)
    assert len(seeds) >= 2  # an interval, never one seed
    # every design has the primary's cells; the full one D = 0 and two positive delays
    assert llm_stage.PRIMARY_DELAY in delays and {"gmc", "tic"} <= set(design.methods)
    if full:
        assert 0 in delays and sum(d > 0 for d in delays) >= 2
    for run in runs[:3]:
        values = config.run_values(run)
        assert values["cache_dir"] == str(tmp_path / "suite" / "cache")
        assert values["bound_every"] > 0  # the bounds' quantities along every run
        config_from_values(values)  # every run's config is valid
    stage = next(s for s in reproduce.STAGES if s.name == "llm_tiny")
    assert stage.runner == "pipeline.llm_stage:llm_tiny_stage"
    settings = dict(stage.full_settings if full else stage.settings)
    assert settings["seeds"] == list(seeds) and settings["design"] == (
        "full" if full else "default"
    )
    assert settings["primary"] == [*llm_stage.PRIMARY, llm_stage.PRIMARY_DELAY]
    assert len(llm_stage.design_seeds(True)) > len(llm_stage.design_seeds(False))


def _synthetic_suite(root: Path) -> dict:
    """Runs at D = 0, 4, 8 (removed mass grows with D by construction, `fig_records`) and the
    measures of an analysis in which GMC's held-out sampled Pass@1 beats TIC's at D = 8 by
    0.10 +- 0.01, and the runs' median KL to the behavior policy is 0.01 D nats."""
    measures = {}
    for seed, noise in enumerate((-0.01, 0.0, 0.01)):
        for delay in (0, 4, 8):
            kl = {"behavior_kl": 0.01 * delay}
            measures[(delay, "grpo", seed)] = {"sampled": 0.80 - 0.01 * delay, **kl}
            measures[(delay, "tic", seed)] = {"sampled": 0.80 + 2 * noise, **kl}
            measures[(delay, "gmc", seed)] = {
                "sampled": 0.80 + (0.10 if delay == 8 else 0.0) + 3 * noise,
                **kl,
            }
            for method in ("grpo", "tic", "gmc"):
                write_train_run(
                    root,
                    f"{method}_d{delay}_seed{seed}",
                    method=method,
                    delay=delay,
                    seed=seed,
                    steps=30,
                    eval_every=10,
                    shift=0.001 * seed,
                    model="tiny",
                )
    return measures


def test_the_report_quotes_the_declared_comparisons_and_the_bounds(tmp_path, monkeypatch):
    measures = _synthetic_suite(tmp_path / "suite")
    analysis = suite.analyse_records(measures)
    analysis.runs = [{"run": f"r{i}"} for i in range(27)]
    seen = []
    monkeypatch.setattr(
        suite, "run_suite", lambda config, render=None: seen.append(config) or analysis
    )
    result = llm_stage.llm_tiny_stage(tmp_path)
    assert seen and seen[0].out == str(tmp_path / "suite") and result["design"] == "default"
    headline = result["headline"]
    # the primary alone at 5% (p = 0.0033), at the largest delay (the declared D = 32 is absent)
    assert headline.startswith(
        "3 seeds, D = 0, 4, 8: primary GMC - TIC (D = 8) held-out sampled Pass@1 of the current "
        "policy +0.100 [+0.075, +0.125] holds"
    )
    assert "nats: D = 4: GRPO 0.04, TIC 0.04, GMC 0.04; D = 8: GRPO 0.08" in headline
    assert result["kl"]["d8/gmc"]["mean"] == pytest.approx(0.08)
    assert "removed mass grows with the delay: agrees" in headline
    assert "capped fraction grows with the delay: agrees" in headline
    assert result["declared"]["primary"]["p"] == pytest.approx(0.00333, abs=1e-4)
    assert result["power"]["sd"] == pytest.approx(0.01)
    markdown = result["markdown"]
    assert "**Primary**" in markdown and "Holm" in markdown
    assert "$\\bar d \\pm t_{0.975,\\,n-1}" in markdown  # formulas as $...$
    assert "| 8 | sampled | gmc - tic | +0.100 |" in markdown
    assert "**Primary** (declared in advance, level 0.05): gmc - tic sampled at D = 8" in markdown
    # the bounds' quantities per delay and method, and the two-delay checks measured
    assert "| 8 | tic | 0.017 [0.0145, 0.0195] |" in markdown  # 0.016 + the seeds' shifts
    assert (
        "removed mass grows with the delay (delay enters through the correction): agrees "
        "(4 of 4 consecutive delays)" in markdown
    )
    for name in ("figure2", "figure4", "bounds_fixed_delay"):
        assert f"![{name}]({tmp_path.name}/figures/{name}.png)" in markdown
        assert (tmp_path / "figures" / f"{name}.png").is_file()
    assert "Machine: " in markdown and "cores" in result["machine"]


def test_the_bias_stage_settings_fit_the_suite():
    settings = dict(llm_bias_stage.llm_bias_settings())
    # a stale behavior policy, no staler than the suite's largest delay (at lag 64 the KL is
    # several nats and every interval stays unresolved: llm_bias_stage's docstring)
    assert 1 <= settings["lag"] <= max(llm_stage.LLM_SUITE_DELAYS)
    from llm_runs.recipes import load_recipe

    total = load_recipe(llm_stage.LLM_SUITE_RECIPE, base_only=True)["total_steps"]
    for step in settings["steps"]:  # checkpoints the run writes (every `lag` updates)
        assert step - settings["lag"] >= 0 and step % settings["lag"] == 0 and step <= total
    from llm_runs.lm_bias import BiasSettings

    bias = BiasSettings(**llm_bias_stage.BIAS_SETTINGS)  # valid
    assert len(bias.group_sizes) >= 2  # the shrink-with-G finding needs two sizes
    stage = next(s for s in reproduce.STAGES if s.name == "llm_bias")
    assert stage.runner == "pipeline.llm_bias_stage:llm_bias_stage"


def test_the_full_design_has_the_seeds_the_pilot_spread_asks_for():
    from llm_runs.comparisons import design_power

    power = design_power(llm_stage.PILOT["differences"], detectable=llm_stage.DETECTABLE)
    assert len(llm_stage.design_seeds(full=True)) == power["seeds_needed"]
    lines = llm_stage.design_markdown(full=False)
    assert any(f"needs {power['seeds_needed']} seeds" in line for line in lines)
