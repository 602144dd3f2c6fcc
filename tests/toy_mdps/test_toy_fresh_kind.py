"""`--fresh` erases only a run of its own kind (issue 36): `toy train --fresh` and `toy sweep
--fresh` pointed at an LLM run (or at each other's runs) are refused in one line, exit 2, with
every file left as it was; on a run of their own kind they say what they erase."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gmc_grpo.run_writer import RunWriter
from toy_mdps.cli import main

torch.set_num_threads(1)

TRAIN = [
    "train", "--num-prompts", "2", "--max-length", "3", "--num-groups", "2", "--group-size",
    "4", "--seeds", "0", "--steps", "2", "--no-progress", "--no-figures",
]  # fmt: skip
SWEEP_CONFIG = {
    "num_prompts": 2, "max_length": 3, "num_groups": 2, "delays": [0], "group_sizes": [2],
    "methods": ["is"], "num_minibatches": 20, "seeds": [0],
}  # fmt: skip


def _llm_run(folder: Path) -> dict[str, bytes]:
    """A folder as `llm train` leaves it: records, a summary and a checkpoint."""
    with RunWriter(folder, {"method": "gmc", "inner_steps": 1, "tiny_model": {"seed": 1}}) as w:
        w.log_metrics({"step": 0, "reward/mean": 0.5})
        w.write_summary({"steps": 1})
    (folder / "checkpoints" / "step_000001").mkdir(parents=True)
    (folder / "checkpoints" / "step_000001" / "state.json").write_text("{}")
    return _files(folder)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _sweep_argv(tmp_path: Path) -> list[str]:
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(SWEEP_CONFIG))
    return ["sweep", "--config", str(path), "--no-progress"]


@pytest.mark.parametrize("command", ["train", "sweep"])
def test_fresh_refuses_another_kind_of_run(tmp_path: Path, capsys, command: str) -> None:
    out = tmp_path / "llm"
    before = _llm_run(out)
    argv = TRAIN if command == "train" else _sweep_argv(tmp_path)
    for extra in (["--fresh"], []):
        assert main([*argv, "--out", str(out), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "holds another kind of run" in err, err
    assert _files(out) == before


def test_fresh_on_its_own_kind_says_what_it_erases(tmp_path: Path, capsys) -> None:
    train_out, sweep_out = tmp_path / "train", tmp_path / "sweep"
    assert main([*TRAIN, "--out", str(train_out)]) == 0
    assert main([*_sweep_argv(tmp_path), "--out", str(sweep_out)]) == 0
    capsys.readouterr()
    assert main([*TRAIN, "--out", str(train_out), "--fresh"]) == 0
    err = capsys.readouterr().err
    assert f"--fresh: erasing the records of {train_out} (metrics.jsonl: 2 rows, " in err
    assert "summary.json, checkpoints/step_000002)" in err
    # a toy run of the other kind is refused too, with and without --fresh
    before = _files(train_out)
    assert main([*_sweep_argv(tmp_path), "--out", str(train_out), "--fresh"]) == 2
    assert main([*TRAIN, "--out", str(sweep_out), "--fresh"]) == 2
    assert _files(train_out) == before
    assert main([*_sweep_argv(tmp_path), "--out", str(sweep_out), "--fresh"]) == 0
    assert f"--fresh: erasing the rows of {sweep_out} (metrics.jsonl: " in capsys.readouterr().err


def test_an_unreadable_config_is_not_erased(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text("[" * 100_000)
    assert main([*TRAIN, "--out", str(out), "--fresh"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot be read" in err and len(err) < 600
    assert (out / "config.json").read_text() == "[" * 100_000
