"""The committed snapshot of one `gmc-grpo reproduce`: where the README's headline numbers come from.

`make snapshot` (`python -m pipeline.snapshot`) copies, from a finished reproduce folder
(`results/` by default), its `REPORT.md` and every stage's headline, status, time and machine into
`snapshot/` at the repository root, with the commit the report names. The README's "Headline
results" table and the headline list of `docs/getting-started.md` ("What the report shows")
quote that snapshot, and `tests/pipeline/test_pipeline_snapshot.py` fails when a number there is
not in it (`unquoted_numbers`, `unquoted_bullet_numbers`): refresh them together, from one
reproduce of the version they describe.

What counts as a headline number (`quoted_numbers`): every decimal (`0.594`, `-0.962`, `9.1e-4`)
and every count phrase (`21 verified`, `3 of 4`) of a table row's result column or a bullet. Small integers
elsewhere (`G = 8`, `D = 64`) name grid points, which the report states in its own words.
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path
from typing import Any

from gmc_grpo.json_files import atomic_write_json, read_json_object

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT_DIR = ROOT / "snapshot"
COMMIT = re.compile(r"commit `([0-9a-f]{40})`")
# a decimal with optional sign and exponent, not part of a longer word or number
DECIMAL = re.compile(r"(?<![\w.])[+-]?\d+\.\d+(?:e[+-]?\d+)?(?![\w.])")
COUNT = re.compile(r"(?<![\w.])\d+ (?:of \d+|verified|reconstructed|holds? with a condition)")
STAGE_FIELDS = ("name", "title", "status", "seconds", "headline", "machine")


def report_commit(report_text: str) -> str:
    """The commit a reproduce report names in its summary (`commit `<40 hex>``)."""
    found = COMMIT.search(report_text)
    if found is None:
        raise ValueError('the report names no commit (its summary line lacks "commit `<sha>`")')
    return found.group(1)


def stage_summaries(results: Path) -> list[dict[str, Any]]:
    """Per stage folder of `results` with a `stage.json`: its name, title, status, seconds,
    headline and machine (what the snapshot keeps; the runs themselves stay out)."""
    out = []
    for marker in sorted(results.glob("*/stage.json")):
        record = read_json_object(marker)
        entry = {key: record.get(key) for key in STAGE_FIELDS}
        entry["name"] = entry["name"] or marker.parent.name
        out.append(entry)
    return out


def save_snapshot(results: Path, dest: Path = SNAPSHOT_DIR) -> dict[str, Any]:
    """Copy `results/REPORT.md` to `dest/REPORT.md` and write `dest/snapshot.json` (the commit,
    the stages' summaries); returns what was written to the JSON."""
    report = results / "REPORT.md"
    if not report.is_file():
        raise FileNotFoundError(
            f"{report} not found: run `make reproduce` (or `gmc-grpo reproduce --out {results}`) first"
        )
    text = report.read_text(encoding="utf-8")
    snapshot = {
        "commit": report_commit(text),
        "source": str(results),
        "stages": stage_summaries(results),
    }
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(report, dest / "REPORT.md")
    atomic_write_json(dest / "snapshot.json", snapshot)
    return snapshot


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The body rows (cells) of the first table under the `## heading` section of `markdown`."""
    rows = [line for line in _section(markdown, heading).splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    return [row for row in cells[2:] if row]  # after the header and its --- line


def quoted_numbers(cell: str) -> list[str]:
    """The headline numbers of a table cell: its decimals and count phrases, in order."""
    return COUNT.findall(cell) + DECIMAL.findall(cell)


def _section(markdown: str, heading: str) -> str:
    """The text of the `## heading` section of `markdown` (up to the next `## `)."""
    for part in re.split(r"^## ", markdown, flags=re.M):
        if part.startswith(heading):
            return part
    raise ValueError(f"no section '## {heading}'")


def bullet_items(markdown: str, heading: str) -> list[str]:
    """The top-level bullets (`- ...`, continuation lines joined) of the `## heading` section."""
    items: list[str] = []
    for line in _section(markdown, heading).splitlines():
        if line.startswith("- "):
            items.append(line[2:])
        elif items and line.startswith("  ") and line.strip():
            items[-1] += " " + line.strip()
        elif not line.strip() and items:
            items.append("")  # a blank line ends the item
    return [item for item in items if item]


def _in_report(number: str, report_text: str) -> bool:
    digits = re.escape(number.lstrip("+"))  # "+0.26" quotes "0.26"
    return re.search(r"(?<![\w.+-])\+?" + digits + r"(?![\w.])", report_text) is not None


def unquoted_numbers(markdown: str, heading: str, report_text: str, column: int = 1) -> list[str]:
    """Each number of the `column`th cell of the rows under `heading` that the report does not
    contain, as `"<row's first cell>: <number>"`; empty when every one is there."""
    missing = []
    for row in table_rows(markdown, heading):
        if column >= len(row):
            continue
        missing += [
            f"{row[0]}: {n}" for n in quoted_numbers(row[column]) if not _in_report(n, report_text)
        ]
    return missing


def unquoted_bullet_numbers(markdown: str, heading: str, report_text: str) -> list[str]:
    """Each number of the bullets under `heading` that the report does not contain, as
    `"<the bullet's first words>: <number>"`."""
    missing = []
    for item in bullet_items(markdown, heading):
        label = " ".join(item.split()[:4])
        missing += [f"{label}: {n}" for n in quoted_numbers(item) if not _in_report(n, report_text)]
    return missing


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.snapshot",
        description=(
            "Copy a finished reproduce's REPORT.md and its stages' headlines into snapshot/ (the "
            "numbers the README quotes; a test checks the README against it)."
        ),
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=ROOT / "results",
        help="a finished `gmc-grpo reproduce` folder (default: results/)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=SNAPSHOT_DIR,
        help="where to write REPORT.md and snapshot.json (default: snapshot/)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        snapshot = save_snapshot(args.results, args.out)
    except (FileNotFoundError, ValueError) as err:
        print(f"[snapshot] {err}")
        return 2
    print(
        f"[snapshot] commit {snapshot['commit'][:12]}, {len(snapshot['stages'])} stages -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
