"""Nothing unpickles model weights: a crafted `pytorch_model.bin` where a model is expected is
refused by every loader, and its payload never runs (issue 15)."""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from transformers import AutoModelForCausalLM  # noqa: E402

from llm_runs.engines.hf import HFEngine  # noqa: E402
from llm_runs.tiny import build_tiny_qwen3, check_model_dir  # noqa: E402


class _Payload:
    """Unpickling this creates (opens for writing) the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (str(self.marker), "w"))


@pytest.fixture
def pickled_model(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny Qwen3 folder whose only weights are a torch pickle carrying the payload."""
    model_dir = build_tiny_qwen3(tmp_path / "model", num_layers=1, hidden_size=64)
    for weights in model_dir.glob("*.safetensors"):
        weights.unlink()
    marker = tmp_path / "payload-ran"
    torch.save({"model.embed_tokens.weight": _Payload(marker)}, model_dir / "pytorch_model.bin")
    return model_dir, marker


def test_the_planted_pickle_is_live(pickled_model) -> None:
    # the check below is not vacuous: an unsafe load does run the payload
    model_dir, marker = pickled_model
    torch.load(model_dir / "pytorch_model.bin", weights_only=False)
    assert marker.exists()


def test_every_model_loader_refuses_pickled_weights(pickled_model) -> None:
    model_dir, marker = pickled_model
    with pytest.raises(FileNotFoundError, match=r"only pickled weights \(pytorch_model.bin\)"):
        check_model_dir(model_dir)
    with pytest.raises(FileNotFoundError, match="safetensors only"):
        HFEngine(model_dir)
    with pytest.raises(OSError):  # the keyword every from_pretrained call of ours passes
        AutoModelForCausalLM.from_pretrained(model_dir, use_safetensors=True)
    assert not marker.exists()


def test_llm_train_and_eval_engines_refuse_a_pickled_model(pickled_model, tmp_path) -> None:
    from llm_train_checks import cpu_config, even_first_char, quiet

    from llm_runs.evaluation.config import EvalConfig
    from llm_runs.evaluation.protocol import engine_for
    from llm_runs.train import Trainer

    model_dir, marker = pickled_model
    config = cpu_config(tmp_path / "run", model=str(model_dir))
    with pytest.raises(FileNotFoundError, match="only pickled weights"):
        Trainer(config, reward_fn=even_first_char, notice=quiet)  # before any compute
    for engine in ("hf", "vllm"):  # the engines `gmc-grpo llm eval` builds
        eval_config = EvalConfig(model=str(model_dir), out=str(tmp_path / "eval"), engine=engine)
        with pytest.raises(FileNotFoundError, match="only pickled weights"):
            engine_for(eval_config, model_dir)
    assert not marker.exists()
