"""`evidence.measured`: the theorems' bounds beside toy-run records, on hand-written records.

The records are written here by hand (no torch, no toy run), so every expected number is worked
out from the formulas of the module docstring, not read from the code under test.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from evidence.measured import find_runs, run_bounds, setting
from evidence.measured_report import outside_rows
from evidence.render import bounds_markdown, bounds_text

ROOT = Path(__file__).resolve().parents[2]
T, V, R, L, ETA, N, EPS = 2, 3, 1.0, 0.5, 0.5, 4, 0.28
SEEDS = [0, 1, 2]
LOG_C = 3.0
J = [[0.2, 0.3, 0.45, 0.5], [0.2, 0.32, 0.4, 0.52], [0.2, 0.28, 0.44, 0.49]]  # J(theta_n)
J_FINAL = [0.55, 0.6, 0.57]
GRAD_SQ = [[0.04, 0.03, 0.02, 0.01], [0.05, 0.03, 0.02, 0.02], [0.04, 0.02, 0.02, 0.01]]


def config(**kw: object) -> dict:
    cfg = {
        "name": "synthetic/gmc",
        "method": "gmc",
        "eps": EPS,
        "truncation": 8.0,
        "advantage": "paper",
        "optimizer": "sgd",
        "lr": ETA,
        "lr_schedule": "constant",
        "grad_clip": None,
        "max_length": T,
        "vocab_size": V,
        "reward_scale": R,
        "total_steps": N,
        "group_size": 4,
        "num_groups": 2,
        "delay": 1,
        "seeds": SEEDS,
        "bound_every": 2,
    }
    cfg.update(kw)
    return cfg


def write_run(path: Path, plant: str | None = None, **cfg_kw: object) -> Path:
    """A tracked run: lag 0 at step 0, then 1; drift = step size^2 of the previous step."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"config": config(**cfg_kw)}))
    rows = []
    for n in range(N):
        for i, seed in enumerate(SEEDS):
            nxt = J[i][n + 1] if n + 1 < N else J_FINAL[i]
            lag = min(n, 1)
            row = {
                "step": n,
                "seed": seed,
                "policy/grad_norm_sq": GRAD_SQ[i][n],
                "policy/objective": J[i][n],
                "staleness/lag": float(lag),
                "optim/grad_norm": 0.1,
                "optim/lr": ETA,
                "ratio/kl_exact": 0.001 * lag,
                "bounds/log_coverage": LOG_C - 0.5 * (n == 0),
                "bounds/drift_sq": 0.0025 * lag,  # = (eta * 0.1)^2: one step back
                "bounds/step_sq": 0.0025,
                "bounds/grad_dot_step": nxt - J[i][n],  # no second-order remainder
                "bounds/lag_sq": float(lag**2),
                "bounds/lag_fourth": float(lag**4),
                "bounds/group_coef_max": 1.1,
                "bounds/lipschitz_L": L,
            }
            if n % 2 == 0:
                row.update(
                    {
                        "bounds/bias_sq": 1e-4 * lag,
                        "bounds/bias_sq_lo": 0.0,
                        "bounds/bias_sq_hi": 2e-4 * lag + 1e-6,
                        "bounds/second_moment": 0.01,
                        "bounds/second_moment_lo": 0.009,
                        "bounds/second_moment_hi": 0.011,
                        "bounds/removed_mass": 0.01 * lag,
                        "bounds/removed_mass_lo": 0.0,
                        "bounds/removed_mass_hi": 0.02 * lag,
                        "bounds/grad_dot_bias": 0.0,
                        "bounds/grad_dot_bias_lo": -1e-4,
                        "bounds/grad_dot_bias_hi": 1e-4,
                        "bounds/kl_mean": 0.001 * lag,
                        "bounds/kl_max": 0.002 * lag,
                    }
                )
            if plant == "second_moment" and (n, seed) == (2, 1):
                row["bounds/second_moment_lo"] = 50.0
            if plant == "kl" and (n, seed) == (3, 2):
                row["ratio/kl_exact"] = 1.0
            rows.append(row)
    (path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    per_seed = {str(s): {"final_objective": J_FINAL[i]} for i, s in enumerate(SEEDS)}
    (path / "summary.json").write_text(json.dumps({"per_seed": per_seed}))
    return path


def test_terms_are_the_documented_formulas(tmp_path: Path) -> None:
    result = run_bounds(write_run(tmp_path / "run"))
    assert result.in_setting and result.setting == []
    c = result.constants
    assert (c["T"], c["N"], c["eta"], c["L"], c["log_C"]) == (T, N, ETA, L, LOG_C)
    assert c["tau4"] == pytest.approx(3 / 4) and c["J0"] == 0.2
    terms = result.terms
    total = sum(sum(g) / N for g in GRAD_SQ) / len(SEEDS)
    assert terms["total"]["measured"]["mean"] == pytest.approx(total, rel=1e-12)
    progress = sum(2 * T * (jf - 0.2) / (ETA * N) for jf in J_FINAL) / 3
    assert terms["optimisation"]["measured"]["mean"] == pytest.approx(progress, rel=1e-12)
    smooth = T * R * L * (2 * math.log(V) + 1)
    assert terms["variance"]["measured"]["mean"] == pytest.approx(T * smooth * ETA * 0.01)
    # delay: T^2 mean bias_sq over the recorded steps 0 (lag 0) and 2 (lag 1)
    assert terms["delay"]["measured"]["mean"] == pytest.approx(T**2 * 0.5e-4)
    # the bound, written out: Theorem 1 with Proposition 1's constant 8
    m = 8 / T * (1 + EPS) * L * R**2 * math.log(V)
    opt = 2 * T * (R - 0.2) / (ETA * N)
    var = T * smooth * ETA * m
    delay = (
        8 * T**3 * L**5 * R**6 * LOG_C**2 * math.log(V) * (1 + EPS) ** 3 * ETA**4 * 0.75
    ) / math.log(1 + 2 * EPS) ** 2
    for term, value in (("optimisation", opt), ("variance", var), ("delay", delay)):
        assert terms[term]["paper"]["bound"] == pytest.approx(value, rel=1e-12), term
    assert terms["total"]["paper"]["bound"] == pytest.approx(opt + var + delay, rel=1e-12)
    assert terms["variance"]["ours"]["bound"] == pytest.approx(var / 4, rel=1e-12)
    ratio = terms["total"]["paper"]["ratio"]
    assert ratio == pytest.approx(total / (opt + var + delay), rel=1e-12)
    assert result.refutations == []
    assert result.lemma1["holds"]


def test_first_order_identity_splits_the_metric_exactly(tmp_path: Path) -> None:
    """No remainder and no bias: the metric is progress plus a residual, per seed."""
    fo = run_bounds(write_run(tmp_path / "run")).first_order
    assert fo["curvature"]["mean"] == pytest.approx(0.0, abs=1e-15)
    assert fo["bias"]["mean"] == 0.0
    progress = [T * (jf - 0.2) / (ETA * N) for jf in J_FINAL]
    assert fo["per_seed"]["progress"] == pytest.approx(progress, rel=1e-12)
    for i, total in enumerate(sum(g) / N for g in GRAD_SQ):
        assert fo["per_seed"]["residual"][i] == pytest.approx(total - progress[i], rel=1e-12)


@pytest.mark.parametrize(
    ("plant", "check", "step", "seed"),
    [
        ("second_moment", "Prop. 1 (paper): E||g||^2 <= M", 2, 1),
        ("kl", "step 3: KL_batch <= (TL/2)||dtheta||^2", 3, 2),
    ],
)
def test_a_bound_below_a_measurement_is_reported(
    tmp_path: Path, plant: str, check: str, step: int, seed: int
) -> None:
    result = run_bounds(write_run(tmp_path / "run", plant=plant))
    found = [r for r in result.refutations if r["check"] == check]
    assert [(r["step"], r["seed"]) for r in found] == [(step, seed)]
    assert found[0]["measured"] > found[0]["bound"]
    text = bounds_markdown([result])
    assert (
        f"step {step}, seed {seed}" in text
        and "Refutations (a bound below a measurement): " in text
    )


def test_setting_names_what_is_outside() -> None:
    assert setting(config()) == []
    assert any("adam" in r for r in setting(config(optimizer="adam")))
    assert any("cosine" in r for r in setting(config(lr_schedule="cosine")))
    assert any("clipping" in r for r in setting(config(grad_clip=1.0)))
    vcpo = setting(config(method="vcpo", advantage="loo"))
    assert any("vcpo/step_scale" in r for r in vcpo) and any("no theorem" in r for r in vcpo)
    assert any("not in the class" in r for r in setting(config(method="grpo")))
    assert any("centered" in r for r in setting(config(advantage="centered")))


def test_outside_runs_are_listed_apart(tmp_path: Path) -> None:
    write_run(tmp_path / "sgd")
    write_run(tmp_path / "adam", optimizer="adam")
    results = [run_bounds(p) for p in find_runs([tmp_path])]
    assert [r.in_setting for r in results] == [False, True]
    untracked = tmp_path / "untracked"
    write_run(untracked, bound_every=0)
    summary = {"per_seed": {}, "mean": {"convergence_metric": {"mean": 1.0, "lo": 0.5, "hi": 1.5}}}
    (untracked / "summary.json").write_text(json.dumps(summary))
    rows = outside_rows([tmp_path])
    assert [r["why"] for r in rows] == ["no bound tracking (bound_every = 0)"]
    md = bounds_markdown(results, rows)
    assert "Outside the theorems' setting" in md and "optimizer adam" in md
    assert "1 runs in the theorems' setting" in bounds_text(results)


def test_theory_cli_runs_reads_json_only(tmp_path: Path) -> None:
    """`gmc-grpo theory --runs DIR` in a fresh interpreter: the table, and torch never imported."""
    write_run(tmp_path / "runs" / "gmc")
    code = (
        "import sys\n"
        "from pipeline.cli import main\n"
        f"rc = main(['theory', '--runs', {str(tmp_path / 'runs')!r}, '--out', "
        f"{str(tmp_path / 'out')!r}])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "Bounds beside toy-run measurements" in proc.stdout
    assert "synthetic/gmc" in proc.stdout
    saved = json.loads((tmp_path / "out" / "bounds.json").read_text())
    assert saved[0]["in_setting"] and "series" in saved[0]
    assert "$" in (tmp_path / "out" / "bounds.md").read_text()


def test_theory_cli_runs_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evidence.theory_runs import main
    from theory.cli import main as theory_main

    assert main(["--runs", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["--runs", str(tmp_path)]) == 2
    assert "no toy run the claims table can read" in capsys.readouterr().err
    # `theory` reads no run: without the evidence layer's reader, --runs is refused
    write_run(tmp_path / "runs" / "gmc")
    assert theory_main(["--runs", str(tmp_path / "runs")]) == 2
    assert "through the evidence layer" in capsys.readouterr().err
