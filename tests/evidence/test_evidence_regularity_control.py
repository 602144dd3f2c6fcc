"""Row 26 (delay regularity) with a negative control (issue 31): a schedule whose lag depends on
the learner's drift must be rejected, an independent one accepted; per-lag results reported."""

from __future__ import annotations

import numpy as np

from evidence.checks_runs import check_delay_regularity, lags_outside
from evidence.run_evidence import RunEvidence, regularity_points
from toy_mdps.train.drift_control import control_summary
from toy_mdps.train.workers_analysis import regularity_of_point

SEEDS, STEPS, H = 6, 400, 4


def _summary(drift_dependent: bool, seed: int = 0) -> dict:
    """Synthetic records of `D_n(t) = t^2 u_(s,n)` (u log-normal, one draw per seed and step);
    each step one group whose lag is uniform on 1..H, or (drift-dependent) H when the seed's own
    drift at that step is above its median and 1 otherwise."""
    rng = np.random.default_rng(seed)
    u = np.exp(rng.normal(scale=0.5, size=(SEEDS, STEPS)))
    lags = np.arange(H + 1, dtype=float)
    per_seed = {}
    for s in range(SEEDS):
        groups, own, others = np.zeros(H + 1), np.zeros(H + 1), np.zeros(H + 1)
        for n in range(STEPS):
            if drift_dependent:
                t = H if u[s, n] > np.median(u[s]) else 1
            else:
                t = int(rng.integers(1, H + 1))
            groups[t] += 1
            own[t] += t**2 * u[s, n]
            others[t] += t**2 * np.mean(np.delete(u[:, n], s))
        per_seed[str(s)] = {
            "groups": groups.tolist(),
            "own_sum": own.tolist(),
            "others_sum": others.tolist(),
            "time_sum": (lags**2 * u[s].sum()).tolist(),
            "corr_lag_length": None,
            "beyond_max_lag": 0,
        }
    record = {"per_seed": per_seed, "max_lag": H, "time_count": [STEPS] * (H + 1)}
    reg = regularity_of_point({"delay_regularity": record}, min_groups=20)
    name = "drift_dependent" if drift_dependent else "independent"
    return {
        "name": "control",
        "delay_regularity": {
            "points": {
                name: {
                    "method": "gmc",
                    "generation_time": name,
                    "lag_mean": 2.5,
                    "regularity": reg,
                }
            }
        },
    }


def test_a_drift_dependent_lag_is_rejected_and_an_independent_one_accepted() -> None:
    independent = regularity_points(_summary(False))
    control = regularity_points(_summary(True))
    assert independent[0]["per_lag"] and control[0]["per_lag"]
    ok = check_delay_regularity(RunEvidence(["x"], regularity=independent))
    assert ok.verdict == "verified"  # pooled 0.997 [0.972, 1.02] on these draws
    assert "per lag: within" in ok.result
    rejected = check_delay_regularity(RunEvidence(["x"], regularity=control))
    assert rejected.verdict == "does not hold"
    # per lag the control's own drift is far above the others' at t = H, below at t = 1
    by_lag = {x["lag"]: x for x in control[0]["per_lag"]}
    assert by_lag[H]["lo"] > 0.05 and by_lag[1]["hi"] < -0.05
    assert "outside at 2" in rejected.result


def test_a_drift_gated_worker_schedule_is_rejected_per_lag() -> None:
    """The negative control from the project's own `WorkerSchedule` (toy_mdps.train.drift_control):
    a share of the groups launched while the learner moves fast take 20x longer. The test must
    reject it (lags failing after Holm), and not reject the same learner with independent
    exponential times."""
    points = {p["run"]: p for p in regularity_points(control_summary())}
    gated = check_delay_regularity(RunEvidence(["x"], regularity=[points["drift_gated"]]))
    assert gated.verdict == "does not hold"
    failing = gated.evidence["lags_failing"]["control/drift_gated"]
    assert failing, "no lag fails: the control would not have been caught"
    by_lag = {x["lag"]: x for x in points["drift_gated"]["per_lag"]}
    # mid lags collect the slow phases' groups (own drift below the others'), long lags the fast
    assert by_lag[3]["hi"] < -0.05 and by_lag[11]["lo"] > 0.05
    independent = check_delay_regularity(RunEvidence(["x"], regularity=[points["independent"]]))
    assert independent.verdict != "does not hold"
    assert independent.evidence["lags_failing"]["control/independent"] == []


def test_lags_outside_by_hand() -> None:
    # 5 seeds, relative 0.30 with 95% interval [0.20, 0.40]: se = 0.1 / t(0.975, 4) = 0.036;
    # (0.30 - 0.05) / se = 6.94, one-sided p = 0.0011; two lags -> Holm 0.0022 < 0.05: rejected.
    # A lag at 0.06 [-0.04, 0.16] is not (p about 0.4).
    per_lag = [
        {"lag": 1, "seeds": 5, "relative": 0.30, "lo": 0.20, "hi": 0.40},
        {"lag": 2, "seeds": 5, "relative": 0.06, "lo": -0.04, "hi": 0.16},
    ]
    out = lags_outside(per_lag, 0.05)
    assert [x["lag"] for x in out] == [1]
    assert abs(out[0]["p"] - 0.00113) < 5e-5 and abs(out[0]["p_holm"] - 2 * out[0]["p"]) < 1e-12
    # records without `seeds` are not tested
    assert lags_outside([{**per_lag[0], "seeds": None}], 0.05) == []


def test_drift_control_command_line(capsys) -> None:
    import pytest

    from toy_mdps.train.drift_control import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--seeds", "2"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "DriftControlConfig.seeds" in err[0]
    assert main(["--seeds", "3", "--steps", "200"]) == 0
    out = capsys.readouterr().out
    assert "drift_gated: mean lag" in out and "independent: mean lag" in out
