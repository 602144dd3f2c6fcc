"""A memory model of the paper's GPU runs: Qwen3-1.7B, 4B, 8B, per layout and method family.

A model, not a measurement: every term is a count of bytes of the tensors the learner and vLLM
hold at their peaks, from the architecture's published `config.json` (`QWEN3_SHAPES`). The one
GPU measurement we have, the 1.7B learner step of `bench/gpu_learner_step.py` and
`bench/gpu_trainer_step.py` on an H200 (bf16 parameters, torch AdamW, padded groups of
8 x 4,608 tokens: 27.35 and 29.96 GiB), is what `calibration_check` compares the model with
(it gives 29.4 GiB for that configuration). Everything else is pending a GPU.

Learner terms (`P` parameters, `N` tokens of the largest micro-batch, `L` layers, `H` hidden,
`I` MLP width, `V` vocabulary; `b` the parameter bytes, 4 under the mixed default):

- parameters `b P`, gradients `b P` (float32 under the mixed default: `llm_runs.precision`);
- optimizer states: 8-bit AdamW `2 P` (+ one float32 absolute maximum per 256-element block
  and state: bitsandbytes' blockwise quantisation, seen in its 0.50.1 state, 16 maxima for a
  4,096-element parameter), torch AdamW `2 b P`;
- autocast's bfloat16 copies of the weights, cached for the forward pass: `2 P` (mixed only);
- activations with gradient checkpointing: each layer's input kept for its recomputation,
  `L N H` values of the residual stream (float32 under autocast: the embedding and the residual
  additions stay float32), one layer's recomputed intermediates and their gradients,
  `2 N (q + 2 kv + 2 H + 4 I)` values in the compute dtype, plus under autocast the float32
  copies of q and k that Qwen3's q/k RMSNorm computes in and their gradients,
  `2 N (q + kv)` float32 values (ours: read from transformers' Qwen3RMSNorm, which upcasts its
  input); and one chunk of the log-softmax, three float32 `[chunk, V]` arrays and one in the
  compute dtype, plus under autocast the bfloat16 copy of the `[V, H]` output weight that
  autocast makes for the chunk's matrix product outside the forward's weight cache (freed after
  the chunk; 0.6 GB at 1.7B, 1.2 GB at 8B);
- method extras: GAC's previous gradient (`b P`, float32 under mixed) and at most 256 MiB of
  temporaries (`gmc_grpo.hooks.gac_project_parameters`); VCPO's in-backward norms, one buffer of
  the parameters per group of the micro-batch (parameter dtype) and, in the output layer's
  backward, three float32 `[V, H]` arrays and one in the parameter dtype
  (`llm_runs.sample_norms`).

vLLM terms: bfloat16 weights `2 P` and the KV cache of the rollouts in flight,
`2 L kv_heads head_dim` bfloat16 values per token, for `B G` sequences of
`max_prompt_tokens + max_completion_tokens` (64 x 5,120 in B.1: no sequence waits for cache).
vLLM runs with less cache (it queues or preempts requests), and adds CUDA-graph and activation
workspace (a few GiB) that is not modelled. One GPU holds both: without sleep mode both stay
resident (`vllm_gpu_memory_utilization` is vLLM's share), so the GPU needs the learner's peak plus
vLLM; with vLLM's sleep mode (`LLMTrainConfig.vllm_sleep_mode`, the one-GPU default on CUDA) vLLM
holds nothing during the learner's step (its weights in host memory, its KV cache freed; the CUDA
context and graph pools, not modelled, stay) and the learner holds only its parameters and
optimizer states while vLLM generates (`RESIDENT_TERMS`: gradients are freed after each step,
autocast's copies after each forward), so the GPU needs the larger of the learner's peak and
its resident memory (plus GAC's previous gradient) plus vLLM. Two GPUs hold one each.

`python -m llm_runs.memory` prints the table of `docs/gpu.md`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

GIB = 2**30


@dataclass(frozen=True)
class ModelShape:
    """The architecture numbers a memory model needs (a Qwen3 `config.json`)."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool

    def parameters(self) -> int:
        """Trainable parameters, a tied output layer counted once."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * (q + 2 * kv) + q * self.hidden + 2 * self.head_dim
        layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return embeddings + self.layers * layer + self.hidden


def shape_of(config) -> ModelShape:
    """The `ModelShape` of a transformers Qwen3 config (`Qwen3Config` or the like)."""
    return ModelShape(
        vocab=config.vocab_size,
        hidden=config.hidden_size,
        intermediate=config.intermediate_size,
        layers=config.num_hidden_layers,
        heads=config.num_attention_heads,
        kv_heads=config.num_key_value_heads,
        head_dim=getattr(config, "head_dim", None)
        or config.hidden_size // config.num_attention_heads,
        tied=bool(config.tie_word_embeddings),
    )


#: Qwen3-*-Base, from their published `config.json` (all: vocabulary 151,936, head_dim 128,
#: 8 KV heads)
QWEN3_SHAPES: dict[str, ModelShape] = {
    "1.7B": ModelShape(151936, 2048, 6144, 28, 16, 8, 128, tied=True),
    "4B": ModelShape(151936, 2560, 9728, 36, 32, 8, 128, tied=True),
    "8B": ModelShape(151936, 4096, 12288, 36, 32, 8, 128, tied=False),
}
#: the method families whose learner memory differs
FAMILIES: tuple[str, ...] = ("grpo/tic/gmc", "vcpo", "gac")
#: elements per block of bitsandbytes' 8-bit optimizer states (one float32 maximum each)
BNB_BLOCK = 256


def memory_family(method: str) -> str:
    """The memory family of a registered method, asked of its spec (`gmc_grpo.methods`): a
    gradient edit with state (GAC's previous gradient) is "gac", a baseline that needs
    per-trajectory score norms (VCPO's) is "vcpo", any other "grpo/tic/gmc"."""
    from gmc_grpo.methods import get_method

    spec = get_method(method)
    if spec.gradient_edit is not None:
        return "gac"
    if spec.baseline is not None and spec.baseline.needs_score_norms:
        return "vcpo"
    return "grpo/tic/gmc"


def learner_bytes(
    shape: ModelShape,
    *,
    family: str = "grpo/tic/gmc",
    precision: str = "mixed_bfloat16",
    optimizer: str = "adamw8bit",
    micro_tokens: int = 8 * (1024 + 4096),
    groups_per_micro: int = 1,
    logit_chunk: int = 4096,
) -> dict[str, float]:
    """The learner's peak memory by term, in bytes (see the module docstring).

    precision: "mixed_bfloat16" (the CUDA default), "bfloat16" (pure) or "float32".
    optimizer: "adamw8bit" (B.1) or "adamw" (torch's).
    micro_tokens: `N`, tokens of the largest micro-batch (B.1's worst case: one group of 8
        responses of 1,024 + 4,096 tokens).
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    p = shape.parameters()
    param = 2 if precision == "bfloat16" else 4
    compute = 4 if precision == "float32" else 2
    residual = 2 if precision == "bfloat16" else 4
    mixed = precision == "mixed_bfloat16"
    n, h = micro_tokens, shape.hidden
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    terms = {
        "parameters": param * p,
        "gradients": param * p,
        "optimizer states": (
            2 * p + 2 * 4 * p / BNB_BLOCK if optimizer == "adamw8bit" else 2 * param * p
        ),
        "autocast weight copies": 2 * p if precision == "mixed_bfloat16" else 0,
        "checkpointed layer inputs": shape.layers * n * h * residual,
        "one layer recomputed": 2 * n * (q + 2 * kv + 2 * h + 4 * shape.intermediate) * compute
        + (2 * n * (q + kv) * 4 if mixed else 0),
        "log-softmax chunk": logit_chunk * shape.vocab * (3 * 4 + compute)
        + (shape.vocab * h * 2 if mixed else 0),
        "method extra": 0.0,
    }
    if family == "gac":
        terms["method extra"] = param * p + 256 * 2**20
    elif family == "vcpo":
        terms["method extra"] = groups_per_micro * param * p + shape.vocab * h * (3 * 4 + param)
    return terms


def engine_bytes(
    shape: ModelShape, *, sequences: int = 64, tokens: int = 1024 + 4096
) -> dict[str, float]:
    """vLLM's weights (bfloat16) and the KV cache of `sequences` sequences of `tokens`, bytes."""
    per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * 2
    return {"weights": 2 * shape.parameters(), "KV cache": per_token * sequences * tokens}


STATIC_TERMS = ("parameters", "gradients", "optimizer states", "autocast weight copies")
#: what the learner keeps on the GPU between its steps, while vLLM generates (the gradients are
#: set to None after each step, autocast's weight copies live for one forward); GAC also keeps
#: its previous gradient (`resident_bytes`)
RESIDENT_TERMS = ("parameters", "optimizer states")


def resident_bytes(shape: ModelShape, *, family: str = "grpo/tic/gmc", **options) -> float:
    """The learner's memory between steps (`RESIDENT_TERMS`, GAC's previous gradient), bytes;
    `options` as `learner_bytes`."""
    terms = learner_bytes(shape, family=family, **options)
    kept = sum(terms[k] for k in RESIDENT_TERMS)
    if family == "gac":  # the previous gradient, in the parameter dtype (not the temporaries)
        kept += terms["parameters"]
    return kept


def memory_rows(**learner_options) -> list[dict[str, object]]:
    """One row per (model, method family), in GiB: the learner's static memory (parameters,
    gradients, 8-bit AdamW states, autocast copies), its activations and method extras, its peak
    with 8-bit and with torch AdamW, vLLM's weights + full KV cache, the one-GPU sum, and the
    one-GPU need with vLLM's sleep mode (the larger of the learner's peak and its resident
    memory plus vLLM)."""
    rows = []
    for name, shape in QWEN3_SHAPES.items():
        engine = sum(engine_bytes(shape).values()) / GIB
        for family in FAMILIES:
            options = {**learner_options, "family": family}
            terms = learner_bytes(shape, optimizer="adamw8bit", **options)
            static = sum(terms[k] for k in STATIC_TERMS) / GIB
            eight = sum(terms.values()) / GIB
            torch_adamw = sum(learner_bytes(shape, optimizer="adamw", **options).values()) / GIB
            resident = resident_bytes(shape, optimizer="adamw8bit", **options) / GIB
            rows.append(
                {
                    "model": name,
                    "parameters": shape.parameters(),
                    "family": family,
                    "static_gib": static,
                    "activations_gib": eight - static,
                    "learner_adamw8bit_gib": eight,
                    "learner_adamw_gib": torch_adamw,
                    "engine_gib": engine,
                    "one_gpu_gib": eight + engine,
                    "resident_gib": resident,
                    "one_gpu_sleep_gib": max(eight, resident + engine),
                }
            )
    return rows


def calibration_check() -> dict[str, float]:
    """The model at the measured configuration: Qwen3-1.7B, pure bf16 parameters, torch AdamW,
    one padded group of 8 x (512 + 4,096) tokens per micro-batch (bench/results/
    gpu_learner_step_h200.json: 27.35 GiB; gpu_trainer_step_h200.json: 29.96 GiB)."""
    terms = learner_bytes(
        QWEN3_SHAPES["1.7B"], precision="bfloat16", optimizer="adamw", micro_tokens=8 * 4608
    )
    return {"modelled_gib": sum(terms.values()) / GIB, "measured_gib": (27.35, 29.96)}


def markdown_table(rows: list[dict[str, object]]) -> str:
    """The rows of `memory_rows` as the Markdown table of `docs/gpu.md`."""
    lines = [
        "| model | method | learner static | + activations, extras | learner peak (8-bit AdamW) "
        "| learner peak (torch AdamW) | vLLM | one GPU (learner + vLLM) "
        "| one GPU, vLLM sleeping during steps |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} ({r['parameters'] / 1e9:.2f} B) | {r['family']} "
            f"| {r['static_gib']:.1f} | {r['activations_gib']:.1f} "
            f"| {r['learner_adamw8bit_gib']:.1f} | {r['learner_adamw_gib']:.1f} "
            f"| {r['engine_gib']:.1f} | {r['one_gpu_gib']:.1f} | {r['one_gpu_sleep_gib']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m llm_runs.memory",
        description="The memory model of docs/gpu.md (a model, not a measurement).",
    )
    parser.add_argument("--precision", default="mixed_bfloat16", help="learner precision")
    parser.add_argument("--micro-tokens", type=int, default=8 * 5120, help="tokens per micro-batch")
    args = parser.parse_args(argv)
    print(markdown_table(memory_rows(precision=args.precision, micro_tokens=args.micro_tokens)))
    check = calibration_check()
    print(
        f"\nGiB, a model (not measured). Calibration: the model gives {check['modelled_gib']:.1f} "
        f"GiB for the measured 1.7B bf16 step (measured {check['measured_gib'][0]} and "
        f"{check['measured_gib'][1]} GiB)"
    )


if __name__ == "__main__":
    main()
