"""Toy training runs: records, resumption, experiments, shipped configs and the CLI entry point."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
import torch

from gmc_grpo.json_files import read_json, read_jsonl
from gmc_grpo.records import METRIC_NAMES
from gmc_grpo.state_files import list_checkpoints
from gmc_grpo.stats import t_interval
from pipeline.toy import draw_figures
from toy_mdps.problem import CONFIG_DIR
from toy_mdps.train import cli as train_cli
from toy_mdps.train.analysis import (
    best_eps,
    eps_star_fit,
    equivalence_verdict,
    gmc_tic_gap,
    interior_test,
    verdict,
)
from toy_mdps.train.config import (
    QUICK_EXPERIMENTS,
    ExperimentConfig,
    ToyTrainConfig,
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
        ("gmc", "fixed_delay", {"delay": 3}),
        ("gac", "fixed_delay", {"delay": 3}),
        ("vcpo", "length_coupled", {}),
        ("a3po", "workers", {**WORKERS, "drift_max_lag": 4}),
        ("gmc", "workers", {**WORKERS, "generation_time": "exponential", "update_time": 0.3}),
    ],
)
def test_killed_run_resumes_to_identical_records(
    tmp_path: Path, method: str, schedule: str, extra: dict
) -> None:
    cfg = ToyTrainConfig(
        **TINY,
        method=method,
        schedule=schedule,
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
    assert sorted(list_checkpoints(killed)) == [8]
    assert not (killed / "summary.json").exists()
    with open(killed / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 10, "seed": 0, "policy/obj')  # torn line of the kill
    resumed = train(cfg, killed)
    assert _lines(killed) == _lines(tmp_path / "full")
    assert resumed == full
    assert sorted(list_checkpoints(killed)) == [12]  # the final one stays (for --extend-to)
    # a finished run is reused, not recomputed
    assert train(cfg, killed) == full


def test_records_have_one_row_per_step_per_seed_with_namespaced_metrics(tmp_path: Path) -> None:
    cfg = ToyTrainConfig(**TINY, method="tic", delay=2, total_steps=5, seeds=[3, 7])
    summary = train(cfg, tmp_path)
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["seed"]) for r in rows] == [(n, s) for n in range(5) for s in (3, 7)]
    for key in rows[0]:
        assert key in ("step", "seed") or key in METRIC_NAMES, key
    assert read_json(tmp_path / "config.json")["config"] == cfg.to_dict()
    conv = sum(r["policy/grad_norm_sq"] for r in rows if r["seed"] == 3) / 5
    assert summary["per_seed"]["3"]["convergence_metric"] == pytest.approx(conv, rel=1e-12)
    assert summary["per_seed"]["7"]["lag_tau4"] == pytest.approx((0 + 1 + 16 * 3) / 5)
    with pytest.raises(ValueError, match='method: "tic" -> "gmc"'):
        train(ToyTrainConfig(**TINY, method="gmc", total_steps=5, seeds=[3, 7]), tmp_path)


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
        assert claim["verdict"] in ("holds", "not significant", "does not hold")
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
    # a job count below 1 is refused before anything is written
    with pytest.raises(ValueError, match=r"jobs=0 \(--jobs\): must be >= 1"):
        run_experiment(config, tmp_path / "none", progress=False, jobs=0)
    assert not (tmp_path / "none").exists()


def test_t_interval_and_verdicts() -> None:
    stat = t_interval([1.0, 2.0, 3.0])
    assert stat["mean"] == 2.0
    assert stat["hi"] - 2.0 == pytest.approx(4.302652729749464 / 3**0.5)  # t_{0.975, 2}
    assert verdict([{"mean": 1.0, "lo": 0.5, "hi": 1.5}]) == "holds"
    # a mean on the claimed side with 0 inside the interval is not evidence (the old
    # "holds (not significant)" for a change of 0.0007)
    assert verdict([{"mean": 0.0007, "lo": -0.5, "hi": 0.5}]) == "not significant"
    assert verdict([{"mean": -0.1, "lo": -0.5, "hi": 0.3}]) == "not significant"
    assert verdict([{"mean": -1.0, "lo": -1.5, "hi": -0.5}]) == "does not hold"
    assert verdict([{"mean": -1.0, "lo": -1.5, "hi": -0.5}], sign=-1.0) == "holds"
    assert verdict([{"mean": 1.0, "lo": 0.5, "hi": 1.5}], sign=-1.0) == "does not hold"
    # every difference must hold; one significant contradiction decides
    two = [{"mean": 1.0, "lo": 0.5, "hi": 1.5}, {"mean": 1.0, "lo": -0.5, "hi": 2.5}]
    assert verdict(two) == "not significant"
    assert verdict([two[0], {"mean": -1.0, "lo": -2.0, "hi": -0.1}]) == "does not hold"
    one_seed = {"mean": 1.0, "lo": -math.inf, "hi": math.inf}  # t_interval of one value
    assert verdict([one_seed]) == "not significant"


def test_equivalence_verdict() -> None:
    inside = {"mean": 0.001, "lo": -0.004, "hi": 0.006}
    assert equivalence_verdict([inside], 0.01) == "holds"
    assert equivalence_verdict([{"mean": 0.0, "lo": -0.02, "hi": 0.02}], 0.01) == "not significant"
    assert equivalence_verdict([inside, {"mean": 0.05, "lo": 0.03, "hi": 0.07}], 0.01) == (
        "does not hold"
    )


def _seed_values(values: dict[str, list[float]], key: str) -> dict[str, dict[str, dict]]:
    """Per point, per seed, `{key: value}`: the per-seed records the analyses take."""
    return {
        point: {str(s): {key: v} for s, v in enumerate(per_seed)}
        for point, per_seed in values.items()
    }


def test_interior_eps_star_is_tested_against_both_neighbours() -> None:
    """Hand-made per-seed metrics: a clear interior minimum at eps = 1, a noisy one, an edge."""
    values = {
        "clear_0.1": [3.0, 3.1, 2.9, 3.0],
        "clear_1": [1.0, 1.1, 0.9, 1.0],
        "clear_10": [2.0, 2.1, 1.9, 2.0],
        "noisy_0.1": [1.0, 3.0, 1.0, 3.0],
        "noisy_1": [1.9, 1.8, 1.9, 1.8],
        "noisy_10": [3.0, 1.0, 3.0, 1.0],
    }
    per_seed = _seed_values(values, "convergence_metric")

    def cell(prefix: str) -> list[dict]:
        return [
            {"point": f"{prefix}_{e:g}", "eps": e, "convergence_metric": sum(v) / 4}
            for e, v in zip(
                (0.1, 1.0, 10.0), (values[f"{prefix}_{x}"] for x in ("0.1", "1", "10")), strict=True
            )
        ]

    for prefix, expected in (("clear", "holds"), ("noisy", "not significant")):
        rows = cell(prefix)
        best = best_eps([r["eps"] for r in rows], [r["convergence_metric"] for r in rows])
        test = interior_test(rows, "convergence_metric", best, per_seed)
        assert best["eps_star_grid"] == 1.0 and test["verdict"] == expected
        assert test["neighbours"] == [0.1, 10.0]
    # the best at the grid's edge, significantly better than its neighbour: not interior
    rows = cell("clear")[1:]  # eps 1 (best, now the smallest) and 10
    best = best_eps([r["eps"] for r in rows], [r["convergence_metric"] for r in rows])
    assert best["censored"] == "below"
    assert interior_test(rows, "convergence_metric", best, per_seed)["verdict"] == "does not hold"


def test_gmc_tic_gap_pairs_points_and_reports_the_theory_factors() -> None:
    per_seed = _seed_values({"g": [1.0, 2.0, 4.0], "t": [2.0, 4.0, 8.0]}, "convergence_metric")
    common = dict(delay=16, schedule="fixed_delay", group_size=8, eps=0.28, total_steps=10, lr=5.0)
    rows = [dict(common, method="gmc", point="g"), dict(common, method="tic", point="t")]
    (gap,) = gmc_tic_gap(rows, per_seed)
    assert gap["ratio"]["mean"] == pytest.approx(0.5) and gap["ratio"]["lo"] == pytest.approx(0.5)
    assert gap["ordering"]["verdict"] == "holds"
    # (c_eps / log(1+2eps))^(2/5) at eps = 0.28, c_eps = log(1.28) - 0.28/1.28
    c = math.log(1.28) - 0.28 / 1.28
    assert gap["theory_denominator_ratio"] == pytest.approx(c / math.log(1.56))
    assert gap["theory_tuned_factor"] == pytest.approx((c / math.log(1.56)) ** 0.4)
    assert gap["theory_tuned_factor"] == pytest.approx(0.331, abs=5e-4)


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


def test_quick_sizes_shrink_a_grid_and_keep_its_ratios() -> None:
    full = ExperimentConfig.from_file(shipped_experiment("eps_full"))
    quick = full.quick_sizes()
    assert quick.name == "eps_full_quick"
    # 800 steps is the largest: every value divided by 800 / 150 (rounded), lr untouched
    assert quick.zip["total_steps"] == [19, 38, 75, 150]
    assert quick.zip["lr"] == full.zip["lr"]
    assert quick.base["seeds"] == [0, 1, 2, 3, 4]
    assert (quick.base["num_prompts"], quick.base["max_length"]) == (4, 5)
    # delays by the same factor 16/3: D/N kept, so D = 64 stays below N = 19 (12 < 19)
    assert quick.grid == {**full.grid, "delay": [1, 3, 12]}
    delay = ExperimentConfig.from_file(shipped_experiment("delay_full")).quick_sizes()
    assert delay.base["total_steps"] == 150 and delay.base["checkpoint_every"] == 151
    # 400 -> 150 steps: factor 8/3, delays 0, 8, 16, 32, 64, 128 -> 0, 3, 6, 12, 24, 48
    assert delay.grid["delay"] == [0, 3, 6, 12, 24, 48]


def test_experiment_config_errors() -> None:
    with pytest.raises(ValueError, match="kind='tables'"):
        ExperimentConfig(kind="tables")
    with pytest.raises(ValueError, match=r"unknown ToyTrainConfig fields \['delays'\]"):
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
    # seeds as flags: each reaches its field; --quick with --config shrinks the given grid
    args = parser.parse_args(
        ["--config", str(path), "--quick", "--mdp-seed", "3", "--init-seed", "4", "--seed", "5"]
        + ["--out", str(tmp_path / "seeded"), "--no-progress", "--no-figures"]
    )
    assert train_cli.run(args) == 0
    config = read_json(tmp_path / "seeded" / "cli_exp_quick" / "experiment.json")
    assert config["name"] == "cli_exp_quick"
    assert {k: config["base"][k] for k in ("mdp_seed", "init_seed", "run_seed")} == {
        "mdp_seed": 3,
        "init_seed": 4,
        "run_seed": 5,
    }
    run = read_json(
        tmp_path / "seeded" / "cli_exp_quick" / "method=gmc_group_size=2" / "config.json"
    )["config"]
    assert (run["mdp_seed"], run["init_seed"], run["run_seed"]) == (3, 4, 5)
    bad = parser.parse_args(["--method", "ppo", "--out", str(tmp_path / "bad")])
    with pytest.raises(ValueError, match="ToyTrainConfig.method='ppo'"):
        train_cli.run(bad)
