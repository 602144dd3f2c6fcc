"""The learner's numeric precision: parameter dtype, compute dtype, and why the default is mixed.

`LLMTrainConfig.learner_dtype` names one of `LEARNER_DTYPES`:

| name               | parameters, gradients, AdamW states | forward / backward compute       |
|--------------------|-------------------------------------|----------------------------------|
| `"float32"`        | float32                             | float32                          |
| `"mixed_bfloat16"` | float32 (the master weights)        | bfloat16 (`torch.autocast`)      |
| `"bfloat16"`       | bfloat16 (pure: no master copy)     | bfloat16                         |
| `"float16"`        | float16 (pure: no master copy)      | float16                          |
| `"auto"`           | `"mixed_bfloat16"` on CUDA, `"float32"` elsewhere                      |

Why mixed on CUDA. An AdamW step moves each element by about `lr` (its normalised update
`m / sqrt(v)` is of order one), and a parameter stored in bfloat16 keeps 8 significant bits: near
`|w| = 0.02` its spacing is `2^-13 = 1.2e-4`, so a step smaller than half of that, `6.1e-5`, is
rounded away. At the paper's lr `1e-6` (Appendix B.1) almost no element of a bfloat16 parameter
moves (`underflow_lr`, measured in `tests/llm_runs/test_llm_train_precision.py`). The mixed
default keeps the parameters, gradients and optimizer states in float32 and runs the matrix
products of the forward (and, through autograd, of the backward) in bfloat16, as verl (fp32
parameters, bf16 compute) and DeepSpeed (fp32 master weights) do. `"bfloat16"` remains available
by name and gets a warning naming its underflow lr (`precision_warning`).

On a CPU, `"auto"` stays float32 (the records of the CPU recipes and tests are float32 runs);
`"mixed_bfloat16"` runs there too (CPU autocast), which is how the tests check the GPU default.

How autocast is attached. `load_policy` marks the learner's model with its compute dtype
(`set_compute_dtype`); every forward of that model that the learner or the rollout producer runs
enters `compute_autocast(model)` (the log-prob functions of `llm_runs.batch`, the reference
per-trajectory path of `llm_runs.learner`, VCPO's in-backward norms in `llm_runs.sample_norms`).
Backward passes run outside the context, as PyTorch recommends: autograd replays each op in the
dtype its forward used, and activation checkpointing's recomputation re-enters the autocast state
of its forward. The rollout engine gets bfloat16 weights (vLLM's dtype, or the HF engine's
compute dtype) cast from the float32 parameters at each sync; checkpoints keep float32.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from llm_runs.choices import LEARNER_DTYPES  # noqa: F401 (re-exported)

#: the attribute `set_compute_dtype` puts on a model (None or absent: no autocast)
_COMPUTE_ATTRIBUTE = "gmc_grpo_compute_dtype"
#: a typical weight magnitude of a pretrained LLM (Qwen3's `initializer_range`): the scale at
#: which `underflow_lr` is quoted
TYPICAL_WEIGHT = 0.02


@dataclass(frozen=True)
class Precision:
    """A resolved learner precision."""

    name: str
    """one of `LEARNER_DTYPES` except "auto\""""
    param_dtype: torch.dtype
    """dtype of the parameters, their gradients and the optimizer's float states"""
    compute_dtype: torch.dtype | None
    """autocast dtype of the forward passes; None: compute in `param_dtype`"""

    @property
    def pure_low_precision(self) -> bool:
        """Parameters below float32 with no master copy (updates can underflow)."""
        return self.param_dtype in (torch.bfloat16, torch.float16)

    @property
    def engine_dtype(self) -> str:
        """The dtype name a rollout engine computing like this learner uses."""
        return str(self.compute_dtype or self.param_dtype).removeprefix("torch.")


def resolve_precision(name: str, device: torch.device) -> Precision:
    """The precision `name` means on `device` ("auto": mixed bfloat16 on CUDA, else float32)."""
    if name not in LEARNER_DTYPES:
        raise ValueError(f"learner_dtype must be one of {LEARNER_DTYPES}, got {name!r}")
    if name == "auto":
        name = "mixed_bfloat16" if device.type == "cuda" else "float32"
    if name == "mixed_bfloat16":
        return Precision(name, torch.float32, torch.bfloat16)
    return Precision(name, getattr(torch, name), None)


def underflow_lr(dtype: torch.dtype, weight: float = TYPICAL_WEIGHT) -> float:
    """The AdamW lr below which a step of about `lr` is rounded away at magnitude `weight`:
    half the spacing of `dtype` there, `2^floor(log2 |w|) * eps / 2` (bfloat16 at 0.02:
    `2^-6 * 2^-7 / 2 = 6.1e-5`; float32: `2^-30 = 9.3e-10`)."""
    return 2.0 ** math.floor(math.log2(abs(weight))) * torch.finfo(dtype).eps / 2


def precision_warning(precision: Precision, lr: float) -> str | None:
    """The warning of a pure low-precision learner (None for float32 and mixed)."""
    if not precision.pure_low_precision:
        return None
    name = str(precision.param_dtype).removeprefix("torch.")
    limit = underflow_lr(precision.param_dtype)
    verdict = (
        f"this run's lr {lr:g} is below it: most elements will not change"
        if lr < limit
        else f"this run's lr {lr:g} is above it, but smaller steps (warm-up, the cosine tail) are lost"
    )
    return (
        f"warning: learner_dtype={precision.name!r} keeps the parameters in {name} with no "
        f"float32 master copy: an AdamW step (about lr per element) is rounded away where lr < "
        f"{limit:.2g} (half the {name} spacing at |w| = {TYPICAL_WEIGHT}); {verdict}. "
        "The default on CUDA, learner_dtype='auto' = 'mixed_bfloat16', keeps float32 parameters "
        "and computes in bfloat16"
    )


def set_compute_dtype(model: torch.nn.Module, dtype: torch.dtype | None) -> None:
    """Mark `model`'s forward passes to run under autocast in `dtype` (None: no autocast)."""
    setattr(model, _COMPUTE_ATTRIBUTE, dtype)


def compute_dtype(model: torch.nn.Module) -> torch.dtype | None:
    """The autocast dtype `set_compute_dtype` gave `model` (None: none)."""
    return getattr(model, _COMPUTE_ATTRIBUTE, None)


@contextlib.contextmanager
def compute_autocast(model: torch.nn.Module) -> Iterator[None]:
    """Autocast in the model's compute dtype on its device (a no-op for an unmarked model)."""
    dtype = compute_dtype(model)
    if dtype is None:
        yield
        return
    device = next(model.parameters()).device
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield


def autocast_state(device_type: str) -> torch.dtype | None:
    """The autocast dtype active for `device_type` now (None: autocast off); custom autograd
    functions record it in forward and re-enter it in backward (`reenter_autocast`)."""
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def reenter_autocast(device_type: str, dtype: torch.dtype | None):
    """A context that re-enters autocast `dtype` on `device_type` (nothing when None)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=dtype)


def parameter_snapshot(
    model: torch.nn.Module, device: torch.device | str | None = None
) -> dict[str, torch.Tensor]:
    """A detached copy of every trainable parameter (for `parameter_change`), on `device`
    (default: the parameter's own; "cpu" keeps a large model's copy off the GPU)."""
    return {
        n: p.detach().to(device or p.device, copy=True)
        for n, p in model.named_parameters()
        if p.requires_grad
    }


def parameter_change(before: dict[str, torch.Tensor], model: torch.nn.Module) -> dict[str, float]:
    """How far `model` moved from `before`: the fraction of elements that changed at all and the
    total `sum |w_after - w_before|` (float64), over the parameters of `before`."""
    params = dict(model.named_parameters())
    elements = changed = 0
    total = 0.0
    for name, old in before.items():
        new = params[name].detach()
        old = old.to(new.device)
        elements += old.numel()
        changed += int((new != old).sum())
        total += float((new.double() - old.double()).abs().sum())
    return {"fraction_changed": changed / max(elements, 1), "abs_delta": total}
