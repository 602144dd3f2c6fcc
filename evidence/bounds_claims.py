"""The bounds stage's claims, each with its own count, computed from the tracked runs' bounds.

`bounds_claims(results)` takes every tracked run's `evidence.measured.RunBounds` and returns a
`BoundsClaims`: Theorems 1-2 at the bound-minimising step (`evidence.bite`), the explicit
theorems' vacuity and Lemma 1 with the measured moments (`evidence.vacuity`), Lemma 1's descent
step at every step, the chain's slack per step (`evidence.slack`), every GMC/TIC pair and each
method tuned on the same grid (`evidence.pairs`), and the per-step checks that could fail
against those true by construction. Numbers only: `evidence.render.bounds_claims_headline` and
`bounds_claims_markdown` write them, `pipeline.bounds_stage` writes the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evidence.bite import bite_rows, bite_summary
from evidence.measured import TAUTOLOGICAL_CHECKS, RunBounds
from evidence.pairs import gmc_tic_pairs, tuned_pairs
from evidence.slack import chain_slack, slack_summary
from evidence.vacuity import lemma1_ratios, smoothness_summary, theorem_vacuity


@dataclass(frozen=True)
class BoundsClaims:
    """The bounds stage's claims (module docstring); each field as its module computes it."""

    bite: list[dict[str, Any]]
    """the runs at the bound-minimising step (`evidence.bite.bite_rows`)"""
    bite_summary: dict[str, Any]
    """their verdicts per constant and method (`evidence.bite.bite_summary`)"""
    vacuity: dict[str, Any]
    """the explicit Theorems 1-2: vacuous or not, decades (`evidence.vacuity.theorem_vacuity`)"""
    lemma1: dict[str, Any]
    """Lemma 1 with the measured moments (`evidence.vacuity.lemma1_ratios`)"""
    smoothness: dict[str, Any]
    """Lemma 1's descent step at every step (`evidence.vacuity.smoothness_summary`)"""
    slack: list[dict[str, Any]]
    """the chain's slack per step, per run (`evidence.slack.chain_slack`)"""
    slack_summary: dict[str, Any]
    """per step over the runs (`evidence.slack.slack_summary`)"""
    pairs: list[dict[str, Any]]
    """every GMC/TIC pair (`evidence.pairs.gmc_tic_pairs`)"""
    tuned: list[dict[str, Any]]
    """each method tuned on the same grid (`evidence.pairs.tuned_pairs`)"""
    refutations: int
    """per-step and run-level checks that failed, over every run"""
    evaluated: int
    """per-step checks that could fail (`TAUTOLOGICAL_CHECKS` left out)"""
    by_construction: int
    """per-step checks true by construction (class membership, pathwise Cauchy-Schwarz)"""

    def as_json(self) -> dict[str, Any]:
        """What the stage's `claims.json` holds (the numbers behind the headline)."""
        return {
            "bite": {"runs": self.bite, "summary": self.bite_summary},
            "vacuity": self.vacuity,
            "lemma1": self.lemma1,
            "smoothness": self.smoothness,
            "slack": self.slack,
            "pairs": self.pairs,
            "tuned": self.tuned,
        }


def _check_counts(results: Sequence[RunBounds], tautological: bool) -> int:
    """Per-step evaluations over every run, of the checks true by construction or of the others."""
    return sum(
        entry["evaluated"]
        for r in results
        for name, entry in r.checks.items()
        if (name in TAUTOLOGICAL_CHECKS) == tautological
    )


def bounds_claims(results: Sequence[RunBounds]) -> BoundsClaims:
    """Every claim of the bounds stage on the tracked runs `results` (module docstring)."""
    results = list(results)
    bite = bite_rows(results)
    slacks = chain_slack(results)
    pairs = gmc_tic_pairs(results)
    return BoundsClaims(
        bite=bite,
        bite_summary=bite_summary(bite),
        vacuity=theorem_vacuity(results),
        lemma1=lemma1_ratios(results),
        smoothness=smoothness_summary(results),
        slack=slacks,
        slack_summary=slack_summary(slacks),
        pairs=pairs,
        tuned=tuned_pairs(results, pairs),
        refutations=sum(len(r.refutations) for r in results),
        evaluated=_check_counts(results, tautological=False),
        by_construction=_check_counts(results, tautological=True),
    )
