"""The figures' GMC-vs-TIC check says "Theorems 1-2" only on runs in the theorems' setting
(plain SGD, constant step, no clip; issue 31)."""

from __future__ import annotations

from evidence.runs_vs_theory import gap_claim, outside_theorem_setting


def test_setting_reasons() -> None:
    sgd = {"optimizer": "sgd", "lr_schedule": "constant", "grad_clip": None}
    assert outside_theorem_setting(sgd) == []
    adam = {"optimizer": "adam", "lr_schedule": "cosine", "grad_clip": 1.0}
    assert outside_theorem_setting(adam) == [
        "optimizer adam",
        "cosine schedule",
        "clipping at 1",
    ]
    assert outside_theorem_setting({}) == ["optimizer unknown"]  # unknown: not claimed inside


def test_theorem_label_only_in_the_setting() -> None:
    inside = [{"outside_setting": []}, {"outside_setting": []}]
    assert "(Theorems 1-2: GMC's bound is smaller" in gap_claim(inside)["claim"]
    mixed = inside + [{"outside_setting": ["optimizer adam", "clipping at 1"]}]
    text = gap_claim(mixed)["claim"]
    assert "Theorems 1-2:" not in text
    assert "outside Theorems 1-2's setting: clipping at 1, optimizer adam" in text
    assert "Theorems 1-2:" not in gap_claim([{}])["claim"]  # no record of the setting
