"""The claims table: sections, pinned verdicts, search strength, Markdown with math."""

from __future__ import annotations

import re

import numpy as np
import pytest

from theory import adversarial
from theory.claims import (
    SPECS,
    claims_markdown,
    evaluate_claim,
    evaluate_claims,
)

KEYS = {
    "key",
    "section",
    "title",
    "where",
    "claim",
    "claim_latex",
    "derived",
    "derived_latex",
    "result",
    "verdict",
    "reason",
    "condition",
    "how",
    "evidence",
    "evidence_kind",  # theory.evidence_kinds (issue 31)
}


def test_rows_and_sections() -> None:  # the verdicts themselves: test_theory_claims_flip.py
    rows = evaluate_claims()
    assert [r["key"] for r in rows] == [s.key for s in SPECS]
    for row in rows:
        assert set(row) == KEYS
        assert row["section"] in ("paper", "ours")
        assert "**" not in str(row["result"]) and "**" not in str(row["derived"])
        assert row["claim_latex"] and row["derived_latex"]
    paper = [r for r in rows if r["section"] == "paper"]
    ours = [r for r in rows if r["section"] == "ours"]
    assert len(paper) == 28 and len(ours) == 9
    assert all(str(r["key"]).startswith("ours_") for r in ours)


def test_searches_get_close_to_the_bounds() -> None:
    """Proposition 1: one-token supremum is 1/(2 ln 2) of the constant-2 bound (0.7213)."""
    second = adversarial.search_second_moment().ratio
    assert 0.70 <= second <= 1 / (2 * np.log(2)) + 1e-9
    bias = adversarial.search_bias()
    assert 0.85 <= bias.ratio <= 1.0 and bias.example["ratio_exact_score"] > 0.99
    assert adversarial.search_kl_drift().ratio > 0.99
    assert 0.1 < adversarial.search_smoothness().ratio <= 1.0
    assert all(0 < s.ratio <= 1 for s in adversarial.search_group_removed_mass().values())


def test_theorem1_power_is_reconstructed() -> None:
    row = evaluate_claim("theorem1")
    assert row["evidence"]["delay_onep"] == 3.0
    assert "(1+eps)^3" in row["derived"]
    with pytest.raises(ValueError, match="unknown exponent"):
        evaluate_claim("theorem1", delay_onepp=4)
    with pytest.raises(KeyError, match="unknown claim"):
        evaluate_claim("theorem9")


def _cells(line: str) -> list[str]:
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


def test_markdown_has_math_sections_and_clean_tables() -> None:
    rows = evaluate_claims()
    md = claims_markdown(rows)
    assert "### Claims of the paper" in md and "### Our readings and extensions (not counted)" in md
    assert "17 verified, 4 reconstructed, 1 holds with a condition, 2 needs runs." in md
    assert "not counted: 3 tautology, 1 merged" in md and "(search, 99.6% reached)" in md
    assert "8 verified. By the kind" in md and " rows:" not in md  # no pooled total
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(table) == 2 + len(rows)  # two header lines, one row per claim
    for line in table:
        assert len(_cells(line)) == 5, line
    body = [line for line in table if re.match(r"\| \d+ \|", line)]
    for line in body:
        claim, _, verdict, derived = _cells(line)[1:]
        assert (
            claim.count("$") == 2
            and derived.strip().startswith("$")
            and derived.strip().endswith("$")
        )
        assert verdict.strip().startswith("**") and verdict.count("**") == 2  # + its kind
    assert not re.search(r"\*\*\d", md)  # no Python powers anywhere
