"""`gmc-grpo theory`: the claims table of the paper's constants and rates (never imports torch).

`--runs` reads run records, which `theory` never does: the router (`pipeline.cli`) runs this
command through `evidence.theory_runs.main`, which hands `main` a reader of the runs
(`read_runs`: folders -> `RunsRead`, the run checks' findings per claims row and the tracked
runs' bounds, rendered).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gmc_grpo.defaults import PAPER_EPS
from theory.run_rows import Findings

# the largest `--eps` of the constants table: the tight GMC constant's series overflows float64
# near eps = 1e307 (a NaN in the table); every column is finite up to 1e300 (checked)
MAX_EPS = 1e300


@dataclass(frozen=True)
class RunsRead:
    """What `--runs` adds, read from the records above `theory` (`evidence.theory_runs`)."""

    findings: Findings
    """the registered run checks' findings, per claims row (`evidence.registry.run_findings`)"""
    counts: dict[str, int]
    """how much evidence was read (the JSON's `evidence`)"""
    bounds: list[dict[str, Any]]
    """every tracked run's bounds beside its measurements (`bounds.json`)"""
    bounds_markdown: str
    """the same as Markdown (`bounds.md`)"""
    bounds_text: str
    """the same as plain text (printed below the table)"""
    problems: list[str]
    """one line per run that could not be read (printed as warnings)"""


RunsReader = Callable[[list[Path]], RunsRead]
"""folders -> what `--runs` adds (`evidence.theory_runs.read_runs`)"""


EPILOG = """examples:
  gmc-grpo theory                      # claims table and the constants at a few eps
  gmc-grpo theory --json               # the same as JSON (claims with their evidence_kind, constants,
                                       # summary, summary_ours, summary_kinds: rows per evidence kind)
  gmc-grpo theory --out results/theory # also write the plots, claims.json and claims.md
  gmc-grpo theory --eps 0.05 0.28 1    # constants table at these eps
  gmc-grpo theory --runs runs/toy_train/bounds_quick   # + the bounds beside toy-run measurements
  gmc-grpo theory --runs results/      # the run rows on a `make reproduce` output
  gmc-grpo theory --explorer explorer.html             # the bounds explorer page (no kernel needed)

verdicts (theory.verdicts; each row gives a one-line reason for its kind):
  verified                an independent computation that could have come out otherwise agrees
  reconstructed           our derivation from the paper's ingredients; nothing computed could
                          contradict it
  holds with a condition  holds only under a condition the paper does not state (named)
  refuted                 an exact example or computation contradicts the claim
  not reproduced          what we derive or measure differs; nothing contradicts it as a bound
  does not hold / not significant   measured comparisons (paired 95% intervals)
  needs runs              evidence from toy runs: add --runs DIR
  not checkable here
The paper's claims are counted, one count per kind (no pooled total); our readings and
extensions are counted apart. JSON rows carry the claim and the derived expression both as plain
text and as LaTeX (claim_latex, derived_latex), and the verdict's reason and condition.

Without --runs the rows whose evidence is a measurement on toy runs say "needs runs" and name the
experiment. --runs reads the records under DIR (JSON and CSV only: config.json, metrics.jsonl,
summary.json, results.csv; no torch; through the evidence layer): toy training runs that tracked their bound
quantities (`--bound-every K`, the shipped bounds_quick, bounds_bite and drift_quick
experiments), delay-regularity experiments (regularity_quick) and bias sweeps; it evaluates the
run rows (drift, delay regularity, the delay-uniform second moment, Lemma 1 with measured
moments, the explicit theorems' vacuity) and prints, per tracked run, the measured
(1/N) sum ||grad J||^2 beside Theorem 1/2's right-hand side with explicit constants, each term
beside its measured counterpart, the per-step checks and every refutation (evidence.measured).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo theory",
        description=(
            "Derive (sympy) and check (exact enumeration on token trees, adversarial searches, "
            "mpmath interval arithmetic) the claims of the GMC-GRPO paper's §2-§4: Lemma 1, "
            "Propositions 1-2, the class of estimators, the §4.2 proof chain with explicit "
            "constants, Theorems 1-2, Corollaries 1-2 and the remarks on delay tolerance."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the bound plots (PNG and PDF), claims.json and claims.md to DIR",
    )
    parser.add_argument(
        "--eps",
        type=float,
        nargs="+",
        default=[0.01, 0.1, 0.2, PAPER_EPS, 0.5, 1.0, 10.0],
        metavar="EPS",
        help="thresholds for the constants table (default: %(default)s)",
    )
    parser.add_argument(
        "--runs",
        type=Path,
        nargs="+",
        default=None,
        metavar="DIR",
        help="toy runs (or folders holding them): evaluate the claims that need runs, and print "
        "the bounds beside the tracked runs' measurements (with --out: bounds.json, bounds.md)",
    )
    parser.add_argument(
        "--explorer",
        type=Path,
        default=None,
        metavar="OUT.html",
        help="write the bounds explorer (sliders for eps, N, tau4, eta, G, delta and the "
        "constants; numbers from theory.explorer) as one HTML file that needs no kernel, and exit",
    )
    return parser


def constants_table(eps_values: list[float]) -> list[dict[str, float]]:
    """One row per `eps`: both denominators, the tight GMC constant and the improvement factors."""
    from theory.constants import (
        c_eps,
        gmc_denominator,
        improvement_factor,
        tight_gmc_denominator,
    )

    return [
        {
            "eps": e,
            "c_eps": float(c_eps(e)),
            "log(1+2eps)": float(gmc_denominator(e)),
            "tight_gmc": float(tight_gmc_denominator(e)),
            "improvement_factor": float(improvement_factor(e)),
            "improvement_factor_tight": float(improvement_factor(e, tight=True)),
        }
        for e in eps_values
    ]


def _wrap(label: str, text: str, width: int) -> list[str]:
    wrapped = textwrap.wrap(text, width=width - 13) or [""]
    return [f"    {label + ':':8s} {wrapped[0]}"] + [f"             {w}" for w in wrapped[1:]]


def counts_text(counts: dict[str, int]) -> str:
    """Every verdict kind that occurs, with its own count (`theory.claims.counts_text`)."""
    from theory.claims import counts_text as text

    return text(counts)


def format_table(
    rows: list[dict[str, object]],
    consts: list[dict[str, float]],
    counts: dict[str, dict[str, int]],
) -> str:
    """Plain-text claims table (paper's claims, then ours; each row with its verdict and the
    kind of evidence behind it, `theory.evidence_kinds`) followed by the constants table."""
    from theory.evidence_kinds import kind_counts, kinds_text

    width = 100
    lines = ["GMC-GRPO theory: the paper's claims, what we derived, verdict", "=" * width]
    sections = (
        ("paper", "CLAIMS OF THE PAPER (counted)"),
        ("ours", "OUR READINGS AND EXTENSIONS (not counted; never a refutation of the paper)"),
    )
    number = 0
    for section, heading in sections:
        lines += [heading, "-" * width]
        for row in (r for r in rows if r["section"] == section):
            number += 1
            kind = row.get("evidence_kind") or {}
            label = kind.get("kind") or "no evidence yet"  # type: ignore[union-attr]
            lines.append(f"{number:2d}. [{row['verdict']}; {label}] {row['title']}")
            lines += _wrap("claim", str(row["claim"]), width)
            reason = str(row["reason"])
            if row.get("condition"):
                reason += f" (condition: {row['condition']})"
            lines += _wrap("why", reason, width)
            lines += _wrap("where", str(row["where"]), width)
            lines += _wrap("derived", str(row["derived"]), width)
            lines += _wrap("result", str(row["result"]), width)
            lines += _wrap("how", str(row["how"]), width)
            lines.append("")
        lines.append(f"{section}: {counts_text(counts[section])}")
        lines.append(f"{section}, by evidence: {kinds_text(kind_counts(rows)[section])}")
        lines.append("")
    header = [
        "eps",
        "c_eps",
        "log(1+2eps)",
        "tight_gmc",
        "improvement_factor",
        "improvement_factor_tight",
    ]
    lines.append("constants (tight TIC = c_eps; improvement factor = (TIC den / GMC den)^(2/5))")
    lines.append("  ".join(f"{h:>12s}" if i else f"{h:>8s}" for i, h in enumerate(header)))
    for c in consts:
        lines.append(
            "  ".join(f"{c[h]:>12.6g}" if i else f"{c[h]:>8g}" for i, h in enumerate(header))
        )
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    """Write atomically (temp file, then rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _write_outputs(
    out: Path, payload: dict[str, object], rows: list, runs: RunsRead | None
) -> None:
    """The plots, `claims.json`, `claims.md` (and `bounds.*` with `--runs`) into `out`; their
    paths go into `payload["files"]`."""
    from theory.claims import claims_markdown
    from theory.plots import write_plots

    out.mkdir(parents=True, exist_ok=True)
    written = write_plots(out)
    claims_path, md_path = out / "claims.json", out / "claims.md"
    _write(claims_path, json.dumps(payload, indent=2) + "\n")
    _write(md_path, claims_markdown(rows))
    payload["files"] = [str(p) for p in [*written, claims_path, md_path]]
    if runs is not None and runs.bounds:
        bounds_json, bounds_md = out / "bounds.json", out / "bounds.md"
        _write(bounds_json, json.dumps(runs.bounds, indent=1) + "\n")
        _write(bounds_md, runs.bounds_markdown)
        payload["files"] += [str(bounds_json), str(bounds_md)]


def main(argv: list[str] | None = None, read_runs: RunsReader | None = None) -> int:
    """Entry point of `gmc-grpo theory` (routed through `evidence.theory_runs.main`, which passes
    `read_runs`): bad input exits with status 2 and one line, a refused write with status 1 and
    one line (`gmc_grpo.errors`). Without `read_runs`, `--runs` is refused."""
    from gmc_grpo.errors import run_reported

    args = build_parser().parse_args(argv)
    return run_reported("gmc-grpo theory", lambda: _checked_run(args, read_runs))


def _checked_run(args: argparse.Namespace, read_runs: RunsReader | None = None) -> int:
    """Check the flags, then run (inside `--out`'s lock when there is one)."""
    from gmc_grpo.fieldchecks import check_positive_numbers

    if args.explorer is not None:
        from theory.explorer_page import write_explorer_page

        path = write_explorer_page(args.explorer)
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
        return 0
    check_positive_numbers(args.eps, "--eps", at_most=MAX_EPS)
    if args.out is None:
        return _run(args, read_runs)
    from gmc_grpo.runlock import run_lock

    # one writer per folder; a file, or a folder that cannot be written, is refused here, before
    # anything is computed or written (`gmc_grpo.runlock`)
    with run_lock(args.out):
        return _run(args, read_runs)


def _read(paths: list[Path], read_runs: RunsReader | None) -> RunsRead:
    """`--runs`' folders read above `theory` (`read_runs`), after checking that they exist."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise FileNotFoundError(f"--runs: no such folder {', '.join(missing)}")
    if read_runs is None:
        raise ValueError(
            "--runs reads run records through the evidence layer: run `gmc-grpo theory --runs "
            "DIR` (or `evidence.theory_runs.main`)"
        )
    runs = read_runs(paths)
    for problem in runs.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return runs


def _run(args: argparse.Namespace, read_runs: RunsReader | None = None) -> int:
    """Compute the claims table (and `--runs`' bounds), print it, write `--out`'s files."""
    from theory.claims import evaluate_claims, needs_runs, summary_by_section
    from theory.evidence_kinds import KIND_MEANINGS, kind_counts

    runs = None if args.runs is None else _read(args.runs, read_runs)
    rows = evaluate_claims(None if runs is None else runs.findings)
    consts = constants_table(args.eps)
    counts = summary_by_section(rows)
    kinds = kind_counts(rows)
    payload: dict[str, object] = {
        "claims": rows,
        "constants": consts,
        "summary": counts["paper"],
        "summary_ours": counts["ours"],
        "summary_kinds": kinds["paper"],
        "summary_kinds_ours": kinds["ours"],
        "kind_meanings": KIND_MEANINGS,
        "needs_runs": needs_runs(rows),
    }
    if runs is not None:
        payload["evidence"] = runs.counts
        payload["bounds"] = [{k: v for k, v in r.items() if k != "series"} for r in runs.bounds]
    if args.out is not None:
        _write_outputs(args.out, payload, rows, runs)
    if args.json:
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        print(format_table(rows, consts, counts))
        if payload["needs_runs"]:
            print(
                "\nrows that need runs (add --runs DIR; each row says which experiment): "
                + ", ".join(payload["needs_runs"])  # type: ignore[arg-type]
            )
        if runs is not None and runs.bounds:
            print()
            print(runs.bounds_text)
        if args.out is not None:
            print(f"\nwrote {len(payload['files'])} files to {args.out}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
