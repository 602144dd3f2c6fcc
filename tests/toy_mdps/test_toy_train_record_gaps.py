"""Records that cannot lose rows (issue 36): a toy run whose `metrics.jsonl` lacks rows its
checkpoint covers (a torn last line, deleted steps, an emptied file) is refused on resume and
on reuse with one line naming the missing rows, never continued with a gap; `--fresh` computes
the same rows again."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gmc_grpo.json_files import read_jsonl
from gmc_grpo.records import read_run_config
from pipeline.toy import main as toy_main
from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.run import train

torch.set_num_threads(1)

FLAGS = [
    "--num-prompts", "2", "--max-length", "3", "--num-groups", "2", "--group-size", "4",
    "--method", "gmc", "--delay", "2", "--seeds", "0,1", "--steps", "6",
    "--checkpoint-every", "3", "--no-progress", "--no-figures",
]  # fmt: skip


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = toy_main(["train", *argv])
    return code, capsys.readouterr().err


def _cut(path: Path, nbytes: int) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:-nbytes])


def test_a_finished_run_with_a_torn_last_line_is_refused_not_reused(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert _cli(capsys, *FLAGS, "--out", str(out))[0] == 0
    whole = (out / "metrics.jsonl").read_bytes()
    _cut(out / "metrics.jsonl", 37)  # the probe of the issue: `truncate -s -37 metrics.jsonl`
    for extra in ([], ["--extend-to", "9"]):
        code, err = _cli(capsys, *FLAGS, "--out", str(out), *extra)
        assert code == 2
        assert err.count("\n") == 1
        assert "lacks 1 row that its checkpoint step_000006 covers (seed 1: step 5)" in err
        assert "line 12 is torn" in err and "--fresh" in err
    # refused means untouched: the torn file is kept for the user to look at
    assert (out / "metrics.jsonl").read_bytes() == whole[:-37]
    # --fresh computes the run again: the same rows (the run is a function of config and seeds)
    assert _cli(capsys, *FLAGS, "--out", str(out), "--fresh")[0] == 0
    assert (out / "metrics.jsonl").read_bytes() == whole


@pytest.mark.parametrize("damage", ["steps 3-5 deleted", "emptied", "removed"])
def test_rows_missing_below_the_checkpoint_are_named(tmp_path, capsys, damage) -> None:
    out = tmp_path / "run"
    assert _cli(capsys, *FLAGS, "--out", str(out))[0] == 0
    path = out / "metrics.jsonl"
    if damage == "steps 3-5 deleted":
        kept = [line for line in path.read_text().splitlines(keepends=True)
                if not any(f'"step": {n},' in line for n in (3, 4, 5))]  # fmt: skip
        path.write_text("".join(kept))
        want = "lacks 6 rows that its checkpoint step_000006 covers (seed 0: steps 3-5; seed 1: steps 3-5)"
    elif damage == "emptied":
        path.write_text("")
        want = "lacks 12 rows that its checkpoint step_000006 covers (seed 0: steps 0-5; seed 1: steps 0-5)"
    else:
        path.unlink()
        want = "lacks 12 rows"
    code, err = _cli(capsys, *FLAGS, "--out", str(out), "--extend-to", "9")
    assert code == 2 and want in err and err.count("\n") == 1


def test_rows_ahead_of_the_checkpoint_are_cut_back_and_computed_again(tmp_path, capsys) -> None:
    """A run killed after its checkpoint at step 3 and mid-way through a row of step 4: the torn
    tail lies ahead of the checkpoint, so it is cut back and the steps from 3 on are computed
    again, equal to an uninterrupted run's."""
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    assert _cli(capsys, *FLAGS, "--out", str(straight))[0] == 0
    config = ToyTrainConfig(
        num_prompts=2, max_length=3, num_groups=2, group_size=4, method="gmc", delay=2,
        seeds=[0, 1], total_steps=6, checkpoint_every=3,
    )  # fmt: skip
    assert config.to_dict() == read_run_config(straight)["config"]  # the run of FLAGS
    assert train(config, broken, stop_after=5) is None  # rows of steps 0-4, checkpoint 3
    _cut(broken / "metrics.jsonl", 37)  # step 4 of seed 1 torn
    assert _cli(capsys, *FLAGS, "--out", str(broken))[0] == 0
    assert read_jsonl(broken / "metrics.jsonl") == read_jsonl(straight / "metrics.jsonl")


def test_an_experiment_point_with_gaps_is_computed_again(tmp_path, capsys) -> None:
    """In an experiment a point is its config alone, so a point whose records lack rows is
    computed again from step 0 with a note, and the experiment goes on (one bad folder does
    not sink the rest); its rows come back identical."""
    from toy_mdps.train.config import ExperimentConfig
    from toy_mdps.train.run import run_experiment

    base = dict(num_prompts=2, max_length=3, num_groups=2, group_size=4, seeds=[0, 1],
                total_steps=4, checkpoint_every=2)  # fmt: skip
    config = ExperimentConfig(name="e", kind="runs", base=base, grid={"method": ["gmc", "tic"]})
    out = tmp_path / "e"
    run_experiment(config, out, progress=False)
    point = out / "method=gmc"
    whole = (point / "metrics.jsonl").read_bytes()
    _cut(point / "metrics.jsonl", 37)
    capsys.readouterr()
    run_experiment(config, out, progress=False)
    err = capsys.readouterr().err
    assert "lacks 1 row that its checkpoint step_000004 covers (seed 1: step 3)" in err
    assert f"computing {point} again from step 0" in err
    assert (point / "metrics.jsonl").read_bytes() == whole
