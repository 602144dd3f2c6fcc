"""The toy sweep's headline comparison (GMC's bias below TIC's): one declared primary point,
the other stale points Holm-adjusted (issue 31), with hand-worked p-values."""

from __future__ import annotations

import pytest

from pipeline.headlines import sweep_headline
from toy_mdps.sweep.analysis import gmc_below_tic, primary_point


def _rows(diffs: dict[tuple[float, int], tuple[float, float, float]]) -> list[dict]:
    """GMC - TIC = the given per-seed differences at `(staleness, G)`, TIC at 1."""
    rows = []
    for (staleness, g), per_seed in diffs.items():
        for seed, d in enumerate(per_seed):
            for method, value in (("tic", 1.0), ("gmc", 1.0 + d)):
                rows.append(
                    {
                        "method": method,
                        "staleness": staleness,
                        "eps": 0.28,
                        "group_size": g,
                        "seed": seed,
                        "estimator/relative_bias_sq": value,
                    }
                )
    return rows


def test_primary_point_and_holm_over_the_rest() -> None:
    rows = _rows(
        {
            (64.0, 8): (-0.5, -0.51, -0.49),  # the primary: largest staleness, eps 0.28, G = 8
            (64.0, 2): (-0.5, -0.51, -0.49),  # p = 1.333e-4: Holm 2 x 1.333e-4, holds
            (16.0, 8): (-0.1, -0.14, -0.07),  # p = 0.0364: holds unadjusted, Holm 2 x 0.0364
            (16.0, 2): (0.01, -0.02, 0.0),  # p = 0.742
        }
    )
    claim = gmc_below_tic(rows)
    first = claim["primary"]
    assert (first["staleness"], first["group_size"], first["verdict"]) == (64.0, 8, "holds")
    assert claim["holds"] == 3 and claim["of"] == 4  # unadjusted
    by = {(p["staleness"], p["group_size"]): p for p in claim["points"]}
    assert by[(64.0, 2)]["p"] == pytest.approx(1.3330667e-4, rel=1e-6)
    assert by[(16.0, 8)]["p"] == pytest.approx(0.0364117, rel=1e-5)
    # Holm over m = 3: sorted p 1.333e-4, 0.0364, 0.742 -> 4.0e-4, max(., 2 x 0.0364), 0.742
    assert by[(64.0, 2)]["p_holm"] == pytest.approx(3 * 1.3330667e-4, rel=1e-6)
    assert by[(16.0, 8)]["p_holm"] == pytest.approx(2 * 0.0364117, rel=1e-5)
    assert by[(16.0, 2)]["p_holm"] == pytest.approx(0.7418011, rel=1e-6)
    assert (
        by[(16.0, 8)]["verdict"] == "holds" and by[(16.0, 8)]["verdict_holm"] == "not significant"
    )
    assert "p_holm" not in by[(64.0, 8)]  # the primary is not in the family
    rest = claim["secondary_holm"]
    assert (rest["holds"], rest["of"], rest["not_significant"], rest["does_not_hold"]) == (
        1,
        3,
        2,
        0,
    )
    text = sweep_headline({"claims": {"gmc_bias_below_tic": claim}})
    assert text.startswith(
        "GMC's bias below TIC's, primary point (staleness 64, eps 0.28, G = 8): holds"
    )
    assert "the other 3 stale points Holm-adjusted: 1 hold, 2 not significant, 0 against" in text
    assert "(unadjusted: 3 of 4 hold)" in text


def test_primary_falls_back_to_the_nearest_eps_and_group_size() -> None:
    points = [
        {"staleness": 32.0, "eps": 0.2, "group_size": 4},
        {"staleness": 32.0, "eps": 0.3, "group_size": 16},
        {"staleness": 16.0, "eps": 0.28, "group_size": 8},
    ]
    assert primary_point(points) is points[1]  # largest staleness, eps nearest 0.28
    assert primary_point([]) is None
