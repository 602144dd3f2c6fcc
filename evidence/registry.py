"""The registry of theory-vs-runs checks: one `RunCheck` per check, evaluated on the runs' evidence.

A `RunCheck` names the claims row it informs (`row`, a key of `theory.claims.SPECS`) and a
function `find(evidence) -> RunFinding | None` (`evidence.run_evidence.RunEvidence` in,
`theory.run_rows.RunFinding` out; None: nothing to say on these runs). `run_findings(evidence)`
evaluates every registered check and groups what they found by row; the claims table takes that
as an argument (`theory.claims.evaluate_claims(runs=...)`), so `theory` never reads a run, and
`gmc-grpo theory --runs` (`evidence.theory_runs`) and the report's claims stage print it.

Adding a check is one `register_run_check(RunCheck(...))` (`docs/DESIGN.md`, "Adding a
theory-vs-runs check"): a part (`RunFinding(text, contradicted, evidence)`) is appended to its
row, refutes it when `contradicted`; a whole verdict (`RunFinding(check=...)`) grades a row that
runs alone decide. The environment variable `GMC_GRPO_RUN_CHECKS` names modules that register
checks for the command line, as `GMC_GRPO_METHODS` does for methods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evidence.checks_runs import (
    check_delay_regularity,
    check_drift,
    check_uniform_second_moment,
    lemma1_part,
    theorem_part,
)
from evidence.run_evidence import RunEvidence
from gmc_grpo.registry import Registry
from theory.run_rows import Findings, RunFinding
from theory.verdicts import NEEDS_RUNS, Check

__all__ = [
    "RUN_CHECKS_ENV",
    "RunCheck",
    "get_run_check",
    "register_run_check",
    "run_check_names",
    "run_findings",
    "unregister_run_check",
]


@dataclass(frozen=True)
class RunCheck:
    """One theory-vs-runs check: which claims row it informs and how it reads the evidence."""

    name: str
    """unique; letters, digits and underscores"""
    row: str
    """the claims row it informs (`theory.claims.SPECS` key)"""
    find: Callable[[RunEvidence], RunFinding | None]
    """the runs' evidence -> what it found (None: nothing on these runs)"""
    source: str = ""
    """where the claim and the method come from (paper section, ours)"""


def part(text: str, contradicted: bool, numbers: dict[str, Any]) -> RunFinding | None:
    """A part a run-free check adds (`text`, `contradicted`, `numbers`); None when empty."""
    if not text and not numbers:
        return None
    return RunFinding(text, contradicted, numbers)


def whole(check: Check) -> RunFinding | None:
    """A row graded by runs alone: `check` as its verdict; None while it still needs runs."""
    return None if check.verdict == NEEDS_RUNS else RunFinding(check=check)


BUILTIN_RUN_CHECKS: tuple[RunCheck, ...] = (
    RunCheck(
        "lemma1_measured_moments",
        "lemma1",
        lambda ev: part(*lemma1_part(ev)),
        "§3, Lemma 1, with each tracked run's measured moments (evidence.vacuity)",
    ),
    RunCheck("drift_measured", "drift", lambda ev: whole(check_drift(ev)), "§4.2 (drift_quick)"),
    RunCheck(
        "theorem1_beside_runs",
        "theorem1",
        lambda ev: part(*theorem_part(ev, "gmc")),
        "Theorem 1 with explicit constants beside GMC runs (evidence.vacuity, evidence.bite)",
    ),
    RunCheck(
        "theorem2_beside_runs",
        "theorem2",
        lambda ev: part(*theorem_part(ev, "tic")),
        "Theorem 2 with explicit constants beside TIC runs (evidence.vacuity, evidence.bite)",
    ),
    RunCheck(
        "delay_regularity_measured",
        "delay_regularity",
        lambda ev: whole(check_delay_regularity(ev)),
        "§2.2, Assumption 3, on rollout-worker runs (regularity_quick)",
    ),
    RunCheck(
        "uniform_second_moment_measured",
        "uniform_second_moment",
        lambda ev: whole(check_uniform_second_moment(ev)),
        "§3-§4.2, Proposition 1 at every delay of a bias sweep",
    ),
)


def _check_spec(spec: RunCheck) -> None:
    from theory.claims import SPECS

    rows = [s.key for s in SPECS]
    if spec.row not in rows:
        raise ValueError(f"RunCheck.row={spec.row!r}: not a claims row; rows: {', '.join(rows)}")
    if not callable(spec.find):
        raise ValueError(f"RunCheck.find of {spec.name!r} is not callable")


RUN_CHECKS_ENV = "GMC_GRPO_RUN_CHECKS"
_RUN_CHECKS: Registry[RunCheck] = Registry(
    "run check",
    BUILTIN_RUN_CHECKS,
    RUN_CHECKS_ENV,
    _check_spec,
    f"add one with evidence.registry.register_run_check, or name its module in {RUN_CHECKS_ENV}",
)


def register_run_check(spec: RunCheck, *, replace: bool = False) -> RunCheck:
    """Add a theory-vs-runs check (`replace=True` overwrites one of the same name)."""
    return _RUN_CHECKS.register(spec, replace=replace)


def unregister_run_check(name: str) -> None:
    """Remove a user's check (the built-in ones cannot be removed)."""
    _RUN_CHECKS.unregister(name)


def get_run_check(name: str) -> RunCheck:
    """The check of `name`; an unknown name raises `ValueError` listing the registered ones."""
    return _RUN_CHECKS.get(name)


def run_check_names() -> tuple[str, ...]:
    """Every registered check, the built-in ones first."""
    return _RUN_CHECKS.names()


def run_findings(evidence: RunEvidence | None) -> Findings:
    """Every registered check on `evidence`, grouped by claims row (rows in registration order;
    a check with nothing to say is left out). No evidence: no findings."""
    if evidence is None:
        return {}
    out: dict[str, list[RunFinding]] = {}
    for name in run_check_names():
        spec = get_run_check(name)
        found = spec.find(evidence)
        if found is not None:
            out.setdefault(spec.row, []).append(found)
    return {row: tuple(found) for row, found in out.items()}
