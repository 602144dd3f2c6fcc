"""Toy training runs: records, resumption, experiments, shipped configs and the CLI entry point."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

from gmc_grpo.records import METRIC_NAMES, read_json, read_jsonl
from gmc_grpo.stats import t_interval
from pipeline.toy import draw_figures
from toy_mdps.problem import CONFIG_DIR
from toy_mdps.train import cli as train_cli
from toy_mdps.train.analysis import eps_star_fit, verdict
from toy_mdps.train.config import (
    QUICK_EXPERIMENTS,
    ExperimentConfig,
    TrainConfig,
    shipped_experiment,
)
from toy_mdps.train.run import run_experiment, train

torch.set_num_threads(1)

TINY = dict(num_prompts=2, vocab_size=3, max_length=3, num_groups=2, group_size=4)


def _lines(path: Path) -> list[str]:
    return (path / "metrics.jsonl").read_text().splitlines()


WORKERS = dict(num_workers=5, generation_time="length_proportional", time_scale=0.5)


@pytest.mark.parametrize(
    ("method", "schedule", "extra"),
    [
        ("gmc", "fixed_delay", {}),
        ("gac", "fixed_delay", {}),
        ("vcpo", "length_coupled", {}),
        ("a3po", "workers", {**WORKERS, "drift_max_lag": 4}),
        ("gmc", "workers", {**WORKERS, "generation_time": "exponential", "update_time": 0.3}),
    ],
)
def test_killed_run_resumes_to_identical_records(
    tmp_path: Path, method: str, schedule: str, extra: dict
) -> None:
    cfg = TrainConfig(
        **TINY,
        method=method,
        schedule=schedule,
        delay=3,
        lam=1.0,
        total_steps=12,
        seeds=[0, 1],
        checkpoint_every=4,
        **extra,
    )
    full = train(cfg, tmp_path / "full")
    assert full is not None
    killed = tmp_path / "killed"
    assert train(cfg, killed, stop_after=10) is None  # killed after step 10, checkpoint at 8
    assert (killed / "checkpoint.pt").exists()
    assert not (killed / "summary.json").exists()
    with open(killed / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 10, "seed": 0, "policy/obj')  # torn line of the kill
    resumed = train(cfg, killed)
    assert _lines(killed) == _lines(tmp_path / "full")
    assert resumed == full
    assert not (killed / "checkpoint.pt").exists()
    # a finished run is reused, not recomputed
    assert train(cfg, killed) == full


def test_records_have_one_row_per_step_per_seed_with_namespaced_metrics(tmp_path: Path) -> None:
    cfg = TrainConfig(**TINY, method="tic", delay=2, total_steps=5, seeds=[3, 7])
    summary = train(cfg, tmp_path)
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["seed"]) for r in rows] == [(n, s) for n in range(5) for s in (3, 7)]
    for key in rows[0]:
        assert key in ("step", "seed") or key in METRIC_NAMES, key
    assert read_json(tmp_path / "config.json")["config"] == cfg.to_dict()
    conv = sum(r["policy/grad_norm_sq"] for r in rows if r["seed"] == 3) / 5
    assert summary["per_seed"]["3"]["convergence_metric"] == pytest.approx(conv, rel=1e-12)
    assert summary["per_seed"]["7"]["lag_tau4"] == pytest.approx((0 + 1 + 16 * 3) / 5)
    with pytest.raises(ValueError, match="different config"):
        train(TrainConfig(**TINY, method="gmc", total_steps=5, seeds=[3, 7]), tmp_path)


def test_experiment_grid_analysis_and_figures(tmp_path: Path) -> None:
    config = ExperimentConfig.from_dict(
        {
            "name": "tiny_delay",
            "kind": "delay_sweep",
            "base": {**TINY, "total_steps": 8, "seeds": [0, 1, 2]},
            "grid": {"method": ["grpo", "tic", "gmc"], "delay": [0, 4]},
        }
    )
    summary = run_experiment(config, tmp_path, progress=False)
    assert "figures" not in summary  # the track draws none: the pipeline's figure step does
    draw_figures("experiment", tmp_path)
    summary = read_json(tmp_path / "summary.json")
    assert summary["num_points"] == 6
    assert (tmp_path / "results.csv").read_text().count("\n") == 7
    claims = {c["claim"]: c for c in summary["orderings"]}
    assert any("D = 4" in name for name in claims)
    for claim in claims.values():
        assert claim["verdict"] in ("holds", "holds (not significant)", "does not hold")
    assert summary["figures"]
    for fig in summary["figures"]:
        assert (tmp_path / fig).stat().st_size > 1000
    # plot functions draw into a given axis and return its figure
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from figures.toy_training import load_results, metric_curve, plot_metric_vs_delay

    fig, ax = plt.subplots()
    rows = load_results(tmp_path)
    assert plot_metric_vs_delay(rows, "final_objective", ax=ax) is fig
    assert len(ax.lines) >= 3
    curve = metric_curve(tmp_path / rows[0]["point"], "policy/objective")
    assert list(curve["step"]) == list(range(8))
    assert (curve["lo"] <= curve["mean"]).all() and (curve["mean"] <= curve["hi"]).all()
    plt.close(fig)


def test_parallel_experiment_writes_the_records_of_a_serial_one(tmp_path: Path) -> None:
    config = ExperimentConfig.from_dict(
        {
            "name": "jobs",
            "kind": "delay_sweep",
            "base": {**TINY, "total_steps": 8, "seeds": [0, 1]},
            "grid": {"method": ["gmc", "tic", "grpo"], "delay": [0, 3]},
        }
    )
    serial = run_experiment(config, tmp_path / "serial", progress=False)
    parallel = run_experiment(config, tmp_path / "parallel", progress=False, jobs=2)
    assert serial["results"] == parallel["results"]
    assert serial["orderings"] == parallel["orderings"]
    for label, _, _ in config.points():
        assert _lines(tmp_path / "serial" / label) == _lines(tmp_path / "parallel" / label)


def test_t_interval_and_verdicts() -> None:
    stat = t_interval([1.0, 2.0, 3.0])
    assert stat["mean"] == 2.0
    assert stat["hi"] - 2.0 == pytest.approx(4.302652729749464 / 3**0.5)  # t_{0.975, 2}
    assert verdict([{"mean": 1.0, "lo": 0.5, "hi": 1.5}]) == "holds"
    assert verdict([{"mean": 1.0, "lo": -0.5, "hi": 2.5}]) == "holds (not significant)"
    assert verdict([{"mean": -1.0, "lo": -1.5, "hi": -0.5}]) == "does not hold"
    assert verdict([{"mean": -1.0, "lo": -1.5, "hi": -0.5}], sign=-1.0) == "holds"


def test_eps_star_fit_recovers_known_exponents() -> None:
    rows = []
    eps_grid = [0.01 * 1.25**k for k in range(40)]
    for n in (100, 200, 400, 800):
        for tau4 in (10.0, 1e3, 1e5):
            star = 0.5 * tau4 ** (1 / 7) * n ** (-3 / 14)
            for eps in eps_grid:
                rows.append(
                    {
                        "method": "gmc",
                        "total_steps": n,
                        "delay": int(tau4),
                        "eps": eps,
                        "lag_tau4": tau4,
                        "final_objective": 0.0,
                        "convergence_metric": (torch.log(torch.tensor(eps / star))) ** 2 + 1,
                    }
                )
    for row in rows:
        row["convergence_metric"] = float(row["convergence_metric"])
    fit = eps_star_fit(rows)
    assert fit["tau4_exponent"] == pytest.approx(1 / 7, abs=0.01)
    assert fit["n_exponent"] == pytest.approx(-3 / 14, abs=0.01)
    assert fit["censored_cells"] == 0


def test_eps_star_flat_tail_is_censored_not_fitted() -> None:
    # GMC equals IS once the cap is never hit: the metric is exactly flat for large eps.
    rows = [
        {
            "method": "gmc",
            "total_steps": n,
            "delay": d,
            "eps": eps,
            "lag_tau4": float(d**4),
            "final_objective": 0.0,
            "convergence_metric": value,
        }
        for n in (50, 100)
        for d in (4, 16)
        for eps, value in ((0.1, 3.0), (1.0, 2.0), (3.0, 1.5), (10.0, 1.5))
    ]
    fit = eps_star_fit(rows)
    assert fit["censored_cells"] == 4
    assert all(t["censored"] == "above" and t["eps_star"] == 3.0 for t in fit["table"])
    assert "tau4_exponent" not in fit


def test_shipped_configs_are_valid() -> None:
    files = sorted(CONFIG_DIR.glob("train_*.json"))
    names = {p.stem.removeprefix("train_") for p in files}
    assert set(QUICK_EXPERIMENTS) <= names
    for name in QUICK_EXPERIMENTS:
        assert name.replace("quick", "full") in names
    for path in files:
        config = ExperimentConfig.from_file(path)
        assert config.points()
        data = json.loads(path.read_text())
        assert "_comment" in data  # where the paper's values come from
    quick = ExperimentConfig.from_file(shipped_experiment("delay_quick"))
    assert {p[1].method for p in quick.points()} == {
        "is",
        "grpo",
        "tic",
        "gmc",
        "vcpo",
        "gac",
        "a3po",
    }
    assert all(len(p[1].seeds) >= 5 for p in quick.points())


def test_experiment_config_errors() -> None:
    with pytest.raises(ValueError, match="kind='tables'"):
        ExperimentConfig(kind="tables")
    with pytest.raises(ValueError, match=r"unknown TrainConfig fields \['delays'\]"):
        ExperimentConfig(grid={"delays": [1]})
    with pytest.raises(ValueError, match="different lengths"):
        ExperimentConfig(zip={"total_steps": [1, 2], "lr": [0.1]})


def test_cli_run_single_and_experiment(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args = parser.parse_args(
        [
            "--method",
            "gmc",
            "--delay",
            "2",
            "--steps",
            "4",
            "--seeds",
            "0,1",
            "--num-prompts",
            "2",
            "--max-length",
            "3",
            "--group-size",
            "4",
            "--num-groups",
            "2",
            "--out",
            str(tmp_path / "one"),
            "--no-progress",
        ]
    )
    assert train_cli.run(args) == 0
    assert "final J" in capsys.readouterr().out
    assert len(read_jsonl(tmp_path / "one" / "metrics.jsonl")) == 8
    cfg = {
        "name": "cli_exp",
        "kind": "group_size",
        "base": {**TINY, "total_steps": 4, "seeds": [0, 1], "delay": 2},
        "grid": {"method": ["gmc", "tic"], "group_size": [2, 4]},
    }
    path = tmp_path / "exp.json"
    path.write_text(json.dumps(cfg))
    args = parser.parse_args(
        ["--config", str(path), "--out", str(tmp_path / "exp"), "--no-progress", "--no-figures"]
    )
    assert train_cli.run(args) == 0
    assert "larger G helps GMC" in capsys.readouterr().out
    bad = parser.parse_args(["--method", "ppo", "--out", str(tmp_path / "bad")])
    with pytest.raises(SystemExit, match="TrainConfig.method='ppo'"):
        train_cli.run(bad)
