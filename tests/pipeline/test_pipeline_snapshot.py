"""The README's headline numbers come from the committed snapshot of one reproduce (`snapshot/`).

`pipeline.snapshot` copies a finished reproduce's report and headlines into `snapshot/`; the
README's "Headline results" table must quote it: a number there that the snapshot's report does
not contain fails here, naming the row and the number. Refresh both with `make reproduce` then
`make snapshot` (docs/development.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.snapshot import (
    SNAPSHOT_DIR,
    main,
    quoted_numbers,
    report_commit,
    save_snapshot,
    table_rows,
    unquoted_bullet_numbers,
    unquoted_numbers,
)

ROOT = Path(__file__).resolve().parents[2]
HEADING = "Headline results"

REPORT = """# gmc-grpo reproduction report

## Summary

2 stages, 2 finished. Package 0.1.0, commit `{sha}`, Python 3.11.

primary (staleness 64): holds (-0.594 [-0.962, -0.226], paired over 3 seeds); TIC-GRPO: 0.26 [0.25, 0.26];
claims: 21 verified, 2 reconstructed; GMC below TIC at 3 of 4 points.
""".format(sha="a" * 40)

README = """# project

## Headline results

| question | result | details |
| --- | --- | --- |
| bias | holds: {primary} [-0.962, -0.226] | [x](x.md) |
| claims | 21 verified, 2 reconstructed | [y](y.md) |
| workers | TIC +0.26 [0.25, 0.26]; GMC below TIC at {count} points | [z](z.md) |

## More

| a | b |
| --- | --- |
| 9.99 | 1.23 |
"""


def test_numbers_and_counts_are_read_from_the_result_column() -> None:
    rows = table_rows(README.format(primary="-0.594", count="3 of 4"), HEADING)
    assert [row[0] for row in rows] == ["bias", "claims", "workers"]
    assert quoted_numbers(rows[0][1]) == ["-0.594", "-0.962", "-0.226"]
    assert quoted_numbers(rows[1][1]) == ["21 verified", "2 reconstructed"]
    assert quoted_numbers(rows[2][1]) == ["3 of 4", "+0.26", "0.25", "0.26"]


def test_a_readme_that_quotes_the_report_passes() -> None:
    readme = README.format(primary="-0.594", count="3 of 4")
    assert unquoted_numbers(readme, HEADING, REPORT) == []  # the other section's 9.99 is not read


@pytest.mark.parametrize(
    ("primary", "count", "missing"),
    [
        ("-0.595", "3 of 4", ["bias: -0.595"]),  # a changed decimal
        ("0.594", "3 of 4", ["bias: 0.594"]),  # a changed sign: -0.594 in the report
        ("-0.594", "2 of 4", ["workers: 2 of 4"]),  # a changed count
    ],
)
def test_a_headline_that_differs_from_the_report_fails(primary, count, missing) -> None:
    readme = README.format(primary=primary, count=count)
    assert unquoted_numbers(readme, HEADING, REPORT) == missing


def test_bulleted_headlines_are_checked_item_by_item() -> None:
    page = (
        "# page\n\n## What the report shows\n\nintro 9.99\n\n"
        "- **Toy** (x): holds (-0.594 [-0.962, -0.226]);\n  claims 21 verified, 2 reconstructed.\n"
        "- **LLM** (y): GMC below TIC at {count} points.\n\n## Next\n\n- 1.23\n"
    )
    assert (
        unquoted_bullet_numbers(page.format(count="3 of 4"), "What the report shows", REPORT) == []
    )
    assert unquoted_bullet_numbers(
        page.format(count="1 of 4"), "What the report shows", REPORT
    ) == ["**LLM** (y): GMC below: 1 of 4"]


def test_save_copies_the_report_and_the_stage_headlines(tmp_path: Path) -> None:
    results = tmp_path / "results"
    (results / "toy_sweep").mkdir(parents=True)
    (results / "REPORT.md").write_text(REPORT)
    stage = {
        "status": "ok",
        "headline": "holds",
        "seconds": 1.5,
        "markdown": "long",
        "analysis": {},
    }
    (results / "toy_sweep" / "stage.json").write_text(json.dumps(stage))
    assert main(["--results", str(results), "--out", str(tmp_path / "snap")]) == 0
    saved = json.loads((tmp_path / "snap" / "snapshot.json").read_text())
    assert saved["commit"] == "a" * 40
    assert saved["stages"] == [
        {
            "name": "toy_sweep",
            "title": None,
            "status": "ok",
            "seconds": 1.5,
            "headline": "holds",
            "machine": None,
        }
    ]
    assert (tmp_path / "snap" / "REPORT.md").read_text() == REPORT


def test_save_refuses_a_folder_without_a_report(tmp_path: Path, capsys) -> None:
    assert main(["--results", str(tmp_path), "--out", str(tmp_path / "snap")]) == 2
    assert "run `make reproduce`" in capsys.readouterr().out
    with pytest.raises(ValueError, match="names no commit"):
        report_commit("## Summary\n\nno sha here")
    (tmp_path / "REPORT.md").write_text("no commit")
    with pytest.raises(ValueError):
        save_snapshot(tmp_path, tmp_path / "snap")


def test_the_readme_quotes_the_committed_snapshot() -> None:
    report = (SNAPSHOT_DIR / "REPORT.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = unquoted_numbers(readme, HEADING, report)
    assert missing == [], (
        "README headline numbers not in snapshot/REPORT.md (refresh the README from the snapshot, "
        f"or the snapshot from a reproduce of this version: make snapshot): {missing}"
    )


def test_getting_started_quotes_the_committed_snapshot() -> None:
    report = (SNAPSHOT_DIR / "REPORT.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    missing = unquoted_bullet_numbers(page, "What the report shows", report)
    assert missing == [], (
        f"docs/getting-started.md headline numbers not in snapshot/REPORT.md: {missing}"
    )


def test_the_snapshot_names_a_commit_of_this_history() -> None:
    saved = json.loads((SNAPSHOT_DIR / "snapshot.json").read_text(encoding="utf-8"))
    assert saved["commit"] == report_commit(
        (SNAPSHOT_DIR / "REPORT.md").read_text(encoding="utf-8")
    )
    assert {stage["status"] for stage in saved["stages"]} == {"ok"}
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the snapshot's commit cannot be looked up")
    known = subprocess.run(
        [git, "cat-file", "-e", f"{saved['commit']}^{{commit}}"], cwd=ROOT, check=False
    )
    if known.returncode != 0:
        pytest.skip("the snapshot's commit is not in this clone (a shallow clone)")
    ancestor = subprocess.run(
        [git, "merge-base", "--is-ancestor", saved["commit"], "HEAD"], cwd=ROOT, check=False
    )
    assert ancestor.returncode == 0, (
        f"snapshot commit {saved['commit'][:12]} is not an ancestor of HEAD"
    )
