"""The registry of theory-vs-runs checks: a new check is one `register_run_check`, and it appears
in the claims table and in `gmc-grpo theory --runs`' output; the built-in checks give the rows
the table gave before the registry (`docs/DESIGN.md`, "Adding a theory-vs-runs check")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_evidence_measured import write_run

from evidence.registry import (
    RunCheck,
    register_run_check,
    run_check_names,
    run_findings,
    unregister_run_check,
)
from evidence.run_evidence import RunEvidence, collect_evidence
from theory.bounds import gradient_norm_sq_ceiling
from theory.claims import evaluate_claims
from theory.run_rows import RunFinding
from theory.verdicts import REFUTED


def below_ceiling(evidence: RunEvidence) -> RunFinding | None:
    """The worked example of docs/DESIGN.md: every tracked run's measured (1/N) sum ||grad J||^2
    against the a-priori ceiling T L R^2 log|A| / 2 (refuted if a run's lower 95% end is above)."""
    if not evidence.tracked:
        return None
    over = 0
    for run in evidence.tracked:
        c = run.constants
        ceiling = float(gradient_norm_sq_ceiling(c["T"], c["L"], c["R"], c["vocab_size"]))
        over += run.terms["total"]["measured"]["lo"] > ceiling
    return RunFinding(
        text=f" Runs: {len(evidence.tracked) - over} of {len(evidence.tracked)} tracked runs "
        "measure (1/N) Σ‖∇J‖² below the ceiling T L R² log|A|/2.",
        contradicted=over > 0,
        evidence={"runs_above_ceiling": over},
    )


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    write_run(tmp_path / "runs" / "gmc")
    return tmp_path / "runs"


@pytest.fixture
def registered() -> Iterator[str]:
    register_run_check(RunCheck("below_ceiling", "ours_explicit_theorem", below_ceiling, "ours"))
    yield "below_ceiling"
    unregister_run_check("below_ceiling")


def test_the_built_in_checks_cover_the_run_rows() -> None:
    from evidence.registry import get_run_check
    from theory.checks import RUN_ROWS

    names = run_check_names()
    assert len(names) == 6
    assert {get_run_check(n).row for n in names} == set(RUN_ROWS)
    assert run_findings(None) == {}


def test_a_registered_check_appears_in_the_claims_table(runs: Path, registered: str) -> None:
    evidence = collect_evidence([runs])
    assert registered in run_check_names()
    before = {r["key"]: r for r in evaluate_claims()}
    rows = {r["key"]: r for r in evaluate_claims(run_findings(evidence))}
    row = rows["ours_explicit_theorem"]
    assert row["result"] == before["ours_explicit_theorem"]["result"] + (
        " Runs: 1 of 1 tracked runs measure (1/N) Σ‖∇J‖² below the ceiling T L R² log|A|/2."
    )
    assert row["evidence"]["runs_above_ceiling"] == 0
    assert row["verdict"] == before["ours_explicit_theorem"]["verdict"]
    # the other rows are the ones the built-in checks give
    unregister_run_check(registered)
    try:
        without = {r["key"]: r for r in evaluate_claims(run_findings(evidence))}
    finally:
        register_run_check(RunCheck(registered, "ours_explicit_theorem", below_ceiling))
    assert {k: v for k, v in rows.items() if k != "ours_explicit_theorem"} == {
        k: v for k, v in without.items() if k != "ours_explicit_theorem"
    }


def test_a_contradicting_finding_refutes_its_row(runs: Path) -> None:
    register_run_check(
        RunCheck(
            "always_contradicts",
            "kl_drift",
            lambda ev: RunFinding(" Planted.", contradicted=True, evidence={"planted": 1}),
        )
    )
    try:
        found = run_findings(collect_evidence([runs]))
        row = next(r for r in evaluate_claims(found) if r["key"] == "kl_drift")
        assert row["verdict"] == REFUTED and row["result"].endswith(" Planted.")
    finally:
        unregister_run_check("always_contradicts")


def test_a_registered_check_appears_in_gmc_grpo_theory_runs(
    runs: Path, registered: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import main

    assert main(["theory", "--runs", str(runs), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    row = next(r for r in payload["claims"] if r["key"] == "ours_explicit_theorem")
    assert "below the ceiling" in row["result"] and "runs_above_ceiling" in row["evidence"]


def test_a_check_for_an_unknown_row_or_a_taken_name_is_refused() -> None:
    with pytest.raises(ValueError, match="not a claims row"):
        register_run_check(RunCheck("nowhere", "no_such_row", below_ceiling))
    with pytest.raises(ValueError, match="already registered"):
        register_run_check(RunCheck("drift_measured", "drift", below_ceiling))
    with pytest.raises(ValueError, match="cannot be unregistered"):
        unregister_run_check("drift_measured")
