"""The `toy_workers` stage of `gmc-grpo reproduce` on tiny stand-ins of its two experiments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import toy_mdps.train.config as train_config
from pipeline import reproduce
from pipeline.workers_stage import workers_stage

TINY = dict(
    num_prompts=2,
    vocab_size=3,
    max_length=3,
    num_groups=2,
    group_size=4,
    total_steps=16,
    seeds=[0, 1, 2],
    checkpoint_every=1000,
)


@pytest.fixture
def tiny_experiments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "configs"
    folder.mkdir()
    mixed = {
        "name": "mixed_tiny",
        "kind": "mixed_delay",
        "description": "tiny mixed",
        "base": TINY,
        "variants": {
            "mixed": {"schedule": "workers", "num_workers": 6, "generation_time": "exponential"},
            "D2": {"schedule": "fixed_delay", "delay": 2},
            "D6": {"schedule": "fixed_delay", "delay": 6},
        },
        "grid": {"method": ["gmc", "tic"]},
    }
    regularity = {
        "name": "regularity_tiny",
        "kind": "delay_regularity",
        "description": "tiny regularity",
        "base": {**TINY, "schedule": "workers", "num_workers": 6, "drift_max_lag": 6},
        "variants": {
            "length_proportional": {"generation_time": "length_proportional"},
            "exponential": {"generation_time": "exponential"},
        },
        "grid": {"method": ["gmc", "tic"]},
    }
    for name, data in (("mixed_tiny", mixed), ("regularity_tiny", regularity)):
        (folder / f"train_{name}.json").write_text(json.dumps(data))
    monkeypatch.setattr(train_config, "WORKER_EXPERIMENTS", ("mixed_tiny", "regularity_tiny"))
    monkeypatch.setattr(train_config, "shipped_experiment", lambda n: folder / f"train_{n}.json")
    return tmp_path


def test_stage_answers_both_questions_with_intervals_and_figures(tiny_experiments: Path) -> None:
    out = tiny_experiments / "results" / "toy_workers"
    out.mkdir(parents=True)
    result = workers_stage(out)
    md = result["markdown"]
    assert "(a) Mixed-lag batches vs uniform delays" in md
    assert "(b) Length-coupled completion" in md
    assert r"$\bar\tau_4 = \frac{1}{NB}" in md  # formulas as LaTeX
    assert r"\mid \tau_n^{(b)}=t]" in md
    assert "mixed - uniform at the same" in md and "GMC - TIC" in md
    # no pipe inside a formula of a table row (it would split the cell)
    for line in md.splitlines():
        if line.startswith("|"):
            for cell in line.strip("|").split("|"):
                assert cell.count("$") % 2 == 0, line
    assert result["headline"].startswith("(a) mixed - uniform at equal tau4")
    assert "(b) delay regularity holds in" in result["headline"]
    for name in ("mixed_tiny_mixed_vs_tau4.png", "regularity_tiny_regularity.png"):
        kind = name.split("_")[0]
        assert (out / f"{kind}_tiny" / "figures" / name).exists()
    # the images the section links resolve to the written files
    for line in md.splitlines():
        if line.startswith("!["):
            link = line[line.index("](") + 2 : -1]
            assert (out.parent / link).exists(), link


def test_stage_is_listed_in_reproduce() -> None:
    stage = next(s for s in reproduce.STAGES if s.name == "toy_workers")
    assert stage.runner == "pipeline.workers_stage:workers_stage"
    names = [s.name for s in reproduce.STAGES]
    assert names.index("toy_workers") < names.index("figures")
