"""Packed vs padded learner updates on a CPU, and VCPO's update with in-backward score norms.

A tiny Qwen3 built from its config (random init, float32, gradient checkpointing, tied
embeddings), 8 groups x 8 responses, prompts of 32 tokens, responses drawn uniformly from 25% to
100% of the 128-token maximum (the paper's spread: 1,024 to 4,096 of 4,096), one group per
micro-batch. Each case is one full `Learner.step` (forward, backward, clipping, optimizer) on the
same batch; the cases run interleaved, round after round (one warm-up round discarded), and the
report gives each case's median seconds and the median over rounds of the per-round time ratios:

- `grpo packed / grpo padded`: the packed path (`llm_runs.packing`) against the right-padded one;
- `vcpo / grpo` (both packed): VCPO with its score norms read off each micro-batch's backward
  (`llm_runs.sample_norms`; issue 14's target is <= 1.3);
- `vcpo per-trajectory / grpo`: VCPO with one extra backward per trajectory (the path replaced);
- `gac / grpo`: GAC's in-place, parameter-by-parameter projection;
- `per-trajectory SDPA / transformers' packed mask`: forward + backward of the transformer body
  on one packed group, our attention (`llm_runs.packing.packed_attention`) against transformers'
  own packed-sequence support (restarting `position_ids`, which builds a dense `[N, N]` mask).

    python bench/bench_packing.py                  # writes bench/results/packing_cpu.json
    python bench/bench_packing.py --rounds 3 --no-reference
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_trainer_step import make_batch, settings_for  # noqa: E402

from llm_runs.learner import Learner  # noqa: E402
from llm_runs.packing import pack_micro_batch, packed_hidden_states  # noqa: E402

#: the CPU benchmark's model (a tiny Qwen3; the heads and widths of a small real one, scaled down)
CPU_SHAPE = dict(
    vocab_size=2048,
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=1024,
    tie_word_embeddings=True,
)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--response-len", type=int, default=128, help="maximum response length")
    parser.add_argument("--no-reference", action="store_true", help="skip VCPO per-trajectory")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results/packing_cpu.json"))
    return parser


def timed_rounds(steps: dict, model: torch.nn.Module, rounds: int) -> dict[str, list[float]]:
    """`rounds` timed rounds of every step, interleaved, after one warm-up round: seconds per
    step and round."""
    seconds: dict[str, list[float]] = {name: [] for name in steps}
    for round_index in range(rounds + 1):
        for name, step in steps.items():
            t0 = time.perf_counter()
            step()
            if round_index:  # round 0 warms up (and gives GAC its first gradient)
                seconds[name].append(time.perf_counter() - t0)
            model.zero_grad(set_to_none=True)
        print(f"round {round_index}/{rounds}", flush=True)
    return seconds


def round_ratios(seconds: dict[str, list[float]], reference: bool) -> dict[str, dict]:
    """The median, range and values over rounds of the per-round time ratios of the report."""

    def ratio(num: str, den: str) -> dict:
        per_round = [a / b for a, b in zip(seconds[num], seconds[den], strict=True)]
        return {
            "median": statistics.median(per_round),
            "min": min(per_round),
            "max": max(per_round),
            "per_round": per_round,
        }

    ratios = {
        "grpo packed / grpo padded": ratio("grpo packed", "grpo padded"),
        "vcpo / grpo (packed)": ratio("vcpo packed (in-backward norms)", "grpo packed"),
        "gac / grpo (packed)": ratio("gac packed", "grpo packed"),
        "per-trajectory SDPA / transformers' packed mask": ratio(
            "body, one group: per-trajectory SDPA", "body, one group: transformers' packed mask"
        ),
    }
    if reference:
        ratios["vcpo per-trajectory / grpo (packed)"] = ratio(
            "vcpo packed (one backward per trajectory)", "grpo packed"
        )
    return ratios


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(**CPU_SHAPE, attn_implementation="sdpa", use_cache=False)
    model = Qwen3ForCausalLM(config).float()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    batch = make_batch(model, CPU_SHAPE["vocab_size"], args.prompt_len, args.response_len, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0)  # lr 0: the same policy each round
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)

    def learner(method: str, packed: bool, norms: str = "in_backward") -> Learner:
        settings = settings_for(method, args.response_len, packed, 0, 1, norms)
        return Learner(model, optimizer, scheduler, settings)

    cases = {
        "grpo packed": learner("grpo", True),
        "grpo padded": learner("grpo", False),
        "vcpo packed (in-backward norms)": learner("vcpo", True),
        "gac packed": learner("gac", True),
    }
    if not args.no_reference:
        cases["vcpo packed (one backward per trajectory)"] = learner("vcpo", True, "per_trajectory")
    group = batch.groups(0, 1)
    packed = pack_micro_batch(
        group.input_ids, group.prompt_len, group.response_len, group.response_width, "cpu"
    )

    def body_ours() -> None:
        packed_hidden_states(model, packed).sum().backward()

    def body_transformers() -> None:  # no attention mask + restarting position ids
        model.model(
            input_ids=packed.input_ids, position_ids=packed.position_ids
        ).last_hidden_state.sum().backward()

    steps = {name: (lambda case=case: case.step(batch, 1)) for name, case in cases.items()}
    steps["body, one group: per-trajectory SDPA"] = body_ours
    steps["body, one group: transformers' packed mask"] = body_transformers
    seconds = timed_rounds(steps, model, args.rounds)
    ratios = round_ratios(seconds, not args.no_reference)
    results = {
        "config": {**vars(args), "model": CPU_SHAPE, "groups": 8, "group_size": 8},
        "machine": f"{cpu_name()}, {torch.get_num_threads()} torch thread(s)",
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "params": sum(p.numel() for p in model.parameters()),
        "real_tokens": batch.num_tokens(),
        "padded_tokens": int(batch.input_ids.numel()),
        "body_group_tokens": packed.num_tokens,
        "seconds": seconds,
        "median_seconds": {name: statistics.median(v) for name, v in seconds.items()},
        "ratios": ratios,
    }
    print_report(results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    return results


def print_report(results: dict) -> None:
    """The token counts, the median seconds per case and the ratios, as Markdown tables."""
    print(f"real tokens {results['real_tokens']:,}, padded {results['padded_tokens']:,}")
    print("| case | median seconds / update |\n| --- | ---: |")
    for name, value in results["median_seconds"].items():
        print(f"| {name} | {value:.3f} |")
    print("| ratio | median over rounds | range |\n| --- | ---: | --- |")
    for name, r in results["ratios"].items():
        print(f"| {name} | {r['median']:.3f} | {r['min']:.3f}-{r['max']:.3f} |")


if __name__ == "__main__":
    main()
