"""figures.discover: what a folder of runs holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fig_records import write_eval_run, write_toy_train_run, write_train_run

from figures.discover import classify, discover, find_run_dirs, inventory, is_run_dir, model_label


def test_discover_classifies_and_attaches_eval_runs(tmp_path: Path) -> None:
    train = write_train_run(tmp_path, "gmc-d128", method="gmc", delay=128, steps=5)
    # an HF model folder inside the run (config.json without a "config" object) is not a run
    (train / "checkpoints" / "step_5" / "model").mkdir(parents=True)
    (train / "checkpoints" / "step_5" / "model" / "config.json").write_text(
        json.dumps({"model_type": "qwen3"})
    )
    evals = write_eval_run(
        tmp_path,
        "eval-gmc",
        model=str(train / "checkpoints" / "step_5" / "model"),
        step=5,
        method_values="gmc",
    )
    base = write_eval_run(
        tmp_path, "eval-base", model="models/Qwen3-4B-Base", step=None, method_values="base"
    )
    write_toy_train_run(tmp_path, "toy", delays=(0, 2), steps=4)
    (tmp_path / "notes").mkdir()
    assert not is_run_dir(train / "checkpoints" / "step_5" / "model")
    assert find_run_dirs([tmp_path]) == sorted(
        p.resolve() for p in (train, evals, base, tmp_path / "toy")
    )
    runs = discover([tmp_path])
    kinds = sorted((r.kind, r.name) for r in runs)
    assert kinds == [
        ("llm_eval", "eval-base"),
        ("llm_eval", "eval-gmc"),
        ("llm_train", "gmc-d128"),
        ("toy_train", "toy[gmc]"),
        ("toy_train", "toy[gmc]"),
        ("toy_train", "toy[tic]"),
        ("toy_train", "toy[tic]"),
    ]
    (trained,) = [r for r in runs if r.kind == "llm_train"]
    assert (trained.method, trained.delay, trained.group_size, trained.model) == (
        "gmc",
        128,
        8,
        "Qwen3-1.7B",
    )
    assert trained.eval_runs == [evals.resolve()]
    assert 5 in trained.eval_steps and "macro" in trained.benchmarks
    (attached,) = [r for r in runs if r.name == "eval-gmc"]
    assert attached.train_run == trained.path and attached.method == "gmc"
    (plain,) = [r for r in runs if r.name == "eval-base"]
    assert plain.train_run is None and plain.model == "Qwen3-4B"
    toy = [r for r in runs if r.kind == "toy_train"]
    assert sorted((r.method, r.delay, len(r.metrics)) for r in toy) == [
        ("gmc", 0, 4),
        ("gmc", 2, 4),
        ("tic", 0, 4),
        ("tic", 2, 4),
    ]
    assert "gmc-d128" in inventory(runs) and classify(trained.record) == "llm_train"


def test_model_labels_and_missing_paths(tmp_path: Path) -> None:
    assert model_label({"tiny_model": {"seed": 0}}) == "tiny"
    assert model_label({"model": "/m/Qwen3-1.7B-Base"}) == "Qwen3-1.7B"
    assert model_label({"model": "/m/Qwen3-8B"}) == "Qwen3-8B"
    assert model_label({"model": "/m/llama"}) == "llama"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        find_run_dirs([tmp_path / "nope"])
