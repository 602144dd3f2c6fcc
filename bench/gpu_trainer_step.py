"""One `Learner.step` per method at paper shapes, with MFU: the table of issue 14, in one run.

The model and batch of `bench/gpu_learner_step.py` (a Qwen3-1.7B-shaped random-init model from
its config, in the learner's precision: `--precision`, default the CUDA default
`mixed_bfloat16`, float32 parameters with bf16 autocast; the H200 table of `docs/gpu.md` was
measured with `--precision bfloat16`'s pure bf16 parameters before that default), gradient
checkpointing, 8 groups x 8 responses, prompt 512 tokens, responses
drawn uniformly from 1,024 to 4,096 tokens), through the trainer's own update
(`llm_runs.learner.Learner.step`: packed micro-batches of whole groups, the core loss, gradient
clipping, GAC's projection, VCPO's in-backward score norms and ESS step size,
`make_optimizer(kind="auto")`, the cosine schedule of B.1). Each method gets one warm-up update
(GAC's first gradient), then `--steps` timed updates; the table reports the median.

Columns: real tokens (prompt + response) per update; the tokens the padded path would process
(`B G S`); seconds per update; peak accelerator memory of the timed updates; MFU =
`6 x parameters x real tokens / seconds / peak` (`--peak-tflops`, 790 = the bf16 matrix rate
measured on an H200); the ratio of each row's seconds to packed GRPO's. `grpo (padded)` is the
padded reference path (`LearnerSettings.packed=False`) on the same batch.

    python bench/gpu_trainer_step.py                          # CUDA, paper shapes (H200: minutes)
    python bench/gpu_trainer_step.py --device cpu --tiny      # the same code path on a CPU
    python bench/gpu_trainer_step.py --sweep-micro-tokens 65536,131072   # + GRPO, token budgets

A method that fails is reported as such and the run continues; the JSON (`--out`) is rewritten
after every row.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_learner_step's model shapes

from gmc_grpo.lr_schedule import CosineWithWarmup  # noqa: E402
from gmc_grpo.methods import MethodSettings, get_method  # noqa: E402
from llm_runs.learner import (  # noqa: E402
    Learner,
    LearnerSettings,
    TrajectoryBatch,
    batch_logprobs,
    make_optimizer,
)

#: (prompt tokens, maximum response tokens): B.1's completion limit, and a seconds-long CPU shape.
PAPER_LENGTHS, TINY_LENGTHS = (512, 4096), (16, 48)


def build_model(tiny: bool, device: str, precision: str = "mixed_bfloat16"):
    from gpu_learner_step import QWEN3_1_7B, TINY
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from llm_runs.precision import resolve_precision, set_compute_dtype

    shape = TINY if tiny else QWEN3_1_7B
    config = Qwen3Config(**shape, attn_implementation="sdpa", use_cache=False)
    resolved = resolve_precision(precision, torch.device(device))
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(resolved.param_dtype)
    set_compute_dtype(model, resolved.compute_dtype)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, shape["vocab_size"]


def make_batch(
    model, vocab: int, prompt_len: int, response_len: int, seed: int, groups: int = 8, size: int = 8
) -> TrajectoryBatch:
    """`groups x size` trajectories, responses uniform in `[T/4, T]`, a stale behavior policy."""
    gen = torch.Generator().manual_seed(seed)
    b, g = groups, size
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
    current = batch_logprobs(model, batch, 4096, 1, packed=False)  # the reference path
    # a stale behavior policy: per-token log-ratios of a few hundredths of a nat
    batch.engine_logprobs = (
        current + 0.02 * torch.randn(current.shape, generator=gen) * batch.response_mask()
    )
    return batch


def settings_for(
    method: str,
    response_len: int,
    packed: bool,
    micro_tokens: int,
    groups_per_micro: int,
    score_norms: str = "in_backward",
) -> LearnerSettings:
    return LearnerSettings(
        method=method,
        loss=get_method(method).loss_config(MethodSettings(), max_length=response_len),
        advantage="paper",  # each method's own (Appendix B.1), VCPO's baseline hook
        groups_per_micro=groups_per_micro,
        logit_chunk=4096,
        grad_clip=1.0,
        packed=packed,
        micro_batch_tokens=micro_tokens,
        score_norms=score_norms if packed else "per_trajectory",
    )


def time_updates(learner: Learner, batch: TrajectoryBatch, steps: int) -> dict:
    """One warm-up update, then `steps` timed ones: seconds, peak memory, last metrics."""
    version = 128
    learner.step(batch, version)
    seconds, peaks, metrics = [], [], {}
    for _ in range(steps):
        t0 = time.perf_counter()
        metrics = learner.step(batch, version)  # synchronises CUDA before returning
        seconds.append(time.perf_counter() - t0)
        peaks.append(metrics["perf/peak_memory_gb"])
    return {"seconds": seconds, "peaks": peaks, "metrics": metrics}


def table_rows(results: dict) -> list[str]:
    """Markdown table of the finished rows (ratios to the packed GRPO row)."""
    rows = results["rows"]
    base = next(
        (r["seconds_median"] for r in rows if r["name"] == "grpo" and "seconds_median" in r), None
    )
    lines = [
        "| method | real tokens / update | padded tokens | seconds / update | peak memory (GiB) "
        "| MFU | ratio to GRPO |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | failed: {r['error']} | | | | | |")
            continue
        peak = "n/a" if r["peak_memory_gib"] is None else f"{r['peak_memory_gib']:.2f}"
        ratio = "" if base is None else f"{r['seconds_median'] / base:.3f}"
        lines.append(
            f"| {r['name']} | {results['real_tokens']:,} | {results['padded_tokens']:,} "
            f"| {r['seconds_median']:.3f} | {peak} | {100 * r['mfu']:.1f}% | {ratio} |"
        )
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny model and short sequences")
    parser.add_argument(
        "--precision",
        default="mixed_bfloat16",
        help="learner precision (llm_runs.precision); bfloat16: the earlier H200 table's",
    )
    parser.add_argument("--methods", default="grpo,gmc,tic,gac,vcpo")
    parser.add_argument("--steps", type=int, default=2, help="timed updates per row (median)")
    parser.add_argument("--groups", type=int, default=8, help="groups per update B (8, B.1)")
    parser.add_argument("--group-size", type=int, default=8, help="responses per group G (8)")
    parser.add_argument(
        "--no-padded-reference",
        action="store_true",
        help="skip the GRPO row through the padded path",
    )
    parser.add_argument(
        "--vcpo-reference",
        action="store_true",
        help="also VCPO with one backward per trajectory (slow: the path this replaces)",
    )
    parser.add_argument("--groups-per-micro", type=int, default=1)
    parser.add_argument(
        "--micro-tokens", type=int, default=0, help="token budget per micro-batch (0: groups)"
    )
    parser.add_argument(
        "--sweep-micro-tokens",
        default="",
        help="comma-separated token budgets: extra GRPO rows, one per budget",
    )
    parser.add_argument("--peak-tflops", type=float, default=790.0, help="MFU denominator")
    parser.add_argument("--out", default="gpu_trainer_step.json")
    return parser


def row_plan(args: argparse.Namespace) -> list[tuple[str, str, bool, int, str]]:
    """The rows to time: `(row name, method, packed, token budget, VCPO's norms)`."""
    plan = [(m, m, True, args.micro_tokens, "in_backward") for m in args.methods.split(",")]
    if not args.no_padded_reference:
        plan.append(("grpo (padded)", "grpo", False, args.micro_tokens, "per_trajectory"))
    if args.vcpo_reference:
        name = "vcpo (one backward per trajectory)"
        plan.append((name, "vcpo", True, args.micro_tokens, "per_trajectory"))
    for budget in filter(None, args.sweep_micro_tokens.split(",")):
        name = f"grpo (micro-batch <= {int(budget)} tokens)"
        plan.append((name, "grpo", True, int(budget), "in_backward"))
    return plan


def time_row(
    plan_row: tuple[str, str, bool, int, str],
    args: argparse.Namespace,
    model,
    optimizer,
    scheduler,
    batch: TrajectoryBatch,
    *,
    params: int,
    real_tokens: int,
    response_len: int,
) -> dict:
    """One row of the table: its updates timed (MFU from `params` and the batch's
    `real_tokens`), or the error that stopped it."""
    name, method, packed, budget, norms = plan_row
    device = args.device
    row: dict = {"name": name, "method": method, "packed": packed, "micro_tokens": budget}
    learner = None
    try:
        settings = settings_for(method, response_len, packed, budget, args.groups_per_micro, norms)
        learner = Learner(model, optimizer, scheduler, settings)
        timed = time_updates(learner, batch, args.steps)
        seconds = statistics.median(timed["seconds"])
        row.update(
            seconds=timed["seconds"],
            seconds_median=seconds,
            peak_memory_gib=max(timed["peaks"]) if device == "cuda" else None,
            mfu=6 * params * real_tokens / seconds / (args.peak_tflops * 1e12),
            micro_batches=len(learner.micro_batches(batch)),
            metrics={k: v for k, v in timed["metrics"].items() if not k.startswith("perf/")},
        )
    except Exception as error:  # report and go on: one failure must not lose the table
        row["error"] = f"{type(error).__name__}: {error}"[:300]
    finally:
        learner = None
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (use --device cpu --tiny)")
    prompt_len, response_len = TINY_LENGTHS if args.tiny else PAPER_LENGTHS
    model, vocab = build_model(args.tiny, device, args.precision)
    params = sum(p.numel() for p in model.parameters())  # tied weights counted once
    batch = make_batch(model, vocab, prompt_len, response_len, 0, args.groups, args.group_size)
    optimizer, optimizer_name = make_optimizer(
        model.parameters(),
        kind="auto",
        lr=1e-6,
        betas=(0.9, 0.999),
        weight_decay=0.0,
        device=torch.device(device),
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, CosineWithWarmup(800, 24))
    real_tokens = batch.num_tokens()
    results = {
        "config": vars(args),
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "optimizer": optimizer_name,
        "params": params,
        "groups": batch.num_groups,
        "group_size": batch.group_size,
        "prompt_len": prompt_len,
        "response_len_max": response_len,
        "real_tokens": real_tokens,
        "padded_tokens": int(batch.input_ids.numel()),
        "mfu_formula": "6 * params * real_tokens / seconds / (peak_tflops * 1e12)",
        "rows": [],
    }
    for plan_row in row_plan(args):
        row = time_row(
            plan_row,
            args,
            model,
            optimizer,
            scheduler,
            batch,
            params=params,
            real_tokens=real_tokens,
            response_len=response_len,
        )
        results["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "metrics"}), flush=True)
        Path(args.out).write_text(json.dumps(results, indent=1))
    results["table"] = table_rows(results)
    print("\n".join(results["table"]))
    Path(args.out).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
