"""The claims rows whose evidence is runs: what they say without runs, and how runs enter them.

`theory` reads no run record. The evidence layer (`evidence.registry`) evaluates its registered
run checks on the records and hands the claims table, per row, what they found: a sequence of
`RunFinding`s (`evaluate_claims(runs={row key: findings})`). A finding is either

* a part a run-free check adds (`text` appended to the row's result, `contradicted` refutes it,
  `evidence` merged into the row's numbers): Lemma 1 with measured moments, the explicit
  Theorems 1-2 beside the measurements; or
* a whole verdict (`check`) for a row graded by runs alone: the drift, the delay-regularity
  condition, the delay-uniform second moment.

Without findings these rows say `needs runs` and name the experiment that provides them
(`check_drift`, `check_delay_regularity`, `check_uniform_second_moment` below); a row whose check
takes no runs gets its findings through `apply_findings` (one rule for every row).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import sympy as sp

from theory import chain
from theory.verdicts import NEEDS_RUNS, REFUTED, Check


@dataclass(frozen=True)
class RunFinding:
    """What one run check found for one claims row (computed above `theory`, from records)."""

    text: str = ""
    """appended to the row's result (starts with a space when it is a part)"""
    contradicted: bool = False
    """the runs contradict the row's claim: the row is refuted"""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    """numbers merged into the row's evidence"""
    check: Check | None = None
    """a whole verdict, for a row graded by runs alone (then `text` etc. are not read)"""


Findings = Mapping[str, Sequence[RunFinding]]
"""claims row key -> what the run checks found for it (`evidence.registry.run_findings`)"""


def joined(findings: Sequence[RunFinding]) -> tuple[str, bool, dict[str, Any]]:
    """`(text, contradicted, evidence)` of the parts `findings` add to a row: texts in order,
    contradicted if one is, evidence merged (a later finding's key wins)."""
    evidence: dict[str, Any] = {}
    for finding in findings:
        evidence |= dict(finding.evidence)
    return (
        "".join(f.text for f in findings),
        any(f.contradicted for f in findings),
        evidence,
    )


def graded(findings: Sequence[RunFinding]) -> Check | None:
    """The first whole verdict among `findings` (None when no run graded the row)."""
    return next((f.check for f in findings if f.check is not None), None)


def apply_findings(check: Check, findings: Sequence[RunFinding]) -> Check:
    """`check` with the parts of `findings` added: the text appended, refuted when one
    contradicts it, the numbers merged; a whole verdict among them replaces it."""
    whole = graded(findings)
    if whole is not None:
        return whole
    if not findings:
        return check
    text, contradicted, evidence = joined(findings)
    return replace(
        check,
        verdict=REFUTED if contradicted else check.verdict,
        result=check.result + text,
        evidence={**check.evidence, **evidence},
    )


DRIFT_RUNS = (
    "`gmc-grpo toy train --experiment drift_quick`, then `gmc-grpo theory --runs "
    "runs/toy_train/drift_quick` (the bounds stage of `make reproduce` runs it)"
)
REGULARITY_RUNS = (
    "`gmc-grpo toy train --experiment regularity_quick` (the toy_workers stage of "
    "`make reproduce`), then `gmc-grpo theory --runs runs/toy_train/regularity_quick`"
)
SWEEP_RUNS = (
    "`gmc-grpo toy sweep --quick --out runs/sweep` (the toy_sweep stage of `make reproduce`), "
    "then `gmc-grpo theory --runs runs/sweep`"
)
DRIFT_DERIVATION = (
    "‖Σ_{k<τ} η gₖ‖² ≤ τ Σ η²‖gₖ‖² (Cauchy–Schwarz) and E‖gₖ‖² ≤ M give η²τ²M (ours); aligned "
    "updates meet it with equality, independent zero-mean updates give τ instead of τ²."
)
REGULARITY_ROLE = (
    "Role (our reconstruction of §4.2): with the condition, E‖Δ‖⁴ ≤ η⁴τ̄₄·P·M takes one "
    "fourth-moment factor pathwise (P) and one in expectation (Proposition 1's M), and the "
    "delay term carries (1+ε)³; without it both factors are pathwise and the power is 4."
)
UNIFORM_STATEMENT = "Proposition 1's bound holds for every behavior policy, so for every delay."


def needs_runs(text: str, expr: sp.Basic, where: str) -> Check:
    """The verdict of a row graded by runs when none were given: what it says, and where the
    runs come from."""
    return Check(
        NEEDS_RUNS,
        text + f" Needs runs: {where}.",
        expr,
        {},
        reason="the evidence is a measurement on toy runs; none were given",
    )


def drift_expr() -> sp.Basic:
    """§4.2's drift bound `E||theta_n - theta_{n-tau}||^2 <= eta^2 tau^2 M`."""
    return chain.drift_second_moment(chain.MOMENT)


def regularity_expr() -> sp.Basic:
    """§2.2's condition `E[D_n(t) | tau = t] = E[D_n(t)]`."""
    return sp.Eq(sp.Symbol("E[D_n(t) | tau=t]"), sp.Symbol("E[D_n(t)]"))


def check_drift(runs: Sequence[RunFinding] = ()) -> Check:
    """§4.2's drift row: graded on runs (`evidence.checks_runs.check_drift`), else `needs runs`."""
    return graded(runs) or needs_runs(DRIFT_DERIVATION, drift_expr(), DRIFT_RUNS)


def check_delay_regularity(runs: Sequence[RunFinding] = ()) -> Check:
    """§2.2's delay-regularity row: graded on worker runs
    (`evidence.checks_runs.check_delay_regularity`), else `needs runs`."""
    return graded(runs) or needs_runs(REGULARITY_ROLE, regularity_expr(), REGULARITY_RUNS)


def check_uniform_second_moment(runs: Sequence[RunFinding] = ()) -> Check:
    """The delay-uniform second moment measured on a bias sweep
    (`evidence.checks_runs.check_uniform_second_moment`), else `needs runs`."""
    return graded(runs) or needs_runs(UNIFORM_STATEMENT, chain.second_moment(), SWEEP_RUNS)
