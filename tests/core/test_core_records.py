"""Run records: config with environment, append-only JSONL, atomic summary, resume truncation."""

import json
import math
from dataclasses import dataclass

import pytest

from gmc_grpo.records import RunWriter, atomic_write_json, read_jsonl, read_run


@dataclass
class _Config:
    seed: int = 3
    eps: float = 0.28


def test_writer_round_trip(tmp_path):
    run = tmp_path / "run"
    with RunWriter(run, _Config()) as writer:
        writer.log_metrics({"step": 0, "reward/mean": 0.5, "ratio/log_max": math.inf})
        writer.log_metrics({"step": 1, "reward/mean": 0.75})
        writer.log_eval({"step": 1, "benchmark": "math500", "decoding": "greedy", "accuracy": 0.4})
        writer.write_summary({"final_reward": 0.75})
    record = read_run(run)
    assert record.config["config"] == {"seed": 3, "eps": 0.28}
    assert record.config["environment"]["gmc_grpo_version"]
    assert "torch" in record.config["environment"]["libraries"]
    assert [r["step"] for r in record.metrics] == [0, 1]
    assert record.metrics[0]["ratio/log_max"] == "inf"  # JSON has no inf: stored as a string
    assert record.evals[0]["benchmark"] == "math500"
    assert record.summary == {"final_reward": 0.75}


def test_each_metrics_line_is_on_disk_before_close(tmp_path):
    writer = RunWriter(tmp_path / "r", {"a": 1})
    writer.log_metrics({"step": 0, "x": 1.0})
    assert read_jsonl(tmp_path / "r" / "metrics.jsonl") == [{"step": 0, "x": 1.0}]
    writer.close()


def test_torn_last_line_is_skipped_but_corruption_elsewhere_raises(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "x"')
    assert [r["step"] for r in read_jsonl(path)] == [0, 1]
    path.write_text('{"step": 0}\n{"step": \n{"step": 2}\n')
    with pytest.raises(ValueError, match="line 2"):
        read_jsonl(path)


def test_resume_drops_rows_at_or_after_the_checkpoint(tmp_path):
    run = tmp_path / "run"
    with RunWriter(run, {}) as writer:
        for step in range(5):
            writer.log_metrics({"step": step})
    with RunWriter(run, {}, resume=True, keep_steps_below=3) as writer:
        writer.log_metrics({"step": 3})
    assert [r["step"] for r in read_run(run).metrics] == [0, 1, 2, 3]
    with RunWriter(run, {}) as writer:  # a fresh (non-resumed) run starts empty
        pass
    assert read_run(run).metrics == []


def test_atomic_write_leaves_no_temp_files_and_missing_run_is_explained(tmp_path):
    atomic_write_json(tmp_path / "s.json", {"a": [1, 2]})
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]
    with pytest.raises(FileNotFoundError, match="config.json is missing"):
        read_run(tmp_path)
    with pytest.raises(ValueError, match="'step'"):
        RunWriter(tmp_path / "x", {}).log_metrics({"reward": 1})


def test_resume_after_a_torn_write_keeps_the_file_readable(tmp_path):
    run = tmp_path / "run"
    with RunWriter(run, {}) as writer:
        writer.log_metrics({"step": 0})
    with open(run / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 1, "x"')  # killed mid-write
    with RunWriter(run, {}, resume=True) as writer:
        writer.log_metrics({"step": 1})
    assert [r["step"] for r in read_run(run).metrics] == [0, 1]
