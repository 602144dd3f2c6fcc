"""The training loop on a tiny Qwen3 with the HF engine: ratios at D = 0, lags under delay,
the simulated pipeline, and bad inputs that stop before any compute."""

from __future__ import annotations

import json
import math

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import (  # noqa: E402, F401
    even_first_char,
    one_thread,
    quiet,
    tiny_config,
)

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from gmc_grpo.records import METRIC_NAMES  # noqa: E402
from llm_runs.config import LLMTrainConfig  # noqa: E402
from llm_runs.engines.hf import HFEngine  # noqa: E402
from llm_runs.recipes import load_recipe  # noqa: E402
from llm_runs.train import Trainer, train  # noqa: E402


@pytest.mark.parametrize("method", ["gmc", "grpo"])
def test_d0_single_inner_step_every_ratio_is_one(tmp_path, method):
    """D = 0, inner_steps = 1, ratio on the learner's own log-probs at the behavior version:
    every trajectory log-ratio is exactly 0 and nothing is capped or clipped."""
    config = tiny_config(tmp_path / "run", method=method, behavior_logprobs="learner")
    train(config, reward_fn=even_first_char, notice=quiet)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        assert r["staleness/lag"] == 0
        assert r["ratio/log_max"] == 0.0
        assert r["ratio/log_mean"] == 0.0
        assert r["ratio/kl_estimate"] == 0.0
        assert r["ratio/ess"] == 1.0
        if method == "gmc":
            assert r["ratio/capped_frac"] == 0.0
            assert r["ratio/removed_mass"] == 0.0
        else:
            assert r["ratio/clipped_token_frac"] == 0.0
        # the engine's sampling log-probs vs the learner's: float rounding only
        assert r["mismatch/logprob_abs_mean"] < 1e-5
        assert set(r) - {
            "advantage/abs_mean",
            "response/truncated_frac",
            "perf/learner_seconds",
            "perf/rollout_seconds",
            "staleness/behavior_version",
        } <= set(METRIC_NAMES)


def test_d0_engine_logprobs_ratio_is_one_up_to_rounding(tmp_path):
    config = tiny_config(tmp_path / "run", method="gmc", total_steps=2)
    train(config, reward_fn=even_first_char, notice=quiet)
    for r in read_jsonl(tmp_path / "run" / "metrics.jsonl"):
        assert abs(r["ratio/log_max"]) < 1e-4
        assert r["ratio/capped_frac"] == 0.0
        assert r["mismatch/logprob_abs_mean"] < 1e-5


def test_fixed_delay_lag_is_d_after_fill(tmp_path):
    """FIFO of D = 3 batches from the initial policy: lag n during the fill, then exactly D."""
    config = tiny_config(tmp_path / "run", method="tic", delay=3, total_steps=7, lr=1e-2)
    summary = train(config, reward_fn=even_first_char, notice=quiet)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    lags = [r["staleness/lag"] for r in rows]
    assert lags == [0, 1, 2, 3, 3, 3, 3]
    assert [r["staleness/behavior_version"] for r in rows] == [0, 0, 0, 0, 1, 2, 3]
    # stale batches: the ratio moves away from 1 once the policy has changed
    assert max(abs(r["ratio/log_mean"]) for r in rows[3:]) > 1e-4
    assert summary["steps"] == 7


def test_d0_inner_steps_split_one_batch_into_minibatches(tmp_path):
    """D = 0 with inner_steps = 2 (B.1 uses 4): one rollout batch, two updates, lags 0 then 1."""
    config = tiny_config(
        tmp_path / "run",
        method="gmc",
        num_groups=4,
        inner_steps=2,
        groups_per_micro=1,
        total_steps=4,
    )
    train(config, reward_fn=even_first_char, notice=quiet)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["staleness/lag"] for r in rows] == [0, 1, 0, 1]
    assert [r["staleness/behavior_version"] for r in rows] == [0, 0, 2, 2]


def test_length_coupled_schedule_logs_realised_lags(tmp_path):
    config = tiny_config(
        tmp_path / "run",
        method="a3po",
        schedule="length_coupled",
        lam=2.0,
        length_unit_tokens=2.0,
        total_steps=5,
    )
    trainer = Trainer(config, reward_fn=even_first_char, notice=quiet)
    trainer.run()
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["staleness/lag"] for r in rows] == trainer.schedule.realised_lags
    assert all(r["staleness/lag"] >= 0 for r in rows)
    assert any(r["staleness/lag"] > 0 for r in rows)


@pytest.mark.parametrize("method", ["vcpo", "gac"])
def test_vcpo_and_gac_hooks_are_logged(tmp_path, method):
    config = tiny_config(
        tmp_path / "run",
        method=method,
        delay=1,
        total_steps=3,
        num_groups=2,
        group_size=3,
        groups_per_micro=1,
    )
    train(config, reward_fn=even_first_char, notice=quiet)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    if method == "vcpo":
        assert all(0 < r["vcpo/step_scale"] <= 1 for r in rows)
        assert all(r["vcpo/score_norm_mean"] > 0 for r in rows)
    else:
        assert all(-1 <= r["gac/cosine"] <= 1 for r in rows)
        assert rows[0]["gac/cosine"] == 0.0  # no previous gradient at the first step


# -- bad inputs: clear messages, nothing computed --------------------------------------------


def test_missing_model_directory(tmp_path):
    config = LLMTrainConfig(out=str(tmp_path / "run"), model=str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Trainer(config, reward_fn=even_first_char, notice=quiet)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"group_size": 1}, "group_size=1: must be >= 2"),
        ({"num_groups": 6, "inner_steps": 4}, "not divisible into inner_steps=4"),
        ({"groups_per_micro": 3}, "groups_per_micro=3"),
        ({"method": "ppo"}, "method='ppo': must be a registered method"),
        ({"total_steps": 5, "inner_steps": 2, "num_groups": 4}, "multiple of inner_steps"),
        ({"schedule": "length_coupled", "delay": 4}, "delay=4: must be 0"),
        ({"sft_steps": 5, "task": "math", "reward": "math_verify"}, "sft_steps"),
        ({"micro_batch_tokens": -1}, "micro_batch_tokens=-1: must be >= 0"),
        ({"packed_sequences": False}, "score_norms='in_backward': must be 'per_trajectory' when"),
    ],
)
def test_bad_config_values(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(tmp_path / "run", **overrides)


class NaNEngine:
    """An HF engine whose second sample of each prompt reports a NaN log-prob."""

    def __init__(self, model_dir):
        self.inner = HFEngine(model_dir)
        self.updates = 0

    def generate(self, prompts, sampling):
        out = self.inner.generate(prompts, sampling)
        for group in out:
            group[1].logprobs[0] = math.nan
        return out

    def update_weights(self, state_dict):
        self.updates += 1
        self.inner.update_weights(state_dict)

    def close(self):
        self.inner.close()


def test_nan_engine_logprobs_stop_before_any_update(tmp_path):
    config = tiny_config(tmp_path / "run")
    trainer = Trainer(config, engine_factory=NaNEngine, reward_fn=even_first_char, notice=quiet)
    with pytest.raises(ValueError, match="non-finite"):
        trainer.run()
    assert read_jsonl(tmp_path / "run" / "metrics.jsonl") == []
    assert trainer.step == 0


def test_fresh_run_refuses_a_directory_with_checkpoints(tmp_path):
    train(tiny_config(tmp_path / "run", total_steps=1), reward_fn=even_first_char, notice=quiet)
    with pytest.raises(ValueError, match="--resume"):
        Trainer(
            tiny_config(tmp_path / "run", total_steps=1), reward_fn=even_first_char, notice=quiet
        )


def test_cli_train_is_registered_and_rejects_bad_input(tmp_path, capsys):
    from llm_runs.cli import main

    assert main(["train", "--out", str(tmp_path / "r"), "--model", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["train", "--recipe", "no_such_recipe"]) == 2
    assert "no_such_recipe" in capsys.readouterr().err
    assert main(["train", "--recipe", "fixed_delay_qwen3_1p7b"]) == 2
    assert "--run" in capsys.readouterr().err


def test_every_shipped_recipe_builds_a_valid_config():
    from llm_runs.recipes import CONFIG_DIR, config_from_values

    names = sorted(p.stem for p in CONFIG_DIR.glob("*.json"))
    assert {"tiny", "fixed_delay_qwen3_1p7b", "simulated_async", "group_size"} <= set(names)
    for name in names:
        data = json.loads((CONFIG_DIR / f"{name}.json").read_text())
        runs = data.get("runs") or {None: {}}
        for run in runs:
            values = load_recipe(name, run)
            values.setdefault("model", None if "tiny_model" in values else "models/placeholder")
            config = config_from_values({"out": "runs/x", **values})
            assert config.total_steps >= 1
            if name != "tiny" and not name.startswith("tiny"):
                assert config.lr == 1e-6 and config.grad_clip == 1.0
                assert config.betas == (0.9, 0.999) and config.weight_decay == 0.0
                assert torch.isclose(torch.tensor(config.warmup_ratio), torch.tensor(0.03))


def test_missing_tensorboard_is_reported_before_compute(tmp_path):
    import importlib.util

    if importlib.util.find_spec("tensorboard") is not None:
        pytest.skip("tensorboard is installed here")
    with pytest.raises(RuntimeError, match="pip install tensorboard"):
        Trainer(tiny_config(tmp_path / "run", log_to=("tensorboard",)), notice=quiet)


def test_a_registered_method_trains_through_the_whole_loop(tmp_path):
    """The soft GMC of docs/method-registry.md (`examples/soft_gmc.py`), registered as one spec, through the LLM
    trainer: D = 0 with the learner's own log-probs makes every ratio 1, so each group keeps the
    smooth scale `alpha = (1 + (1/1.28)^4)^(-1/4)` and loses `1 - alpha` of its mass."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from examples.soft_gmc import SOFT_GMC
    from gmc_grpo.methods import register_method, unregister_method

    register_method(SOFT_GMC, replace=True)
    try:
        config = tiny_config(tmp_path / "run", method="soft_gmc", behavior_logprobs="learner")
        summary = train(config, reward_fn=even_first_char, notice=quiet)
    finally:
        unregister_method("soft_gmc")
    assert summary["method"] == "soft_gmc"
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    alpha = (1 + (1 / 1.28) ** 4) ** -0.25
    for r in rows:
        assert r["ratio/log_max"] == 0.0
        assert r["ratio/capped_frac"] == 1.0  # every trajectory has w < 1
        assert r["ratio/removed_mass"] == pytest.approx(1 - alpha, rel=1e-6)
