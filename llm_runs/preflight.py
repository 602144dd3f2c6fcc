"""What a run needs, checked before anything expensive (issue 32).

A paper-recipe run that cannot fit used to start anyway: vLLM started, the length-coupled
warm-up generated its launches one by one, and the out-of-memory error came at the first
backward, hours in. `plan(config, ...)` states what the run needs, from the memory model
(`llm_runs.memory`, a model, not a measurement):

- per device, the least the run needs there (`DeviceNeed`): the learner's modelled peak; on one
  GPU with vLLM, vLLM's bfloat16 weights and the KV cache of ONE full-length sequence (the least
  vLLM starts with: it queues the other sequences) on top of the learner's resident memory
  (vLLM sleeping during the learner's step) or of its peak (not sleeping); in the two-GPU layout,
  those vLLM terms alone on the engine's device;
- the host shared memory of the engine process's weight buffer (the engine's weights in its
  dtype, `llm_runs.engines.remote.WeightBuffer`), in the folder it goes to (`/dev/shm`).

Because each need is a lower bound of the model, a refusal means the run cannot fit as modelled;
passing does not promise it fits (vLLM's CUDA graphs and workspace, the allocator's
fragmentation are not modelled).

The checks, by name (`CHECKS`; `LLMTrainConfig.preflight_skip` skips them by name):

- `"shared_memory"`: the shared-memory folder's free space (`os.statvfs`) against the weight
  buffer; no torch needed;
- `"gpu_memory"`: each CUDA device's free memory (`torch.cuda.mem_get_info`) against its need.

A failed check raises `PreflightError` (a `ValueError`: the command line prints its one line and
exits 2) naming the run, the need, the device and the fix. `plan_text` is what
`gmc-grpo llm train --recipe R --run X --plan` prints.

This module imports no torch: `check_shared_memory` runs before torch loads; `check_gpu_memory`
imports it to ask the devices. `check_before_torch` is what `gmc-grpo llm train` runs before it
imports the trainer: the output, model and data folders, and the shared memory where the config
alone decides the engine process (`engine_process_without_torch`); `Trainer` repeats them with
the resolved devices.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_runs.memory import (
    GIB,
    QWEN3_SHAPES,
    ModelShape,
    engine_bytes,
    learner_bytes,
    memory_family,
    resident_bytes,
)

#: the preflight checks, by the names `LLMTrainConfig.preflight_skip` takes
CHECKS: tuple[str, ...] = ("shared_memory", "gpu_memory")

#: `LLMTrainConfig.model` of a `--plan` given no model: the model comes from the names
NO_MODEL = "<no --model: the paper model of the recipe's name>"

#: the size tokens of the paper recipes' names (`simulated_async`'s `gmc_8b`,
#: `fixed_delay_qwen3_1p7b`) -> `QWEN3_SHAPES` key: how `--plan` finds the model of a recipe run
#: given without `--model` (the recipes name their model in their description and run names)
SIZE_TOKENS = {"1p7b": "1.7B", "1.7b": "1.7B", "4b": "4B", "8b": "8B"}


class PreflightError(ValueError):
    """A run that cannot fit: one line naming the run, the need, the device and the fix."""


@dataclass(frozen=True)
class DeviceNeed:
    """The least a run needs on one device."""

    device: str
    """the device, e.g. "cuda:0" """
    need_bytes: float
    """bytes the run needs there (modelled)"""
    what: str
    """the terms, in words"""


@dataclass(frozen=True)
class RunPlan:
    """What a run needs (`plan`)."""

    run: str
    """the run's name (its output folder's)"""
    model: str
    """the model, e.g. "Qwen3-8B (8.19 B parameters)", or why it is unknown"""
    layout: str
    """`LLMTrainConfig.layout`"""
    family: str
    """the method's memory family (`llm_runs.memory.FAMILIES`)"""
    needs: tuple[DeviceNeed, ...] = ()
    """per device; empty when the model's shape is unknown"""
    shm_bytes: int = 0
    """the engine process's weight buffer in host shared memory (0: no engine process)"""
    shm_dir: str = "/dev/shm"
    """the folder the weight buffer goes to (`llm_runs.engines.remote.shared_folder`)"""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """what the plan assumed"""


def default_shared_folder() -> Path:
    """Where the engine process's weight file goes by default: `/dev/shm` (memory), else the
    temporary folder (`llm_runs.engines.remote.shared_folder`)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    import tempfile

    return Path(tempfile.gettempdir())


# -- the model -----------------------------------------------------------------------------------


def shape_from_config_json(model_dir: str | Path) -> ModelShape | None:
    """The `ModelShape` of a Hugging Face model folder's `config.json` (JSON only: no torch, no
    transformers); None when the folder has none or it lacks a Qwen3 field."""
    import json

    path = Path(model_dir) / "config.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    try:
        heads = int(data["num_attention_heads"])
        return ModelShape(
            vocab=int(data["vocab_size"]),
            hidden=int(data["hidden_size"]),
            intermediate=int(data["intermediate_size"]),
            layers=int(data["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(data.get("num_key_value_heads", heads)),
            head_dim=int(data.get("head_dim") or int(data["hidden_size"]) // heads),
            tied=bool(data.get("tie_word_embeddings", False)),
        )
    except (KeyError, TypeError, ValueError):
        return None


def config_json_of(shape: ModelShape) -> dict[str, Any]:
    """The Qwen3 `config.json` fields of `shape`: the inverse of `shape_from_config_json` (a
    model folder's config for the checks that run before any weight is read, as in the tests)."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "vocab_size": shape.vocab,
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "tie_word_embeddings": shape.tied,
    }


def model_of(config: Any, names: Sequence[str] = ()) -> tuple[str, ModelShape | None]:
    """`(description, shape)` of the run's model: its `model` folder's `config.json`, its
    `tiny_model` (built by `llm_runs.tiny`: not modelled, None), else the paper model named by a
    size token (`SIZE_TOKENS`) of one of `names` (the recipe's and the run's names)."""
    if config.model is not None and config.model != NO_MODEL:
        shape = shape_from_config_json(config.model)
        if shape is not None:
            return f"{config.model} ({shape.parameters() / 1e9:.2f} B parameters)", shape
        return f"{config.model} (no readable config.json: not modelled)", None
    if config.tiny_model is not None:
        return "the tiny random-init Qwen3 (CPU demonstration: not modelled)", None
    for name in names:
        for token in re.split(r"[\s_\-/(),;:]+", str(name).lower()):
            if token in SIZE_TOKENS:
                size = SIZE_TOKENS[token]
                shape = QWEN3_SHAPES[size]
                text = f"Qwen3-{size}-Base ({shape.parameters() / 1e9:.2f} B parameters)"
                where = name if len(str(name)) <= 40 else "the recipe's description"
                return text + f", from {where!r}", shape
    return "unknown: give --model DIR", None


# -- the plan ------------------------------------------------------------------------------------


def _precision(config: Any) -> str:
    """The learner's precision on CUDA (`llm_runs.precision`: "auto" is mixed bfloat16)."""
    dtype = config.learner_dtype
    return "mixed_bfloat16" if dtype == "auto" else dtype


def plan(
    config: Any,
    *,
    names: Sequence[str] = (),
    learner_device: str = "cuda:0",
    engine_device: str | None = None,
    engine_process: bool | None = None,
    engine_sleeps: bool | None = None,
    precision: str | None = None,
    shm_dir: str | Path | None = None,
) -> RunPlan:
    """What the run of `config` (a `LLMTrainConfig`) needs on the GPUs of its layout.

    The devices and the engine's process and sleep mode default to the layout's on CUDA (one
    GPU: both on cuda:0, vLLM sleeping during the learner's step; two GPUs: the engine in its
    own process on cuda:1); `Trainer` passes its resolved placement. precision: the learner's
    (`llm_runs.precision` name; default: `learner_dtype`, "auto" read as CUDA's mixed bfloat16).
    names: the recipe's and the run's names, for the model when `config.model` is None
    (`model_of`).
    """
    precision = precision or _precision(config)
    two = config.layout == "two_gpu"
    engine_device = engine_device or ("cuda:1" if two else learner_device)
    if engine_process is None:
        engine_process = config.engine_process if config.engine_process is not None else two
    if engine_sleeps is None:
        engine_sleeps = (
            config.vllm_sleep_mode
            if config.vllm_sleep_mode is not None
            else config.engine == "vllm" and not two and not engine_process
        )
    run = Path(config.out).name
    family = memory_family(config.method)
    description, shape = model_of(config, names)
    shm_dir = str(shm_dir or default_shared_folder())
    if shape is None:
        return RunPlan(run, description, config.layout, family, shm_dir=shm_dir)
    tokens = config.max_prompt_tokens + config.max_completion_tokens
    micro_tokens = config.micro_batch_tokens or config.groups_per_micro * config.group_size * tokens
    options = dict(
        family=family,
        precision=precision,
        optimizer="adamw8bit" if config.optimizer == "adamw8bit" else "adamw",
        micro_tokens=micro_tokens,
        groups_per_micro=config.groups_per_micro,
        logit_chunk=config.logit_chunk,
    )
    peak = sum(learner_bytes(shape, **options).values())
    resident = resident_bytes(shape, **options)
    engine = engine_bytes(shape, sequences=1, tokens=tokens)
    engine_dtype_bytes = 4 if config.engine == "hf" and precision == "float32" else 2
    weights = engine["weights"] / 2 * engine_dtype_bytes
    engine_least = weights + engine["KV cache"]
    engine_words = "the engine's weights and the KV cache of one full-length sequence"
    notes = [
        f"learner: {options['precision']}, {options['optimizer']}, micro-batches of "
        f"{micro_tokens:,} tokens, method family {family}",
    ]
    if engine_device == learner_device:
        if engine_sleeps:
            need = max(peak, resident + engine_least)
            what = f"the larger of the learner's peak and its resident memory + {engine_words}"
        else:
            need = peak + engine_least
            what = f"the learner's peak + {engine_words}"
        needs: tuple[DeviceNeed, ...] = (DeviceNeed(learner_device, need, what),)
    else:
        needs = (
            DeviceNeed(learner_device, peak, "the learner's peak"),
            DeviceNeed(engine_device, engine_least, engine_words),
        )
    shm = int(weights) if engine_process else 0
    return RunPlan(run, description, config.layout, family, needs, shm, shm_dir, notes=tuple(notes))


def plan_text(run_plan: RunPlan) -> str:
    """The plan as lines of text (`gmc-grpo llm train --plan`)."""
    lines = [
        f"run {run_plan.run}: {run_plan.model}",
        f"layout {run_plan.layout}, method family {run_plan.family}",
    ]
    if not run_plan.needs:
        lines.append("GPU memory: not modelled for this model (the checks skip it)")
    for need in run_plan.needs:
        lines.append(f"{need.device}: at least {need.need_bytes / GIB:.1f} GiB ({need.what})")
    if run_plan.shm_bytes:
        lines.append(
            f"host shared memory: {run_plan.shm_bytes / GIB:.1f} GiB in {run_plan.shm_dir} "
            "(the engine process's weight buffer)"
        )
    lines += [f"  {note}" for note in run_plan.notes]
    lines.append(
        "a model of the least the run needs (llm_runs.memory), not a measurement; "
        f"checks before start: {', '.join(CHECKS)} (skip by name: --set preflight_skip=NAME)"
    )
    return "\n".join(lines)


# -- the checks ----------------------------------------------------------------------------------


def free_bytes_of(folder: str | Path) -> int:
    """Bytes an unprivileged process may still write in `folder`'s file system."""
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


def check_shared_memory(run_plan: RunPlan, free: Callable[[str], int] | None = None) -> None:
    """Refuse a run whose engine-process weight buffer does not fit in the shared-memory
    folder's free space (`free`, default `free_bytes_of`; no torch needed)."""
    if not run_plan.shm_bytes:
        return
    have = (free or free_bytes_of)(run_plan.shm_dir)
    if have < run_plan.shm_bytes:
        raise PreflightError(
            f"preflight: run {run_plan.run} needs {run_plan.shm_bytes / GIB:.2f} GiB of host "
            f"shared memory in {run_plan.shm_dir} for the engine's weights and it has "
            f"{have / GIB:.2f} GiB free: enlarge it (docker run --shm-size={_shm_advice(run_plan)}, "
            "Kubernetes: an emptyDir with medium Memory), or skip this check: "
            "--set preflight_skip=shared_memory"
        )


def _shm_advice(run_plan: RunPlan) -> str:
    return f"{int(-(-run_plan.shm_bytes * 1.25 // GIB))}g"


def check_gpu_memory(
    run_plan: RunPlan,
    *,
    mem_get_info: Callable[[Any], tuple[int, int]] | None = None,
    device_name: Callable[[Any], str] | None = None,
) -> None:
    """Refuse a run whose modelled need on a CUDA device exceeds that device's free memory
    (`torch.cuda.mem_get_info`; the arguments stand in for torch's in tests)."""
    import torch

    if mem_get_info is None and not torch.cuda.is_available():
        devices = ", ".join(n.device for n in run_plan.needs if n.device.startswith("cuda"))
        raise PreflightError(
            f"preflight: run {run_plan.run} puts work on {devices} and torch sees no CUDA "
            "device here: set learner_device and engine_device to cpu (or auto), or run it "
            "where the GPUs are"
        )
    mem_get_info = mem_get_info or torch.cuda.mem_get_info
    device_name = device_name or torch.cuda.get_device_name
    for need in run_plan.needs:
        device = torch.device(need.device)
        if device.type != "cuda":
            continue
        free, total = mem_get_info(device)
        if free >= need.need_bytes:
            continue
        fix = "a GPU with that much free memory"
        if run_plan.layout == "one_gpu":
            fix += ", or layout two_gpu (the learner alone on one GPU, the engine on another)"
        if run_plan.family != "grpo/tic/gmc":
            fix += f" (the {run_plan.family} family's extra state is part of the need)"
        raise PreflightError(
            f"preflight: run {run_plan.run} needs at least {need.need_bytes / GIB:.1f} GiB on "
            f"{need.device} ({need.what}; modelled, llm_runs.memory) and "
            f"{device_name(device)} there has {free / GIB:.1f} of {total / GIB:.1f} GiB free: "
            f"use {fix}; skip this check: --set preflight_skip=gpu_memory"
        )


def preflight(run_plan: RunPlan, skip: Sequence[str] = (), **device_probes: Any) -> None:
    """Run the checks not in `skip` (`LLMTrainConfig.preflight_skip`, names checked there): shared
    memory first (no torch), then GPU memory (`device_probes`: `check_gpu_memory`'s stand-ins)."""
    if "shared_memory" not in skip:
        check_shared_memory(run_plan)
    if "gpu_memory" not in skip and any(n.device.startswith("cuda") for n in run_plan.needs):
        check_gpu_memory(run_plan, **device_probes)


def check_run(config: Any, placement: Any, **device_probes: Any) -> RunPlan:
    """The plan of `config` on its resolved `placement` (`llm_runs.models.Placement`), checked
    (`preflight`); `Trainer` calls it before it loads data, a model or an engine."""
    run_plan = plan(
        config,
        learner_device=str(placement.learner_device),
        engine_device=str(placement.engine_device),
        engine_process=placement.engine_process,
        engine_sleeps=placement.engine_sleeps,
        precision=placement.precision.name if placement.precision is not None else None,
    )
    preflight(run_plan, config.preflight_skip, **device_probes)
    return run_plan


def engine_process_without_torch(config: Any) -> bool | None:
    """Whether the run's engine gets a process of its own, where the config decides it without
    asking torch for the devices; None where it does not.

    Follows `llm_runs.models.resolve_placement`: `engine_process` when set; else the two-GPU
    layout on a CUDA engine device. With `engine_device="auto"` that device is `cuda:1` only
    where CUDA is available, which takes torch to know: None (the check waits for `check_run`).
    """
    if config.engine_process is not None:
        return bool(config.engine_process)
    if config.layout != "two_gpu":
        return False
    if config.engine_device == "auto":
        return None
    return str(config.engine_device).startswith("cuda")


def check_before_torch(config: Any) -> None:
    """The input checks of a run that need no torch, run by `gmc-grpo llm train` before it
    imports the trainer (issues 32, 36: a refusal used to wait 3-6 s for torch to load).

    - its `out` folder: no file where it or a parent should be (`check_output_folder`); whether
      it holds the records of an earlier run is checked by `Trainer` under the folder's lock, so
      that a folder a live run is writing names that run (`gmc_grpo.runlock`);
    - a fresh run (`resume` false): its `model` folder holds a safetensors model
      (`llm_runs.model_files.check_model_dir`);
    - the math task: its `data_dir` is a folder (`llm_runs.data.check_data_dir`);
    - the shared memory of the engine process's weight buffer (`check_shared_memory`, unless
      `preflight_skip` names it) where the config decides the engine process without torch
      (`engine_process_without_torch`). The learner's precision is then `_precision`'s, which
      reads "auto" as CUDA's mixed bfloat16: the engine's weights are counted at 2 bytes where
      the run's resolved precision may give 4, so this need is never above `check_run`'s and
      the check refuses no run that `check_run` would let start.

    `Trainer` repeats each of them (and the GPU-memory check, which needs torch) with the
    resolved devices. Raises the checks' one-line errors (`ValueError`, `FileNotFoundError`,
    `llm_runs.data.DataError`).
    """
    from gmc_grpo.runlock import check_output_folder

    check_output_folder(config.out)
    if not config.resume and config.model is not None:
        from llm_runs.model_files import check_model_dir

        check_model_dir(config.model)
    if config.task == "math" and config.data_dir is not None:
        from llm_runs.data import check_data_dir

        check_data_dir(config.data_dir)
    engine_process = engine_process_without_torch(config)
    if engine_process and "shared_memory" not in config.preflight_skip:
        check_shared_memory(plan(config, engine_process=True))
