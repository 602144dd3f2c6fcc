"""The claims table's run rows: `needs runs` without runs, and with runs a verdict that can fail.

Synthetic run records with planted exponents, intervals and violations: each row must come out
verified on records that agree with the claim and turn (refuted, not reproduced, does not hold,
not significant) on records, or claims, that do not. The records of real runs are used by the
slow test at the end and by `gmc-grpo reproduce`'s claims stage.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_evidence_measured import write_run

from evidence.checks_runs import (
    check_delay_regularity,
    check_drift,
    check_uniform_second_moment,
)
from evidence.drift_fit import DriftRun, fit_drift
from evidence.pairs import gmc_tic_pairs, tuned_pairs
from evidence.registry import run_findings
from evidence.render import slack_markdown
from evidence.run_evidence import RunEvidence, collect_evidence
from evidence.slack import chain_slack, slack_summary
from evidence.vacuity import lemma1_ratios, theorem_vacuity
from theory.claims import evaluate_claim, evaluate_claims, needs_runs, summary
from theory.verdicts import (
    DOES_NOT_HOLD,
    NEEDS_RUNS,
    NOT_SIGNIFICANT,
    REFUTED,
    VERIFIED,
)

SEEDS = [0, 1, 2, 3, 4]
M = 1.0
LAGS = np.arange(1, 17, dtype=np.float64)


def drift_runs(eta_exp: float, tau_exp: float, scale: float = 1e-3) -> list[DriftRun]:
    """Runs at three step sizes whose drift is `scale eta^a t^b` times seeded noise."""
    rng = np.random.default_rng(0)
    runs = []
    for eta in (0.1, 1.0, 10.0):
        noise = np.exp(rng.normal(scale=0.05, size=(len(SEEDS), LAGS.size)))
        drift = scale * eta**eta_exp * LAGS**tau_exp * noise
        runs.append(DriftRun(f"d/eta={eta}", "gmc", "fixed_delay", eta, M, SEEDS, LAGS, drift))
    return runs


def test_without_runs_the_run_rows_say_so() -> None:
    rows = evaluate_claims()
    # row 27 is merged into Proposition 1's row: graded without runs, which only add to it
    assert needs_runs(rows) == ["Drift", "Delay regularity"]
    drift = next(r for r in rows if r["key"] == "drift")
    assert drift["verdict"] == NEEDS_RUNS and "drift_quick" in str(drift["result"])
    assert summary(rows)[NEEDS_RUNS] == 2
    merged = next(r for r in rows if r["key"] == "uniform_second_moment")
    assert "toy sweep" in str(merged["result"]) and "cannot bind" in str(merged["result"])


def test_drift_fit_recovers_planted_exponents() -> None:
    fit = fit_drift(drift_runs(2.0, 1.5))
    assert fit["eta_exponent"]["mean"] == pytest.approx(2.0, abs=0.02)
    assert fit["tau_exponent"]["mean"] == pytest.approx(1.5, abs=0.02)
    assert fit["eta_exponent"]["lo"] < 2.0 < fit["eta_exponent"]["hi"]
    assert fit["bound_max_ratio"] == pytest.approx(1e-3, rel=0.2)  # scale t^(-1/2) at t = 1
    with pytest.raises(ValueError, match="two step sizes"):
        fit_drift(drift_runs(2.0, 2.0)[:1])


@pytest.mark.parametrize(
    ("eta_exp", "tau_exp", "scale", "claimed", "expected"),
    [
        (2.0, 2.0, 1e-3, {}, VERIFIED),
        # slower than tau^2 and far below: an upper bound holds (the tightness is reported)
        (2.0, 1.5, 1e-3, {}, VERIFIED),
        (2.0, 2.0, 0.5, {}, VERIFIED),  # half of eta^2 t^2 M
        (2.0, 2.0, 0.5, {"tau_exponent": 1.5}, REFUTED),  # a perturbed claim turns it
        (2.0, 2.0, 5.0, {}, REFUTED),  # above eta^2 t^2 M
        (2.0, 2.5, 0.3, {}, REFUTED),  # faster than t^2: crosses the bound at large lags
    ],
)
def test_drift_row_is_graded_as_an_upper_bound(
    eta_exp: float, tau_exp: float, scale: float, claimed: dict, expected: str
) -> None:
    evidence = RunEvidence(["synthetic"], drift=drift_runs(eta_exp, tau_exp, scale))
    check = check_drift(evidence, **claimed)
    assert check.verdict == expected
    assert "Tightness, not the verdict" in check.result
    assert check_drift(None).verdict == NEEDS_RUNS


def test_drift_measured_moment_bound_is_the_non_vacuous_check() -> None:
    """`eta^2 t^2 max_n E||g_n||^2` with each run's measured moment: 0.1 with upper end 0.12
    holds for a drift of 0.05 eta^2 t^2 (ratio 0.5) and is refuted by 0.2 eta^2 t^2, which
    stays below eta^2 t^2 M (M = 1): only the measured-moment check catches it."""
    for scale, expected, violations in ((0.05, VERIFIED, 0), (0.2, REFUTED, 3 * LAGS.size)):
        runs = drift_runs(2.0, 2.0, scale)
        for run in runs:
            run.measured_second_moment, run.measured_second_moment_hi = 0.1, 0.12
        fit = fit_drift(runs)
        assert fit["bound_max_ratio_lower"] < 1.0  # below the M bound either way
        meas = fit["measured_bound"]
        assert meas["runs"] == 3 and meas["evaluated"] == 3 * LAGS.size
        assert meas["violations"] == violations
        assert meas["max_ratio"] == pytest.approx(scale / 0.1, rel=0.2)
        check = check_drift(RunEvidence(["synthetic"], drift=runs))
        assert check.verdict == expected
        assert f"{violations} violations" in check.result


def _regularity(ratios: list[tuple[float, float]]) -> RunEvidence:
    points = [
        {
            "run": f"r{i}",
            "method": "gmc",
            "generation_time": "length_proportional",
            "corr_lag_length": 0.7,
            "ratio": {"mean": (lo + hi) / 2, "lo": lo, "hi": hi},
        }
        for i, (lo, hi) in enumerate(ratios)
    ]
    return RunEvidence(["synthetic"], regularity=points)


def test_delay_regularity_is_an_equivalence_test() -> None:
    assert check_delay_regularity(_regularity([(0.98, 1.02), (0.99, 1.01)])).verdict == VERIFIED
    assert check_delay_regularity(_regularity([(0.98, 1.02), (1.2, 1.3)])).verdict == DOES_NOT_HOLD
    assert check_delay_regularity(_regularity([(0.9, 1.1)])).verdict == NOT_SIGNIFICANT
    tight = check_delay_regularity(_regularity([(0.98, 1.02)]), margin=0.001)
    assert tight.verdict == NOT_SIGNIFICANT  # a perturbed margin turns it
    assert check_delay_regularity(None).verdict == NEEDS_RUNS


def _sweep(second_moment_lo: float) -> RunEvidence:
    rows = []
    for method in ("tic", "gmc", "is"):
        for staleness in (0, 16, 64):
            rows.append(
                {
                    "method": method,
                    "staleness": str(staleness),
                    "estimator/second_moment": str(0.01 * (1 + staleness / 64)),
                    "estimator/second_moment_lo": str(second_moment_lo),
                    "chain/second_moment_bound": "1.0",
                }
            )
    return RunEvidence(["synthetic"], sweep_rows=rows)


def test_uniform_second_moment_against_the_delay_free_bound() -> None:
    ok = check_uniform_second_moment(_sweep(0.005))
    assert ok.verdict == VERIFIED and "IS 2×" in ok.result and "TIC 2×" in ok.result
    assert check_uniform_second_moment(_sweep(1.5)).verdict == REFUTED
    assert check_uniform_second_moment(_sweep(0.005), constant=1e-3).verdict == REFUTED
    assert check_uniform_second_moment(None).verdict == NEEDS_RUNS


def _pair(tmp_path: Path, method: str, lr: float, conv: list[float], final: list[float]) -> Path:
    name = f"exp/{method}_lr={lr:g}"
    path = write_run(tmp_path / name, method=method, lr=lr, name=name)
    seeds = json.loads((path / "config.json").read_text())["config"]["seeds"]
    per_seed = {
        str(s): {"final_objective": f, "convergence_metric": c}
        for s, c, f in zip(seeds, conv, final, strict=True)
    }
    (path / "summary.json").write_text(json.dumps({"per_seed": per_seed}))
    return path


def test_pairs_vacuity_slack_and_lemma1_from_tracked_runs(tmp_path: Path) -> None:
    """Two step sizes, both methods: every pair listed with final J, the tuned comparison
    censored at the grid's edges, the theorems vacuous, the chain's slack per step."""
    _pair(tmp_path, "gmc", 0.5, [1.0, 1.1, 0.9], [0.9, 0.8, 0.85])
    _pair(tmp_path, "tic", 0.5, [2.0, 2.2, 1.8], [0.5, 0.6, 0.55])
    _pair(tmp_path, "gmc", 1.0, [3.0, 3.3, 2.7], [0.95, 0.9, 0.92])
    _pair(tmp_path, "tic", 1.0, [1.0, 1.1, 0.9], [0.5, 0.5, 0.5])
    evidence = collect_evidence([tmp_path])
    assert len(evidence.tracked) == 4 and not evidence.problems
    pairs = gmc_tic_pairs(evidence.tracked)
    assert [p["eta"] for p in pairs] == [0.5, 1.0]
    assert pairs[0]["ratio"]["mean"] == pytest.approx(0.5) and pairs[0]["ratio_verdict"] == "holds"
    assert pairs[1]["ratio"]["mean"] == pytest.approx(3.0)
    assert pairs[1]["ratio_verdict"] == "does not hold"  # the reversal is listed too
    assert pairs[1]["final_verdict"] == "holds"
    assert pairs[0]["bound_ratio"] is not None and 0 < pairs[0]["bound_ratio"] < 1
    (tuned,) = tuned_pairs(evidence.tracked, pairs)
    assert tuned["gmc"]["measured_eta"] == 0.5 and tuned["tic"]["measured_eta"] == 1.0
    assert tuned["censored"] and tuned["gmc"]["measured_censored"]
    vac = theorem_vacuity(evidence.tracked)
    assert vac["runs"] == 4 and vac["all"]["paper"]["vacuous"] == 4 and vac["refuted"] == 0
    lem = lemma1_ratios(evidence.tracked)
    assert lem["runs"] == 4 and lem["violated"] == 0 and 0 < lem["ratio"]["median"] < 1
    # a right-hand side at or above the ceiling is vacuous, not counted as holding
    assert lem["holds"] + lem["vacuous"] == 4 and len(lem["vacuous_runs"]) == lem["vacuous"]
    slacks = chain_slack(evidence.tracked)
    assert len(slacks) == 4
    s = slacks[0]
    # the records' squared-bias intervals start at 0: the bias is not resolved, step 1 is n/a
    assert s["stale_steps"] == 1 and s["factors"]["bias"] is None and s["chain_total"] is None
    assert all(s["factors"][k] > 0 for k in s["factors"] if k != "bias")
    # step 4 = Prop. 1 slack x eta^2 tau^2 E||g||^2 / drift (0.5^2 x 0.01 / 0.0025 = 1 here)
    assert s["factors"]["drift"] == pytest.approx(
        s["factors"]["second_moment"] * 0.5**2 * 0.01 / 0.0025
    )
    # the run-level ratio's denominator is resolved when the measured delay term's interval
    # excludes 0; an unresolved one is marked in the table
    first = next(r for r in evidence.tracked if r.name == s["run"])
    assert s["run_delay_resolved"] == (first.terms["delay"]["measured"]["lo"] > 0)
    assert "denominator not resolved from 0" in slack_markdown(slacks, slack_summary(slacks))
    unresolved = [{**s, "run_delay_resolved": False}]
    resolved = [{**s, "run_delay_resolved": True}]
    assert "* |" in slack_markdown(unresolved, slack_summary(unresolved))
    assert "* |" not in slack_markdown(resolved, slack_summary(resolved))
    found = run_findings(evidence)
    row = evaluate_claim("theorem1", found)
    assert row["verdict"] == "reconstructed" and "vacuous there" in str(row["result"])
    assert evaluate_claim("lemma1", found)["verdict"] == VERIFIED


def test_a_run_with_gaps_or_a_mistyped_config_is_left_out_with_one_line(tmp_path: Path) -> None:
    """Issue 36: a tracked run whose metrics lack rows is left out of the run rows with a line
    naming them; a `config.json` that is a JSON list is not a run (no AttributeError); the
    other runs are read."""
    from toy_mdps.train.run_records import find_runs

    good = write_run(tmp_path / "good")
    gapped = write_run(tmp_path / "gapped")
    metrics = gapped / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    kept = [r for r in rows if not (r["step"] == 2 and r["seed"] == 1)]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in kept))
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "config.json").write_text("[1, 2]")
    (listed / "metrics.jsonl").write_text("")
    assert find_runs([tmp_path]) == [gapped, good]
    evidence = collect_evidence([tmp_path])
    assert len(evidence.tracked) == 1  # the good run
    gap, damaged = evidence.problems
    assert str(gapped) in gap and "lacks 1 of the" in gap and "(seed 1: step 2)" in gap
    assert damaged.startswith("skipped a damaged run: ") and "listed/config.json" in damaged
    assert "not a JSON object" in damaged


def test_row27_is_merged_into_proposition1_and_runs_can_refute_it() -> None:
    from theory.checks import check_uniform_second_moment_merged

    ok = check_uniform_second_moment_merged(run_findings(_sweep(0.005))["uniform_second_moment"])
    assert ok.verdict == VERIFIED and ok.evidence["merged_into"] == "prop1_second_moment"
    assert "a consistency check that cannot bind" in ok.result
    refuted = run_findings(_sweep(1.5))["uniform_second_moment"]
    assert check_uniform_second_moment_merged(refuted).verdict == REFUTED
