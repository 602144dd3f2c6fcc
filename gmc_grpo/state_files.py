"""Checkpoint files without pickle: any nested state as one safetensors file plus one JSON file.

A learner's `state_dict()` is a tree of dicts, lists and tuples whose leaves are tensors, numpy
arrays, numbers, strings, booleans and None. `flatten_state` splits it into

- the tensors (and numpy arrays), each stored under the dotted path where it sat
  (`schedules.0.queue.3.batch.prompts`), for `safetensors`, and
- a JSON tree (the manifest) that keeps everything else and marks where each tensor goes.

`write_state(folder, state)` writes `state.safetensors` and `state.json`; `read_state(folder)`
rebuilds the tree. Reading parses a safetensors header and JSON only: nothing is unpickled, so
a crafted file is refused with an error (`CheckpointError`) and never runs. Anything the format
cannot hold (an arbitrary object, a set, a complex tensor) is refused when writing, with the path
of the offending value, so a learner that adds state learns at once whether it round-trips.

The manifest's encoding (`STATE_FORMAT`, version `STATE_FORMAT_VERSION`):

| value                                   | JSON                                           |
|-----------------------------------------|------------------------------------------------|
| None, bool, int, float (NaN/inf too), str | itself (`NaN`, `Infinity` tokens)            |
| list                                    | a JSON list                                    |
| dict with str keys, none starting `$`   | a JSON object                                  |
| any other dict (int keys, `$` keys)     | `{"$dict": [[key, value], ...]}`               |
| tuple                                   | `{"$tuple": [...]}`                            |
| torch.Tensor                            | `{"$tensor": "<name in state.safetensors>"}`   |
| numpy.ndarray                           | `{"$ndarray": "<name>"}`                       |

A JSON object with exactly one key that starts with `$` is a marker; plain objects never have
such a key (they are written as `$dict`), so the encoding is unambiguous.

A JSON part written beside safetensors by another writer (`llm_runs.checkpoint`'s `state.json`)
goes through `check_json_state` first: a tensor or array in it, or more than
`MAX_JSON_STATE_BYTES`, is refused naming its path, since it would be written as a list of
numbers and come back as a list.

Step folders (`checkpoints/step_<NNNNNN>/`) are written under a temporary name and renamed into
place (`save_step_folder`): a process killed while writing leaves the previous checkpoint whole.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gmc_grpo.errors import write_site
from gmc_grpo.filemodes import give_plain_mode

STATE_FORMAT = "gmc-grpo-state"
STATE_FORMAT_VERSION = 1
CHECKPOINT_DIR = "checkpoints"
_STEP_DIR = re.compile(r"^step_(\d+)$")
_MARKERS = ("$dict", "$tuple", "$tensor", "$ndarray")
# Files a pickle-based checkpoint or model could hide in: never read by gmc-grpo.
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")


class CheckpointError(ValueError):
    """A checkpoint (or state to checkpoint) that cannot be written or read: the message names
    the file or the value's path and what to do."""


# -- the tree <-> (tensors, manifest) ----------------------------------------------------------


def flatten_state(state: Any) -> tuple[dict[str, Any], Any]:
    """`(tensors, manifest)` of a nested state (see the module docstring for the encoding).

    Tensors are detached, moved to the CPU and made contiguous; one that shares memory with
    another (or is a view into a larger buffer) is copied, as safetensors requires.
    """
    import numpy as np
    import torch

    tensors: dict[str, Any] = {}
    seen_storage: set[int] = set()

    def tensor_name(path: str) -> str:
        name = path or "state"
        return name if name not in tensors else f"{name}#{len(tensors)}"

    def store(value: Any, path: str) -> str:
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise CheckpointError(
                    f"state value {path or '<root>'}: numpy object arrays "
                    "cannot be stored (they would need pickle)"
                )
            value = torch.from_numpy(np.require(value, requirements="C"))
        tensor = value.detach().to("cpu").contiguous()
        if tensor.is_complex():
            raise CheckpointError(
                f"state value {path or '<root>'}: complex tensors cannot be stored in "
                "safetensors; store the real and imaginary parts"
            )
        storage = tensor.untyped_storage()
        pointer = storage.data_ptr()
        whole = storage.nbytes() == tensor.numel() * tensor.element_size()
        if pointer in seen_storage or not whole:
            tensor = tensor.clone()
        elif tensor.numel():
            seen_storage.add(pointer)
        name = tensor_name(path)
        tensors[name] = tensor
        return name

    def encode(value: Any, path: str) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return float(value)
        if isinstance(value, torch.Tensor):
            return {"$tensor": store(value, path)}
        if isinstance(value, np.ndarray):
            return {"$ndarray": store(value, path)}
        if isinstance(value, np.generic):  # numpy scalars: their Python value
            return encode(value.item(), path)
        if isinstance(value, tuple):
            return {"$tuple": [encode(v, f"{path}.{i}".lstrip(".")) for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [encode(v, f"{path}.{i}".lstrip(".")) for i, v in enumerate(value)]
        if isinstance(value, Mapping):
            for key in value:
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise CheckpointError(
                        f"state value {path or '<root>'}: dict key {key!r} of type "
                        f"{type(key).__name__} cannot be stored (use str or int keys)"
                    )
            items = {k: encode(v, f"{path}.{k}".lstrip(".")) for k, v in value.items()}
            plain = all(isinstance(k, str) and not k.startswith("$") for k in value)
            return items if plain else {"$dict": [[k, v] for k, v in items.items()]}
        raise CheckpointError(
            f"state value {path or '<root>'} has type {type(value).__name__}, which a checkpoint "
            "cannot store without pickle: return tensors, numpy arrays, numbers, strings, "
            "booleans, None, lists, tuples or dicts from state_dict()"
        )

    return tensors, encode(state, "")


def unflatten_state(tensors: Mapping[str, Any], manifest: Any) -> Any:
    """The state `flatten_state` split into `tensors` and `manifest` (numpy arrays come back as
    numpy arrays, tuples as tuples, int keys as ints)."""

    def tensor(name: Any) -> Any:
        if not isinstance(name, str) or name not in tensors:
            raise CheckpointError(f"the manifest names tensor {name!r}, which the file lacks")
        return tensors[name]

    def decode(value: Any) -> Any:
        if isinstance(value, list):
            return [decode(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, inner),) = value.items()
            if key == "$tensor":
                return tensor(inner)
            if key == "$ndarray":
                return tensor(inner).numpy()
            if key == "$tuple":
                return tuple(decode(v) for v in inner)
            if key == "$dict":
                return {k: decode(v) for k, v in inner}
            if key.startswith("$"):
                raise CheckpointError(f"unknown marker {key!r} in the manifest")
        return {k: decode(v) for k, v in value.items()}

    return decode(manifest)


#: the largest JSON part a checkpoint writes (`check_json_state`): the scalars, counters and
#: queue metadata of a run are a few hundred kB at most, so anything near this size is state
#: that belongs in safetensors (e.g. an optimizer's tensors turned into lists of numbers, which
#: took 35 MB per million parameters, issue 32)
MAX_JSON_STATE_BYTES = 16 * 1024 * 1024


def check_json_state(value: Any, what: str, limit: int = MAX_JSON_STATE_BYTES) -> None:
    """Refuse to write `value` as JSON when it holds a tensor or numpy array, or would take more
    than `limit` bytes: a `CheckpointError` naming `what`, the value's path and the fix.

    A tensor in a JSON tree would be written as a list of numbers (`gmc_grpo.records`), tens of
    GB for a large model's optimizer state, and come back as a list that no optimizer accepts.
    """
    import numpy as np
    import torch

    def walk(item: Any, path: str) -> None:
        if isinstance(item, (torch.Tensor, np.ndarray)):
            raise CheckpointError(
                f"{what}: {path or '<root>'} is a {type(item).__name__} of shape "
                f"{tuple(item.shape)}, which would be written as JSON numbers: split the state "
                "with flatten_state so its tensors go to safetensors"
            )
        if isinstance(item, Mapping):
            for key, inner in item.items():
                walk(inner, f"{path}.{key}".lstrip("."))
        elif isinstance(item, (list, tuple)):
            for index, inner in enumerate(item):
                walk(inner, f"{path}.{index}".lstrip("."))

    walk(value, "")
    size = len(json.dumps(value, allow_nan=True, default=str))
    if size > limit:
        parts = value.items() if isinstance(value, Mapping) else [("<root>", value)]
        largest, _ = max(
            ((key, len(json.dumps(inner, allow_nan=True, default=str))) for key, inner in parts),
            key=lambda pair: pair[1],
        )
        raise CheckpointError(
            f"{what}: {size / 2**20:.1f} MiB of JSON (largest part: {largest!r}), above the "
            f"{limit / 2**20:.0f} MiB limit for a checkpoint's scalars: tensors and arrays "
            "belong in safetensors (flatten_state)"
        )


# -- files -------------------------------------------------------------------------------------


# a safetensors header is a little-endian u64 length, then that many bytes of JSON
_MAX_HEADER_BYTES = 100 * 1024 * 1024


def check_safetensors_file(path: str | Path) -> None:
    """Refuse a file that is not safetensors (e.g. a pickle under a `.safetensors` name) by
    parsing its header only: a `CheckpointError` naming the file; nothing is executed."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        ok = 0 < length <= min(size - 8, _MAX_HEADER_BYTES)
        if ok:
            try:
                ok = isinstance(json.loads(handle.read(length).decode("utf-8")), dict)
            except (UnicodeDecodeError, json.JSONDecodeError):
                ok = False
    if not ok:
        raise CheckpointError(
            f"{path} is not a safetensors file (its header does not parse): gmc-grpo reads "
            "weights and checkpoints as safetensors only and never unpickles; the file is damaged "
            "or is a pickle under another name. Replace it with a file written by "
            "save_pretrained/safetensors"
        )


def read_safetensors(path: str | Path) -> dict[str, Any]:
    """The tensors of a safetensors file; anything else (a pickle, a torn file) is refused with a
    `CheckpointError` naming the file. Only the file's JSON header is parsed: nothing runs."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path} is missing: the checkpoint is incomplete")
    check_safetensors_file(path)
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f"{path} is not a safetensors file ({err}); gmc-grpo writes checkpoints as "
            "safetensors + JSON and never unpickles: the file is damaged or was put there by "
            "something else. Delete the checkpoint folder to restart from an earlier one, or "
            "start the run over (--fresh)"
        ) from None


def write_state(folder: str | Path, state: Any, name: str = "state") -> None:
    """Write `state` as `folder/<name>.safetensors` and `folder/<name>.json`."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors, manifest = flatten_state(state)
    save_file(tensors, str(folder / f"{name}.safetensors"))
    give_plain_mode(folder / f"{name}.safetensors")  # safetensors writes 0600 files
    text = json.dumps(
        {"format": STATE_FORMAT, "version": STATE_FORMAT_VERSION, "state": manifest},
        allow_nan=True,
    )
    with open(folder / f"{name}.json", "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def read_state(folder: str | Path, name: str = "state") -> Any:
    """The state `write_state` wrote into `folder` (no pickle: safetensors and JSON only)."""
    folder = Path(folder)
    meta_path = folder / f"{name}.json"
    if not meta_path.is_file():
        raise CheckpointError(f"{meta_path} is missing: the checkpoint is incomplete")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(
            f"{meta_path} is not valid JSON ({err}): the checkpoint is damaged"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
        raise CheckpointError(f"{meta_path} is not a gmc-grpo state manifest")
    if meta.get("version") != STATE_FORMAT_VERSION:
        raise CheckpointError(
            f"{meta_path} has state format version {meta.get('version')!r}; this gmc-grpo "
            f"reads version {STATE_FORMAT_VERSION}: upgrade gmc-grpo or start the run over"
        )
    return unflatten_state(read_safetensors(folder / f"{name}.safetensors"), meta["state"])


# -- step folders ------------------------------------------------------------------------------


def step_dir_name(step: int) -> str:
    """`step_000800` for step 800."""
    return f"step_{step:06d}"


def list_checkpoints(
    run_dir: str | Path, marker: str = "state.json", folder: str = CHECKPOINT_DIR
) -> dict[int, Path]:
    """`{step: folder}` of the complete checkpoints of a run (those holding `marker`), in
    `run_dir/folder/`."""
    root = Path(run_dir) / folder
    if not root.is_dir():
        return {}
    found = {}
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and child.is_dir() and (child / marker).is_file():
            found[int(match.group(1))] = child
    return found


def latest_checkpoint(run_dir: str | Path, marker: str = "state.json") -> Path | None:
    """The folder of the newest complete checkpoint (None without one)."""
    found = list_checkpoints(run_dir, marker)
    return found[max(found)] if found else None


def save_step_folder(
    run_dir: str | Path,
    step: int,
    write: Callable[[Path], None],
    *,
    keep: int,
    marker: str = "state.json",
    folder: str = CHECKPOINT_DIR,
) -> Path:
    """Write `checkpoints/step_<step>/` (or `folder/step_<step>/`) atomically: `write(tmp)` fills
    a temporary folder, which is renamed into place; then only the newest `keep` checkpoints are
    kept (`keep = 0`: all). Its files get the mode of a plain open under the umask
    (`gmc_grpo.filemodes`)."""
    root = Path(run_dir) / folder
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_dir_name(step)
    tmp = root / f".{step_dir_name(step)}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        with write_site(final):  # a full disk: one line naming the checkpoint, not a traceback
            write(tmp)
            give_plain_mode(tmp)  # the umask's modes (safetensors and save_pretrained write 0600)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in sorted(list_checkpoints(run_dir, marker, folder))[:-keep] if keep > 0 else []:
        shutil.rmtree(root / step_dir_name(old), ignore_errors=True)
    return final


def remove_checkpoints(run_dir: str | Path) -> None:
    """Delete a run's `checkpoints/` folder (a fresh start)."""
    shutil.rmtree(Path(run_dir) / CHECKPOINT_DIR, ignore_errors=True)


def pickled_files(folder: str | Path) -> list[Path]:
    """Files in `folder` (not recursive) whose suffix says pickle (`PICKLE_SUFFIXES`)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in PICKLE_SUFFIXES)
