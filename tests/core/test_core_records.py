"""Run records: config with environment, append-only JSONL, atomic summary, resume truncation,
non-finite values, the history of run segments and the record schema."""

import json
import math
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gmc_grpo.json_files import atomic_write_json, read_json, read_jsonl
from gmc_grpo.records import RECORD_SCHEMA, RecordSchemaError, read_run
from gmc_grpo.run_writer import RecordsExistError, RunWriter


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
    assert record.metrics[0]["ratio/log_max"] == math.inf  # written as the token Infinity
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


# ---------------------------------------------------------------- non-finite values


def test_a_summary_with_infinities_reads_back_as_numbers(tmp_path):
    # A single-seed toy run has an infinite t-interval; its rerun formats the stored summary.
    atomic_write_json(tmp_path / "summary.json", {"lo": -math.inf, "hi": math.inf, "m": 0.5})
    summary = read_json(tmp_path / "summary.json")
    assert f"[{summary['lo']:.4f}, {summary['hi']:.4f}]" == "[-inf, inf]"
    assert '"hi": Infinity' in (tmp_path / "summary.json").read_text()


def _same(a, b) -> bool:
    """Equal values of equal types, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


_LEAVES = (
    st.floats()  # NaN, +-inf, subnormals, +-1.8e308 included
    | st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -1e-308, 5e-324, -0.0])
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.booleans()
    | st.none()
    | st.text(max_size=8)
    | st.sampled_from(["inf", "-inf", "nan", "NaN", "Infinity"])  # strings stay strings
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_RECORDS = st.dictionaries(st.text(max_size=6).filter(lambda k: k != "step"), _VALUES, max_size=5)


@settings(max_examples=60, deadline=None)
@given(record=_RECORDS)
def test_every_record_round_trips_any_value(tmp_path_factory, record):
    run = tmp_path_factory.mktemp("run")
    with RunWriter(run, record) as writer:
        writer.log_metrics({"step": 0, **record})
        writer.log_eval(record)
        writer.write_summary(record)
    back = read_run(run)
    assert _same(back.config["config"], record)
    assert _same(back.metrics, [{"step": 0, **record}])
    assert _same(back.evals, [record])
    assert _same(back.summary, record)
    # a resume rewrites the JSONL files: the values survive that too
    with RunWriter(run, record, resume=True):
        pass
    assert _same(read_run(run).metrics, [{"step": 0, **record}])


# ---------------------------------------------------------------- history and schema


def test_resume_keeps_the_history_of_run_segments(tmp_path, monkeypatch):
    import gmc_grpo.run_writer as run_writer

    run = tmp_path / "run"
    env = {"gmc_grpo_version": "0.1.0", "git_commit": "aaa", "python": "3.11", "platform": "x"}
    monkeypatch.setattr(run_writer, "environment_info", lambda: dict(env, libraries={}))
    with RunWriter.fresh(run, {"lr": 1e-6, "steps": 10}) as writer:
        writer.log_metrics({"step": 0})
    env.update(gmc_grpo_version="0.2.0", git_commit="bbb")
    with RunWriter.resume(run, {"lr": 1e-6, "steps": 20}, keep_steps_below=1) as writer:
        writer.log_metrics({"step": 1})
    config = read_json(run / "config.json")
    assert config["schema_version"] == RECORD_SCHEMA == 2
    first, second = config["history"]
    assert (first["gmc_grpo_version"], first["git_commit"], first["mode"]) == (
        "0.1.0",
        "aaa",
        "fresh",
    )
    assert (second["gmc_grpo_version"], second["git_commit"]) == ("0.2.0", "bbb")
    assert second["mode"] == "resume" and second["keep_steps_below"] == 1
    assert second["config_changed"] == ["steps"]
    assert first["started"] <= second["started"] and first["started"].endswith("+00:00")
    assert config["environment"]["gmc_grpo_version"] == "0.2.0"  # the current segment
    assert [r["step"] for r in read_run(run).metrics] == [0, 1]


def _write_schema_1_run(run):
    """A run folder as gmc-grpo wrote it before the record schema (infinities as strings)."""
    run.mkdir()
    env = {"gmc_grpo_version": "0.0.9", "git_commit": "old", "libraries": {"torch": "2.4"}}
    (run / "config.json").write_text(json.dumps({"config": {"eps": "inf"}, "environment": env}))
    (run / "metrics.jsonl").write_text('{"step": 0, "ratio/log_max": "inf", "x": "-inf"}\n')
    (run / "summary.json").write_text(json.dumps({"hi": "inf", "lo": "-inf", "n": "nan"}))


def test_schema_1_records_are_read_and_upgraded_on_resume(tmp_path):
    run = tmp_path / "old"
    _write_schema_1_run(run)
    record = read_run(run)
    assert record.config["config"]["eps"] == math.inf
    assert record.metrics[0]["ratio/log_max"] == math.inf and record.metrics[0]["x"] == -math.inf
    assert record.summary["hi"] == math.inf and math.isnan(record.summary["n"])
    with RunWriter.resume(run, {"eps": math.inf}) as writer:
        writer.log_metrics({"step": 1, "ratio/log_max": math.inf})
    assert [r["ratio/log_max"] for r in read_jsonl(run / "metrics.jsonl")] == [math.inf] * 2
    config = read_json(run / "config.json")
    old, new = config["history"]
    assert (old["gmc_grpo_version"], old["git_commit"], old["started"]) == ("0.0.9", "old", None)
    assert new["mode"] == "resume" and new["config_changed"] == []


def test_a_newer_record_schema_is_refused_with_what_differs(tmp_path):
    run = tmp_path / "future"
    run.mkdir()
    newer = {
        "schema_version": RECORD_SCHEMA + 1,
        "config": {},
        "environment": {"gmc_grpo_version": "9.0"},
    }
    (run / "config.json").write_text(json.dumps(newer))
    (run / "metrics.jsonl").write_text('{"step": 0}\n')
    for attempt in (lambda: RunWriter.resume(run, {}), lambda: read_run(run)):
        with pytest.raises(RecordSchemaError, match="schema 3.*gmc-grpo 9.0.*schemas 1-2.*history"):
            attempt()
    assert (run / "metrics.jsonl").read_text() == '{"step": 0}\n'  # nothing was touched
    (run / "config.json").write_text(json.dumps({"schema_version": "two", "config": {}}))
    with pytest.raises(RecordSchemaError, match="schema_version 'two'"):
        RunWriter.resume(run, {})


def test_a_fresh_run_refuses_a_folder_with_records(tmp_path):
    run = tmp_path / "run"
    with RunWriter.fresh(run, {"a": 1}) as writer:
        writer.log_metrics({"step": 0})
        writer.log_eval({"step": 0, "benchmark": "math500"})
    with pytest.raises(
        RecordsExistError,
        match=r"metrics.jsonl: 1 rows, evals.jsonl: 1 rows.*--resume.*another folder",
    ):
        RunWriter.fresh(run, {"a": 1})
    assert len(read_jsonl(run / "metrics.jsonl")) == 1  # nothing erased
    with RunWriter.fresh(run, {"a": 2}, overwrite=True):
        pass
    assert read_run(run).metrics == [] and read_run(run).config["config"] == {"a": 2}
    with RunWriter.fresh(run, {"a": 3}):  # empty record files are no records
        pass
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "summary.json").write_text("{}")
    with pytest.raises(RecordsExistError, match="summary.json"):
        RunWriter.fresh(tmp_path / "done", {})
    with pytest.raises(FileNotFoundError, match="no run to resume"):
        RunWriter.resume(tmp_path / "nothing", {})


# -- file modes (issue 26): what a plain open would give under the umask, not mkstemp's 0600


@contextmanager
def _umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize(("mask", "want"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_records_get_the_mode_of_a_plain_open(tmp_path, mask, want):
    from gmc_grpo.filemodes import current_umask, plain_mode
    from gmc_grpo.state_files import save_step_folder, write_state

    with _umask(mask):
        assert current_umask() == mask and plain_mode() == want
        run = tmp_path / "run"
        with RunWriter.fresh(run, _Config()) as writer:
            writer.log_metrics({"step": 0})
            writer.log_metrics({"step": 1})
            writer.write_summary({"done": True})
        with RunWriter.resume(run, _Config(), keep_steps_below=1) as writer:  # rewrites the rows
            writer.log_metrics({"step": 1})
        atomic_write_json(tmp_path / "plain.json", {"a": 1})
        folder = save_step_folder(run, 1, lambda tmp: write_state(tmp, {"x": [1.0]}), keep=1)
        write_state(tmp_path / "state", {"y": 2})
        with open(tmp_path / "reference.txt", "w") as handle:  # what a plain open gives
            handle.write("x")
    files = [
        run / "config.json",
        run / "metrics.jsonl",
        run / "summary.json",
        tmp_path / "plain.json",
        folder / "state.safetensors",
        folder / "state.json",
        tmp_path / "state" / "state.safetensors",
        tmp_path / "reference.txt",
    ]
    assert {str(p.relative_to(tmp_path)): oct(_mode(p)) for p in files} == {
        str(p.relative_to(tmp_path)): oct(want) for p in files
    }
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_rewritten_file_keeps_its_mode(tmp_path):
    path = tmp_path / "summary.json"
    atomic_write_json(path, {"a": 1})
    os.chmod(path, 0o640)  # set by its owner
    with _umask(0o077):
        atomic_write_json(path, {"a": 2})  # a plain open("w") keeps the mode too
    assert _mode(path) == 0o640 and read_json(path) == {"a": 2}


# -- records that cannot lose rows (issue 36) ---------------------------------------------------


def test_missing_and_complete_steps_per_seed_pinned() -> None:
    from gmc_grpo.records import complete_steps, describe_missing, missing_steps

    rows = [{"step": n, "seed": s} for n in range(5) for s in (0, 1)]
    rows = [r for r in rows if (r["step"], r["seed"]) not in {(1, 1), (2, 1), (4, 0)}]
    assert missing_steps(rows, 5, [0, 1]) == {0: [4], 1: [1, 2]}
    assert missing_steps(rows, 1, [0, 1]) == {}
    assert complete_steps(rows, [0, 1]) == 1  # seed 1 lacks step 1
    assert describe_missing({0: [4], 1: [1, 2]}) == "seed 0: step 4; seed 1: steps 1-2"
    # LLM rows carry no seed: one sequence
    llm = [{"step": n} for n in (0, 1, 2, 4, 6, 7)]
    assert missing_steps(llm, 8) == {None: [3, 5]}
    assert describe_missing(missing_steps(llm, 8)) == "steps 3, 5"
    assert complete_steps(llm) == 3
    assert complete_steps([]) == 0


def test_check_records_reach_names_the_rows_and_the_torn_line(tmp_path: Path) -> None:
    from gmc_grpo.records import RecordGapError, check_records_reach

    rows = "".join(json.dumps({"step": n}) + "\n" for n in range(4))
    (tmp_path / "metrics.jsonl").write_text(rows + '{"step": 4, "rew')
    check_records_reach(tmp_path, 4, covered_by="checkpoint 4", hint="x")  # whole below 4
    with pytest.raises(RecordGapError) as caught:
        check_records_reach(tmp_path, 6, covered_by="its checkpoint step_000006", hint="fix it")
    assert str(caught.value) == (
        f"{tmp_path / 'metrics.jsonl'} lacks 2 rows that its checkpoint step_000006 covers "
        "(steps 4-5); its line 5 is torn (cut off mid-write), so continuing from it would leave "
        "a gap in the records: fix it"
    )


def test_record_gaps_of_read_back_runs(tmp_path: Path) -> None:
    from gmc_grpo.records import RunRecord, record_gaps

    toy = {"config": {"seeds": [0, 1], "total_steps": 3, "checkpoint_every": 3}}
    whole = [{"step": n, "seed": s} for n in range(3) for s in (0, 1)]
    assert record_gaps(RunRecord(tmp_path, toy, metrics=whole, summary={})) is None
    cut = whole[:-1]
    torn = RunRecord(tmp_path, toy, metrics=cut, summary={}, torn={"metrics.jsonl": 6})
    assert record_gaps(torn) == "1 missing metrics rows (seed 1: step 2); metrics.jsonl line 6 torn"
    # a running run (no summary) is held to its largest step only
    assert record_gaps(RunRecord(tmp_path, toy, metrics=whole[:2])) is None
    # a sweep numbers rows by `step` across seeds: one sequence
    sweep = {"config": {"seeds": [0, 1], "total_steps": 800}}
    rows = [{"step": n, "seed": n % 2} for n in range(4)]
    assert record_gaps(RunRecord(tmp_path, sweep, metrics=rows, summary={})) is None
    assert record_gaps(RunRecord(tmp_path, sweep, metrics=rows[:1] + rows[2:])) == (
        "1 missing metrics rows (step 1)"
    )


def test_the_writer_syncs_rows_before_a_summary(tmp_path: Path, monkeypatch) -> None:
    """`RunWriter.sync` fsyncs the open record files; `write_summary` calls it first."""

    from gmc_grpo import run_writer

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(run_writer.os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    writer = run_writer.RunWriter(tmp_path, {"a": 1})
    writer.log_metrics({"step": 0})
    before = len(synced)
    writer.write_summary({"done": True})
    assert len(synced) >= before + 2  # the metrics file, then the summary's temp file
    writer.close()
