"""`gmc-grpo figures` and the figures stage of `gmc-grpo reproduce`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from fig_records import write_toy_train_run, write_train_run

from figures.cli import main, write_all
from figures.registry import item_names


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    for method in ("tic", "gmc"):
        write_train_run(root, f"{method}-0", method=method, delay=0, steps=12, eval_every=4)
    write_toy_train_run(root, "toy", delays=(0, 2), steps=12)
    return root


def test_write_all_makes_what_it_can_and_says_why_not(root: Path, tmp_path: Path) -> None:
    result = write_all([root], tmp_path / "out")
    made = set(result.written)
    assert {"figure2", "figure4", "table3", "bounds_fixed_delay", "bounds_toy"} <= made
    for name in ("figure2", "figure4", "bounds_toy"):
        assert sorted(p.suffix for p in result.written[name]) == [".pdf", ".png"]
        assert all(p.stat().st_size > 1000 for p in result.written[name])
    assert sorted(p.suffix for p in result.written["table3"]) == [".md", ".tex"]
    assert set(result.skipped) >= {"figure5", "figure6", "table1", "table5", "toy_sweeps"}
    assert "no run" in result.skipped["figure6"] and "needs" in result.skipped["table1"]
    assert made | set(result.skipped) == set(item_names())
    index = (tmp_path / "out" / "INDEX.md").read_text()
    assert "![figure2](figure2.png)" in index and "## Not produced" in index
    assert "- figure6: needs" in index


def test_main_only_formats_list_and_errors(root: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "only"
    assert main([str(root), "--out", str(out), "--only", "figure4", "--formats", "png"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["INDEX.md", "figure4.png"]
    assert main([str(root), "--list"]) == 0
    assert "llm_train" in capsys.readouterr().out
    assert main([str(tmp_path / "absent")]) == 2
    assert main([str(root), "--only", "figure9"]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty), "--out", str(tmp_path / "e")]) == 2  # says why (test_fig_edge_cases)
    assert (
        main([str(empty), "--out", str(tmp_path / "e2"), "--include-empty", "--only", "table1"])
        == 0
    )
    assert "paper (Table 1)" in (tmp_path / "e2" / "table1.md").read_text()


def test_help_is_fast_and_imports_no_matplotlib() -> None:
    code = (
        "import sys; from figures.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "assert 'matplotlib' not in sys.modules and 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "gmc-grpo figures" in done.stdout


def test_reproduce_figures_stage_reads_sibling_stages(root: Path, tmp_path: Path) -> None:
    from pipeline.reproduce import STAGES, figures_stage

    assert STAGES[-1].name == "figures"
    results = tmp_path / "results"
    write_train_run(results / "llm", "gmc-0", method="gmc", delay=0, steps=12, eval_every=4)
    stage_dir = results / "figures"
    stage_dir.mkdir(parents=True)
    out = figures_stage(stage_dir)
    assert "figure2" in out["written"] and "figure6" in out["skipped"]
    assert "(figures/figure2.png)" in out["markdown"]
    assert out["headline"].startswith(f"{len(out['written'])} figures/tables made")


def test_figures_stage_leaves_out_the_lm_bias_stages_run(tmp_path: Path) -> None:
    """The LM bias stage's one GMC run at D = 16 is not a run of the fixed-delay suite: Table 3
    and Figure 2 show the suite's delays only (no "D = 16 ... missing" row, no empty panel)."""
    from pipeline.reproduce import STAGES, figures_stage

    (bias_stage,) = [stage for stage in STAGES if not stage.figure_runs]
    assert bias_stage.name == "llm_bias"
    results = tmp_path / "results"
    for method in ("grpo", "gmc"):
        write_train_run(results / "llm_tiny", f"{method}-0", method=method, delay=0, steps=12)
    write_train_run(results / bias_stage.name / "run", "gmc", method="gmc", delay=16, steps=12)
    stage_dir = results / "figures"
    stage_dir.mkdir(parents=True)
    out = figures_stage(stage_dir)
    assert "table3" in out["written"]
    table = (stage_dir / "table3.md").read_text()
    assert not re.search(r"^\|\s*16\s*\|", table, flags=re.M), table
    assert "llm_bias/run" not in out["markdown"]
    assert "Not read: `llm_bias/`" in out["markdown"]
    # the same runs with the bias stage's folder read: its D = 16 run shows up (the check can fail)
    both = write_all([results], tmp_path / "all", exclude=[stage_dir], only=["table3"])
    assert re.search(r"^\|\s*16\s*\|", (tmp_path / "all" / "table3.md").read_text(), flags=re.M)
    assert "table3" in both.written


def _damage_lines(path: Path, line: int, text: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = text + "\n"
    path.write_text("".join(lines))


def test_damaged_runs_are_reported_and_skipped(tmp_path: Path, capsys) -> None:
    root = tmp_path / "runs"
    write_train_run(root, "good", method="gmc", delay=0, steps=12, eval_every=4)
    bad_metrics = write_train_run(root, "bad-metrics", method="tic", delay=0, steps=12)
    _damage_lines(bad_metrics / "metrics.jsonl", 5, '{"step": 4, "reward/mean": 0.')
    bad_config = write_train_run(root, "bad-config", method="tic", delay=64, steps=12)
    (bad_config / "config.json").write_text('{"config": {"method": "tic",\n  "delay": ')
    bad_summary = write_train_run(root, "bad-summary", method="gmc", delay=64, steps=12)
    (bad_summary / "summary.json").write_bytes(b"\xff\xfe garbage")

    result = write_all([root], tmp_path / "out", only=["figure2", "table3"])
    assert set(result.written) == {"figure2", "table3"}  # the good run is drawn
    assert len(result.damaged) == 3
    by_name = {Path(line.split(":")[0]).parent.name: line for line in result.damaged}
    assert "bad-metrics/metrics.jsonl: line 5: not valid JSON (" in by_name["bad-metrics"]
    assert by_name["bad-config"].endswith("config.json: line 2: not valid JSON (Expecting value)")
    assert by_name["bad-summary"].endswith("summary.json: not UTF-8 text")
    index = (tmp_path / "out" / "INDEX.md").read_text()
    assert "## Damaged runs (skipped)" in index and "metrics.jsonl: line 5" in index
    runs_found = index.split("## Damaged")[0]  # a table of the readable runs, under <details>
    assert (
        re.search(r"\| `[^`]*good` \| llm_train \|", runs_found) and "bad-metrics" not in runs_found
    )
    assert "<details><summary>Every run found (1)</summary>" in runs_found

    assert main([str(root), "--list"]) == 0
    listed = capsys.readouterr().out
    assert "good: llm_train method=gmc" in listed
    assert "damaged, skipped:" in listed and "metrics.jsonl: line 5: not valid JSON" in listed
    assert main([str(root), "--out", str(tmp_path / "cli"), "--only", "figure2"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("skipped damaged run:") == 3 and "wrote figure2" in printed

    from figures.discover import discover

    with pytest.warns(UserWarning) as caught:
        runs = discover([root])
    assert [r.name for r in runs] == ["good"]
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3 and all(m.startswith("skipped a damaged run: ") for m in messages)


def test_default_output_goes_under_runs_and_the_command_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    write_train_run(tmp_path / "runs", "gmc-0", method="gmc", delay=0, steps=12, eval_every=4)
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "--only", "table3"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # nothing in the working dir
    out = tmp_path / "runs" / "figures"
    assert (out / "INDEX.md").is_file() and (out / "table3.md").is_file()
    assert f"wrote 1 items to {out.resolve()}" in capsys.readouterr().out
    # a second run does not read the figures folder as runs
    assert main(["runs", "--list"]) == 0
    assert "figures" not in capsys.readouterr().out.replace("gmc-grpo figures", "")
