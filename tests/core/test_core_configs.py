"""One vocabulary: an old field name or value in a config stops with an error naming the new one,
in the toy and the LLM configs alike; the shared reading helpers; the cosine schedule; the
statistics helpers."""

from __future__ import annotations

import math

import pytest

from gmc_grpo.config_reading import RENAMED_FIELDS, check_field_names, dataclass_from_dict
from gmc_grpo.lr_schedule import CosineWithWarmup, cosine_lr, warmup_steps_for
from gmc_grpo.stats import normal_quantile, paired_difference, t_interval, t_quantile
from llm_runs.config import LLMTrainConfig
from llm_runs.recipes import config_from_values
from toy_mdps.sweep.config import SweepConfig
from toy_mdps.train.config import ExperimentConfig, ToyTrainConfig


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("learning_rate", "lr"),
        ("num_steps", "total_steps"),
        ("warmup_frac", "warmup_ratio"),
        ("beta1", "betas"),
    ],
)
def test_old_toy_field_names_name_the_new_one(old, new):
    with pytest.raises(ValueError, match=rf"ToyTrainConfig\.{old} was renamed {new}"):
        ToyTrainConfig.from_dict({old: 1})
    with pytest.raises(
        ValueError, match=rf"ExperimentConfig\.base: ToyTrainConfig\.{old} was renamed"
    ):
        ExperimentConfig.from_dict({"base": {old: 1}})


def test_old_sweep_field_name_names_the_new_one():
    with pytest.raises(ValueError, match=r"SweepConfig\.learning_rate was renamed lr"):
        SweepConfig.from_dict({"learning_rate": 5.0})


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("eps_high", "eps"),
        ("clip_eps", "clip_low and clip_high"),
        ("vcpo_truncation", "truncation"),
        ("num_steps", "total_steps"),
        ("learning_rate", "lr"),
    ],
)
def test_old_llm_field_names_name_the_new_one(old, new):
    with pytest.raises(ValueError, match=rf"LLMTrainConfig\.{old} was renamed {new}"):
        config_from_values({"out": "runs/x", "model": "m", old: 0.3})


def test_old_values_name_the_new_one():
    with pytest.raises(ValueError, match=r"schedule='fixed'.*'fixed' was renamed 'fixed_delay'"):
        ToyTrainConfig(schedule="fixed")
    with pytest.raises(ValueError, match=r"schedule='fixed'.*'fixed' was renamed 'fixed_delay'"):
        LLMTrainConfig(out="o", model="m", schedule="fixed")
    with pytest.raises(ValueError, match=r"advantage=None.*None was renamed 'paper'"):
        LLMTrainConfig(out="o", model="m", advantage=None)  # type: ignore[arg-type]


def test_the_two_training_configs_share_the_method_fields():
    toy, llm = ToyTrainConfig(), LLMTrainConfig(out="o", model="m")
    for name in ("eps", "clip_low", "clip_high", "truncation", "a3po_mask_threshold",
                 "vcpo_rho_ref", "gac_low", "gac_high", "lr", "total_steps", "warmup_ratio",
                 "betas", "grad_clip", "schedule", "delay", "lam", "max_launches", "method",
                 "advantage", "group_size"):  # fmt: skip
        assert hasattr(toy, name) and hasattr(llm, name), name
    assert toy.method_settings() == llm.method_settings()  # the same paper constants
    assert (toy.eps, toy.clip_low, toy.truncation, toy.gac_high) == (0.28, 0.2, 8.0, 0.30)


def test_unknown_fields_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown SweepConfig fields \['nope'\]; valid fields"):
        dataclass_from_dict(SweepConfig, {"nope": 1, "_comment": "ignored"})
    check_field_names(SweepConfig, ["_comment", "lr"])  # comments and real fields pass
    assert set(RENAMED_FIELDS) >= {"learning_rate", "num_steps", "eps_high", "clip_eps"}


def test_cosine_schedule_hand_values():
    # 800 updates, 3% warm-up = 24 (Appendix B.1)
    assert warmup_steps_for(800, 0.03) == 24
    lr = 1e-6
    assert cosine_lr(0, peak_lr=lr, total_steps=800, warmup_steps=24) == lr / 24
    assert cosine_lr(23, peak_lr=lr, total_steps=800, warmup_steps=24) == lr
    assert cosine_lr(24, peak_lr=lr, total_steps=800, warmup_steps=24) == lr
    # half-way through the decay: (1 + cos(pi/2)) / 2 = 1/2
    assert cosine_lr(412, peak_lr=lr, total_steps=800, warmup_steps=24) == pytest.approx(lr / 2)
    assert cosine_lr(800, peak_lr=lr, total_steps=800, warmup_steps=24) == 0.0
    assert cosine_lr(900, peak_lr=lr, total_steps=800, warmup_steps=24) == 0.0  # held
    # a floor: min + (peak - min) (1 + cos)/2
    assert cosine_lr(800, peak_lr=1.0, total_steps=800, warmup_steps=0, min_lr=0.1) == 0.1
    factor = CosineWithWarmup(800, 24)
    assert [factor(s) for s in (0, 23, 412)] == [1 / 24, 1.0, pytest.approx(0.5)]
    assert factor.__dict__ == {"total_steps": 800, "warmup_steps": 24, "min_ratio": 0.0}


def test_statistics_helpers_hand_values():
    assert normal_quantile(0.95) == pytest.approx(1.959963984540054, rel=1e-15)
    assert t_quantile(1, 0.95) == pytest.approx(12.706204736174694, rel=1e-12)
    assert t_quantile(4, 0.95) == pytest.approx(2.7764451051977934, rel=1e-12)
    # values 1, 2, 3: mean 2, sd 1, half-width t_{0.975, 2} / sqrt(3) = 4.302652729749462 / sqrt(3)
    got = t_interval([1.0, 2.0, 3.0, None, math.nan])
    half = 4.302652729749462 / math.sqrt(3)
    assert got["n"] == 3 and got["mean"] == 2.0
    assert got["lo"] == pytest.approx(2 - half) and got["hi"] == pytest.approx(2 + half)
    assert t_interval([5.0]) == {"mean": 5.0, "lo": -math.inf, "hi": math.inf, "n": 1}
    assert math.isnan(t_interval([])["mean"])
    # paired over the seeds both have: differences 1, 1 -> mean 1, zero width
    diff = paired_difference({0: 3.0, 1: 4.0, 2: 9.0}, {0: 2.0, 1: 3.0})
    assert (diff["mean"], diff["lo"], diff["hi"], diff["n"]) == (1.0, 1.0, 1.0, 2)
    with pytest.raises(ValueError, match="confidence level"):
        normal_quantile(1.5)
