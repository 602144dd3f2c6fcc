"""The toy learners' headline (issue 31): one declared primary ordering, the rest Holm-adjusted;
each ordering's p-value recovered from its paired intervals agrees with its verdict."""

from __future__ import annotations

import pytest

from gmc_grpo.stats import paired_t_test
from pipeline.headlines import ordering_p_value, toy_multiplicity, toy_train_headline


def _diff(*values: float) -> dict[str, float]:
    return paired_t_test(values)


def _ordering(claim: str, *diffs: dict[str, float], verdict: str = "holds") -> dict:
    return {
        "claim": claim,
        "metric": "final_objective",
        "verdict": verdict,
        "differences": list(diffs),
    }


def test_p_values_from_intervals_match_the_paired_t_test() -> None:
    a, b = _diff(0.1, 0.12, 0.11), _diff(-0.03, -0.05, -0.04)
    assert ordering_p_value(_ordering("x >= y", a)) == pytest.approx(a["p"], rel=1e-9)
    # a chain is an intersection-union test: the largest step p-value
    c = _diff(0.05, 0.02, 0.08)
    assert ordering_p_value(_ordering("x >= y >= z", a, c)) == pytest.approx(c["p"], rel=1e-9)
    # a step on the wrong side of a "<=" claim: p = 1; on the right side its p-value
    assert ordering_p_value(_ordering("x <= y", a)) == 1.0
    assert ordering_p_value(_ordering("x <= y", b)) == pytest.approx(b["p"], rel=1e-9)
    # equivalence within 0.01: TOST at half the level, below 0.05 iff the 95% interval is inside
    tiny = _diff(0.003, -0.002, 0.001)
    p = ordering_p_value(_ordering("similar", tiny), tolerance=0.01)
    assert (p < 0.05) == (-0.01 <= tiny["lo"] and tiny["hi"] <= 0.01)
    assert ordering_p_value(_ordering("x >= y", _diff(0.1))) != ordering_p_value(
        _ordering("x >= y", _diff(0.1))
    )  # NaN with one seed


def test_primary_and_holm_in_the_headline() -> None:
    strong, weak = _diff(0.1, 0.12, 0.11), _diff(-0.03, -0.05, -0.04)  # p 0.0027, 0.0202
    primary = _ordering("GMC >= TIC >= GRPO, final J, D = 64", strong)
    others = [
        _ordering("GMC <= TIC <= GRPO, (1/N) sum ||grad J||^2, D = 64", weak),
        _ordering("GRPO degrades from D = 0 to D = 64 (final J)", strong),
    ]
    counted = [("delay_quick", primary)] + [("delay_quick", o) for o in others]
    multi = toy_multiplicity(counted)
    assert multi["primary"][1] is primary and multi["primary"][2] == pytest.approx(strong["p"])
    # Holm over m = 2: 2 x 0.0027 = 0.0055 and max(0.0055, 0.0202) = 0.0202: both hold
    assert (multi["holds"], multi["not_significant"], multi["of"]) == (2, 0, 2)
    text = toy_train_headline(
        {"delay_quick": {"orderings": [primary, *others]}}, {"delay_quick": []}
    )
    assert text.startswith(
        "paper orderings on the toy MDPs: primary (delay_quick: GMC >= TIC >= GRPO, final J, "
        "D = 64) holds (p = 0.0027); the other 2 Holm-adjusted: 2 hold, 0 not"
    )
    # three more weak ones: Holm over m = 5 leaves the 0.0202 ones not significant
    more = counted + [("group_quick", _ordering(f"c{i}", weak)) for i in range(3)]
    assert toy_multiplicity(more)["holds"] == 1
