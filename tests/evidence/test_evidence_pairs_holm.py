"""The bounds stage's GMC/TIC pairs (issue 31): one declared primary pair, Holm over the other
pairs in the theorems' setting per claim, identical pairs and pairs outside the setting apart."""

from __future__ import annotations

import math

import pytest

from evidence.pairs import PRIMARY_PAIR, multiplicity
from evidence.render import pairs_headline


def _pair(delay: int, eta: float, ratio_p: float, final_p: float, **kw: object) -> dict:
    return {
        "folder": kw.get("folder", "bounds_quick"),
        "delay": delay,
        "eta": eta,
        "ratio": {"mean": kw.get("ratio", 0.5), "lo": 0.4, "hi": 0.6, "n": 5},
        "ratio_p": ratio_p,
        "ratio_verdict": "holds",
        "final_difference": {"mean": kw.get("final", 0.1), "lo": 0.05, "hi": 0.15, "n": 5},
        "final_p": final_p,
        "identical": kw.get("identical", False),
        "in_setting": kw.get("in_setting", True),
    }


def test_roles_and_holm_by_hand() -> None:
    pairs = [
        _pair(PRIMARY_PAIR["delay"], PRIMARY_PAIR["eta"], 1e-4, 1e-4),
        _pair(16, 5.0, 0.01, 0.02, ratio=2.0),  # GMC higher
        _pair(16, 20.0, 0.02, 0.03),
        _pair(16, 80.0, 0.5, 0.001),
        _pair(2, 0.1, math.nan, math.nan, identical=True, folder="bounds_bite"),
        _pair(16, 20.0, 1e-6, 1e-6, in_setting=False, folder="toy_train"),
    ]
    multiplicity(pairs)
    assert [p["role"] for p in pairs] == [
        "primary",
        "secondary",
        "secondary",
        "secondary",
        "identical",
        "outside",
    ]
    # ratio p 0.01, 0.02, 0.5 -> Holm 0.03, 0.04, 0.5
    assert [p["ratio_p_holm"] for p in pairs[1:4]] == pytest.approx([0.03, 0.04, 0.5])
    assert [p["ratio_verdict_holm"] for p in pairs[1:4]] == [
        "does not hold",  # GMC's metric higher (ratio 2)
        "holds",
        "not significant",
    ]
    # final p 0.02, 0.03, 0.001 -> sorted 0.001, 0.02, 0.03 -> 0.003, 0.04, 0.04
    assert [p["final_p_holm"] for p in pairs[1:4]] == pytest.approx([0.04, 0.04, 0.003])
    text = pairs_headline(pairs)
    assert text.startswith("GMC vs TIC (Theorems 1-2's setting), primary pair bounds_quick D = 64")
    assert "the other 3 pairs in the setting, Holm-adjusted: gradient metric lower in 1, " in text
    assert "higher in 1; final J higher in 3, lower in 0" in text
    assert text.endswith("not counted: 1 identical pairs (no group capped), 1 outside the setting")
