"""The sweep: config checks, resumability, the results table, the CLI and the figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gmc_grpo.json_files import read_json, read_jsonl
from toy_mdps.cli import COMMANDS, main
from toy_mdps.problem import CONFIG_DIR
from toy_mdps.sweep import TABLE_COLUMNS, grid_points, row_key, run_sweep
from toy_mdps.sweep.analysis import fit_log_log_slope, gmc_below_tic
from toy_mdps.sweep.config import SweepConfig

torch.set_num_threads(1)

SWEEP_CONFIGS = ("quick", "full", "direct")  # the sweep configs shipped in toy_mdps/configs/

TINY = {
    "name": "tiny",
    "num_prompts": 2,
    "vocab_size": 3,
    "max_length": 3,
    "trajectory_steps": 6,
    "lr": 5.0,
    "delays": [0, 3, 6],
    "group_sizes": [2, 4],
    "eps_values": [0.1, 0.28],
    "num_groups": 2,
    "num_minibatches": 30,
    "seeds": [0],
    "figures": False,
}


def _numbers(rows: list[dict]) -> list[tuple]:
    return [
        (row_key(r), r["estimator/bias_sq"], r["estimator/second_moment"], r["ratio/removed_mass"])
        for r in rows
    ]


def test_sweep_writes_table_summary_and_resumes(tmp_path: Path) -> None:
    config = SweepConfig.from_dict(TINY)
    full = run_sweep(config, tmp_path / "a", progress=False)
    n_points = len(list(grid_points(config)))
    # 3 delays x 2 G x (4 eps-free methods + 2 capped methods x 2 eps)
    assert n_points == 3 * 2 * (4 + 2 * 2) == len(full)
    run = tmp_path / "a"
    for name in ("config.json", "metrics.jsonl", "results.csv", "summary.json"):
        assert (run / name).exists()
    header = (run / "results.csv").read_text().splitlines()[0].split(",")
    assert header == list(TABLE_COLUMNS)
    summary = read_json(run / "summary.json")
    assert summary["num_rows"] == n_points
    assert summary["claims"]["is_unbiased"]["of"] == 6
    # Kill simulation: keep 17 rows and a torn 18th line, then resume.
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join(lines[:17]) + "\n" + lines[17][:25])
    (run / "summary.json").unlink()
    resumed = run_sweep(config, run, progress=False)
    assert sorted(_numbers(resumed)) == sorted(_numbers(full))
    assert len(read_jsonl(run / "metrics.jsonl")) == n_points
    # A second resume has nothing left to do and changes nothing.
    again = run_sweep(config, run, progress=False)
    assert _numbers(again) == _numbers(resumed)


def test_parallel_sweep_writes_the_rows_of_a_serial_one(tmp_path: Path) -> None:
    """`jobs=2` (two worker processes, one thread each) resumes a partial serial sweep and
    writes, in grid order, the same rows as the serial sweep."""
    config = SweepConfig.from_dict(TINY)
    with pytest.raises(ValueError, match=r"jobs=0 \(--jobs\): must be >= 1"):
        run_sweep(config, tmp_path / "none", progress=False, jobs=0)  # refused before writing
    assert not (tmp_path / "none").exists()
    serial = run_sweep(config, tmp_path / "serial", progress=False)
    run = tmp_path / "parallel"
    run_sweep(config, run, progress=False)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join(lines[:13]) + "\n")  # stopped mid-cell
    (run / "summary.json").unlink()
    parallel = run_sweep(config, run, progress=False, jobs=2)

    def strip(rows: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "perf/wall_s"} for r in rows]

    assert strip(parallel) == strip(serial)
    assert [r["step"] for r in parallel] == list(range(len(serial)))


def test_sweep_rows_check_the_chain(tmp_path: Path) -> None:
    rows = run_sweep(SweepConfig.from_dict(TINY), tmp_path / "b", progress=False)
    for r in rows:
        assert r["chain/kl_drift_bound_holds"] is True
        if r["method"] in ("tic", "gmc"):
            assert r["chain/removed_mass_bound"] is not None
            assert r["chain/removed_mass_bound_holds"] is True
        if r["staleness"] == 0:
            assert r["ratio/kl_exact"] == 0.0
            assert r["estimator/bias_sq_lo"] <= 0.0
            assert r["ratio/removed_mass"] in (0.0, None)
        assert r["estimator/bias_sq_lo"] <= r["estimator/bias_sq"] <= r["estimator/bias_sq_hi"]


def test_resume_with_a_different_config_is_refused(tmp_path: Path) -> None:
    run_sweep(SweepConfig.from_dict({**TINY, "delays": [0]}), tmp_path / "c", progress=False)
    with pytest.raises(ValueError, match="num_minibatches"):
        run_sweep(
            SweepConfig.from_dict({**TINY, "delays": [0], "num_minibatches": 31}), tmp_path / "c"
        )
    fresh = run_sweep(
        SweepConfig.from_dict({**TINY, "delays": [0], "num_minibatches": 31}),
        tmp_path / "c",
        fresh=True,
        progress=False,
    )
    assert all(r["num_minibatches"] == 31 for r in fresh)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"delays": [0, 99]}, "delays"),
        ({"group_sizes": [1]}, "group_sizes"),
        ({"methods": ["gac"]}, "methods"),
        ({"eps_values": [0.0]}, "eps_values"),
        ({"num_minibatches": 2}, "num_minibatches"),
        ({"behavior": "direct", "target_kls": []}, "target_kls"),
        ({"pattern_length": 4}, "pattern_length"),
        ({"confidence": 1.5}, "confidence"),
        ({"seeds": [1, 1]}, "seeds"),
        ({"direction": "up"}, "direction"),
    ],
)
def test_config_errors_name_field_and_value(override: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"SweepConfig\.{field}="):
        SweepConfig.from_dict({**TINY, **override})


def test_unknown_config_key_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown SweepConfig fields"):
        SweepConfig.from_dict({**TINY, "group_size": 4})
    with pytest.raises(ValueError, match="gmc-grpo toy train"):
        SweepConfig.from_dict({**TINY, "kind": "train"})
    assert SweepConfig.from_dict({**TINY, "kind": "sweep"}).name == "tiny"


# name -> (grid points, staleness values, group sizes), worked out by hand from each file:
# points = seeds x staleness x G x (4 methods without eps + TIC and GMC once per eps value)
SHIPPED_GRIDS = {
    "quick": (3 * 4 * 4 * (4 + 2 * 1), [0, 16, 32, 64], [2, 8, 32, 128]),  # 288
    "full": (3 * 7 * 7 * (4 + 2 * 3), [0, 4, 8, 16, 32, 48, 64], [2, 4, 8, 16, 32, 64, 128]),
    "direct": (3 * 6 * 3 * (4 + 2 * 1), [0.0, 0.1, 0.5, 1.0, 2.0, 4.0], [2, 8, 32]),  # target KLs
}


@pytest.mark.parametrize("name", SWEEP_CONFIGS)
def test_shipped_configs_hold_the_grid_their_file_says(name: str) -> None:
    """Every field of a shipped file reaches the config unchanged, and the grid crosses seeds,
    staleness values, group sizes, methods and (for TIC and GMC only) eps, as counted by hand."""
    path = CONFIG_DIR / f"{name}.json"
    config = SweepConfig.from_file(path)
    for key, value in json.loads(path.read_text()).items():
        if not key.startswith("_"):
            assert getattr(config, key) == value, key
    count, staleness, group_sizes = SHIPPED_GRIDS[name]
    assert config.staleness_values == staleness and config.group_sizes == group_sizes
    assert config.methods == ["is", "grpo", "tic", "gmc", "vcpo", "a3po"]
    points = list(grid_points(config))
    assert len(points) == len(set(points)) == count
    assert {p[0] for p in points} == {0, 1, 2}  # seeds
    assert [p[2] for p in points if p[0] == 0 and p[3] == group_sizes[0] and p[4] == "is"] == (
        staleness
    )  # staleness values in order, with their index
    assert all(p[1] == staleness.index(p[2]) for p in points)
    eps_of = {m: sorted({p[5] for p in points if p[4] == m}, key=str) for m in config.methods}
    assert eps_of["tic"] == eps_of["gmc"] == sorted(config.eps_values)
    assert all(eps_of[m] == [None] for m in ("is", "grpo", "vcpo", "a3po"))


def test_direct_mode_sweep(tmp_path: Path) -> None:
    cfg = {**TINY, "behavior": "direct", "target_kls": [0.0, 0.3], "direction": "suppress"}
    rows = run_sweep(SweepConfig.from_dict(cfg), tmp_path / "d", progress=False)
    kls = sorted({round(r["ratio/kl_exact"], 3) for r in rows})
    assert kls == [0.0, 0.3]


def test_cli_sweep_and_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "sweep" in COMMANDS
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    config_path = tmp_path / "tiny.json"
    config_path.write_text(json.dumps({**TINY, "delays": [0, 6], "group_sizes": [2]}))
    out = tmp_path / "run"
    code = main(
        [
            "sweep",
            "--config",
            str(config_path),
            "--out",
            str(out),
            "--no-progress",
            "--methods",
            "is,gmc",
        ]
    )
    assert code == 0
    rows = read_jsonl(out / "metrics.jsonl")
    assert {r["method"] for r in rows} == {"is", "gmc"}
    assert "is_unbiased" in capsys.readouterr().out
    bad = ["sweep", "--config", str(config_path), "--out", str(out), "--group-sizes", "1"]
    assert main(bad) == 2  # one line naming the field, exit status 2
    assert "SweepConfig.group_sizes=[1]" in capsys.readouterr().err


def test_cli_help_does_not_import_torch() -> None:
    code = "import sys, toy_mdps.cli as c; c.build_parser(); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_log_log_slope_recovers_a_power_law() -> None:
    points = [(g, 0.5 * g**-1.5, 0.01 * 0.5 * g**-1.5) for g in (2, 4, 8, 16)]
    fit = fit_log_log_slope(points, 1.96)
    assert abs(fit["slope"] + 1.5) < 1e-9
    assert fit["slope_lo"] < -1.5 < fit["slope_hi"]
    flat = fit_log_log_slope([(2, 1.0, 0.1), (8, 0.0, 0.1)], 1.96)
    assert flat["slope"] is None and flat["n_zero"] == 1
    assert fit["n_points"] == 4 and flat["n_points"] == 1


def test_gmc_below_tic_is_paired_over_seeds() -> None:
    def row(method: str, seed: int, g: int, bias: float) -> dict:
        return {
            "method": method,
            "staleness": 16.0,
            "eps": 0.28,
            "group_size": g,
            "seed": seed,
            "estimator/relative_bias_sq": bias,
        }

    rows = []
    for seed, (tic2, gmc2, tic8, gmc8) in enumerate(
        [(0.60, 0.01, 0.30, 0.31), (0.62, 0.02, 0.30, 0.28), (0.61, 0.01, 0.30, 0.30)]
    ):
        rows += [row("tic", seed, 2, tic2), row("gmc", seed, 2, gmc2)]
        rows += [row("tic", seed, 8, tic8), row("gmc", seed, 8, gmc8)]
    claim = gmc_below_tic(rows)
    assert (claim["holds"], claim["of"], claim["not_significant"]) == (1, 2, 1)
    assert claim["num_seeds"] == 3
    by_g = {p["group_size"]: p for p in claim["points"]}
    assert by_g[2]["verdict"] == "holds" and by_g[2]["mean"] == pytest.approx(-0.5967, abs=1e-4)
    assert by_g[8]["verdict"] == "not significant"
    one_seed = gmc_below_tic([r for r in rows if r["seed"] == 0])
    assert one_seed["holds"] == 0 and one_seed["not_significant"] == 2  # one seed is no evidence


def test_seed_flags_and_quick_sizes(tmp_path: Path) -> None:
    """--mdp-seed, --init-seed and --seed reach the config; each changes what it should."""
    config_path = tmp_path / "tiny.json"
    tiny = {**TINY, "delays": [6], "group_sizes": [2], "methods": ["is"], "num_minibatches": 500}
    config_path.write_text(json.dumps(tiny))

    def sweep(name: str, *flags: str) -> list[dict]:
        argv = ["sweep", "--config", str(config_path), "--out", str(tmp_path / name)]
        assert main([*argv, "--no-progress", *flags]) == 0
        return read_jsonl(tmp_path / name / "metrics.jsonl")

    base = sweep("base")
    sampled = sweep("sampled", "--seed", "7")
    problem = sweep("problem", "--init-seed", "1")
    other_mdp = sweep("mdp", "--mdp-seed", "5")
    cfg = read_json(tmp_path / "sampled" / "config.json")["config"]
    assert (cfg["run_seed"], cfg["init_seed"], cfg["mdp_seed"]) == (7, 0, 0)
    exact = "policy/objective"  # depends on theta_0 and the MDP, not on the samples
    assert sampled[0][exact] == base[0][exact]
    assert sampled[0]["estimator/second_moment"] != base[0]["estimator/second_moment"]
    assert problem[0][exact] != base[0][exact]
    assert other_mdp[0][exact] != base[0][exact]
    # --quick with --config: the given grid at the quick sweep's sizes
    quick = SweepConfig.from_dict({**TINY, "seeds": [0, 1, 2, 3], "num_minibatches": 5000})
    small = quick.quick_sizes()
    assert small.seeds == [0, 1, 2] and small.num_minibatches == 400
    assert small.delays == quick.delays and small.group_sizes == quick.group_sizes
