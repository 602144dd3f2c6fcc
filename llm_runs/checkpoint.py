"""Training checkpoints: written atomically, read back without unpickling anything.

A checkpoint is a folder `RUN/checkpoints/step_<NNNNNN>/`:

```
model/                  save_pretrained (model.safetensors, config.json) + the tokenizer
optimizer.safetensors   every tensor of the optimizer state, nested ones too (bitsandbytes' 8-bit
                        states: `state.<param>.__bnb_optimizer_quant_state__.state1`)
schedule.safetensors    every tensor of the stored batches of the staleness queue
state.safetensors       RNG states (torch CPU, CUDA, numpy) and the method's state (the tensors
                        of its gradient edit: GAC's previous gradient), `method.<key>`
state.json              step, counters, the optimizer state's manifest (param groups, scalars,
                        where each tensor goes), scheduler state,
                        the queue's entries (versions, launch and ready times), python RNG,
                        the method state's keys
```

Everything is tensors (safetensors) or JSON, so loading never runs `pickle`. The folder is
written under a temporary name and renamed into place (`os.replace`), so a run killed while
writing leaves the previous checkpoint intact and no half-written `step_*` folder.

Precision. The model is saved in the learner's parameter dtype: float32 under the mixed default
(`llm_runs.precision`), so a resume continues from the exact float32 weights and optimizer
states; the rollout engine's bfloat16 weights are derived from them at each sync and are not
stored. With `keep_checkpoint_models`, each checkpoint's model is also written alone, cast to
bfloat16 (what the engine generates with), to `RUN/models/step_<NNNNNN>/` (`MODEL_COPY_DIR`),
which the rotation of checkpoints (`keep_checkpoints`) leaves alone: the models `gmc-grpo llm
eval --model RUN --step N` evaluates after training (B.1's protocol) at a quarter of a
checkpoint's size.

Model resolution (`llm_runs.model_files`, torch-free, re-exported here): `resolve_model(path, step)` turns a model directory or a
training run directory (its `checkpoints/step_<N>/model/`) into the model folder to load, which
is how `gmc-grpo llm eval --model RUN --step N` evaluates a checkpoint (a checkpoint's model, or
the model copy of that step under `models/`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from gmc_grpo.json_files import atomic_write_json, read_json
from gmc_grpo.state_files import (
    CHECKPOINT_DIR,
    check_json_state,
    flatten_state,
    latest_checkpoint,
    list_checkpoints,
    read_safetensors,
    save_step_folder,
    step_dir_name,
    unflatten_state,
)
from llm_runs.batch import Rollout, TrajectoryBatch, batch_from, tensors_of
from llm_runs.model_files import (  # noqa: F401 (re-exported: model resolution lives there)
    MODEL_COPY_DIR,
    resolve_model,
    step_from_name,
)

__all__ = [
    "CHECKPOINT_DIR",
    "MODEL_COPY_DIR",
    "checkpoint_config",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "resolve_model",
    "save_checkpoint",
    "step_dir_name",
]


# -- optimizer -------------------------------------------------------------------------------


#: `state.json`'s "optimizer" entry of this format: the manifest of `flatten_state`
OPTIMIZER_MANIFEST = "manifest"


def _optimizer_to_flat(state: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict]:
    """Split an optimizer's `state_dict()` into tensors (for `optimizer.safetensors`, each under
    the dotted path where it sat, `state.<param>.<key>[.<inner key>...]`) and a JSON manifest.

    Recursive (`gmc_grpo.state_files.flatten_state`): bitsandbytes >= 0.49.2 nests the 8-bit
    states of each parameter (`state1`, `state2`, `absmax*`, `qmap*`) in a dict under
    `"__bnb_optimizer_quant_state__"`, torch's AdamW keeps them at the top level; both land in
    safetensors. `check_json_state` refuses a manifest that would still hold a tensor.
    """
    tensors, manifest = flatten_state(dict(state))
    meta = {OPTIMIZER_MANIFEST: manifest}
    check_json_state(meta, "the optimizer state's JSON part")
    return tensors, meta


def _optimizer_from_flat(tensors: Mapping[str, torch.Tensor], meta: Mapping[str, Any]) -> dict:
    """The `state_dict()` `_optimizer_to_flat` split (tuples such as `betas` come back as tuples,
    parameter ids as ints)."""
    if OPTIMIZER_MANIFEST in meta:
        return unflatten_state(tensors, meta[OPTIMIZER_MANIFEST])
    # a checkpoint of an earlier gmc-grpo: top-level tensors `state.<param>.<key>`, scalars apart
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        _, pid, key = name.split(".", 2)
        state.setdefault(int(pid), {})[key] = value
    for name, value in meta["scalars"].items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = value
    groups = []
    for group in meta["param_groups"]:
        group = dict(group)
        if isinstance(group.get("betas"), list):
            group["betas"] = tuple(group["betas"])
        groups.append(group)
    return {"state": state, "param_groups": groups}


# -- staleness queue -------------------------------------------------------------------------


def _schedule_to_flat(state: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict]:
    """Split a core schedule's `state_dict` (entries hold `Rollout`s: a pending one is waited
    for) into tensors and JSON."""
    state = dict(state)
    key = "queue" if "queue" in state else "in_flight"
    tensors: dict[str, torch.Tensor] = {}
    entries = []
    for index, entry in enumerate(state[key]):
        entry = dict(entry)
        item = entry.pop("batch")
        batch_tensors, batch_meta = tensors_of(item.result() if isinstance(item, Rollout) else item)
        for name, value in batch_tensors.items():
            tensors[f"{key}.{index}.{name}"] = value.cpu()
        entry["batch_meta"] = batch_meta
        entries.append(entry)
    state[key] = entries
    return tensors, state


def _schedule_from_flat(tensors: Mapping[str, torch.Tensor], meta: Mapping[str, Any]) -> dict:
    state = dict(meta)
    key = "queue" if "queue" in state else "in_flight"
    entries = []
    for index, entry in enumerate(state[key]):
        entry = dict(entry)
        prefix = f"{key}.{index}."
        own = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        entry["batch"] = Rollout.ready(batch_from(own, entry.pop("batch_meta")))
        entries.append(entry)
    state[key] = entries
    return state


# -- RNG -------------------------------------------------------------------------------------


def rng_state() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Global RNG states: torch CPU (and CUDA) and numpy as tensors, python's as JSON."""
    tensors = {"rng.torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    tensors["rng.numpy"] = torch.from_numpy(np.asarray(keys, dtype=np.int64))
    py_version, py_state, py_gauss = random.getstate()
    meta = {
        "numpy": [kind, int(pos), int(has_gauss), float(cached)],
        "python": [py_version, list(py_state), py_gauss],
    }
    return tensors, meta


def set_rng_state(tensors: Mapping[str, torch.Tensor], meta: Mapping[str, Any]) -> None:
    torch.set_rng_state(tensors["rng.torch"])
    cuda = sorted((k for k in tensors if k.startswith("rng.cuda.")), key=lambda k: int(k[9:]))
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([tensors[k] for k in cuda])
    kind, pos, has_gauss, cached = meta["numpy"]
    keys = tensors["rng.numpy"].numpy().astype(np.uint32)
    np.random.set_state((kind, keys, pos, has_gauss, cached))
    py_version, py_state, py_gauss = meta["python"]
    random.setstate((py_version, tuple(py_state), py_gauss))


# -- whole checkpoint ------------------------------------------------------------------------


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    model: torch.nn.Module,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    schedule_state: Mapping[str, Any],
    method_state: Mapping[str, torch.Tensor | None] | None,
    counters: Mapping[str, Any],
    keep: int,
    config: Mapping[str, Any] | None = None,
    model_copy_dtype: torch.dtype | None = None,
) -> Path:
    """Write the checkpoint of `step` atomically; keep the newest `keep` checkpoints.

    `config`: the run's `LLMTrainConfig` as a dict, stored in `state.json` (a resume compares it
    with its own, `gmc_grpo.resume`). `model_copy_dtype`: also write the model alone, cast to
    this dtype, to `run_dir/models/step_<step>/` (`save_model_copy`; kept by the rotation).
    """
    if model_copy_dtype is not None:
        save_model_copy(run_dir, step, model, tokenizer, model_copy_dtype)

    def write(tmp: Path) -> None:
        model.save_pretrained(tmp / "model", safe_serialization=True)
        tokenizer.save_pretrained(tmp / "model")
        opt_tensors, opt_meta = _optimizer_to_flat(optimizer.state_dict())
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
        sched_tensors, sched_meta = _schedule_to_flat(schedule_state)
        save_file(sched_tensors, str(tmp / "schedule.safetensors"))
        rng_tensors, rng_meta = rng_state()
        state_tensors = dict(rng_tensors)
        own = dict(method_state or {})
        for key, value in own.items():
            if value is not None:
                state_tensors[f"method.{key}"] = value.detach().cpu().contiguous()
        save_file(state_tensors, str(tmp / "state.safetensors"))
        scheduler_state = {k: v for k, v in scheduler.state_dict().items()}
        payload = {
            "step": step,
            "counters": dict(counters),
            "optimizer": opt_meta,
            "scheduler": scheduler_state,
            "schedule": sched_meta,
            "rng": rng_meta,
            "method_state_keys": sorted(own),
            "config": None if config is None else dict(config),
        }
        check_json_state(payload, f"checkpoint {step_dir_name(step)}/state.json")
        atomic_write_json(tmp / "state.json", payload)

    return save_step_folder(run_dir, step, write, keep=keep)


def save_model_copy(
    run_dir: str | Path, step: int, model: torch.nn.Module, tokenizer: Any, dtype: torch.dtype
) -> Path:
    """Write `model` (cast to `dtype`, e.g. bfloat16) and `tokenizer` to
    `run_dir/models/step_<step>/`, atomically (a temporary folder renamed into place); every
    copy is kept."""

    def write(tmp: Path) -> None:
        state, seen = {}, set()
        for name, value in model.state_dict().items():
            if value.data_ptr() in seen:  # a tied weight (lm_head = embedding): stored once
                continue
            seen.add(value.data_ptr())
            state[name] = value.detach().to(dtype)
        model.save_pretrained(tmp, state_dict=state, safe_serialization=True)
        config_file = tmp / "config.json"  # the copy's dtype, not the learner's
        config = read_json(config_file)
        config["dtype"] = str(dtype).removeprefix("torch.")
        config.pop("torch_dtype", None)
        atomic_write_json(config_file, config)
        tokenizer.save_pretrained(tmp)

    return save_step_folder(
        run_dir, step, write, keep=0, marker="config.json", folder=MODEL_COPY_DIR
    )


def checkpoint_config(path: str | Path) -> dict[str, Any] | None:
    """The `LLMTrainConfig` dict a checkpoint folder was written with (None for checkpoints of
    gmc-grpo versions that did not store it)."""
    config = read_json(Path(path) / "state.json").get("config")
    return config if isinstance(config, dict) else None


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint folder (no pickle): a dict with `step`, `counters`, `model_dir`,
    `optimizer` (a `state_dict`), `scheduler` (a `state_dict`), `schedule` (a core schedule
    `state_dict` whose entries hold `TrajectoryBatch`es), `method_state` (the method's
    gradient-edit state, `{key: tensor or None}`), `rng` and `config` (None when not stored).

    A file that is not what it should be (a pickle where safetensors belong, a torn file) is
    refused with a `CheckpointError` naming it; the model folder is checked (safetensors only)
    by `llm_runs.tiny.check_model_dir`.
    """
    from llm_runs.tiny import check_model_dir

    path = Path(path)
    meta = read_json(path / "state.json")
    state_tensors = read_safetensors(path / "state.safetensors")
    check_model_dir(path / "model")
    return {
        "step": int(meta["step"]),
        "counters": meta["counters"],
        "model_dir": path / "model",
        "optimizer": _optimizer_from_flat(
            read_safetensors(path / "optimizer.safetensors"), meta["optimizer"]
        ),
        "scheduler": meta["scheduler"],
        "schedule": _schedule_from_flat(
            read_safetensors(path / "schedule.safetensors"), meta["schedule"]
        ),
        "method_state": _method_state(meta, state_tensors),
        "rng": ({k: v for k, v in state_tensors.items() if k.startswith("rng.")}, meta["rng"]),
        "config": meta.get("config"),
    }


def _method_state(meta: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> dict:
    if "method_state_keys" in meta:
        return {key: tensors.get(f"method.{key}") for key in meta["method_state_keys"]}
    # a checkpoint written before the method registry: GAC's state had a key of its own
    return {"previous_gradient": tensors.get("gac.previous_gradient")}


def schedule_batches(state: Mapping[str, Any]) -> list[TrajectoryBatch]:
    """The stored batches of a loaded schedule state (for inspection and tests)."""
    key = "queue" if "queue" in state else "in_flight"
    return [entry["batch"].result() for entry in state[key]]
