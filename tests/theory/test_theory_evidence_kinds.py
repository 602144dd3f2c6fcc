"""Every claims-table row names the kind of evidence behind its verdict (issue 31); the counts
name every kind, and tautologies are not counted."""

from __future__ import annotations

import json
import subprocess
import sys

from pipeline.headlines import claims_headline
from theory.claims import evaluate_claims, summary_by_section
from theory.evidence_kinds import (
    KINDS,
    MEASURED,
    MERGED,
    NON_BINDING,
    STATIC_KINDS,
    TAUTOLOGY,
    evidence_kind,
    kind_counts,
    kinds_text,
)


def test_every_row_has_a_kind_and_tautologies_are_not_counted() -> None:
    rows = evaluate_claims()
    assert set(STATIC_KINDS) | {"theorem1", "theorem2"} == {r["key"] for r in rows}
    for r in rows:
        kind = r["evidence_kind"]
        assert kind == evidence_kind(r)
        assert kind["kind"] in KINDS or r["verdict"] == "needs runs"
    taut = {r["key"] for r in rows if r["evidence_kind"]["kind"] == TAUTOLOGY}
    assert taut == {"class_tic_gmc", "prop2", "gmc_minimiser", "ours_explicit_theorem"}
    counts = kind_counts(rows)
    paper = counts["paper"]
    assert set(paper["kinds"]) == set(KINDS) - {TAUTOLOGY, MERGED}  # every kind, zeros included
    # row 27 is Proposition 1's statement: merged into row 2, shown, not counted again
    assert paper["not_counted"] == {TAUTOLOGY: 3, MERGED: 1} and paper["without_kind"] == 2
    merged = next(r for r in rows if r["key"] == "uniform_second_moment")
    prop1 = next(r for r in rows if r["key"] == "prop1_second_moment")
    assert merged["verdict"] == prop1["verdict"]
    assert merged["evidence_kind"]["nearness"] == prop1["evidence_kind"]["nearness"]
    counted = sum(paper["kinds"].values())
    assert counted == sum(summary_by_section(rows)["paper"].values()) - paper["without_kind"]
    # near-extremal searches say how near: row 9's two-point laws reach 99.6% of D/log(1+2eps)
    gmc = next(r for r in rows if r["key"] == "gmc_removed_mass")["evidence_kind"]
    assert gmc["kind"] == "search" and 0.99 < gmc["nearness"] <= 1.0
    text = kinds_text(paper)
    assert text.endswith("; not counted: 3 tautology, 1 merged") and "search" in text
    headline = claims_headline(summary_by_section(rows), counts)
    assert "[by evidence: " in headline and "not counted: 3 tautology" in headline


def test_theorem_rows_kind_follows_the_runs() -> None:
    base = {"key": "theorem1", "section": "paper", "verdict": "verified"}
    assert evidence_kind({**base, "evidence": {"runs": 8, "bite_checks": 4}})["kind"] == MEASURED
    assert evidence_kind({**base, "evidence": {"runs": 8, "bite_checks": 0}})["kind"] == NON_BINDING
    assert evidence_kind({**base, "evidence": {}})["kind"] == "derivation"
    assert evidence_kind({**base, "verdict": "needs runs", "evidence": {}})["kind"] is None


def test_theory_json_gives_kinds_and_their_summary() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "theory", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    payload = json.loads(out.stdout)
    assert all("evidence_kind" in r for r in payload["claims"])
    assert set(payload["summary_kinds"]["kinds"]) == set(KINDS) - {TAUTOLOGY, MERGED}
    assert payload["summary_kinds"]["not_counted"] == {TAUTOLOGY: 3, MERGED: 1}
    assert set(payload["kind_meanings"]) == set(KINDS)
