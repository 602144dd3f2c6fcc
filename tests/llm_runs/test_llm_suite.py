"""Suites over seeds and methods (`llm_runs.suite`): the paired analysis against a hand
computation, records that depend neither on sharing the initial policy and its rollouts nor on
how the runs are spread over processes, and the same records for the same seed."""

from __future__ import annotations

import json
import math
import os
import queue

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import CPU_RUN, one_thread, quiet  # noqa: E402, F401

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from llm_runs.suite import (  # noqa: E402
    SuiteConfig,
    analyse_records,
    analyse_suite,
    run_measures,
    run_suite,
    sampled_curve_area,
    shared_prefix,
    verdict,
)
from llm_runs.train import Trainer  # noqa: E402

# t quantiles of a two-sided 95% interval, by hand from tables: df = 1 and df = 2
T_975_DF1 = 12.706204736174703
T_975_DF2 = 4.302652729749464

# a seconds-long run that earns some reward: a 1-layer model, 40 warm-up steps on sums of 0..3
BASE = dict(
    CPU_RUN,
    tiny_model={"seed": 0, "num_layers": 1, "hidden_size": 64, "intermediate_size": 128},
    task="arithmetic",
    reward="exact",
    arithmetic={"max_operand": 3, "num_train": 12, "num_eval": 4},
    sft_steps=40,
    sft_lr=3e-3,
    sft_batch_size=16,
    num_groups=4,
    group_size=4,
    groups_per_micro=4,
    total_steps=5,
    lr=1e-3,
    max_prompt_tokens=32,
    max_completion_tokens=8,
    delay=2,
    eval_every=5,
    eval_samples=2,
)


def strip(rows):
    """Rows without wall-clock and memory fields (the only ones allowed to differ)."""
    return [
        {k: v for k, v in r.items() if not k.startswith("perf/") and k != "time_s"} for r in rows
    ]


def records(folder):
    return strip(read_jsonl(folder / "metrics.jsonl")), strip(read_jsonl(folder / "evals.jsonl"))


def test_paired_intervals_by_hand():
    """Hand-worked intervals: 2 seeds (t = 12.706) and 3 seeds (t = 4.303), and the verdicts."""
    measures = {}
    for seed, (tic, gmc) in enumerate([(0.2, 0.3), (0.1, 0.4)]):
        measures[(16, "tic", seed)] = {"consumed_reward_final": tic, "mean_reward": tic}
        measures[(16, "gmc", seed)] = {"consumed_reward_final": gmc, "mean_reward": gmc + 0.5}
    analysis = analyse_records(measures)
    row = next(r for r in analysis.paired if r["measure"] == "consumed_reward_final")
    # differences 0.1 and 0.3: mean 0.2, sd 0.1 sqrt(2), half-width t sd / sqrt(2) = 0.1 t
    assert (row["a"], row["b"], row["n"], row["seeds"]) == ("gmc", "tic", 2, [0, 1])
    assert row["mean"] == pytest.approx(0.2)
    assert row["half_width"] == pytest.approx(0.1 * T_975_DF1)
    assert row["lo"] == pytest.approx(0.2 - 1.2706204736) and row["verdict"] == "not resolved"
    interval = analysis.intervals[(16, "tic", "consumed_reward_final")]  # 0.2, 0.1: mean 0.15
    assert interval["mean"] == pytest.approx(0.15)
    assert interval["hi"] - interval["mean"] == pytest.approx(0.05 * T_975_DF1)
    three = analyse_records(
        {
            (0, m, s): {"consumed_reward_final": base + d}
            for s, d in enumerate([0.0, 0.1, 0.2])
            for m, base in (("grpo", 0.0), ("gmc", 0.5 + 0.1 * s))
        }
    )
    # gmc - grpo = 0.5, 0.6, 0.7: mean 0.6, sd 0.1, half-width 4.3027 * 0.1 / sqrt(3) = 0.24841
    row = next(r for r in three.paired if (r["a"], r["b"]) == ("gmc", "grpo"))
    assert row["half_width"] == pytest.approx(T_975_DF2 * 0.1 / math.sqrt(3))
    assert row["lo"] == pytest.approx(0.6 - 0.2484138) and row["verdict"] == "holds"
    assert verdict({"mean": -1.0, "lo": -1.5, "hi": -0.5, "n": 3}) == "reversed"
    assert verdict({"mean": 0.3, "lo": -math.inf, "hi": math.inf, "n": 1}) == "one seed"
    # its Markdown: tests/pipeline/test_pipeline_llm_report.py


def test_run_measures_read_the_last_updates_and_the_last_evaluation():
    metrics = [{"step": i, "reward/mean": float(i)} for i in range(20)]
    evals = [
        {"step": 0, "decoding": "greedy", "accuracy": 0.1},
        {"step": 20, "decoding": "greedy", "accuracy": 0.4},
        {"step": 20, "decoding": "sampled", "avg_at_n": 0.3, "pass_at_k": {"1": 0.35}},
    ]
    got = run_measures(metrics, evals, final_fraction=0.1)
    assert got == {
        "consumed_reward_final": 18.5,  # last 2 of 20 updates
        "mean_reward": 9.5,
        "rise": 18.0,  # 18.5 - mean of the first 2
        "greedy": 0.4,
        "sampled": 0.35,
        "reward_timeouts": None,  # records written before the scorer counted its timeouts
        "eval_timeouts": None,
        "sampled_area": 0.35,  # one sampled evaluation: its value
        "collapsed": 0.0,  # consumed reward 18.5 >= COLLAPSE_BELOW
        "behavior_kl": None,  # no bound tracker
        "group_share_max": None,
        "group_ess": None,
    }
    # issue 36: the answers a scorer timeout made incorrect, beside the rewards and Pass@1
    metrics[3]["reward/scoring_timeouts"] = 2
    metrics[4]["reward/scoring_timeouts"] = 0
    evals[0]["scoring_timeouts"] = 5  # an earlier evaluation: not the last one's
    evals[1]["scoring_timeouts"] = 1
    evals[2]["scoring_timeouts"] = 3
    got = run_measures(metrics, evals, final_fraction=0.1)
    assert (got["reward_timeouts"], got["eval_timeouts"]) == (2.0, 4.0)
    assert run_measures(metrics, [], 0.25)["consumed_reward_final"] == 17.0  # last 5 of 20: 15..19
    assert run_measures(metrics, [], 0.25)["greedy"] is None


def test_run_measures_read_the_regime_and_the_collapse():
    """The median of the tracked KL (lag-0 rows count as measured 0), the median of the
    applied weights' largest group share (the ratios' where a method logs none), collapse."""
    metrics = [
        {"step": 0, "reward/mean": 0.5, "bounds/kl_estimate": 0.0, "ratio/group_share_max": 0.2},
        {"step": 1, "reward/mean": 0.3, "weight/group_share_max": 0.5, "ratio/group_ess_mean": 0.9},
        {"step": 2, "reward/mean": 0.05, "bounds/kl_estimate": 0.4},
        {"step": 3, "reward/mean": 0.04, "bounds/kl_estimate": 3.0, "weight/group_share_max": 0.9},
    ]
    got = run_measures(metrics, [], final_fraction=0.5)
    assert got["behavior_kl"] == pytest.approx(0.4)  # median of 0, 0.4, 3
    assert got["group_share_max"] == pytest.approx(0.5)  # median of 0.2, 0.5, 0.9
    assert got["group_ess"] == pytest.approx(0.9)  # the one row that logs it
    assert got["collapsed"] == 1.0  # the last half's consumed reward 0.045 < 0.1
    assert run_measures(metrics[:2], [], final_fraction=0.5)["collapsed"] == 0.0
    assert run_measures([], [])["collapsed"] is None


def test_the_area_under_the_held_out_curve_by_hand():
    assert sampled_curve_area({0: 0.2, 50: 0.4, 150: 0.4}) == pytest.approx(
        (50 * 0.3 + 100 * 0.4) / 150
    )
    assert sampled_curve_area({150: 0.4, 0: 0.2}) == pytest.approx(0.3)  # order does not matter
    assert sampled_curve_area({7: 0.5}) == 0.5
    assert sampled_curve_area({}) is None
    evals = [
        {"step": 0, "decoding": "sampled", "pass_at_k": {"1": 0.1}},
        {"step": 10, "decoding": "sampled", "avg_at_n": 0.3},
        {"step": 10, "decoding": "greedy", "accuracy": 1.0},  # not part of the sampled curve
    ]
    assert run_measures([], evals)["sampled_area"] == pytest.approx(0.2)


def test_shared_prefix_counts_identical_leading_rows():
    a = [{"step": i, "reward/mean": 0.5, "perf/learner_seconds": i} for i in range(5)]
    b = [dict(row, **{"perf/learner_seconds": 9.0}) for row in a]  # timings do not count
    b[1]["mismatch/trajectory_abs_max"] = 0.5  # a side measurement of the engine's lag-0 batch
    b[3]["reward/mean"] = 0.25
    assert shared_prefix(a, b) == 3
    assert shared_prefix(a, a[:2]) == 2
    assert shared_prefix(a, [{"step": 0}]) == 0  # a field only one run has is a difference


def test_sharing_the_initial_policy_and_its_rollouts_changes_no_record(tmp_path):
    """GMC and GRPO at D = 2, with and without a shared cache: identical records. With the cache
    the second method reads the warm-up and the version-0 rollouts (the FIFO fill) of the first;
    another seed misses both."""
    from llm_runs.recipes import config_from_values

    def run(name, method, seed=0, cache=None):
        values = {**BASE, "out": str(tmp_path / name), "method": method, "run_seed": seed}
        trainer = Trainer(config_from_values({**values, "cache_dir": cache}), notice=quiet)
        trainer.run()
        return trainer

    cache = str(tmp_path / "cache")
    first = run("gmc_cached", "gmc", cache=cache)
    second = run("grpo_cached", "grpo", cache=cache)
    assert (first.rollouts.cache.hits, first.rollouts.cache.misses) == (0, 3)  # D + 1 launches
    assert (second.rollouts.cache.hits, second.rollouts.cache.misses) == (3, 0)
    assert len(list((tmp_path / "cache" / "initial_models").glob("*/key.json"))) == 1
    other = run("grpo_seed1", "grpo", seed=1, cache=cache)
    assert other.rollouts.cache.hits == 0
    assert len(list((tmp_path / "cache" / "initial_models").glob("*/key.json"))) == 2
    run("gmc_alone", "gmc")
    run("grpo_alone", "grpo")
    rows, _ = records(tmp_path / "gmc_alone")
    assert any(r["reward/mean"] > 0 for r in rows)  # not a trivial run
    for method in ("gmc", "grpo"):
        assert records(tmp_path / f"{method}_cached") == records(tmp_path / f"{method}_alone")
    assert records(tmp_path / "grpo_seed1") != records(tmp_path / "grpo_alone")


def test_a_damaged_cache_entry_is_dropped_and_generated_again(tmp_path):
    """Issue 36: a truncated rollout file (and a damaged initial-policy marker) in the shared
    cache: the next run drops the entry with a notice naming it, generates it again and writes
    the records of a run without the cache."""
    from llm_runs.recipes import config_from_values

    def run(name, cache=None, notes=None):
        values = {**BASE, "out": str(tmp_path / name), "method": "gmc", "run_seed": 0}
        notice = quiet if notes is None else notes.append
        trainer = Trainer(config_from_values({**values, "cache_dir": cache}), notice=notice)
        trainer.run()
        return trainer

    cache = tmp_path / "cache"
    run("first", cache=str(cache))
    (entry,) = sorted((cache / "rollouts").rglob("pos00000000_*.safetensors"))[:1]
    entry.write_bytes(entry.read_bytes()[:-50])  # cut short, as a full disk or a copy leaves it
    (marker,) = list((cache / "initial_models").glob("*/key.json"))
    marker.write_text('{"name": ')
    notes: list[str] = []
    again = run("again", cache=str(cache), notes=notes)
    dropped = [n for n in notes if "dropped a damaged rollout-cache entry" in n]
    assert len(dropped) == 1 and str(entry) in dropped[0] and "generating it again" in dropped[0]
    assert again.rollouts.cache.dropped == 1
    assert (again.rollouts.cache.hits, again.rollouts.cache.misses) == (2, 1)
    run("alone")
    assert records(tmp_path / "again") == records(tmp_path / "alone")


def test_two_seed_two_method_suite(tmp_path):
    """`run_suite` over seeds 0, 1 and TIC, GMC on two processes: one run folder per cell, and
    the analysis equal to a hand computation from the run records. The same suite on one process
    without sharing writes the same records (the same seed gives the same records on one machine,
    however the runs are spread and whatever they share)."""
    two = SuiteConfig(
        out=str(tmp_path / "two"), base=BASE, seeds=(0, 1), methods=("tic", "gmc"), processes=2
    )
    analysis = run_suite(two, render=lambda a: f"{len(a.runs)} runs\n")
    names = sorted(p.name for p in (tmp_path / "two").iterdir() if (p / "summary.json").exists())
    assert names == ["gmc_d2_seed0", "gmc_d2_seed1", "tic_d2_seed0", "tic_d2_seed1"]
    assert (tmp_path / "two" / "suite_summary.md").read_text() == "4 runs\n"  # the renderer's
    assert json.loads((tmp_path / "two" / "suite.json").read_text())["cells"]["seeds"] == [0, 1]

    # by hand: final reward = last update's reward (ceil(0.1 * 5) = 1 update), paired over seeds
    final = {}
    for name in names:
        rows = read_jsonl(tmp_path / "two" / name / "metrics.jsonl")
        assert len(rows) == 5
        final[name] = rows[-1]["reward/mean"]
    diffs = [final[f"gmc_d2_seed{s}"] - final[f"tic_d2_seed{s}"] for s in (0, 1)]
    mean = (diffs[0] + diffs[1]) / 2
    half = T_975_DF1 * abs(diffs[0] - diffs[1]) / 2  # t * (|d0 - d1| / sqrt 2) / sqrt 2
    row = next(r for r in analysis.paired if r["measure"] == "consumed_reward_final")
    assert (row["a"], row["b"], row["delay"]) == ("gmc", "tic", 2)
    assert row["mean"] == pytest.approx(mean, abs=1e-12)
    assert row["lo"] == pytest.approx(mean - half, abs=1e-12)
    assert row["hi"] == pytest.approx(mean + half, abs=1e-12)
    greedy = {}
    for name in names:
        evals = read_jsonl(tmp_path / "two" / name / "evals.jsonl")
        greedy[name] = next(r for r in evals if r["step"] == 5 and r["decoding"] == "greedy")
    g = [
        greedy[f"gmc_d2_seed{s}"]["accuracy"] - greedy[f"tic_d2_seed{s}"]["accuracy"]
        for s in (0, 1)
    ]
    row = next(r for r in analysis.paired if r["measure"] == "greedy")
    assert row["mean"] == pytest.approx(sum(g) / 2, abs=1e-12)
    assert row["hi"] - row["lo"] == pytest.approx(T_975_DF1 * abs(g[0] - g[1]), abs=1e-12)
    assert analyse_suite(tmp_path / "two").paired == analysis.paired  # read back the same

    one = SuiteConfig(
        out=str(tmp_path / "one"),
        base=BASE,
        seeds=(0, 1),
        methods=("tic", "gmc"),
        processes=1,
        share=False,
    )
    run_suite(one)
    assert not (tmp_path / "one" / "cache").exists()
    # without a renderer the track writes the numbers only (the text is the pipeline's)
    assert (tmp_path / "one" / "suite_summary.json").is_file()
    assert not (tmp_path / "one" / "suite_summary.md").exists()
    for name in names:
        assert records(tmp_path / "one" / name) == records(tmp_path / "two" / name), name
    differ = [records(tmp_path / "two" / f"gmc_d2_seed{s}") for s in (0, 1)]
    assert differ[0] != differ[1]  # the seeds are different runs

    # a finished suite is read back, not rerun; another base config is refused
    assert run_suite(two).paired == analysis.paired
    other = SuiteConfig(
        out=str(tmp_path / "two"), base={**BASE, "lr": 1e-4}, seeds=(0,), methods=("gmc",)
    )
    with pytest.raises(ValueError, match="another base config"):
        run_suite(other)


def test_suite_command_line(tmp_path):
    import argparse

    from llm_runs.train_cli import add_arguments, is_suite, suite_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["--recipe", "tiny_delay", "--seeds", "0,1,2", "--methods", "grpo,tic,gmc"]
    )
    assert is_suite(args)
    assert is_suite(parser.parse_args(["--recipe", "tiny", "--seeds", ""]))  # refused, not 1 run
    assert not is_suite(parser.parse_args(["--recipe", "tiny"]))
    suite = suite_from_args(args)
    assert suite.seeds == (0, 1, 2) and suite.methods == ("grpo", "tic", "gmc")
    assert suite.suite_delays == (16,) and suite.out == "runs/tiny_delay_suite"
    assert [r.out for r in suite.runs()][:2] == [
        "runs/tiny_delay_suite/grpo_d16_seed0",
        "runs/tiny_delay_suite/grpo_d16_seed1",
    ]
    bad = [
        (["--seeds", "0,x"], "--seeds '0,x': 'x' is not a whole number"),
        (["--seeds", ""], "--seeds '': give at least one value"),
        (["--seeds", "1,,2"], "--seeds '1,,2': an entry is empty"),
        (["--methods", ""], "--methods '': give at least one value"),
        (["--delays", "0,"], "--delays '0,': an entry is empty"),
        (["--seeds", "0,0"], "distinct seeds"),
        (["--methods", "gmc,nope"], "registered methods"),
        (["--methods", "gmc", "--method", "tic"], "not both"),
        (["--seeds", "0", "--resume"], "drop --resume"),
        (["--seeds", "0", "--extend-to", "300"], "change one run"),
        (["--seeds", "0", "--allow-config-change", "lr"], "change one run"),
    ]
    for extra, message in bad:
        with pytest.raises(ValueError, match=message):
            suite_from_args(parser.parse_args(["--recipe", "tiny_delay", *extra]))


def test_suite_processes_on_gpus_one_per_device_and_never_more(monkeypatch):
    """On CUDA (faked device counts) a suite defaults to one process per visible GPU, each
    pinned to its own GPU (a pair in the two-GPU layout), and refuses more processes than fit;
    CPU runs keep the core rule."""
    from llm_runs.suite import _pin_worker, worker_devices

    cuda = {**BASE, "learner_device": "auto"}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # restored after the test (set below)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    suite = SuiteConfig(out="s", base=cuda, seeds=(0, 1), methods=("gmc",))
    assert suite.worker_devices(gpus=3) == ["0", "1", "2"]
    assert SuiteConfig(out="s", base={**cuda, "layout": "two_gpu"}, seeds=(0,), methods=("gmc",)
                       ).worker_devices(gpus=5) == ["0,1", "2,3"]  # fmt: skip
    with pytest.raises(ValueError, match=r"processes=4: 3 GPU\(s\) visible .* --processes 3"):
        SuiteConfig(out="s", base=cuda, seeds=(0,), methods=("gmc",), processes=4).worker_devices(3)
    assert worker_devices(2, 3, 1, None) == ["0", "1"]
    assert worker_devices(0, 2, 1, "5,7") == ["5", "7"]  # the visible GPUs' own ids
    with pytest.raises(ValueError, match="needs 2 GPUs and 1 are visible"):
        worker_devices(0, 1, 2, None)
    # a CPU suite (learner_device "cpu") on a GPU machine, and no GPU at all
    cpu = SuiteConfig(out="s", base=BASE, seeds=(0,), methods=("gmc",), processes=3)
    assert cpu.worker_devices(gpus=4) == [None] * 3
    assert set(suite.worker_devices(gpus=0)) == {None}

    handed = queue.Queue()
    handed.put("2")
    _pin_worker(handed)  # what each worker process runs first
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"


def test_a_run_with_gaps_is_not_counted_finished(tmp_path):
    """Issue 36: a run whose metrics lack rows (a torn last line beside its summary) is left out
    of the analysis and named in it, `skipped` (which the pipeline's renderer prints under the
    table: tests/pipeline/test_pipeline_llm_report.py; `_run_one` resumes such a run, not
    reuses it)."""
    from gmc_grpo.run_writer import RunWriter
    from llm_runs import suite

    for seed in (0, 1):
        config = {"method": "gmc", "seed": seed, "delay": 2, "inner_steps": 1,
                  "checkpoint_every": 2, "total_steps": 4}  # fmt: skip
        with RunWriter(tmp_path / f"gmc_d2_seed{seed}", config) as writer:
            for step in range(4):
                writer.log_metrics({"step": step, "reward/mean": 0.1 * step})
            writer.write_summary({"steps": 4})
    metrics = tmp_path / "gmc_d2_seed1" / "metrics.jsonl"
    metrics.write_bytes(metrics.read_bytes()[:-20])
    analysis = suite.analyse_suite(tmp_path)
    assert [r["seed"] for r in analysis.runs] == [0]
    assert analysis.skipped == [
        "gmc_d2_seed1: 1 missing metrics rows (step 3); metrics.jsonl line 4 torn"
    ]
    assert analysis.to_json()["skipped"] == analysis.skipped  # in suite_summary.json too
