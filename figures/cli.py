"""`gmc-grpo figures`: every figure and table that the given run directories allow.

Discovers the runs below the given paths (`figures.discover`), builds every item of the registry
(`figures.registry`: each paper figure and table, the runs-vs-theory figure of every suite and the
figures of every toy sweep), writes them (PNG and PDF; tables as Markdown and LaTeX,
`figures.tables`) and an `INDEX.md` that lists what was made, what was not and why. A run whose records
cannot be read is skipped and listed (file, line, reason) in the output and in `INDEX.md`; the
other runs are drawn. Matplotlib and the figure modules are imported only when a command runs, so
`--help` is fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from figures.registry import Entry, entries, get_entry, item_names
from gmc_grpo.errors import run_reported
from gmc_grpo.runlock import locks_folder

# the default output folder: under runs/ (git-ignored), never the working directory itself; the
# discovery skips folders named `figures`, so the outputs are never read back as runs
DEFAULT_OUT = "runs/figures"

# figure formats matplotlib writes without extra packages (`--formats`)
FORMATS = ("png", "pdf", "svg", "eps", "ps", "jpg", "jpeg", "tif", "tiff")

EPILOG = """examples:
  gmc-grpo figures runs/                       # everything below runs/, into runs/figures/
  gmc-grpo figures runs/gmc-d128 runs/tic-d128 --out paper_figs --only figure2 table3
  gmc-grpo figures runs/ --step 800           # tables at checkpoint 800 (default: last evaluated)
  gmc-grpo figures runs/ --list               # only say what was found

items: """ + ", ".join(item_names())


@dataclass
class FiguresResult:
    """What `write_all` made: `written[name] = paths`, `skipped[name] = reason`, the Markdown of
    each table, each item's notes, the inventory of runs found (Markdown: counts, then a table
    under `<details>`), the damaged runs skipped (`damaged`: one `path: line N: reason` line
    each) and the record files read without their torn last line or with missing rows (`torn`,
    the same form)."""

    out: Path
    written: dict[str, list[Path]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    inventory: str = ""
    damaged: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)

    def markdown(self, image_prefix: str = "") -> str:
        """The index: produced items (images, tables, captions), then what was not and why."""
        lines = ["## Runs found", "", self.inventory.rstrip() or "(none)", ""]
        if self.damaged:
            lines += ["## Damaged runs (skipped)", ""]
            lines += [f"- {line}" for line in self.damaged] + [""]
        if self.torn:
            lines += ["## Torn or gapped records (drawn from the rows they hold)", ""]
            lines += [f"- {line}" for line in self.torn] + [""]
        lines += ["## Produced", ""]
        if not self.written:
            lines.append("(nothing)")
        for name, paths in self.written.items():
            entry = get_entry(name)
            lines.append(f"### {name}: {entry.shows}" if entry else f"### {name}")
            lines.append("")
            for path in paths:
                rel = path.relative_to(self.out)
                if path.suffix == ".png":
                    # a toy sweep's figures: each image says which registry entry it is
                    part = get_entry(path.stem) if entry is None else None
                    alt = f"{name}: {part.shows}" if part else name
                    lines.append(f"![{alt}]({image_prefix}{rel})")
            if name in self.captions:
                lines += ["", self.captions[name]]
            if name in self.tables:  # a table's notes are part of its Markdown
                lines += ["", self.tables[name]]
            else:
                lines += [f"- note: {note}" for note in self.notes.get(name, [])]
            lines.append("")
        lines += ["## Not produced", ""]
        if not self.skipped:
            lines.append("(everything was produced)")
        lines += [f"- {name}: {reason}" for name, reason in self.skipped.items()]
        return "\n".join(lines) + "\n"


@locks_folder("out")
def write_all(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    only: Sequence[str] | None = None,
    formats: Sequence[str] = ("png", "pdf"),
    step: int | None = None,
    include_empty: bool = False,
    exclude: Sequence[str | Path] = (),
    root: str | Path | None = None,
) -> FiguresResult:
    """Discover the runs below `paths` (minus those under `exclude`) and write every item of
    `only` (default: all; `figures.registry`) into `out`; items without data are skipped (or
    drawn with the paper's reference only when `include_empty`). Paths in the index are relative
    to `root` (default: the working directory). Holds `out`'s lock throughout
    (`gmc_grpo.runlock`)."""
    from figures.common import save_figure
    from figures.discover import DamagedRun, discover, inventory_markdown, torn_records
    from figures.tables import render_markdown

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    excluded = [Path(p).resolve() for p in exclude]
    base = Path(root) if root is not None else Path.cwd()

    def kept(path: Path) -> bool:
        return not any(path == e or e in path.parents for e in excluded)

    damaged: list[DamagedRun] = []
    runs = [r for r in discover(paths, damaged=damaged) if kept(r.path)]
    damaged = [d for d in damaged if kept(d.run_dir)]
    result = FiguresResult(
        out=out,
        inventory=inventory_markdown(runs, root=base),
        damaged=[d.describe(base) for d in damaged],
        torn=torn_records(runs, root=base),
    )
    names = item_names()
    wanted = list(only) if only else names
    for name in wanted:
        if name not in names:
            raise ValueError(f"unknown item {name!r}; choose from {', '.join(names)}")
    for entry in entries("runs"):
        name = entry.name
        if name not in wanted:
            continue
        if entry.output == "sweep figures":
            _write_sweeps(entry, runs, result, formats)
            continue
        numbers = entry.numbers(runs, **({"step": step} if entry.takes_step else {}))
        result.notes[name] = numbers.notes
        if not numbers.has_data and not include_empty:
            result.skipped[name] = f"needs {entry.needs}; {numbers.why_empty}"
        elif entry.output == "table":
            result.written[name] = _write_table(numbers, out / name)
            result.tables[name] = render_markdown(numbers)
        else:
            result.written[name] = save_figure(entry.figure(numbers), out / name, formats)
            result.captions[name] = numbers.caption
    (out / "INDEX.md").write_text("# gmc-grpo figures\n\n" + result.markdown(), encoding="utf-8")
    return result


def _write_table(table: Any, stem: Path) -> list[Path]:
    """`stem.md` and `stem.tex` of a table; returns their paths."""
    from figures.tables import render_latex, render_markdown

    md, tex = stem.with_suffix(".md"), stem.with_suffix(".tex")
    md.write_text(render_markdown(table), encoding="utf-8")
    tex.write_text(render_latex(table), encoding="utf-8")
    return [md, tex]


def _write_sweeps(
    entry: Entry, runs: Sequence[Any], result: FiguresResult, formats: Sequence[str]
) -> None:
    """The `"sweep"` entries of the registry for every toy sweep found, into
    `out/<item>/<sweep>/`; each sweep is listed as `toy_sweep <name>`."""
    from figures.writers import write_sweep_figures

    sweeps = entry.numbers(runs)
    if not sweeps:
        result.skipped[entry.name] = f"needs {entry.needs}; none was found"
    for sweep in sweeps:
        label = f"toy_sweep {sweep.name}"
        if not sweep.rows:
            result.skipped[label] = "its metrics.jsonl has no rows"
            continue
        out = result.out / entry.name / sweep.name
        result.written[label] = write_sweep_figures(sweep, out, formats)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo figures",
        description="Regenerate the paper's Figures 2, 4, 5, 6 and Tables 1, 3, 4, 5 (next to the "
        "paper's values), the runs-vs-theory figures and the toy-sweep figures from run "
        "directories. Says which items it could not make and why.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="*", default=["runs"], help="run directories or roots (default: runs)"
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help=f"output folder (default: {DEFAULT_OUT}; a folder named figures is never read as runs)",
    )
    parser.add_argument("--only", nargs="+", metavar="ITEM", help="make only these items")
    parser.add_argument(
        "--formats", default="png,pdf", help="comma-separated figure formats (default: png,pdf)"
    )
    parser.add_argument(
        "--step", type=int, default=None, help="evaluation step of Tables 1, 3, 5 (default: last)"
    )
    parser.add_argument(
        "--include-empty",
        action="store_true",
        help="also draw items with no matching run (the paper's reference values only)",
    )
    parser.add_argument("--list", action="store_true", help="only list the runs found")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    return run_reported("gmc-grpo figures", lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    if args.only:
        unknown = sorted(set(args.only) - set(item_names()))
        if unknown:
            raise ValueError(f"--only: unknown item(s) {unknown}; choose from {item_names()}")
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = sorted(set(formats) - set(FORMATS))
    if not formats or bad:
        raise ValueError(f"--formats {args.formats!r}: choose from {', '.join(FORMATS)}")
    if args.step is not None and args.step < 0:
        raise ValueError(f"--step {args.step}: must be >= 0 (an evaluation step)")
    from figures.discover import DamagedRun, discover, inventory, scan_runs

    if args.list:
        damaged: list[DamagedRun] = []
        runs = discover(args.paths, damaged=damaged)
        print(inventory(runs, root=Path.cwd(), damaged=damaged), end="")
        return 0
    found, damaged_found = scan_runs(args.paths)  # checked before --out is created
    if not found and not damaged_found and not args.include_empty:
        raise ValueError(
            f"no run directory under {', '.join(map(str, args.paths))}: a run directory holds "
            "the config.json and records that `gmc-grpo toy ...` and `gmc-grpo llm ...` write "
            "into their --out; give the folder your runs are in (or --include-empty to draw the "
            "paper's reference values alone)"
        )
    result = write_all(
        args.paths,
        args.out,
        only=args.only,
        formats=formats,
        step=args.step,
        include_empty=args.include_empty,
    )
    for line in result.damaged:
        print(f"skipped damaged run: {line}")
    for line in result.torn:
        print(f"note: {line}")
    for name, paths in result.written.items():
        print(f"wrote {name}: " + ", ".join(str(p) for p in paths))
    for name, reason in result.skipped.items():
        print(f"not made {name}: {reason}")
    print(
        f"wrote {len(result.written)} items to {Path(args.out).resolve()} "
        f"(index: {Path(args.out) / 'INDEX.md'})"
    )
    if not result.written:
        print(
            f"nothing was made from the runs found under {', '.join(map(str, args.paths))}: "
            "each item above says what it needs",
            file=sys.stderr,
        )
        return 1
    return 0
