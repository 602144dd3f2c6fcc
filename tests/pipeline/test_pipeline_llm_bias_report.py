"""The LM bias report is rendered apart from the measurement: `pipeline.llm_bias_stage` renders a
results object (`bias_table_markdown`, `bias_stage_markdown`), and `gmc-grpo llm bias` gets that
renderer from `pipeline.llm` (the track writes numbers only)."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("torch")

from pipeline.llm_bias_stage import (  # noqa: E402
    BiasStageResults,
    bias_stage_headline,
    bias_stage_markdown,
    bias_table_markdown,
)


def _interval(value: float, half: float) -> dict[str, float]:
    return {"value": value, "lo": value - half, "hi": value + half, "se": half / 1.96}


def synthetic_result() -> dict:
    """A `bias_of_run` result of one checkpoint at G = 4 and 16 (IS, TIC, GMC; GMC - TIC)."""
    from llm_runs.lm_bias import bias_findings

    def at(g: int) -> dict:
        shrink = 4 / g
        methods = {
            "is": {"bias_sq": _interval(0.01, 0.05), "relative_bias_sq": _interval(0.1, 0.5)},
            "tic": {"bias_sq": _interval(0.3, 0.05), "relative_bias_sq": _interval(3.0, 0.5)},
            "gmc": {
                "bias_sq": _interval(0.1 * shrink, 0.02),
                "relative_bias_sq": _interval(shrink, 0.2),
            },
        }
        methods["tic"]["removed_mass"] = _interval(0.6, 0.01)
        paired = {"gmc - tic": {k: _interval(-0.2, 0.05) for k in ("bias_sq", "relative_bias_sq")}}
        return {"methods": methods, "paired": paired, "groups_per_block": 128 // g}

    checkpoints = [
        {"step": 48, "behavior_step": 32, "kl": _interval(0.5, 0.1), "by_group_size": {}}
    ]
    checkpoints[0]["by_group_size"] = {4: at(4), 16: at(16)}
    settings = {"group_sizes": (4, 16), "blocks": 24, "target_blocks": 48, "seed": 0}
    settings["trajectories_per_block"] = 128
    return {
        "run": "RUN",
        "lag": 16,
        "checkpoints": checkpoints,
        "findings": bias_findings(checkpoints, 0.95),
        "settings": settings,
    }


def test_the_table_renders_every_number_and_finding():
    text = bias_table_markdown(synthetic_result())
    lines = text.splitlines()
    assert lines[0] == (
        "Checkpoint 48 against its behavior policy 32 (lag 16): KL(current || behavior) "
        "0.5 [0.4, 0.6] nats per response."
    )
    assert "| 4 | tic | 0.3 [0.25, 0.35] | 3 [2.5, 3.5] | 0.6 | nan |" in lines
    assert (
        "| 16 | **gmc - tic** (paired) | -0.2 [-0.25, -0.15] | -0.2 [-0.25, -0.15] | | |" in lines
    )
    assert "- IS unbiased (0 inside its interval): 2 of 2 points." in lines
    assert (
        "- GMC's squared bias below TIC's (paired interval below 0): 2 of 2 points (0 reversed)."
        in lines
    )
    assert any(line.startswith("- gmc, checkpoint 48:") and "(shrinks)" in line for line in lines)
    assert text.endswith("\n")


def test_the_stage_section_renders_a_results_object_of_one_run():
    from pipeline.llm_bias_stage import across_run_findings

    runs = {0: synthetic_result()}
    across = across_run_findings(runs, primary=(48, 4))
    results = BiasStageResults(runs, across, "tiny_delay_sweep", "llm_bias", "a machine", {0: 1.0})
    headline = bias_stage_headline(results)
    assert headline.startswith(
        "GMC - TIC relative squared bias at the primary point (checkpoint 48, G = 4): "
        "-0.2 (1 run, no interval) over 1 run (not resolved; own interval below 0 in 1 of 1)"
    )
    assert "IS unbiased at 2 of 2 points" in headline
    assert "shrinks with G (resolved) at 1 of 1 checkpoints" in headline
    text = bias_stage_markdown(results)
    assert "trained here into `llm_bias/run_s<seed>/`" in text and "$D = 16$" in text
    assert bias_table_markdown(runs[0]).rstrip() in text
    assert "checkpoint 48, $G = 4$" in text
    assert "Machine: a machine at the start of the stage" in text
    assert text.endswith("seed 0 1 s.\n")


def test_the_llm_command_writes_the_pipelines_report_the_track_only_numbers(
    tmp_path, monkeypatch, capsys
):
    import llm_runs.lm_bias
    from llm_runs.cli import main as track_main
    from pipeline.llm import main

    result = synthetic_result()
    monkeypatch.setattr(
        llm_runs.lm_bias, "bias_of_run", lambda *a, **k: json.loads(json.dumps(result))
    )
    argv = ["bias", "--run", str(tmp_path / "run"), "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    written = (tmp_path / "a" / "bias.md").read_text()
    assert written == bias_table_markdown(json.loads(json.dumps(result)))
    assert json.loads((tmp_path / "a" / "bias.json").read_text())["lag"] == 16
    assert track_main([*argv, "--out", str(tmp_path / "b")]) == 0  # no renderer: numbers only
    assert (tmp_path / "b" / "bias.json").is_file() and not (tmp_path / "b" / "bias.md").exists()
    assert capsys.readouterr().out.rstrip().endswith(f"wrote {tmp_path / 'b' / 'bias.json'}")


# ----------------------------------------------------------------------------------------------
# Over several runs: the across-run statistics and their rendering
# ----------------------------------------------------------------------------------------------


def run_result(paired: dict[tuple[int, int], tuple[float, float]], shrinks: bool = False) -> dict:
    """A `bias_of_run` result (JSON-reread: `G` keys as text) whose GMC - TIC paired relative
    squared bias at (checkpoint, G) is `value -+ half` for each `paired` entry."""
    from llm_runs.lm_bias import bias_findings

    steps = sorted({step for step, _ in paired})
    checkpoints = []
    for step in steps:
        by_g = {}
        for (s, g), (value, half) in sorted(paired.items()):
            if s != step:
                continue
            gmc = 0.1 if shrinks and g == 16 else 1.0
            by_g[str(g)] = {
                "methods": {
                    "is": {"bias_sq": _interval(0.0, 0.1), "relative_bias_sq": _interval(0, 1)},
                    "tic": {"bias_sq": _interval(2.0, 0.1), "relative_bias_sq": _interval(2, 1)},
                    "gmc": {"bias_sq": _interval(gmc, 0.1), "relative_bias_sq": _interval(1, 1)},
                },
                "paired": {
                    "gmc - tic": {
                        "bias_sq": _interval(value, half),
                        "relative_bias_sq": _interval(value, half),
                    }
                },
            }
        checkpoints.append(
            {
                "step": step,
                "behavior_step": step - 32,
                "kl": _interval(0.2, 0.05),
                "by_group_size": by_g,
            }
        )
    settings = {"group_sizes": [4, 16], "blocks": 24, "target_blocks": 48, "seed": 7}
    settings["trajectories_per_block"] = 128
    return {
        "run": "RUN",
        "lag": 32,
        "checkpoints": checkpoints,
        "findings": bias_findings(checkpoints, 0.95),
        "settings": settings,
    }


def three_runs() -> dict[int, dict]:
    """Three runs: at the primary (32, 4) the paired values -3, -2, -1 (per-run intervals
    -+0.5: all below 0); at (32, 16) 1, 2, 3; at (64, 4) 0.1, -0.1, 0; (64, 16) only in run 0."""
    values = {
        (32, 4): (-3.0, -2.0, -1.0),
        (32, 16): (1.0, 2.0, 3.0),
        (64, 4): (0.1, -0.1, 0.0),
    }
    runs = {}
    for i, seed in enumerate((0, 1, 2)):
        paired = {key: (v[i], 0.5) for key, v in values.items()}
        if seed == 0:
            paired[(64, 16)] = (-5.0, 0.5)
        runs[seed] = run_result(paired, shrinks=seed == 2)
    return runs


def test_across_runs_the_paired_mean_and_t_interval_are_the_hand_computed_ones():
    from pipeline.llm_bias_stage import across_run_findings

    across = across_run_findings(three_runs(), primary=(32, 4))
    points = {(p["step"], p["G"]): p for p in across["points"]}
    assert list(points) == [(32, 4), (32, 16), (64, 4), (64, 16)]
    head = across["primary"]
    assert head is points[(32, 4)] and head["primary"] and head["n"] == 3
    # mean -2, sd 1, t_{0.975, 2} = 4.302653 -> half-width 4.302653 / sqrt(3) = 2.484138
    assert head["mean"] == pytest.approx(-2.0)
    assert head["lo"] == pytest.approx(-2.0 - 2.484138, abs=1e-5)
    assert head["hi"] == pytest.approx(-2.0 + 2.484138, abs=1e-5)
    assert (head["below"], head["above"]) == (3, 0)  # every run's own interval lies below 0
    assert head["verdict"] == "not resolved"  # the interval over 3 runs still covers 0
    assert [v["seed"] for v in head["values"]] == [0, 1, 2]
    # t = -2 / (1 / sqrt 3) = -3.4641, two-sided p with 2 df = 0.07418
    assert head["p"] == pytest.approx(0.07418, abs=1e-4)
    assert math.isnan(head["p_holm"])
    up = points[(32, 16)]
    assert (up["mean"], up["below"], up["above"]) == (pytest.approx(2.0), 0, 3)
    # the run missing a point: (64, 16) measured in run 0 only -> no interval, no test
    lone = points[(64, 16)]
    assert lone["n"] == 1 and [v["seed"] for v in lone["values"]] == [0]
    assert lone["lo"] == -math.inf and math.isnan(lone["p"]) and math.isnan(lone["p_holm"])
    assert lone["verdict"] == "not resolved" and lone["below"] == 1
    # Holm over the two tested secondaries: p(32,16) = 0.07418, p(64,4) = 1 -> 0.148, 1
    assert up["p_holm"] == pytest.approx(2 * 0.07418, abs=2e-4)
    assert points[(64, 4)]["p_holm"] == pytest.approx(1.0)
    assert up["verdict"] == points[(64, 4)]["verdict"] == "not resolved"
    # per run: the existing findings counted
    assert across["per_run"][0]["gmc_below_tic"] == {"holds": 2, "reversed": 1, "of": 4}
    assert across["per_run"][1]["is_unbiased"] == {"holds": 3, "of": 3}
    # run 0 has G = 4 and 16 at both checkpoints, runs 1 and 2 only at checkpoint 32
    shrinks = [across["per_run"][s]["gmc_shrinks"] for s in (0, 1, 2)]
    assert shrinks == [{"holds": 0, "of": 2}, {"holds": 0, "of": 1}, {"holds": 1, "of": 1}]
    assert across["seeds"] == [0, 1, 2] and across["measure"] == "relative_bias_sq"


def test_across_runs_a_resolved_primary_and_holm_verdicts_are_signed():
    from pipeline.llm_bias_stage import across_run_findings

    runs = {
        s: run_result({(32, 4): (-1.0 - 0.01 * s, 0.1), (64, 4): (1.0 + 0.01 * s, 0.1)})
        for s in range(4)
    }
    across = across_run_findings(runs, primary=(32, 4))
    assert across["primary"]["verdict"] == "holds" and across["primary"]["hi"] < 0
    second = across["points"][1]
    assert second["p_holm"] == pytest.approx(second["p"])  # one secondary: Holm changes nothing
    assert second["verdict"] == "reversed"
    missing = across_run_findings(runs, primary=(48, 8))  # a primary not measured
    assert missing["primary"] is None
    assert all(p["verdict"] == "holds" or p["verdict"] == "reversed" for p in missing["points"])


def test_the_stage_renders_every_run_and_the_across_run_table():
    from pipeline.llm_bias_stage import (
        across_run_findings,
        across_run_markdown,
    )

    runs = three_runs()
    across = across_run_findings(runs, primary=(32, 4))
    results = BiasStageResults(
        runs,
        across,
        "tiny_additions_sweep",
        "llm_bias",
        "a machine",
        {0: 612.4, 2: 399.6},  # run 1 reused
    )
    headline = bias_stage_headline(results)
    assert headline.startswith(
        "GMC - TIC relative squared bias at the primary point (checkpoint 32, G = 4): "
        "-2 [-4.48, +0.484] over 3 runs (not resolved; own interval below 0 in 3 of 3)"
    )
    assert "secondary points below 0 (Holm) at 0 of 3 (0 reversed)" in headline
    assert "IS unbiased at 4, 3, 3 points" not in headline  # counts, each with its own "of"
    assert "IS unbiased at 4 of 4, 3 of 3, 3 of 3 points" in headline
    assert "shrinks with G (resolved) at 0 of 2, 0 of 1, 1 of 1 checkpoints" in headline
    table = across_run_markdown(across).splitlines()
    assert table[2] == (
        "| 32 | 4 | **primary** | -2 [-4.48, +0.484] | 3 | 3 | 0 | 0.0742 |  | not resolved |"
    )
    assert table[5] == (
        "| 64 | 16 | secondary | -5 (1 run, no interval) | 1 | 1 | 0 | nan | nan | not resolved |"
    )
    text = bias_stage_markdown(results)
    for seed in (0, 1, 2):
        assert f"**Training seed {seed}** (bias seed 7;" in text
        assert bias_table_markdown(runs[seed]).rstrip() in text
    assert across_run_markdown(across).rstrip() in text
    assert "training seeds 0, 1, 2" in text and "`llm_bias/run_s<seed>/`" in text
    assert text.endswith("seed 0 612 s, seed 1 reused, seed 2 400 s.\n")


def test_the_settings_name_the_seeds_and_each_run_has_its_own_bias_seed():
    from pipeline.llm_bias_stage import BIAS_PRIMARY, BIAS_SEEDS, bias_seed, llm_bias_settings

    settings = dict(llm_bias_settings())
    assert settings["seeds"] == list(BIAS_SEEDS) and len(BIAS_SEEDS) >= 2
    assert settings["primary"] == list(BIAS_PRIMARY)
    assert BIAS_PRIMARY[0] in settings["steps"]
    assert BIAS_PRIMARY[1] in settings["bias"]["group_sizes"]
    seeds = [bias_seed(s) for s in BIAS_SEEDS]
    assert len(set(seeds)) == len(seeds) and seeds == [bias_seed(s) for s in BIAS_SEEDS]
    import numpy as np

    expected = np.random.SeedSequence(0, spawn_key=(1,)).generate_state(1, np.uint32)[0]
    assert bias_seed(1) == int(expected)


def test_the_stage_trains_and_measures_each_seed_with_its_own_bias_seed(tmp_path, monkeypatch):
    """`llm_bias_results` with the training and the measurement replaced by fakes: one run per
    seed in `run_s<seed>/`, one cache folder for all, each measured with `bias_seed(seed)`; a
    finished run's `bias.json` is reused; `bias.json` holds the runs and the across-run
    findings."""
    import llm_runs.bias_cli
    import llm_runs.lm_bias
    from pipeline import llm_bias_stage as stage

    trained, measured = [], []
    values = {0: -3.0, 1: -2.0}

    def fake_train(recipe, run, out, steps, *, progress, delay, seed, cache_dir):
        trained.append((recipe, run, out.name, delay, seed, cache_dir))
        return out

    def fake_bias(run_dir, settings, *, steps, lag, progress):
        seed = int(run_dir.name.removeprefix("run_s"))
        measured.append((run_dir.name, settings.seed, tuple(steps), lag))
        return json.loads(json.dumps(run_result({(32, 4): (values[seed], 0.5)})))

    monkeypatch.setattr(llm_runs.bias_cli, "train_for_bias", fake_train)
    monkeypatch.setattr(llm_runs.lm_bias, "bias_of_run", fake_bias)
    monkeypatch.setattr(stage, "BIAS_SEEDS", (0, 1))
    results = stage.llm_bias_results(tmp_path)
    cache = tmp_path / "cache"
    assert trained == [
        (stage.LLM_SUITE_RECIPE, "gmc", "run_s0", 32, 0, cache),
        (stage.LLM_SUITE_RECIPE, "gmc", "run_s1", 32, 1, cache),
    ]
    assert measured == [
        ("run_s0", stage.bias_seed(0), (32, 64), 32),
        ("run_s1", stage.bias_seed(1), (32, 64), 32),
    ]
    assert list(results.runs) == [0, 1] and results.runs[1]["run_seed"] == 1
    assert results.across["primary"]["mean"] == pytest.approx(-2.5)
    written = json.loads((tmp_path / "bias.json").read_text())
    assert list(written["runs"]) == ["0", "1"]
    assert written["across_runs"]["primary"]["n"] == 2
    trained.clear()
    measured.clear()
    stage.llm_bias_results(tmp_path)  # both runs finished and measured: reused
    assert trained == [] and measured == []
    assert list(results.seconds) == [0, 1] and stage.llm_bias_results(tmp_path).seconds == {}
