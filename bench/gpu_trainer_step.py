"""One update of the trainer's own `llm_runs.learner.Learner` at paper shapes, per method.

Same model and shapes as `bench/gpu_learner_step.py` (a Qwen3-1.7B-shaped random-init model
from its config, bf16, gradient checkpointing, 8 groups x 8 responses, prompt 512 tokens,
responses of 1,024 to 4,096 tokens, one group per micro-batch), but through the code path
`gmc-grpo llm train` runs: `TrajectoryBatch` on the CPU, `Learner.step` (advantages, whole-group
micro-batches, the core loss, gradient clipping, GAC projection, VCPO's per-trajectory score
norms and ESS step size), `make_optimizer(kind="auto")` and the cosine schedule of B.1.

    python bench/gpu_trainer_step.py [--methods grpo,gmc,gac,vcpo] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from gmc_grpo.methods import MethodSettings, get_method
from gmc_grpo.schedules import CosineWithWarmup
from llm_runs.learner import (
    Learner,
    LearnerSettings,
    TrajectoryBatch,
    batch_logprobs,
    make_optimizer,
)


def build_model(tiny: bool, device: str):
    from gpu_learner_step import QWEN3_1_7B, TINY  # the same shapes (this script's folder)
    from transformers import Qwen3Config, Qwen3ForCausalLM

    shape = TINY if tiny else QWEN3_1_7B
    config = Qwen3Config(**shape, attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(torch.float32 if tiny else torch.bfloat16)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, shape["vocab_size"]


def make_batch(model, vocab: int, prompt_len: int, response_len: int, seed: int) -> TrajectoryBatch:
    gen = torch.Generator().manual_seed(seed)
    b, g = 8, 8
    lengths = torch.randint(response_len // 4, response_len + 1, (b, g), generator=gen)
    ids = torch.randint(
        1, vocab, (b, g, prompt_len + response_len), generator=gen, dtype=torch.int32
    )
    ids[:, :, :prompt_len] = ids[:, :1, :prompt_len]
    batch = TrajectoryBatch(
        input_ids=ids,
        prompt_len=torch.full((b, g), prompt_len, dtype=torch.long),
        response_len=lengths,
        engine_logprobs=torch.zeros(b, g, response_len),
        learner_logprobs=None,
        rewards=(torch.rand(b, g, generator=gen) < 0.5).float(),
        truncated=lengths == response_len,
        prompt_index=torch.arange(b),
        behavior_version=0,
    )
    current = batch_logprobs(model, batch, 4096, 1)
    # a stale behavior policy: per-token log-ratios of a few hundredths of a nat
    batch.engine_logprobs = (
        current + 0.02 * torch.randn(current.shape, generator=gen) * batch.response_mask()
    )
    return batch


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--methods", default="grpo,gmc,gac,vcpo")
    parser.add_argument(
        "--steps", type=int, default=1, help="timed steps per method after a warm-up"
    )
    parser.add_argument("--tiny", action="store_true", help="tiny model on the CPU (smoke test)")
    parser.add_argument("--out", default="gpu_trainer_step.json")
    args = parser.parse_args()
    device = "cpu" if args.tiny else "cuda"
    prompt_len, response_len = (16, 48) if args.tiny else (512, 4096)
    model, vocab = build_model(args.tiny, device)
    batch = make_batch(model, vocab, prompt_len, response_len, 0)
    optimizer, optimizer_name = make_optimizer(
        model.parameters(),
        kind="auto",
        lr=1e-6,
        betas=(0.9, 0.999),
        weight_decay=0.0,
        device=torch.device(device),
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, CosineWithWarmup(800, 24))
    results = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "optimizer": optimizer_name,
        "tokens_per_step": batch.num_tokens(),
        "methods": {},
    }
    for method in args.methods.split(","):
        settings = LearnerSettings(
            method=method,
            loss=get_method(method).loss_config(MethodSettings(), max_length=response_len),
            advantage="paper",
            groups_per_micro=1,
            logit_chunk=4096,
            grad_clip=1.0,
        )
        learner = Learner(model, optimizer, scheduler, settings)
        version = 128
        learner.step(batch, version)  # warm-up (and GAC's first gradient)
        times, metrics = [], {}
        for _ in range(args.steps):
            t0 = time.perf_counter()
            metrics = learner.step(batch, version)
            times.append(time.perf_counter() - t0)
        keep = (
            "perf/peak_memory_gb",
            "optim/grad_norm",
            "ratio/capped_frac",
            "ratio/clipped_token_frac",
            "gac/cosine",
            "gac/removed_frac",
            "vcpo/step_scale",
            "policy/entropy",
        )
        results["methods"][method] = {
            "step_seconds": times,
            **{k: metrics[k] for k in keep if k in metrics},
        }
        print(method, json.dumps(results["methods"][method]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
