"""Lemma 1 as what it is (issue 31): the run-based comparison is a consistency check whose
right-hand side above the ceiling is vacuous (not "holds"), with each term's share; and the
descent step is tested directly at every step, a check that fails when `L_J` is too small."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_runs import tiny_tracked_run

import evidence.measured as measured
from evidence.measured import SMOOTHNESS_CHECK, run_bounds
from evidence.vacuity import lemma1_ratios, smoothness_summary

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lemma") / "run"
    return tiny_tracked_run(path, lr=1.0, total_steps=8, bound_every=1, name="lemma/gmc")


def test_shares_ceiling_and_every_step_moments(run_dir: Path) -> None:
    result = run_bounds(run_dir)
    lem = result.lemma1
    shares = lem["shares"]
    assert sum(shares.values()) == pytest.approx(1.0, rel=1e-9)
    # T L R^2 log|A| / 2 with T = 3, |A| = 3, R = 1
    assert lem["ceiling"] == pytest.approx(3 * result.constants["L"] * 1.0986122886681098 / 2)
    assert lem["vacuous"] == (lem["rhs_with_measured_moments"]["mean"] >= lem["ceiling"])
    assert lem["moment_steps"] == lem["steps"] == 8  # bound_every = 1: moments at every step
    summary = lemma1_ratios([result])
    assert summary["every_step"] == 1
    assert summary["holds"] + summary["vacuous"] + summary["violated"] >= summary["runs"] == 1


def test_a_right_hand_side_above_the_ceiling_is_vacuous_not_holds(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(measured, "gradient_norm_sq_ceiling", lambda *a: 1e-12)
    result = run_bounds(run_dir)
    assert result.lemma1["vacuous"] and result.lemma1["holds"]
    summary = lemma1_ratios([result])
    assert (summary["vacuous"], summary["holds"], summary["violated"]) == (1, 0, 0)
    assert summary["vacuous_runs"] == ["lemma/gmc"]


def test_descent_step_holds_and_fails_on_a_planted_curvature(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_bounds(run_dir)
    entry = result.checks[SMOOTHNESS_CHECK]
    assert entry["evaluated"] == 3 * 8 and entry["violations"] == 0
    used = result.smoothness["max_curvature_over_L_J"]
    assert used is not None and used <= 1.0  # the curvature the steps used, as a share of L_J
    s = smoothness_summary([result])
    assert (s["runs"], s["evaluated"], s["violations"]) == (1, 24, 0)
    # J planted to fall by 1 per step (a curvature far beyond L_J): the check must fail
    original = measured.load_series

    def planted(path: Path):  # noqa: ANN202
        series = original(path)
        series.every["objective"] = series.every["objective"] - 1.0 * np.arange(8)
        return series

    monkeypatch.setattr(measured, "load_series", planted)
    broken = run_bounds(run_dir)
    assert broken.checks[SMOOTHNESS_CHECK]["violations"] >= 3 * 6
    assert any(r["check"] == SMOOTHNESS_CHECK for r in broken.refutations)
