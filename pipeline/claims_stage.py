"""`gmc-grpo reproduce`'s claims stage: the claims table again, with the runs of this report.

The theory stage (first) evaluates every row that needs no run and says which rows need runs;
this stage, after the toy stages, evaluates those rows on the records the earlier stages wrote
(`evidence.run_evidence.collect_evidence` over the sibling stage folders: the bias sweep, the toy
training runs, the bounds stage's `drift_quick`, `bounds_quick`, `bounds_bite` and `bounds_optimal`
(Theorems 1-2 at the bound-minimising step, rows 13-14), the workers
stage's `regularity_quick`), the same as `gmc-grpo theory --runs results/` would. Writes
`claims.json` and `claims.md`; the headline counts each kind of verdict apart and names the kinds
of evidence behind the paper's rows (`theory.evidence_kinds`; tautologies not counted).
`claims_results` evaluates, `claims_headline_of` and `claims_stage_markdown` render.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gmc_grpo.json_files import atomic_write_json, atomic_write_text


@dataclass(frozen=True)
class ClaimsResults:
    """The claims table evaluated with the runs: its rows (`theory.claims.evaluate_claims`),
    their counts by section, the evidence read (`evidence.run_evidence.collect_evidence`'s) and
    the rows still without runs."""

    rows: list[dict[str, Any]]
    by_section: dict[str, Any]
    evidence: Any
    missing: list[str]


def claims_results(out_dir: Path) -> ClaimsResults:
    """Evaluate the claims table with the earlier stages' runs (module docstring); writes
    `claims.json` and `claims.md`."""
    from evidence.registry import run_findings
    from evidence.run_evidence import collect_evidence
    from theory.claims import (
        claims_markdown,
        evaluate_claims,
        needs_runs,
        summary_by_section,
    )

    out_dir = Path(out_dir)
    roots = sorted(p for p in out_dir.parent.iterdir() if p.is_dir() and p != out_dir)
    evidence = collect_evidence(roots)
    rows = evaluate_claims(run_findings(evidence))
    by_section = summary_by_section(rows)
    atomic_write_json(out_dir / "claims.json", rows)
    atomic_write_text(out_dir / "claims.md", claims_markdown(rows))
    return ClaimsResults(rows, by_section, evidence, needs_runs(rows))


def claims_headline_of(results: ClaimsResults) -> str:
    """One line: the counts of each kind of verdict, the rows still without runs."""
    from pipeline.headlines import claims_headline
    from theory.evidence_kinds import kind_counts

    headline = claims_headline(results.by_section, kind_counts(results.rows))
    if results.missing:
        headline += f"; still without runs: {', '.join(results.missing)}"
    return headline


def claims_stage_markdown(results: ClaimsResults) -> str:
    """The stage's section: the rows measured on toy runs, their verdicts and evidence, the runs
    that could not be read."""
    from theory.checks import RUN_ROWS

    evidence = results.evidence
    run_rows = [r for r in results.rows if r["key"] in RUN_ROWS]
    lines = [
        "The rows of the claims table whose evidence is a measurement on toy runs, evaluated on "
        f"this report's records ({len(evidence.tracked)} tracked toy runs, "
        f"{len(evidence.drift)} with a drift record, {len(evidence.regularity)} delay-regularity "
        f"runs, {len(evidence.sweep_rows)} sweep rows; `gmc-grpo theory --runs DIR` does the "
        f"same). Counts with these rows: {claims_headline_of(results)}.",
        "",
        "| claim | verdict | why |",
        "| --- | --- | --- |",
    ]
    lines += [
        f"| {r['title']} | **{r['verdict']}** | {str(r['reason']).replace('|', chr(92) + '|')} |"
        for r in run_rows
    ]
    lines += ["", "Evidence:", ""]
    lines += [f"- *{r['title']}*: {r['result']}" for r in run_rows]
    if evidence.problems:
        lines += ["", "Runs that could not be read:", ""]
        lines += [f"- {p}" for p in evidence.problems]
    return "\n".join(lines) + "\n"


def claims_stage(out_dir: Path) -> dict[str, Any]:
    """Evaluate the claims table with the earlier stages' runs (module docstring)."""
    results = claims_results(out_dir)
    return {
        "headline": claims_headline_of(results),
        "markdown": claims_stage_markdown(results),
        "verdicts": results.by_section["paper"],
    }
