"""The LM bias report is rendered apart from the measurement: `pipeline.llm_bias_stage` renders a
results object (`bias_table_markdown`, `bias_stage_markdown`), and `gmc-grpo llm bias` gets that
renderer from `pipeline.llm` (the track writes numbers only)."""

from __future__ import annotations

import json

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
    settings = {"group_sizes": (4, 16), "blocks": 24, "target_blocks": 48}
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


def test_the_stage_section_renders_a_results_object():
    results = BiasStageResults(synthetic_result(), "tiny_delay_sweep", "llm_bias", "a machine")
    headline = bias_stage_headline(results)
    assert headline.startswith("GMC's squared bias below TIC's (paired interval below 0) at 2 of 2")
    assert "shrinks from G = 4 to 16 (resolved) at 1 of 1 checkpoints" in headline
    text = bias_stage_markdown(results)
    assert "trained here into `llm_bias/run/`" in text and "$D = 16$" in text
    assert bias_table_markdown(results.result).rstrip() in text
    assert "checkpoint 48, G = 4: -0.2 [-0.25, -0.15] (holds)" in text
    assert text.endswith("Machine: a machine at the start of the stage.\n")


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
