"""The packed learner with each group's prompt once against every prompt copied, on a CPU.

The tiny model of the Qwen3 stage's recipe (`llm_runs/configs/tiny_additions_sweep.json`: a
random-init 2-layer Qwen3, hidden size 128, float32, no activation checkpointing) and a batch of
its shape: 8 groups x 8 responses, each group's prompt one of the task's (`llm_runs.arithmetic`:
`Problem: a+b\\nAnswer:`, operands to 49), each response as long as the task's answer (`
\\boxed{a+b}` and EOS) with random tokens. Each case is one forward and backward of the packed
learner's log-probs (`pack_micro_batch` -> `packed_hidden_states` -> the chunked log-softmax, a
weighted sum's backward) over the whole batch as one micro-batch (the recipe's
`groups_per_micro` 8); the two cases run interleaved, round after round (one warm-up round
discarded). The report gives each case's median seconds, the tokens each processes and the
median over rounds of the per-round ratio `every prompt / shared prompt`.

    python bench/bench_shared_prompt.py            # writes bench/results/shared_prompt_cpu.json
    python bench/bench_shared_prompt.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch

from llm_runs.arithmetic import build_prompt, target_text
from llm_runs.logprobs import chunked_token_logprobs_entropy, output_embedding
from llm_runs.packing import pack_micro_batch, packed_hidden_states
from llm_runs.tiny import build_tiny_qwen3, build_tokenizer


def make_batch(groups: int, size: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """`(input_ids [b, G, S], prompt_len [b, G], T)` of the task's shape; every response fills
    `T` (the answers of operands to 49 have one length up to a digit)."""
    gen = torch.Generator().manual_seed(seed)
    tokenizer = build_tokenizer()
    prompts, answers = [], []
    for _ in range(groups):
        a, b = (int(x) for x in torch.randint(0, 50, (2,), generator=gen))
        prompts.append(tokenizer(build_prompt(f"{a}+{b}"))["input_ids"])
        answers.append(len(tokenizer(target_text(str(a + b)))["input_ids"]) + 1)  # + EOS
    width = max(answers)
    ids = torch.zeros(groups, size, max(map(len, prompts)) + width, dtype=torch.long)
    for g, prompt in enumerate(prompts):
        ids[g, :, : len(prompt)] = torch.tensor(prompt)
        ids[g, :, len(prompt) : len(prompt) + width] = torch.randint(
            0, len(tokenizer), (size, width), generator=gen
        )
    prompt_len = torch.tensor([len(p) for p in prompts]).unsqueeze(-1).expand(groups, size)
    return ids, prompt_len.contiguous(), width


def step(model, ids, prompt_len, width, share: bool) -> int:
    """One forward and backward of the packed log-probs; returns the tokens processed."""
    response_len = torch.full(prompt_len.shape, width)
    packed = pack_micro_batch(ids, prompt_len, response_len, width, "cpu", share_prompts=share)
    hidden = packed_hidden_states(model, packed)
    lp, _ = chunked_token_logprobs_entropy(
        hidden.index_select(0, packed.response_hidden_index),
        output_embedding(model),
        packed.response_targets,
        4096,
    )
    lp.sum().backward()
    model.zero_grad(set_to_none=True)
    return packed.num_tokens


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results/shared_prompt_cpu.json")
    )
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        path = build_tiny_qwen3(Path(folder) / "m", hidden_size=128, intermediate_size=256)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.train()
    ids, prompt_len, width = make_batch(args.groups, args.group_size)
    seconds: dict[str, list[float]] = {"shared": [], "every": []}
    tokens = {}
    for round_ in range(args.rounds + 1):
        for name in ("shared", "every") if round_ % 2 else ("every", "shared"):
            start = time.perf_counter()
            tokens[name] = step(model, ids, prompt_len, width, share=name == "shared")
            if round_:  # round 0 warms up
                seconds[name].append(time.perf_counter() - start)
    ratios = [e / s for e, s in zip(seconds["every"], seconds["shared"], strict=True)]
    result = {
        "what": "packed learner forward+backward, each group's prompt once vs every copy",
        "batch": f"{args.groups} groups x {args.group_size}, prompts of the 2-digit task, "
        f"responses of {width} tokens",
        "tokens": tokens,
        "median_seconds": {k: statistics.median(v) for k, v in seconds.items()},
        "ratio_every_over_shared": {"median": statistics.median(ratios), "rounds": ratios},
        "threads": args.threads,
        "machine": f"{platform.processor() or platform.machine()}",
        "torch": torch.__version__,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
