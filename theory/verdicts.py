"""The verdict kinds of the claims table, the `Check` record every check returns, and the helpers
the checks share (seeded random trees, comparisons, number formatting).

A verdict says what its evidence shows, no more (`VERDICT_MEANINGS`):

* `verified`: an independent computation that could have come out otherwise agrees with the
  claim (an exact enumeration, an adversarial search, interval arithmetic, a limit of the printed
  expression, a measurement with an interval); a perturbed claim turns the verdict
  (`tests/theory/test_theory_claims_flip.py`);
* `reconstructed`: our derivation from the paper's ingredients gives the printed statement, and
  nothing we computed could have contradicted it (the appendix with the proofs is not in our
  copy, so the derivation is ours);
* `holds with a condition`: the claim holds only under a condition the paper does not state;
  the row names it (`Check.condition`);
* `refuted`: an exact example or an exact computation contradicts the claim;
* `not reproduced`: what we derive or measure differs from the claim (another power, a larger
  constant, another rate) and nothing contradicts the claim as an upper bound;
* `does not hold`, `not significant`: a measured comparison whose paired 95% interval excludes
  the claimed side, or does not decide it;
* `needs runs`: the evidence is a measurement on toy runs; `gmc-grpo theory --runs DIR` evaluates
  it (the row says which runs);
* `not checkable here`: nothing here can decide it.

Everything in the run-free rows is exact or a deterministic (seeded) search: no Monte Carlo, so
no intervals apply there; fitted slopes report the number of points they rest on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from theory import numerics
from theory.exact import GroupProblem, problem_from_tree
from theory.trees import tabular_tree

VERIFIED = "verified"
RECONSTRUCTED = "reconstructed"
CONDITIONAL = "holds with a condition"
REFUTED = "refuted"
NOT_REPRODUCED = "not reproduced"
DOES_NOT_HOLD = "does not hold"
NOT_SIGNIFICANT = "not significant"
NEEDS_RUNS = "needs runs"
NOT_CHECKABLE = "not checkable here"
VERDICTS = (
    VERIFIED,
    RECONSTRUCTED,
    CONDITIONAL,
    REFUTED,
    NOT_REPRODUCED,
    DOES_NOT_HOLD,
    NOT_SIGNIFICANT,
    NEEDS_RUNS,
    NOT_CHECKABLE,
)
VERDICT_MEANINGS = {
    VERIFIED: "an independent computation that could have come out otherwise agrees "
    "(a perturbed claim turns the verdict)",
    RECONSTRUCTED: "our derivation from the paper's ingredients gives the printed statement; "
    "nothing computed could have contradicted it",
    CONDITIONAL: "holds only under a condition the paper does not state (named in the row)",
    REFUTED: "an exact example or computation contradicts the claim",
    NOT_REPRODUCED: "what we derive or measure differs (another power, constant or rate); "
    "nothing contradicts it as an upper bound",
    DOES_NOT_HOLD: "a measured comparison's 95% interval excludes the claimed side",
    NOT_SIGNIFICANT: "a measured comparison's 95% interval does not decide it",
    NEEDS_RUNS: "the evidence is a measurement on toy runs: gmc-grpo theory --runs DIR",
    NOT_CHECKABLE: "nothing here can decide it",
}

TREE = tabular_tree(2, 2)  # the random cases' tree: two tokens, vocabulary 2
# relative rounding allowed when an exact quantity meets its bound with equality
REL_TOL = 1e-9


@dataclass(frozen=True)
class Check:
    """Outcome of one check: verdict, result text (Unicode, no Markdown), derived sympy
    expression, evidence; `reason` says in one line why the row gets this kind of verdict, and
    `condition` names the condition of a `holds with a condition` row."""

    verdict: str
    result: str
    expr: sp.Basic
    evidence: dict[str, object] = field(default_factory=dict)
    reason: str = ""
    condition: str | None = None


def bound_verdict(claimed: float, proven: float, attained: float) -> str:
    """Verdict for a claimed upper-bound constant (larger = weaker claim; for a claimed
    denominator pass its inverse).

    `attained`: the largest constant an exact example needs (a claim below it is refuted);
    `proven`: the constant our derivation proves (a claim at or above it is verified: the exact
    examples could have needed more).
    """
    if claimed < attained * (1.0 - REL_TOL):
        return REFUTED
    return VERIFIED if claimed >= proven * (1.0 - REL_TOL) else NOT_REPRODUCED


def equal(a: object, b: object) -> bool:
    """Exact equality for sympy numbers, `1e-12` for floats."""
    try:
        return (
            bool(sp.simplify(sp.nsimplify(a) - sp.nsimplify(b)) == 0)
            and abs(
                float(a) - float(b)  # type: ignore[arg-type]
            )
            < 1e-12
        )
    except (TypeError, ValueError):
        return a == b


def short(x: float, digits: int = 3) -> str:
    """`x` with `digits` significant digits."""
    return f"{x:.{digits}g}"


def fits_within(pairs: list[tuple[numerics.SlopeFit, float]], tol: float = 0.01) -> bool:
    """Every fitted slope within `tol` of its claimed value."""
    return all(f.within(c, tol) for f, c in pairs)


def fits_text(pairs: list[tuple[numerics.SlopeFit, float]]) -> str:
    """The fits against their claimed values, one clause each."""
    return "; ".join(f.text(c) for f, c in pairs)


@dataclass(frozen=True)
class RandomCase:
    """A seeded two-token tabular tree with a current policy, a stale one and rewards in [0, 1]."""

    theta: np.ndarray
    behavior: np.ndarray
    rewards: np.ndarray
    problem: GroupProblem


def random_case(seed: int, shift: float = 1.5) -> RandomCase:
    """Current logits `N(0, 1)`, stale logits shifted by `N(0, shift^2)`, uniform rewards."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=TREE.dim)
    behavior = theta + rng.normal(scale=shift, size=TREE.dim)
    rewards = rng.uniform(0, 1, size=4)
    return RandomCase(
        theta, behavior, rewards, problem_from_tree(TREE, theta, behavior, rewards=rewards)
    )
