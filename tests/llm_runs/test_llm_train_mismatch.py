"""The train-inference mismatch measured at lag 0 per trajectory (issue 24, item 6): a hand-worked
batch, the tiny model with the HF engine in float32 (rounding only), a perturbed engine copy whose
caps a hand computation predicts, a bfloat16 engine, and `behavior_logprobs="learner"` as the
remedy."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import even_first_char, one_thread, quiet, tiny_config  # noqa: E402, F401

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from gmc_grpo.records import METRIC_NAMES  # noqa: E402
from llm_runs.engines.hf import HFEngine  # noqa: E402
from llm_runs.mismatch import mismatch_metrics  # noqa: E402
from llm_runs.train import Trainer  # noqa: E402

NAMES = (
    "mismatch/trajectory_abs_mean",
    "mismatch/trajectory_abs_p99",
    "mismatch/trajectory_abs_max",
    "mismatch/gmc_capped_group_frac",
    "mismatch/tic_capped_group_frac",
)
#: the amount the perturbed engine copy takes off every log-prob it reports (nats per token)
SHIFT = 0.05


def test_hand_worked_batch():
    """Three groups of two; s_i = sum_t (learner - engine) over each response.

    s = [0.3, 0.0], [0.6, 0.4], [-0.5, 0.2]; log 1.28 = 0.2469.
    GMC caps a group when mean_i exp(s_i) > 1.28: (1.350 + 1) / 2 = 1.175 no; (1.822 + 1.492) / 2
    = 1.657 yes; (0.607 + 1.221) / 2 = 0.914 no -> 1/3. TIC drops a trajectory with s_i > 0.2469:
    0.3 yes, 0.6 yes, 0.2 no -> 2/3 of the groups. |s| sorted: 0, .2, .3, .4, .5, .6: mean 1/3,
    p99 at position 0.99 * 5 = 4.95 -> 0.5 + 0.95 * 0.1 = 0.595, max 0.6.
    """
    s = torch.tensor([[0.3, 0.0], [0.6, 0.4], [-0.5, 0.2]])
    lengths = torch.tensor([[3, 1], [2, 3], [1, 2]])
    mask = torch.arange(4) < lengths.unsqueeze(-1)  # [3, 2, 4]
    engine = torch.full((3, 2, 4), -1.0)
    learner = engine.clone()
    learner[..., 0] += s  # the whole gap on the first token...
    learner[..., 1] += torch.where(lengths > 2, 0.25, 0.0)
    learner[..., 2] -= torch.where(lengths > 2, 0.25, 0.0)  # ... and +0.25 - 0.25 elsewhere
    learner[~mask] = 7.0  # padding is ignored whatever it holds
    got = mismatch_metrics(engine, learner, mask)
    assert got["mismatch/trajectory_abs_mean"] == pytest.approx(2.0 / 6, abs=1e-6)
    assert got["mismatch/trajectory_abs_p99"] == pytest.approx(0.595, abs=1e-6)
    assert got["mismatch/trajectory_abs_max"] == pytest.approx(0.6, abs=1e-6)
    assert got["mismatch/gmc_capped_group_frac"] == pytest.approx(1 / 3)
    assert got["mismatch/tic_capped_group_frac"] == pytest.approx(2 / 3)
    assert set(got) == set(NAMES) <= set(METRIC_NAMES)


class Shifted(HFEngine):
    """The engine copy reports every sampled token's log-prob `SHIFT` lower (its samples are
    unchanged): a mismatch of exactly `SHIFT * L` nats per trajectory of `L` tokens."""

    def generate(self, prompts, sampling):
        out = super().generate(prompts, sampling)
        for group in out:
            for sample in group:
                sample.logprobs = [v - SHIFT for v in sample.logprobs]
        return out


class Recording(Trainer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.consumed = []

    def update(self, minibatch):
        self.consumed.append(minibatch)
        return super().update(minibatch)


def train_recording(out, engine=None, **overrides) -> tuple[Recording, list[dict]]:
    config = tiny_config(out, lr=1e-2, **overrides)
    factory = None if engine is None else (lambda model_dir: engine(model_dir))
    trainer = Recording(config, engine_factory=factory, reward_fn=even_first_char, notice=quiet)
    trainer.run()
    return trainer, read_jsonl(out / "metrics.jsonl")


def test_float32_engine_mismatch_is_rounding_and_measured_every_k(tmp_path):
    """The HF engine and the learner in float32: |s_i| of rounding size, nothing capped; every
    `mismatch_every` = 2 updates that launch a batch (D = 1, N = 5: launches at steps 0..3)."""
    _, rows = train_recording(tmp_path / "run", method="gmc", delay=1, total_steps=5,
                              mismatch_every=2)  # fmt: skip
    measured = [r["step"] for r in rows if NAMES[0] in r]
    assert measured == [0, 2]  # step 4 launches nothing (its batch would never be consumed)
    for r in rows:
        if NAMES[0] in r:
            assert r["mismatch/trajectory_abs_max"] < 1e-4
            assert r["mismatch/gmc_capped_group_frac"] == r["mismatch/tic_capped_group_frac"] == 0


def hand(batch: torch.Tensor) -> dict[str, float]:
    """What the perturbed engine's mismatch must be: s_i = SHIFT * L_i (computed by hand from
    the response lengths, not through `llm_runs.mismatch`)."""
    s = SHIFT * batch.response_len.double()
    cap = math.log(1.28)
    return {
        "mismatch/trajectory_abs_mean": float(s.mean()),
        "mismatch/trajectory_abs_max": float(s.max()),
        "mismatch/gmc_capped_group_frac": float((s.exp().mean(-1) > 1.28).double().mean()),
        "mismatch/tic_capped_group_frac": float((s > cap).any(-1).double().mean()),
    }


def test_a_perturbed_engine_copy_caps_as_a_hand_computation_says(tmp_path):
    """D = 0, so the consumed batch is the measured one: its metrics equal the hand computation
    from its response lengths, and GMC's update caps exactly the groups the measurement says."""
    trainer, rows = train_recording(
        tmp_path / "run", engine=Shifted, method="gmc", total_steps=3, mismatch_every=1
    )
    capped = 0.0
    for batch, row in zip(trainer.consumed, rows, strict=True):
        want = hand(batch)
        for name, value in want.items():
            assert row[name] == pytest.approx(value, abs=1e-4), name
        assert row["mismatch/trajectory_abs_mean"] > 0.1
        assert row["ratio/capped_frac"] == row["mismatch/gmc_capped_group_frac"]
        capped += row["mismatch/gmc_capped_group_frac"]
    assert capped > 0  # the shift caps some on-policy groups: the case worth measuring


def test_behavior_logprobs_learner_is_the_remedy(tmp_path):
    """The same perturbed engine with `behavior_logprobs="learner"`: the measurement still
    reports the engine's mismatch, but the update's ratio is exactly 1 and caps nothing."""
    _, rows = train_recording(
        tmp_path / "run",
        engine=Shifted,
        method="gmc",
        total_steps=3,
        mismatch_every=1,
        behavior_logprobs="learner",
    )
    assert sum(r["mismatch/gmc_capped_group_frac"] for r in rows) > 0
    assert all(r["ratio/capped_frac"] == 0.0 and r["ratio/log_max"] == 0.0 for r in rows)


def test_a_bfloat16_engine_shows_a_mismatch(tmp_path):
    """The HF engine in bfloat16 beside a float32 learner: |s_i| well above float32 rounding,
    and the capped fraction is what GMC's own update computes at lag 0."""
    _, rows = train_recording(
        tmp_path / "run", method="gmc", total_steps=2, mismatch_every=1, engine_dtype="bfloat16"
    )
    for r in rows:
        assert r["mismatch/trajectory_abs_mean"] > 1e-3
        assert r["ratio/capped_frac"] == r["mismatch/gmc_capped_group_frac"]
    print({k: round(v, 4) for k, v in rows[0].items() if k.startswith("mismatch/")})
