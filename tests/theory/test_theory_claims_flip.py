"""Every verdict comes from a check that can fail: inject a perturbed claim, see the verdict flip.

Each case names a row, the claimed constant or exponent as the check's parameter (the paper's
value is the default), a perturbed value, and the verdict the perturbed claim must get. The
unperturbed verdicts are pinned in `test_theory_claims.py`.
"""

from __future__ import annotations

import pytest

from theory import chain
from theory.checks import NOT_REPRODUCED, OUR_CHECKS, PAPER_CHECKS, REFUTED, VERIFIED

FLIPS = [
    ("lemma1", {"opt_coef": 1.9}, NOT_REPRODUCED),
    ("lemma1", {"smoothness": 0.1}, REFUTED),
    ("prop1_second_moment", {"constant": 1.2}, REFUTED),
    ("prop1_second_moment", {"constant": 1.9}, NOT_REPRODUCED),
    ("prop1_bias", {"multiplier": 0.8}, REFUTED),
    ("class_tic_gmc", {"cap_multiplier": 0.95}, REFUTED),
    ("class_vcpo", {"threshold_multiplier": 1.05}, REFUTED),
    ("grpo_outside", {"exponent": 1.95}, REFUTED),
    ("is_unbiased", {"factor": 1.05}, REFUTED),
    ("prop2", {"cap_multiplier": 1.05}, REFUTED),
    ("gmc_removed_mass", {"multiplier": 1.1}, REFUTED),
    ("tic_removed_mass", {"multiplier": 1.1}, REFUTED),
    ("kl_drift", {"t_exponent": 0.95}, REFUTED),
    ("kl_drift", {"constant": 0.45}, REFUTED),
    ("drift", {"tau_exponent": 1.95}, REFUTED),
    ("theorem1", {"delay_onep": 4}, NOT_REPRODUCED),
    ("theorem1", {"delay_onep": 2}, NOT_REPRODUCED),
    ("theorem1", {"delay_eta": 3.95}, NOT_REPRODUCED),
    ("theorem2", {"delay_den": -1.95}, NOT_REPRODUCED),
    ("c_through_log", {"second_moment_expr": chain.second_moment() * chain.C}, REFUTED),
    ("c_eps_below", {"multiplier": 1.1}, REFUTED),
    ("denominator_orders", {"tic_exponent": 2.05}, REFUTED),
    ("penalties", {"tic_exponent": -3.95}, REFUTED),
    ("penalties", {"gmc_exponent": -2.05}, REFUTED),
    ("improvement_factor", {"exponent": 0.45}, REFUTED),
    ("tuned_rate", {"d_n_exponent": -0.75}, REFUTED),
    ("corollary1", {"n_exponent": -3 / 14 + 0.05}, REFUTED),
    ("corollary1", {"tau_exponent": 1 / 7 + 0.05}, REFUTED),
    ("delay_tolerance", {"eps_n_exponent": -3 / 14 - 0.05}, REFUTED),
    ("delay_tolerance", {"q_max": 1.55}, REFUTED),
    ("large_delay", {"rate_offset": 0.05}, REFUTED),
    ("large_delay", {"eta_offset": -0.05}, REFUTED),
    ("corollary2", {"g_exponent": -0.45}, REFUTED),
    ("group_bias", {"tic_persists": False}, REFUTED),
    ("group_bias", {"gmc_vanishes": False}, REFUTED),
    ("ours_prop1_constant", {"constant": 1.3}, REFUTED),
    ("ours_bias_constant", {"multiplier": 0.8}, REFUTED),
    ("ours_explicit_theorem", {"delay_t_power": 2}, REFUTED),
    ("ours_explicit_theorem", {"delay_log_c_power": 1}, REFUTED),
    ("ours_tight_constants", {"multiplier": 1.01}, REFUTED),
    ("ours_joint_minimiser", {"n_exponent": -0.45}, REFUTED),
    ("ours_centered", {"factor_offset": 0.05}, REFUTED),
    ("ours_grpo_mean", {"exponent": 1.05}, REFUTED),
    ("ours_group_removed_mass", {"multiplier": 0.7}, REFUTED),
    ("ours_tic_bias_constant_in_g", {"constant_in_g": False}, REFUTED),
]
CHECKS = {**PAPER_CHECKS, **OUR_CHECKS}


def test_every_row_has_a_flip() -> None:
    assert {key for key, _, _ in FLIPS} == set(CHECKS)


@pytest.mark.parametrize(("key", "perturbed", "expected"), FLIPS, ids=lambda v: str(v)[:40])
def test_perturbed_claim_flips_the_verdict(key: str, perturbed: dict, expected: str) -> None:
    assert CHECKS[key]().verdict == VERIFIED
    assert CHECKS[key](**perturbed).verdict == expected
