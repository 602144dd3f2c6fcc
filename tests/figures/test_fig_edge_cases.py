"""`gmc-grpo figures` at the edges (issue 26): an empty folder, a missing path, a file argument,
a rerun whose writes are refused, a torn last record line, a byte-order mark; and captions that
name only what is drawn (no bare "missing: ", no "(; intervals )", no repeated headings or
notes, no diamonds that are not there)."""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path

import pytest
from fig_records import write_toy_train_run, write_train_run

from figures import llm
from figures.cli import main, write_all
from figures.discover import discover
from gmc_grpo.json_files import BOM, read_json, read_jsonl
from gmc_grpo.records import read_run


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_an_empty_folder_says_why_and_writes_nothing(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    assert main([str(empty), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = _lines(captured.err)
    assert line.startswith(f"gmc-grpo figures: error: no run directory under {empty}: ")
    assert "give the folder your runs are in" in line and "--include-empty" in line
    assert not out.exists()


def test_a_missing_path_creates_no_output_folder(tmp_path: Path, capsys) -> None:
    out = tmp_path / "X"
    assert main([str(tmp_path / "nonexistent"), "--out", str(out)]) == 2
    (line,) = _lines(capsys.readouterr().err)
    assert "nonexistent does not exist" in line
    assert not out.exists()


def test_a_file_argument_is_refused_not_read_as_its_parent(tmp_path: Path, capsys) -> None:
    """`figures runs/a/config.json` used to read every run below `runs/` (the file's parent's
    parent included, through the walk of the parent): now it names the folder to give."""
    root = tmp_path / "runs"
    first = write_train_run(root, "a", method="gmc", delay=0, steps=4, eval_every=2)
    write_train_run(root, "b", method="tic", delay=0, steps=4, eval_every=2)
    (root / "notes.txt").write_text("my runs")
    out = tmp_path / "out"
    for path in (first / "config.json", root / "notes.txt"):
        assert main([str(path), "--out", str(out)]) == 2
        (line,) = _lines(capsys.readouterr().err)
        assert f"{path} is a file, not a folder: give the run directory that holds it " in line
        assert f"({path.parent})" in line
        assert not out.exists()
        with pytest.raises(NotADirectoryError):
            discover([path])
    assert [r.name for r in discover([first])] == ["a"]  # the folder itself: that run only


def test_nothing_made_from_runs_says_so(tmp_path: Path, capsys) -> None:
    root = tmp_path / "runs"
    write_train_run(root, "a", method="gmc", delay=0, steps=4)  # fixed delay: no Figure 6
    assert main([str(root), "--out", str(tmp_path / "out"), "--only", "figure6"]) == 1
    captured = capsys.readouterr()
    assert "not made figure6: needs length-coupled LLM training runs" in captured.out
    assert _lines(captured.err) == [
        f"nothing was made from the runs found under {root}: each item above says what it needs"
    ]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, object]:
    """Every item written from LLM runs at D = 0 (one seed) and D = 16 (two seeds), a toy run
    with delay 0 only (no GMC/TIC gap to measure) and a toy sweep's records."""
    root = tmp_path_factory.mktemp("edge") / "runs"
    for method in ("tic", "gmc"):
        write_train_run(root, f"{method}-0", method=method, delay=0, steps=8, eval_every=4)
        for seed in (0, 1):
            write_train_run(
                root, f"{method}-16-s{seed}", method=method, delay=16, steps=8, eval_every=4,
                seed=seed, shift=0.01 * seed,
            )  # fmt: skip
    write_toy_train_run(root, "toy", delays=(0,), steps=6)
    sweep = root / "sweep"
    from gmc_grpo.run_writer import RunWriter

    with RunWriter(sweep, {"delays": [0, 4], "name": "mine"}) as writer:
        writer.write_summary({})
    out = root.parent / "out"
    result = write_all([root], out)
    return out, (out / "INDEX.md").read_text(), result


def test_captions_name_only_what_is_drawn(index) -> None:
    out, text, result = index
    runs = discover([out.parent / "runs"])
    two_panels = llm.figure2_data(runs)
    assert [p.key for p in two_panels.panels] == [0, 16]
    assert [bool(p.references) for p in two_panels.panels] == [True, False]  # Table 3 has D = 0
    assert two_panels.caption.startswith("Open diamonds: the paper's Pass@1")
    assert "Shaded: 95% interval over seeds" in two_panels.caption  # D = 16 has two seeds
    only_16 = llm.figure2_data(runs, delays=[16])
    assert not only_16.has_references and "diamond" not in only_16.caption.lower()
    assert only_16.caption.startswith("No paper value is drawn: Table 3 reports D = 0, 32, 64,")
    one_seed = llm.figure2_data(runs, delays=[0])
    assert not one_seed.has_bands and "Shaded" not in one_seed.caption
    figure4 = llm.figure4_data(runs, delays=[0])
    assert figure4.caption == "Faint: per-step values; solid: centred moving average over 9 steps."

    # no empty lists left in the text: "missing: " with nothing after it, "(; intervals )"
    assert not re.search(r"missing: ?($|\n|\))", text), text
    assert "(; intervals" not in text and "( pp" not in text and "()" not in text
    for reason in result.skipped.values():
        assert not reason.rstrip().endswith(("missing:", ";", ":")), reason
    assert "no delay > 0 with both a GMC and a TIC run" in result.captions["bounds_toy"]


def test_headings_and_notes_are_not_repeated(index) -> None:
    out, text, result = index
    headings = re.findall(r"^### (.*)$", text, flags=re.M)
    for heading in headings:
        name, _, shows = heading.partition(": ")
        assert shows != name, heading  # not "toy_sweep mine: toy_sweep mine"
    assert "### toy_sweep sweep" not in text or "toy_sweep sweep: toy_sweep" not in text
    table = result.tables["table3"]
    for note in result.notes["table3"]:
        assert text.count(note) == 1, note  # in the table's Markdown only, not again as "note:"
        assert f"- {note}" in table


def test_sweep_images_say_which_figure_they_are(tmp_path: Path) -> None:
    import torch

    from toy_mdps.sweep import run_sweep
    from toy_mdps.sweep.config import SweepConfig

    torch.set_num_threads(1)
    config = SweepConfig.from_dict(
        {"name": "tiny", "num_prompts": 2, "vocab_size": 3, "max_length": 3,
         "trajectory_steps": 4, "delays": [0, 4], "group_sizes": [2, 4], "num_minibatches": 10,
         "methods": ["tic", "gmc"], "figures": False}
    )  # fmt: skip
    run_sweep(config, tmp_path / "runs" / "tiny", progress=False)
    result = write_all([tmp_path / "runs"], tmp_path / "out", only=["toy_sweeps"])
    text = (tmp_path / "out" / "INDEX.md").read_text()
    assert "### toy_sweep tiny\n" in text
    assert "![toy_sweep tiny: relative squared bias per method vs the delay" in text
    assert len(re.findall(r"!\[toy_sweep tiny: [^]]+\]\(toy_sweeps/tiny/\w+\.png\)", text)) == 4
    assert len(result.written["toy_sweep tiny"]) == 8


def test_a_refused_write_prints_no_wrote_line(tmp_path: Path, capsys, monkeypatch) -> None:
    """A rerun whose figure files cannot be written (a read-only copy of the output) stops with
    one line and exit status 1; it does not claim to have written anything."""
    import matplotlib.figure

    root = tmp_path / "runs"
    write_toy_train_run(root, "toy", delays=(0, 2), steps=6)
    out = tmp_path / "out"
    assert main([str(root), "--out", str(out), "--only", "bounds_toy"]) == 0
    assert "wrote bounds_toy" in capsys.readouterr().out
    before = {p: p.stat().st_mtime_ns for p in out.iterdir()}

    def refuse(self, path, *args, **kwargs):  # noqa: ANN001, ANN202
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", refuse)
    assert main([str(root), "--out", str(out), "--only", "bounds_toy"]) == 1
    captured = capsys.readouterr()
    assert "wrote" not in captured.out and "index:" not in captured.out
    (line,) = _lines(captured.err)
    assert line.startswith("gmc-grpo figures: error: cannot write or read ")
    assert "bounds_toy.png: Permission denied" in line
    assert {p: p.stat().st_mtime_ns for p in out.iterdir()} == before  # INDEX.md not rewritten


def test_a_torn_last_line_is_reported(tmp_path: Path, capsys) -> None:
    root = tmp_path / "runs"
    run = write_toy_train_run(root, "toy", delays=(0, 2), steps=6)
    metrics = run / "metrics.jsonl"
    complete = len(read_jsonl(metrics))
    with open(metrics, "a", encoding="utf-8") as handle:
        handle.write('{"step": 6, "method": "gmc", "delay": 2, "seed": 0, "policy/obj')
    torn: list[int] = []
    assert len(read_jsonl(metrics, torn)) == complete and torn == [complete + 1]
    assert read_run(run).torn == {"metrics.jsonl": complete + 1}

    out = tmp_path / "out"
    assert main([str(root), "--out", str(out), "--only", "bounds_toy"]) == 0
    printed = capsys.readouterr().out
    note = f"toy/metrics.jsonl: line {complete + 1}: a torn last line"
    assert sum(note in line for line in printed.splitlines() if line.startswith("note: ")) == 1
    text = (out / "INDEX.md").read_text()
    section = text.split("## Torn or gapped records (drawn from the rows they hold)")[1].split(
        "## "
    )[0]
    assert note in section
    rows = [line for line in text.splitlines() if line.startswith("| `") and "toy" in line]
    assert rows and all("(torn line left out)" in line for line in rows)
    assert all("| 6 (torn line left out) |" in line for line in rows)  # steps 0-5, per curve
    assert main([str(root), "--list"]) == 0
    assert "(torn last line left out: metrics.jsonl)" in capsys.readouterr().out


def test_missing_rows_are_reported_and_the_rest_drawn(tmp_path: Path, capsys) -> None:
    """Issue 36: a run whose metrics lack steps (rows deleted, a finished run cut short) is
    drawn from the rows it holds, with a note naming the missing rows in the output, in
    `INDEX.md` and in `--list`."""
    root = tmp_path / "runs"
    run = write_toy_train_run(root, "toy", delays=(0, 2), steps=6)
    metrics = run / "metrics.jsonl"
    kept = [
        line for line in metrics.read_text().splitlines(keepends=True) if '"step": 3,' not in line
    ]
    metrics.write_text("".join(kept))
    out = tmp_path / "out"
    assert main([str(root), "--out", str(out), "--only", "bounds_toy"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "missing rows" in line]
    assert len(notes) == 1 and "toy/metrics.jsonl: missing rows (" in notes[0]
    assert "step 3" in notes[0] and "drawn with the gap" in notes[0]
    assert "missing rows (" in (out / "INDEX.md").read_text()
    assert main([str(root), "--list"]) == 0
    assert "(missing rows: " in capsys.readouterr().out


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    """A BOM (as Windows editors save UTF-8) is read past, in records and in config files,
    instead of json's "Unexpected UTF-8 BOM (decode using utf-8-sig)"."""
    from gmc_grpo.config_reading import read_json_config
    from llm_runs.evaluation.config import read_config_file
    from toy_mdps.train.config import ExperimentConfig

    root = tmp_path / "runs"
    plain = write_train_run(root, "plain", method="gmc", delay=0, steps=4, eval_every=2)
    marked = write_train_run(root, "marked", method="gmc", delay=0, steps=4, eval_every=2)
    for name in ("config.json", "metrics.jsonl", "evals.jsonl", "summary.json"):
        path = marked / name
        path.write_bytes(BOM + path.read_bytes())
    a, b = read_run(plain), read_run(marked)
    assert (b.metrics, b.evals, b.summary) == (a.metrics, a.evals, a.summary) and b.torn == {}
    assert b.config["config"]["method"] == "gmc"
    assert read_json(marked / "config.json") == json.loads(
        (marked / "config.json").read_bytes()[3:]
    )
    assert sorted(r.name for r in discover([root])) == ["marked", "plain"]

    experiment = tmp_path / "grid.json"
    experiment.write_bytes(BOM + b'{"name": "g", "base": {"total_steps": 3, "seeds": [0]}}')
    assert read_json_config(experiment, "experiment")["name"] == "g"
    assert ExperimentConfig.from_file(experiment).points()[0][1].total_steps == 3
    toml = tmp_path / "eval.toml"
    toml.write_bytes(BOM + b'[eval]\nbenchmarks = ["math500"]\nn = 2\n')
    assert read_config_file(toml) == {"benchmarks": ["math500"], "n": 2}
