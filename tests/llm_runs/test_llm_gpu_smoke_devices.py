"""`bench/gpu_smoke.py` on a real device layout (issue 32): the learner joins its micro-batches'
CPU results with a batch on any device (the two-GPU part crashed mixing `cuda:0` and the CPU),
checked with fake CUDA tensors (torch's `FakeTensorMode`: no GPU, devices and shapes only), so a
device mix-up fails on the CPU; each part's row is in the JSON before the next part starts; the
MFU's peak comes from the device's name."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from test_llm_train_precision import SMOKE  # noqa: E402
from torch._subclasses.fake_tensor import (  # noqa: E402
    FakeTensorDeviceMismatchError,
    FakeTensorMode,
)

from llm_runs.learner import masked_logprobs  # noqa: E402


def test_the_learner_joins_cpu_results_with_a_batch_on_the_gpu():
    """The batch's response mask on `cuda:0` (faked), the accumulated log-probs on the CPU (where
    `Learner.accumulate` returns them): the join lands on the batch's device. The expression it
    replaces raises the device mismatch the GPU raised."""
    with FakeTensorMode(allow_non_fake_inputs=True):
        mask = torch.ones(2, 3, 4, dtype=torch.bool, device="cuda:0")
        current = torch.zeros(2, 3, 4)  # on the CPU
        joined = masked_logprobs(current, mask)
        assert joined.device == torch.device("cuda:0")
        assert joined.shape == (2, 3, 4) and joined.dtype == torch.float32
        with pytest.raises(FakeTensorDeviceMismatchError, match="cuda:0 and cpu"):
            torch.where(mask, current, torch.zeros(()))  # the learner's old line


def test_masked_logprobs_zeroes_the_padding():
    current = torch.tensor([[[-1.0, -2.0, -3.0]]])
    mask = torch.tensor([[[True, True, False]]])
    assert masked_logprobs(current, mask).tolist() == [[[-1.0, -2.0, 0.0]]]


@pytest.mark.parametrize(
    ("name", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA RTX 6000 Ada Generation", 364.0),
        ("NVIDIA L4", None),
    ],
)
def test_the_peak_comes_from_the_device_name(name, tflops):
    assert SMOKE.peak_tflops_of(name) == tflops


def test_each_part_is_written_before_the_next_starts(tmp_path, monkeypatch):
    """The two-GPU part crashing leaves the learning and mismatch rows in the JSON."""

    def crash(*args, **kwargs):
        raise RuntimeError("the two-GPU part crashed")

    monkeypatch.setattr(SMOKE, "overlap_row", crash)
    out = tmp_path / "smoke.json"
    with pytest.raises(RuntimeError, match="two-GPU part crashed"):
        SMOKE.main(["--device", "cpu", "--tiny", "--no-vllm", "--updates", "2", "--out", str(out)])
    written = json.loads(out.read_text())
    assert written["mismatch_lag0"] == {"skipped": "--no-vllm"}
    (row,) = written["learning"]
    assert row["updates"] == 2 and row["fraction_changed"] > 0.9
    assert "two_gpu_overlap" not in written
