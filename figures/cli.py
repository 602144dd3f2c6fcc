"""`gmc-grpo figures`: every figure and table that the given run directories allow.

Discovers the runs below the given paths (`figures.discover`), builds each paper figure and table
(`figures.llm`), the runs-vs-theory figure of every suite (`figures.bounds_vs_runs`) and the
figures of every toy sweep (`figures.toy_bias`), writes them (PNG and PDF; tables as Markdown and
LaTeX) and an `INDEX.md` that lists what was made, what was not and why. A run whose records
cannot be read is skipped and listed (file, line, reason) in the output and in `INDEX.md`; the
other runs are drawn. Matplotlib and the figure modules are imported only when a command runs, so
`--help` is fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmc_grpo.errors import run_reported
from gmc_grpo.runlock import locks_folder

# figure formats matplotlib writes without extra packages (`--formats`)
FORMATS = ("png", "pdf", "svg", "eps", "ps", "jpg", "jpeg", "tif", "tiff")

# name -> (what it shows, what it needs)
ITEMS: dict[str, tuple[str, str]] = {
    "figure2": (
        "sampled Pass@1 vs step per fixed delay in the records (paper: D = 0/64/128), "
        "GRPO/TIC/GMC; seeds as a mean with a 95% band",
        "fixed-delay LLM training runs (G = 8) with sampled evaluations",
    ),
    "figure4": (
        "current-policy token entropy vs step per fixed delay in the records",
        "fixed-delay LLM training runs (G = 8) logging policy/entropy",
    ),
    "figure5": (
        "training reward, GMC vs TIC, D = 128, G = 4/8/32",
        "fixed-delay D = 128 LLM training runs of GMC and TIC",
    ),
    "figure6": (
        "training reward, A-3PO vs GMC, simulated asynchrony",
        "length-coupled LLM training runs of A-3PO and GMC",
    ),
    "table1": (
        "six benchmarks greedy / avg@n, macro average, mean lag",
        "length-coupled LLM training runs with evaluations on the six benchmarks",
    ),
    "table3": (
        "greedy and pass@k per fixed delay in the records (seeds: mean ± 95% half-width)",
        "fixed-delay LLM training runs (G = 8) with MATH500 evaluations",
    ),
    "table4": (
        "MATH500 at checkpoints per group size, D = 128",
        "fixed-delay D = 128 GMC/TIC runs with MATH500 evaluations",
    ),
    "table5": (
        "A-3PO vs GMC on the six benchmarks",
        "length-coupled A-3PO/GMC runs with evaluations on the six benchmarks",
    ),
    "bounds_fixed_delay": (
        "runs vs theory, fixed-delay suite",
        "fixed-delay LLM training runs",
    ),
    "bounds_length_coupled": (
        "runs vs theory, simulated suite",
        "length-coupled LLM training runs",
    ),
    "bounds_toy": ("runs vs theory, toy MDP training", "toy training runs (`gmc-grpo toy train`)"),
    "toy_sweeps": ("bias / second moment / removed mass of each toy sweep", "toy sweep runs"),
}

EPILOG = """examples:
  gmc-grpo figures runs/                       # everything below runs/, into figures_out/
  gmc-grpo figures runs/gmc-d128 runs/tic-d128 --out paper_figs --only figure2 table3
  gmc-grpo figures runs/ --step 800           # tables at checkpoint 800 (default: last evaluated)
  gmc-grpo figures runs/ --list               # only say what was found

items: """ + ", ".join(ITEMS)


@dataclass
class FiguresResult:
    """What `write_all` made: `written[name] = paths`, `skipped[name] = reason`, the Markdown of
    each table, each item's notes, the inventory of runs found (Markdown: counts, then a table
    under `<details>`) and the damaged runs skipped (`damaged`: one `path: line N: reason` line
    each)."""

    out: Path
    written: dict[str, list[Path]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    inventory: str = ""
    damaged: list[str] = field(default_factory=list)

    def markdown(self, image_prefix: str = "") -> str:
        """The index: produced items (images, tables, captions), then what was not and why."""
        lines = ["## Runs found", "", self.inventory.rstrip() or "(none)", ""]
        if self.damaged:
            lines += ["## Damaged runs (skipped)", ""]
            lines += [f"- {line}" for line in self.damaged] + [""]
        lines += ["## Produced", ""]
        if not self.written:
            lines.append("(nothing)")
        for name, paths in self.written.items():
            lines.append(f"### {name}: {ITEMS.get(name, (name, ''))[0]}")
            lines.append("")
            for path in paths:
                rel = path.relative_to(self.out)
                if path.suffix == ".png":
                    lines.append(f"![{name}]({image_prefix}{rel})")
            if name in self.captions:
                lines += ["", self.captions[name]]
            if name in self.tables:
                lines += ["", self.tables[name]]
            for note in self.notes.get(name, []):
                lines.append(f"- note: {note}")
            lines.append("")
        lines += ["## Not produced", ""]
        if not self.skipped:
            lines.append("(everything was produced)")
        lines += [f"- {name}: {reason}" for name, reason in self.skipped.items()]
        return "\n".join(lines) + "\n"


def _figure_builders() -> dict[str, Callable[..., Any]]:
    from figures import llm

    return {
        "figure2": llm.figure2_data,
        "figure4": llm.figure4_data,
        "figure5": llm.figure5_data,
        "figure6": llm.figure6_data,
    }


def _table_builders() -> dict[str, Callable[..., Any]]:
    from figures import llm

    return {
        "table1": llm.table1_data,
        "table3": llm.table3_data,
        "table4": llm.table4_data,
        "table5": llm.table5_data,
    }


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
    `only` (default: all) into `out`; items without data are skipped (or drawn with the paper's
    reference only when `include_empty`). Paths in the index are relative to `root` (default:
    the working directory). Holds `out`'s lock throughout (`gmc_grpo.runlock`)."""
    from figures.common import save_figure
    from figures.discover import DamagedRun, discover, inventory_markdown

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
    )
    wanted = list(only) if only else list(ITEMS)
    for name in wanted:
        if name not in ITEMS:
            raise ValueError(f"unknown item {name!r}; choose from {', '.join(ITEMS)}")

    figure_builders = _figure_builders()
    for name, build in figure_builders.items():
        if name not in wanted:
            continue
        data = build(runs)
        result.notes[name] = data.notes
        if not data.has_data and not include_empty:
            missing = sorted({m for p in data.panels for m in p.missing})
            result.skipped[name] = f"needs {ITEMS[name][1]}; missing: {', '.join(missing)}"
            continue
        from figures.common import plot_panels

        result.written[name] = save_figure(plot_panels(data), out / name, formats)
        result.captions[name] = data.caption

    for name, build in _table_builders().items():
        if name not in wanted:
            continue
        kwargs = {"step": step} if name != "table4" else {}
        table = build(runs, **kwargs)
        result.notes[name] = table.notes
        if not table.has_data and not include_empty:
            result.skipped[name] = f"needs {ITEMS[name][1]}; no matching run was found"
            continue
        md, tex = out / f"{name}.md", out / f"{name}.tex"
        md.write_text(table.markdown(), encoding="utf-8")
        tex.write_text(table.latex(), encoding="utf-8")
        result.written[name] = [md, tex]
        result.tables[name] = table.markdown()

    for suite in ("fixed_delay", "length_coupled", "toy"):
        name = f"bounds_{suite}"
        if name not in wanted:
            continue
        from figures.bounds_vs_runs import bounds_data, plot_bounds_vs_runs

        data = bounds_data(runs, suite)
        if not data.has_data and not include_empty:
            result.skipped[name] = f"needs {ITEMS[name][1]}; none was found"
            continue
        result.written[name] = save_figure(plot_bounds_vs_runs(data), out / name, formats)
        result.captions[name] = data.caption

    if "toy_sweeps" in wanted:
        sweeps = [r for r in runs if r.kind == "toy_sweep"]
        if not sweeps:
            result.skipped["toy_sweeps"] = f"needs {ITEMS['toy_sweeps'][1]}; none was found"
        for run in sweeps:
            from figures.toy_bias import load_results, write_toy_figures

            rows = load_results(run.path)
            if not rows:
                result.skipped[f"toy_sweep {run.name}"] = "its metrics.jsonl has no rows"
                continue
            slopes = (run.record.summary or {}).get("group_size_slopes")
            paths_ = write_toy_figures(rows, out / "toy_sweeps" / run.name, slopes=slopes)
            result.written[f"toy_sweep {run.name}"] = [p for p in paths_ if p.suffix[1:] in formats]

    (out / "INDEX.md").write_text("# gmc-grpo figures\n\n" + result.markdown(), encoding="utf-8")
    return result


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
    parser.add_argument("--out", default="figures_out", help="output folder (default: figures_out)")
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
        unknown = sorted(set(args.only) - set(ITEMS))
        if unknown:
            raise ValueError(f"--only: unknown item(s) {unknown}; choose from {list(ITEMS)}")
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = sorted(set(formats) - set(FORMATS))
    if not formats or bad:
        raise ValueError(f"--formats {args.formats!r}: choose from {', '.join(FORMATS)}")
    if args.step is not None and args.step < 0:
        raise ValueError(f"--step {args.step}: must be >= 0 (an evaluation step)")
    from figures.discover import DamagedRun, discover, inventory

    if args.list:
        damaged: list[DamagedRun] = []
        runs = discover(args.paths, damaged=damaged)
        print(inventory(runs, root=Path.cwd(), damaged=damaged), end="")
        return 0
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
    for name, paths in result.written.items():
        print(f"wrote {name}: " + ", ".join(str(p) for p in paths))
    for name, reason in result.skipped.items():
        print(f"not made {name}: {reason}")
    print(f"index: {Path(args.out) / 'INDEX.md'}")
    return 0 if result.written else 1
