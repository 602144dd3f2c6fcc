"""The toy command lines (issue 15): `--quick` and `--experiment` write identically shaped
folders; the sweep writes no empty `evals.jsonl` and says what it does after its progress bar."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from pipeline.toy import main as toy_main
from toy_mdps.train import config as train_config

torch.set_num_threads(1)

TINY = dict(num_prompts=2, max_length=3, num_groups=2, group_size=4, total_steps=4, seeds=[0, 1])


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_quick_and_experiment_write_identically_shaped_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = tmp_path / "configs"
    shipped.mkdir()
    for name, methods in (("one_quick", ["gmc", "tic"]), ("two_quick", ["grpo"])):
        experiment = {"name": name, "kind": "runs", "base": TINY, "grid": {"method": methods}}
        (shipped / f"train_{name}.json").write_text(json.dumps(experiment))
    monkeypatch.setattr(train_config, "CONFIG_DIR", shipped)
    monkeypatch.setattr(train_config, "QUICK_EXPERIMENTS", ("one_quick", "two_quick"))
    flags = ["--no-progress", "--no-figures"]
    assert toy_main(["train", "--quick", "--out", str(tmp_path / "quick"), *flags]) == 0
    for name in ("one_quick", "two_quick"):
        argv = ["train", "--experiment", name, "--out", str(tmp_path / "each"), *flags]
        assert toy_main(argv) == 0
    assert tree(tmp_path / "quick") == tree(tmp_path / "each")
    assert "one_quick/method=gmc/metrics.jsonl" in tree(tmp_path / "each")
    assert "one_quick/results.csv" in tree(tmp_path / "each")
    # an experiment from a file lands in the same shape, under its name
    argv = ["train", "--config", str(shipped / "train_two_quick.json"), "--out",
            str(tmp_path / "file"), *flags]  # fmt: skip
    assert toy_main(argv) == 0
    assert tree(tmp_path / "file") == [p for p in tree(tmp_path / "each") if "two_quick" in p]
    capsys.readouterr()


def test_sweep_writes_no_empty_evals_and_says_what_runs_after_its_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "name": "cli",
        "num_prompts": 2,
        "vocab_size": 3,
        "max_length": 3,
        "trajectory_steps": 4,
        "delays": [0, 2],
        "methods": ["tic", "gmc"],
        "group_sizes": [2],
        "num_groups": 2,
        "num_minibatches": 3,
    }
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(config))
    out = tmp_path / "run"
    assert toy_main(["sweep", "--config", str(path), "--out", str(out)]) == 0
    assert not (out / "evals.jsonl").exists()  # a sweep has no evaluations
    assert (out / "metrics.jsonl").exists()
    captured = capsys.readouterr()
    err = captured.err
    drawn = sorted((out / "figures").glob("*.png")) + sorted((out / "figures").glob("*.pdf"))
    assert drawn  # and the command says where they went
    assert f"wrote {len(drawn)} figure files to {out}/figures" in captured.out
    bar_done = err.rfind("100%")
    assert bar_done >= 0
    after = err[bar_done:]
    assert f"writing {out}/results.csv" in after
    assert f"drawing the figures into {out}/figures" in after


def test_one_seed_prints_no_infinite_interval(tmp_path: Path, capsys) -> None:
    """One learner seed has no interval over seeds: the summary line says so instead of
    `final J 0.1757 [-inf, inf]`; two seeds print the t-interval of `summary.json`."""
    from gmc_grpo.json_files import read_json
    from gmc_grpo.stats import interval_text

    flags = ["--num-prompts", "2", "--max-length", "3", "--num-groups", "2", "--group-size", "4"]
    for seeds, out in (("0", tmp_path / "one"), ("0,1", tmp_path / "two")):
        argv = ["train", "--steps", "3", "--seeds", seeds, "--out", str(out), "--no-progress"]
        assert toy_main([*argv, *flags]) == 0
        line = capsys.readouterr().out.splitlines()[0].split("summary.json: ")[1]
        final = read_json(out / "summary.json")["mean"]["final_objective"]
        assert "inf" not in line and "nan" not in line
        if seeds == "0":
            assert final["n"] == 1 and f"final J {final['mean']:.4f} (1 seed, no interval)," in line
        else:
            lo, hi = f"{final['lo']:.4f}", f"{final['hi']:.4f}"
            assert f"final J {final['mean']:.4f} [{lo}, {hi}]," in line
    stat = {"mean": 2.0, "lo": 1.0, "hi": 3.0, "n": 3}
    assert interval_text(stat, ".2f") == "2.00 [1.00, 3.00]"
    assert interval_text({**stat, "lo": -math.inf, "hi": math.inf, "n": 1}) == (
        "2 (1 seed, no interval)"
    )
    assert interval_text({"mean": math.nan, "lo": math.nan, "hi": math.nan, "n": 0}) == "no value"
