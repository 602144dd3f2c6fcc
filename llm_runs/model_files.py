"""The model folder a run names, found and checked without torch.

- `check_model_dir`: a Hugging Face model folder with safetensors weights (no pickles);
- `resolve_model(path, step)`: a model folder, or a training run's checkpoint or model copy.

`gmc-grpo llm train` and `llm eval` call them before torch loads, so a wrong `--model` is
refused in a fraction of a second (issues 32, 36: it used to wait 3-6 s for torch); the loaders
(`llm_runs.engines`, `llm_runs.train`, `llm_runs.evaluation.protocol`, `llm_runs.checkpoint`) call them
again before they read a file. `llm_runs.tiny` re-exports `check_model_dir` and
`PICKLED_WEIGHT_SUFFIXES`, `llm_runs.checkpoint` `resolve_model`, `step_from_name` and
`MODEL_COPY_DIR`.
"""

from __future__ import annotations

import re
from pathlib import Path

from gmc_grpo.state_files import CHECKPOINT_DIR

#: folder of a run's bfloat16 model copies (`llm_runs.checkpoint.save_checkpoint(...,
#: model_copy_dtype=...)`)
MODEL_COPY_DIR = "models"

# Weight files that are pickles (loading one can run arbitrary code): never loaded.
PICKLED_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def check_model_dir(model_dir: str | Path) -> Path:
    """Return `model_dir` as a `Path` after checking it holds a Hugging Face model with
    safetensors weights.

    Raises `FileNotFoundError` naming the path and the fix when it does not. A folder whose
    weights are only pickles (`pytorch_model.bin`, `*.pt`, ...) is refused without reading them:
    unpickling a crafted file runs code, whatever `torch.load`'s defaults of the installed torch.
    Loaders then pass `use_safetensors=True` (transformers) or `load_format="safetensors"` (vLLM).
    """
    path = Path(model_dir)
    if not path.is_dir():
        raise FileNotFoundError(
            f"model directory {str(path)!r} does not exist: pass a local directory written by "
            "`save_pretrained` (for tests, `llm_runs.tiny.build_tiny_qwen3(dir)` makes one)"
        )
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model directory {str(path)!r} has no config.json: it is not a Hugging Face model "
            "directory (write one with `model.save_pretrained(dir)` and "
            "`tokenizer.save_pretrained(dir)`, or `llm_runs.tiny.build_tiny_qwen3(dir)`)"
        )
    if not any(path.glob("*.safetensors")):
        pickles = sorted(p.name for p in path.iterdir() if p.suffix in PICKLED_WEIGHT_SUFFIXES)
        found = f"only pickled weights ({', '.join(pickles)})" if pickles else "no weights"
        raise FileNotFoundError(
            f"model directory {str(path)!r} holds {found}: gmc-grpo loads safetensors only "
            "(unpickling a crafted weight file runs code). Use a checkpoint published as "
            "safetensors, or convert it once where you trust the file: "
            "`AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir)` writes "
            "model.safetensors"
        )
    from gmc_grpo.state_files import check_safetensors_file

    for weights in sorted(path.glob("*.safetensors")):
        check_safetensors_file(weights)  # a pickle under a safetensors name is refused here
    return path


# -- model resolution ------------------------------------------------------------------------

_STEP_IN_NAME = re.compile(r"(\d+)$")


def step_from_name(path: Path) -> int | None:
    """The trailing integer of a checkpoint folder name (`step_000800` -> 800), else None."""
    match = _STEP_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def _model_dir_in(checkpoint: Path) -> Path | None:
    """The Hugging Face model folder of a checkpoint: itself or its `model/` subfolder."""
    for candidate in (checkpoint, checkpoint / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    return None


def resolve_model(model: str | Path, step: int | None = None) -> tuple[Path, int | None]:
    """`(model_dir, step)` for a model directory or a run directory with `checkpoints/` (and/or
    the model copies of `models/`, `keep_checkpoint_models`).

    A run directory picks the checkpoint whose folder name ends in `step` (or the highest step);
    a step with no checkpoint left is read from `models/` when its model copy is there.
    Raises `FileNotFoundError` naming the path and what was expected there.
    """
    path = Path(model)
    if not path.exists():
        raise FileNotFoundError(
            f"--model {str(path)!r} does not exist: pass a Hugging Face model directory or a "
            "training run directory with checkpoints/"
        )
    checkpoints = path / CHECKPOINT_DIR
    copies = path / MODEL_COPY_DIR
    # a run directory first: its own config.json is the run record, not a model's
    direct = None if checkpoints.is_dir() or copies.is_dir() else _model_dir_in(path)
    if direct is not None:
        return direct, step if step is not None else step_from_name(path)
    if not checkpoints.is_dir() and not copies.is_dir():
        raise FileNotFoundError(
            f"--model {str(path)!r} is neither a model directory (no config.json) nor a run "
            "directory (no checkpoints/ or models/ folder)"
        )
    found: dict[int, Path] = {}
    for folder in (copies, checkpoints):  # a checkpoint's own float32 model wins
        if folder.is_dir():
            found.update(
                {
                    s: c
                    for c in folder.iterdir()
                    if c.is_dir()
                    and not c.name.startswith(".")
                    and (s := step_from_name(c)) is not None
                }
            )
    if not found:
        raise FileNotFoundError(
            f"{path} holds no checkpoint or model-copy folders named like step_<N> (in "
            f"{CHECKPOINT_DIR}/ or {MODEL_COPY_DIR}/)"
        )
    chosen = step if step is not None else max(found)
    if chosen not in found:
        raise FileNotFoundError(
            f"{path} has no checkpoint or model copy for step {chosen}; available: {sorted(found)}"
        )
    model_dir = _model_dir_in(found[chosen])
    if model_dir is None:
        raise FileNotFoundError(
            f"checkpoint {found[chosen]} holds no model (no config.json in it or in model/)"
        )
    return model_dir, chosen
