"""`gmc-grpo reproduce`: stage reuse, reruns of dependent stages, failures reported, the report."""

import json

import pytest

from pipeline import reproduce
from pipeline.reproduce import Stage

CALLS: list[str] = []


def stage_a(out_dir):
    CALLS.append("a")
    (out_dir / "a.txt").write_text("a")
    return {"headline": "a done", "markdown": "A section\n"}


def stage_b(out_dir):
    CALLS.append("b")
    return {"headline": f"saw {(out_dir.parent / 'a' / 'a.txt').read_text()}", "markdown": "B\n"}


def stage_fail(out_dir):
    raise RuntimeError("boom")


@pytest.fixture
def stages(monkeypatch):
    CALLS.clear()
    monkeypatch.setattr(
        reproduce,
        "STAGES",
        (
            Stage("a", "Stage A", f"{__name__}:stage_a", (("k", 1),)),
            Stage("b", "Stage B", f"{__name__}:stage_b", reads_earlier=True),
        ),
    )


def test_second_run_reuses_and_dependent_stage_follows(tmp_path, stages):
    assert reproduce.main(["--out", str(tmp_path)]) == 0
    assert CALLS == ["a", "b"]
    assert reproduce.main(["--out", str(tmp_path)]) == 0
    assert CALLS == ["a", "b"]  # both reused
    assert reproduce.main(["--out", str(tmp_path), "--only", "a", "--force"]) == 0
    assert CALLS == ["a", "b", "a"]
    report = (tmp_path / "REPORT.md").read_text()
    assert (
        "Stage B" in report and "saw a" in report
    )  # a stage left out by --only stays in the report
    assert reproduce.main(["--out", str(tmp_path)]) == 0
    assert CALLS == ["a", "b", "a", "b"]  # a reused, but b is older than a's rerun: b reruns
    assert reproduce.main(["--out", str(tmp_path)]) == 0
    assert CALLS == ["a", "b", "a", "b"]
    assert (tmp_path / "REPORT.html").read_text().startswith("<!doctype html>")


def test_changed_settings_rerun_a_stage(tmp_path, stages, monkeypatch):
    reproduce.main(["--out", str(tmp_path)])
    changed = (
        Stage("a", "Stage A", f"{__name__}:stage_a", (("k", 2),)),
        Stage("b", "Stage B", f"{__name__}:stage_b", reads_earlier=True),
    )
    monkeypatch.setattr(reproduce, "STAGES", changed)
    reproduce.main(["--out", str(tmp_path)])
    assert CALLS == ["a", "b", "a", "b"]


def test_a_failing_stage_is_reported_and_the_exit_code_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce, "STAGES", (Stage("f", "Failing", f"{__name__}:stage_fail"),))
    assert reproduce.main(["--out", str(tmp_path)]) == 1
    marker = json.loads((tmp_path / "f" / "stage.json").read_text())
    assert marker["status"] == "failed" and "boom" in marker["markdown"]
    assert "boom" in (tmp_path / "REPORT.md").read_text()


def test_unknown_stage_is_an_error(tmp_path, stages, capsys):
    # one line and exit 2, as every other bad input (issue 36: no argparse usage block)
    assert reproduce.main(["--out", str(tmp_path), "--only", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--only nope: not a stage; choose from a, b" in err


def stage_designs(out_dir, full=False):
    CALLS.append(f"designs full={full}")
    return {"headline": f"full={full}", "markdown": "D\n"}


def test_full_runs_the_larger_design_of_a_stage_that_has_one(tmp_path, monkeypatch):
    CALLS.clear()
    monkeypatch.setattr(
        reproduce,
        "STAGES",
        (
            Stage("a", "Stage A", f"{__name__}:stage_a", (("k", 1),)),
            Stage(
                "d",
                "Designs",
                f"{__name__}:stage_designs",
                (("seeds", 2),),
                full_settings=(("seeds", 8),),
            ),
        ),
    )
    assert reproduce.main(["--out", str(tmp_path)]) == 0
    assert reproduce.main(["--out", str(tmp_path), "--full"]) == 0  # a reused, d rerun larger
    assert CALLS == ["a", "designs full=False", "designs full=True"]
    marker = json.loads((tmp_path / "d" / "stage.json").read_text())
    assert marker["settings"] == {"seeds": 8} and marker["headline"] == "full=True"
    assert reproduce.main(["--out", str(tmp_path), "--full"]) == 0
    assert CALLS == ["a", "designs full=False", "designs full=True"]  # both reused
