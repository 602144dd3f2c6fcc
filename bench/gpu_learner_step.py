"""Peak memory and time of one full-actor learner step, GRPO vs GMC (and the other losses).

A Qwen3-1.7B-shaped model built from its config with random weights (no download), bf16,
gradient checkpointing, SDPA attention, paper shapes (Appendix B.1): 8 prompts x 8 responses
= 64 trajectories per step, one optimizer update. Micro-batches hold whole groups, so GMC's
group-level coefficient is computed inside each micro-batch from that micro-batch's own forward
pass and the accumulated gradient equals the full-batch one. The log-softmax over the vocabulary
is computed in chunks under activation checkpointing (never the full `[tokens, vocab]` fp32
logits). Optimizer: torch AdamW on bf16 parameters (bitsandbytes' 8-bit AdamW of B.1 is not
available on the measurement machine: memory for optimizer states is therefore 4x that of B.1).

Usage:
    python bench/gpu_learner_step.py                 # CUDA, Qwen3-1.7B shape, writes JSON
    python bench/gpu_learner_step.py --tiny          # CPU smoke run of the same code path
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from gmc_grpo import advantages
from gmc_grpo.losses import PolicyLossConfig, policy_loss
from gmc_grpo.methods import paper_advantage

# The learner's log-prob functions (chunked, checkpointed log-softmax), shared with the trainer.
from llm_runs.learner import chunked_token_logprobs, response_logprobs  # noqa: F401

# Qwen3-1.7B(-Base) architecture (its published config.json).
QWEN3_1_7B = dict(
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
TINY = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=512,
    tie_word_embeddings=True,
)


def learner_step(model, optimizer, batch, method: str, groups_per_micro: int, chunk: int):
    """One optimizer update on `batch` (all groups), micro-batched by whole groups."""
    input_ids, behavior, mask, rewards, prompt_len = batch
    num_groups, group_size = rewards.shape
    config = PolicyLossConfig(method=method, max_length=mask.shape[-1])
    adv = advantages.compute(rewards, paper_advantage(method))
    optimizer.zero_grad(set_to_none=True)
    lag = torch.full((groups_per_micro, group_size), 128, device=rewards.device)
    for g0 in range(0, num_groups, groups_per_micro):
        sl = slice(g0, g0 + groups_per_micro)
        ids = input_ids[sl].reshape(-1, input_ids.shape[-1])
        lp = response_logprobs(model, ids, prompt_len, chunk).view(-1, group_size, mask.shape[-1])
        loss, _ = policy_loss(lp, behavior[sl], adv[sl], mask[sl], config, version_lag=lag)
        # the paper's 1/(T B G) over the full batch: each micro-batch is 1/(num micro-batches)
        (loss * groups_per_micro / num_groups).backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return float(grad_norm)


def make_batch(model, num_groups, group_size, prompt_len, response_len, vocab, device, seed):
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (num_groups, group_size, prompt_len + response_len)
    input_ids = torch.randint(0, vocab, shape, generator=gen, device=device)
    input_ids[:, :, :prompt_len] = input_ids[:, :1, :prompt_len]  # a group shares its prompt
    with torch.no_grad():
        lp = torch.cat(
            [
                response_logprobs(model, input_ids[g], prompt_len, 4096).unsqueeze(0)
                for g in range(num_groups)
            ]
        )
    # a stale behavior policy: per-token log-ratios of a few hundredths of a nat
    behavior = lp.float() + 0.02 * torch.randn(lp.shape, generator=gen, device=device)
    lengths = torch.randint(
        response_len // 4, response_len + 1, (num_groups, group_size), generator=gen, device=device
    )
    mask = torch.arange(response_len, device=device) < lengths.unsqueeze(-1)
    rewards = (torch.rand(num_groups, group_size, generator=gen, device=device) < 0.5).float()
    return input_ids, behavior, mask, rewards, prompt_len


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="tiny model on CPU (smoke test)")
    parser.add_argument("--methods", default="grpo,gmc,tic,vcpo,is,a3po")
    parser.add_argument(
        "--steps", type=int, default=2, help="timed steps per method (after 1 warm-up)"
    )
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--response-len", type=int, default=4096, help="completion limit, B.1")
    parser.add_argument("--groups-per-micro", type=int, default=1)
    parser.add_argument("--out", default="gpu_learner_step.json")
    args = parser.parse_args()

    from transformers import Qwen3Config, Qwen3ForCausalLM

    device = "cpu" if args.tiny else "cuda"
    dtype = torch.float32 if args.tiny else torch.bfloat16
    shape = TINY if args.tiny else QWEN3_1_7B
    if args.tiny:
        args.prompt_len, args.response_len = 16, 48
    torch.manual_seed(0)
    config = Qwen3Config(**shape, attn_implementation="sdpa", use_cache=False)
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(dtype)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), weight_decay=0.0)
    num_params = sum(p.numel() for p in model.parameters())
    batch = make_batch(
        model, 8, 8, args.prompt_len, args.response_len, shape["vocab_size"], device, 0
    )
    tokens = int(batch[2].sum()) + 64 * args.prompt_len
    results = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "params": num_params,
        "dtype": str(dtype),
        "shape": {
            "trajectories": 64,
            "prompt_len": args.prompt_len,
            "response_len": args.response_len,
            "tokens_per_step_incl_prompt": tokens,
            "groups_per_micro": args.groups_per_micro,
        },
        "methods": {},
    }
    for method in args.methods.split(","):
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        learner_step(model, optimizer, batch, method, args.groups_per_micro, 4096)  # warm-up
        times = []
        for _ in range(args.steps):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            grad_norm = learner_step(model, optimizer, batch, method, args.groups_per_micro, 4096)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
        results["methods"][method] = {
            "step_seconds": times,
            "step_seconds_mean": sum(times) / len(times),
            "peak_memory_gib": peak,
            "tokens_per_second": tokens / (sum(times) / len(times)),
            "grad_norm": grad_norm,
        }
        print(method, json.dumps(results["methods"][method]), flush=True)
    # the loss alone on GPU-sized tensors: [8, 8, T] log-probs, forward + backward
    loss_times = {}
    T = args.response_len
    gen = torch.Generator(device=device).manual_seed(1)
    lp0 = -torch.rand(8, 8, T, generator=gen, device=device)
    beh = lp0 + 0.05 * torch.randn(8, 8, T, generator=gen, device=device)
    mask = torch.ones(8, 8, T, dtype=torch.bool, device=device)
    adv = torch.randn(8, 8, generator=gen, device=device)
    lag = torch.full((8, 8), 128, device=device)
    for method in args.methods.split(","):
        cfg = PolicyLossConfig(method=method)
        reps = 50
        for rep in range(reps + 5):
            if rep == 5:
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
            lp = lp0.clone().requires_grad_(True)
            loss, _ = policy_loss(lp, beh, adv, mask, cfg, version_lag=lag)
            loss.backward()
        if device == "cuda":
            torch.cuda.synchronize()
        loss_times[method] = (time.perf_counter() - t0) / reps
    results["loss_only_seconds"] = loss_times
    results["loss_only_ratio_to_grpo"] = (
        {m: t / loss_times["grpo"] for m, t in loss_times.items()} if "grpo" in loss_times else {}
    )
    print(json.dumps(results, indent=1))
    Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
