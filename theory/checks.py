"""The registry of the claims table's checks: row key -> check function.

Every `check_*` function returns a `theory.verdicts.Check` (verdict, a one-paragraph result with
the numbers, the derived expression as sympy, the evidence as a dict, a one-line reason for the
kind of verdict). The claimed constant or exponent is an argument with the paper's value as
default, so a test can inject a perturbed value (`c_eps x 1.1`, an exponent off by 0.05,
`(1+eps)^4`) and see the verdict turn. The verdict kinds are defined in `theory.verdicts`.

The checks live by section: `theory.checks_estimators` (§3), `theory.checks_chain` (§4.2,
Theorems 1-2), `theory.checks_rates` (§4.1, §4.3, the corollaries), `theory.run_rows` (rows
whose evidence is a measurement on toy runs: `needs runs` without it; the measurement itself is
the evidence layer's, `evidence.registry`, handed in as `runs`) and `theory.checks_ours` (our
readings and extensions).
"""

from __future__ import annotations

from collections.abc import Sequence

from theory.checks_chain import (
    check_c_through_log,
    check_gmc_removed_mass,
    check_kl_drift,
    check_theorem,
    check_tic_removed_mass,
    evaluator_twin_error,
)
from theory.checks_estimators import (
    check_class_membership,
    check_gmc_minimiser,
    check_grpo,
    check_lemma1,
    check_prop1_bias,
    check_prop1_second_moment,
    check_prop2,
    check_unbiased,
    check_vcpo,
    grpo_example,
)
from theory.checks_ours import (
    check_ours_bias_constant,
    check_ours_centered,
    check_ours_explicit_theorem,
    check_ours_group_removed_mass,
    check_ours_grpo_mean,
    check_ours_joint_minimiser,
    check_ours_prop1_constant,
    check_ours_tic_bias_constant_in_g,
    check_ours_tight_constants,
)
from theory.checks_rates import (
    check_c_eps_below,
    check_corollary1,
    check_corollary2,
    check_delay_tolerance,
    check_denominator_orders,
    check_group_bias,
    check_improvement_factor,
    check_large_delay,
    check_penalties,
    check_tuned_rate,
    group_bias_table,
)
from theory.run_rows import (
    SWEEP_RUNS,
    RunFinding,
    check_delay_regularity,
    check_drift,
    check_uniform_second_moment,
)
from theory.verdicts import (
    CONDITIONAL,
    DOES_NOT_HOLD,
    NEEDS_RUNS,
    NOT_CHECKABLE,
    NOT_REPRODUCED,
    NOT_SIGNIFICANT,
    RECONSTRUCTED,
    REFUTED,
    VERDICT_MEANINGS,
    VERDICTS,
    VERIFIED,
    Check,
)

__all__ = [
    "CONDITIONAL",
    "DOES_NOT_HOLD",
    "NEEDS_RUNS",
    "NOT_CHECKABLE",
    "NOT_REPRODUCED",
    "NOT_SIGNIFICANT",
    "OUR_CHECKS",
    "PAPER_CHECKS",
    "RUN_ROWS",
    "RECONSTRUCTED",
    "REFUTED",
    "VERDICTS",
    "VERDICT_MEANINGS",
    "VERIFIED",
    "Check",
    "evaluator_twin_error",
    "group_bias_table",
    "grpo_example",
]


def check_uniform_second_moment_merged(
    runs: Sequence[RunFinding] = (), constant: float = 8.0
) -> Check:
    """Row 27 ("the second moment is controlled uniformly, independently of the delay"), merged
    into Proposition 1's row (issue 31): it is the same statement, since Proposition 1's bound
    holds for every behavior policy (so for every delay) and has no delay in it. Its verdict is
    that row's (the search over arbitrary behavior policies and the whole class), refuted also if
    a run's measured second moment exceeds the bound; the runs' comparison is reported as a
    consistency check that cannot bind (the bound lies decades above them). Not counted again
    (`theory.evidence_kinds`: kind `merged`)."""
    base = check_prop1_second_moment(constant)
    measured = check_uniform_second_moment(runs)
    has_runs = measured.verdict != NEEDS_RUNS
    verdict = REFUTED if measured.verdict == REFUTED else base.verdict
    fraction = float(base.evidence["fraction_of_paper"])  # type: ignore[arg-type]
    text = (
        "Merged into Proposition 1's row: the same statement (its bound holds for every behavior "
        "policy, so for every delay, and contains no delay; Theorem 1's second-moment term is "
        "that bound). Graded by that row's searches over arbitrary behavior policies and eq. 5's "
        f"whole class, which reach {fraction:.3g} of the bound with constant "
        f"{constant:g}; not counted again. "
        + (
            "Runs (a consistency check that cannot bind): " + measured.result
            if has_runs
            else f"Bias-sweep runs ({SWEEP_RUNS}) would add a consistency check that cannot bind."
        )
    )
    return Check(
        verdict,
        text,
        base.expr,
        {
            "merged_into": "prop1_second_moment",
            "fraction_of_paper": fraction,
            "runs": measured.evidence if has_runs else None,
        },
        reason="the same statement as Proposition 1's row, graded by its searches (which could "
        "have exceeded the bound); measured runs could refute it but not bind",
    )


# Registry: key -> check function (defaults = the paper's or our claimed values).
PAPER_CHECKS = {
    "lemma1": check_lemma1,
    "prop1_second_moment": check_prop1_second_moment,
    "prop1_bias": check_prop1_bias,
    "class_tic_gmc": check_class_membership,
    "class_vcpo": check_vcpo,
    "grpo_outside": check_grpo,
    "is_unbiased": check_unbiased,
    "prop2": check_prop2,
    "gmc_minimiser": check_gmc_minimiser,
    "gmc_removed_mass": check_gmc_removed_mass,
    "tic_removed_mass": check_tic_removed_mass,
    "kl_drift": check_kl_drift,
    "drift": check_drift,
    "theorem1": lambda runs=(), **kw: check_theorem("gmc", runs, **kw),
    "theorem2": lambda runs=(), **kw: check_theorem("tic", runs, **kw),
    "c_through_log": check_c_through_log,
    "c_eps_below": check_c_eps_below,
    "denominator_orders": check_denominator_orders,
    "penalties": check_penalties,
    "improvement_factor": check_improvement_factor,
    "tuned_rate": check_tuned_rate,
    "corollary1": check_corollary1,
    "delay_tolerance": check_delay_tolerance,
    "large_delay": check_large_delay,
    "corollary2": check_corollary2,
    "group_bias": check_group_bias,
    "delay_regularity": check_delay_regularity,
    "uniform_second_moment": check_uniform_second_moment_merged,
}
# the rows whose checks take the runs' findings (`runs`, `theory.run_rows.RunFinding`, computed by
# the evidence layer): "required" ones say `needs runs` without them, "optional" ones add what the
# runs show to a run-free check
RUN_ROWS = {
    "lemma1": "optional",
    "drift": "required",
    "theorem1": "optional",
    "theorem2": "optional",
    "delay_regularity": "required",
    "uniform_second_moment": "optional",
}
OUR_CHECKS = {
    "ours_prop1_constant": check_ours_prop1_constant,
    "ours_bias_constant": check_ours_bias_constant,
    "ours_explicit_theorem": check_ours_explicit_theorem,
    "ours_tight_constants": check_ours_tight_constants,
    "ours_joint_minimiser": check_ours_joint_minimiser,
    "ours_centered": check_ours_centered,
    "ours_grpo_mean": check_ours_grpo_mean,
    "ours_group_removed_mass": check_ours_group_removed_mass,
    "ours_tic_bias_constant_in_g": check_ours_tic_bias_constant_in_g,
}
