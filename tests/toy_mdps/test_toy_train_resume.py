"""Resuming toy runs (issue 15): the config must be the run's unless a change is asked for by
name; `--extend-to` rebuilds the step-size schedule; a finished run can be rerun; a folder with
records but no run is refused; checkpoints are safetensors + JSON and anything the learner's
`state_dict()` returns round-trips."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from gmc_grpo.json_files import read_json, read_jsonl
from gmc_grpo.lr_schedule import cosine_lr
from gmc_grpo.state_files import flatten_state, latest_checkpoint, read_state, write_state
from pipeline.toy import main as toy_main
from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.learner import AsyncLearner
from toy_mdps.train.run import train

torch.set_num_threads(1)

TINY = dict(num_prompts=2, max_length=3, num_groups=2, group_size=4)  # as FLAGS
FLAGS = [
    "--num-prompts", "2", "--max-length", "3", "--num-groups", "2", "--group-size", "4",
    "--method", "gmc", "--delay", "2", "--seeds", "0,1", "--steps", "6", "--no-progress",
]  # fmt: skip


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = toy_main(["train", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("method", "schedule"),
    [("gac", "fixed_delay"), ("vcpo", "length_coupled"), ("a3po", "fixed_delay")],
)
def test_learner_state_round_trips_and_continues_identically(
    tmp_path: Path, method: str, schedule: str
) -> None:
    """Whatever `AsyncLearner.state_dict()` returns (queued batches, generators, GAC's previous
    gradient, length-coupled in-flight batches) is restored exactly: both learners then take
    the same steps."""
    delay = 3 if schedule == "fixed_delay" else 0  # the length-coupled lags are simulated
    cfg = ToyTrainConfig(
        **TINY, method=method, schedule=schedule, delay=delay, lam=1.0, total_steps=9, seeds=[0, 4]
    )
    learner = AsyncLearner(cfg)
    for _ in range(4):
        learner.train_step()
    state = learner.state_dict()
    write_state(tmp_path, state)
    restored = read_state(tmp_path)
    # same tree (tuples stay tuples, int keys ints), same tensors bit for bit
    (want, want_tree), (got, got_tree) = flatten_state(state), flatten_state(restored)
    assert json.dumps(got_tree) == json.dumps(want_tree)
    assert want.keys() == got.keys()
    for name, tensor in want.items():
        assert got[name].dtype == tensor.dtype
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=0, equal_nan=True)
    twin = AsyncLearner(cfg)
    twin.load_state_dict(restored)
    for _ in range(5):
        assert twin.train_step() == learner.train_step()


def test_a_changed_config_is_refused_naming_fields_and_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _cli(capsys, *FLAGS, "--out", str(out))[0] == 0
    before = _files(out)
    code, _, err = _cli(capsys, *FLAGS, "--out", str(out), "--lr", "0.2", "--eps", "0.5")
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "eps: 0.28 -> 0.5" in err and "lr: 0.05 -> 0.2" in err
    assert "--allow-config-change eps --allow-config-change lr" in err and "--out" in err
    code, _, err = _cli(capsys, *FLAGS[:-3], "--steps", "9", "--out", str(out), "--no-progress")
    assert code == 2 and "total_steps: 6 -> 9" in err and "--extend-to N" in err
    assert _files(out) == before  # nothing written


def test_checkpoint_cadence_may_change_and_the_history_records_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = ToyTrainConfig(**TINY, delay=2, total_steps=8, seeds=[0], checkpoint_every=2)
    full = train(cfg, tmp_path / "full")
    killed = tmp_path / "killed"
    assert train(cfg, killed, stop_after=5) is None
    other = ToyTrainConfig(**TINY, delay=2, total_steps=8, seeds=[0], checkpoint_every=3)
    assert train(other, killed) == full
    assert read_jsonl(killed / "metrics.jsonl") == read_jsonl(tmp_path / "full" / "metrics.jsonl")
    history = read_json(killed / "config.json")["history"]
    assert [h["mode"] for h in history] == ["fresh", "resume"]
    assert history[1]["keep_steps_below"] == 4
    assert history[1]["config_changes"] == {"checkpoint_every": [2, 3]}


def test_extend_to_rebuilds_the_step_size_schedule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _cli(capsys, *FLAGS, "--out", str(out))[0] == 0
    first = read_jsonl(out / "metrics.jsonl")
    code, stdout, err = _cli(capsys, *FLAGS, "--out", str(out), "--extend-to", "10")
    assert code == 0, err
    rows = read_jsonl(out / "metrics.jsonl")
    assert rows[:12] == first  # the finished updates are kept as they were
    assert [(r["step"], r["seed"]) for r in rows] == [(n, s) for n in range(10) for s in (0, 1)]
    rows = rows[::2]  # seed 0
    # the old schedule is 0 from step 6 on; the new updates follow a 10-update schedule
    # (peak 0.05, warm-up ceil(0.03 * 10) = 1 step): step 6 -> 0.05 * (1 + cos(5 pi / 9)) / 2
    assert cosine_lr(6, peak_lr=0.05, total_steps=6, warmup_steps=1) == 0.0
    assert rows[6]["optim/lr"] == pytest.approx(0.05 * 0.5 * (1 + math.cos(5 * math.pi / 9)))
    assert all(r["optim/lr"] > 0 for r in rows[6:9])
    config = read_json(out / "config.json")
    assert config["config"]["total_steps"] == 10
    last = config["history"][-1]
    assert last["request"] == {"extend_to": 10, "allow_config_change": []}
    assert last["config_changes"] == {"total_steps": [6, 10]}
    assert read_json(out / "summary.json")["total_steps"] == 10
    assert "final J" in stdout
    # asking again for the same total is refused: the run already has 10 updates
    code, _, err = _cli(capsys, *FLAGS, "--out", str(out), "--extend-to", "10")
    assert code == 2 and "must be larger than the run's total_steps (10)" in err


def test_allow_config_change_continues_a_run_on_purpose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    cfg = ToyTrainConfig(**TINY, method="gmc", delay=2, total_steps=6, seeds=[0])
    assert train(cfg, out, stop_after=4) is None  # checkpoint_every 50: killed before one
    flags = [*FLAGS[:-1], "--seeds", "0", "--out", str(out), "--no-progress"]
    code, _, err = _cli(capsys, *flags, "--eps", "0.5", "--allow-config-change", "eps")
    assert code == 0, err
    history = read_json(out / "config.json")["history"]
    assert history[-1]["config_changes"] == {"eps": [0.28, 0.5]}
    assert history[-1]["request"]["allow_config_change"] == ["eps"]
    # no checkpoint was written before the kill: the run restarted from step 0 with eps 0.5
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == list(range(6))
    code, _, err = _cli(capsys, *flags, "--allow-config-change", "epss")
    assert code == 2 and "epss: not a config field" in err
    code, _, err = _cli(capsys, *flags, "--allow-config-change", "total_steps")
    assert code == 2 and "use --extend-to N" in err


def test_a_finished_single_seed_run_can_be_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # one seed: the t-intervals are infinite (records hold them as JSON Infinity; schema 1 wrote
    # the string "inf"), and the summary line says there is no interval
    flags = [*FLAGS, "--seeds", "0", "--out", str(tmp_path / "run")]
    code, first, _ = _cli(capsys, *flags)
    assert code == 0 and "(1 seed, no interval)" in first
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["mean"]["final_objective"]["hi"] == float("inf")
    before = _files(tmp_path / "run")
    code, again, err = _cli(capsys, *flags)
    assert code == 0, err
    assert again == first
    assert _files(tmp_path / "run") == before  # reused, not recomputed


def test_records_without_a_run_are_never_erased(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    rows = '{"step": 0, "seed": 0, "policy/objective": 0.5}\n'
    (out / "metrics.jsonl").write_text(rows)
    code, _, err = _cli(capsys, *FLAGS, "--out", str(out))
    assert code == 2 and "metrics.jsonl: 1 rows" in err and "--fresh" in err and "--out" in err
    assert sorted(p.name for p in out.iterdir()) == ["metrics.jsonl"]
    assert (out / "metrics.jsonl").read_text() == rows
    code, _, err = _cli(capsys, *FLAGS, "--out", str(tmp_path / "none"), "--resume")
    assert code == 2 and "holds no run to continue" in err
    assert not (tmp_path / "none").exists()


def test_a_newer_record_schema_is_refused_saying_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert _cli(capsys, *FLAGS, "--out", str(out))[0] == 0
    payload = json.loads((out / "config.json").read_text())
    payload["schema_version"] = 99
    (out / "config.json").write_text(json.dumps(payload))
    before = _files(out)
    code, _, err = _cli(capsys, *FLAGS, "--out", str(out), "--extend-to", "8")
    assert code == 2 and "schema 99" in err and "What differs" in err
    assert _files(out) == before


def test_a_pickled_checkpoint_in_the_run_folder_is_never_loaded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import builtins

    class Payload:
        def __reduce__(self):
            return (builtins.open, (str(tmp_path / "payload-ran"), "w"))

    out = tmp_path / "run"
    cfg = ToyTrainConfig(**TINY, delay=2, total_steps=6, seeds=[0], checkpoint_every=2)
    assert train(cfg, out, stop_after=3) is None
    # the pickled checkpoint of gmc-grpo before safetensors, next to the new ones
    torch.save({"theta": Payload()}, out / "checkpoint.pt")
    argv = [*FLAGS, "--seeds", "0", "--checkpoint-every", "2", "--out", str(out)]
    code, _, err = _cli(capsys, *argv)
    assert code == 2 and "checkpoint.pt is a pickled checkpoint" in err and "--fresh" in err
    # a pickle where the safetensors checkpoint belongs
    (out / "checkpoint.pt").unlink()
    weights = latest_checkpoint(out) / "state.safetensors"
    weights.unlink()
    torch.save({"theta": Payload()}, weights)
    code, _, err = _cli(capsys, *argv)
    assert code == 2 and "state.safetensors is not a safetensors file" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "payload-ran").exists()
    # --fresh starts over without reading it
    code, _, err = _cli(capsys, *argv, "--fresh")
    assert code == 0, err
    assert not (tmp_path / "payload-ran").exists()
