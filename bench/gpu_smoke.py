"""GPU smoke check of the paper's path: do updates land, what do they cost, how far is vLLM?

One command, on one GPU (torch + transformers only; vLLM and bitsandbytes are used when present):

1. **Learning.** A Qwen3-1.7B-shaped model built from its config with random weights (Qwen3's
   init, std 0.02; nothing downloaded), 3 optimizer updates of the trainer's own learner
   (`llm_runs.learner.Learner.step`, GRPO) at lr 1e-6 on a synthetic stale batch of 8 groups x 8
   (prompt 512 tokens, responses of 1,024 to 4,096 tokens, packed micro-batches of one group),
   in the learner's default precision on CUDA (`mixed_bfloat16`: float32 parameters and AdamW
   states, bfloat16 autocast; `llm_runs.precision`). Prints the fraction of parameter elements
   that changed and their total |delta|: a run whose updates underflow (pure bfloat16
   parameters, `--precision bfloat16`) changes about 2% where float32 changes over 90%.
   `--compare-precisions` adds float32 and pure bfloat16 rows on the same batch.
2. **Cost.** Peak accelerator memory, seconds per update (the median of updates 2 and 3; the
   first includes warm-up), MFU = `6 x parameters x real tokens / seconds / peak`, the peak from
   the device's name (`PEAK_BF16_TFLOPS`: H100, H200, A100, RTX 6000 Ada, their datasheets'
   dense bfloat16 tensor rates; `--peak-tflops` overrides it, and an unknown card gets no MFU),
   and the memory model's prediction for the same configuration (`llm_runs.memory`), to compare.
3. **Train-inference mismatch at lag 0** (only when vLLM is installed): the same weights in
   vLLM (bfloat16) generate 8 prompts x 8 samples; the learner recomputes their log-probs;
   prints the per-trajectory `|sum_t log pi - sum_t log mu|` (mean, median, p99, max), the
   per-token mean, and the fraction of the 8 groups GMC and TIC would cap from it alone, through
   the trainer's own measurement (`llm_runs.mismatch`, what `mismatch_every` logs): the quantity
   a cap of `log 1.28 = 0.25` nats compares with.
4. **Two-GPU overlap** (only with two GPUs): the layout of Appendix B.1 as the trainer runs it,
   the engine in its own process on `cuda:1` (`llm_runs.engines.remote`; vLLM when installed,
   else the HF engine) and the learner on `cuda:0`. Per step: the weights go to the engine
   through host shared memory, the engine generates 8 prompts x 8 samples of
   `--mismatch-tokens` tokens, the learner makes one update on the synthetic batch; timed
   `--overlap-steps` times (after one warm-up) one after the other ("sequential": wait for the
   generation, then update) and overlapped (update while the engine generates, then wait), the
   median of each and their ratio. The synthetic batch stays on the CPU, where the trainer keeps
   its batches (the learner moves each micro-batch to its device). `--overlap-on-cpu` runs the
   same code on a CPU with the HF engine (a test does: on shared cores the times mean nothing).

Each part's row is written to the JSON (`--out`) as soon as it is done, before the next part
starts, so a part that crashes leaves the rows before it.

    python bench/gpu_smoke.py                                 # CUDA, 1.7B shape
    python bench/gpu_smoke.py --compare-precisions           # + float32 and pure bf16 rows
    python bench/gpu_smoke.py --device cpu --tiny --no-vllm   # the same code path on a CPU

The JSON (`--out`) holds every number printed. The CPU mode is run by
`tests/llm_runs/test_llm_train_precision.py`.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the model shapes and the batch

from gmc_grpo.methods import MethodSettings, get_method  # noqa: E402
from llm_runs.learner import (  # noqa: E402
    Learner,
    LearnerSettings,
    TrajectoryBatch,
    batch_logprobs,
    make_optimizer,
)
from llm_runs.memory import GIB, learner_bytes, shape_of  # noqa: E402
from llm_runs.mismatch import mismatch_metrics, trajectory_log_ratios  # noqa: E402
from llm_runs.precision import (  # noqa: E402
    parameter_change,
    parameter_snapshot,
    resolve_precision,
)

#: (prompt tokens, maximum response tokens): B.1's completion limit, and a seconds-long CPU shape
PAPER_LENGTHS, TINY_LENGTHS = (512, 4096), (16, 48)

#: dense bfloat16 tensor-core peak, TFLOPS, by a piece of `torch.cuda.get_device_name()`, first
#: match wins (so the PCIe and NVL H100s come before the SXM one). From NVIDIA's datasheets (the
#: "with sparsity" figures halved): H100 SXM and H200 989, H100 NVL 835, H100 PCIe 756, A100 312,
#: RTX 6000 Ada 364. Not measured here; the project's one measurement, the H200's bf16 matrix
#: rate of 790 TFLOPS (docs/gpu.md), is about 80% of its datasheet figure.
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("A100", 312.0),
    ("RTX 6000 Ada", 364.0),
)


def peak_tflops_of(device_name: str) -> float | None:
    """The dense bf16 peak of a device named `device_name` (`PEAK_BF16_TFLOPS`), else None."""
    for piece, tflops in PEAK_BF16_TFLOPS:
        if piece.lower() in device_name.lower():
            return tflops
    return None


def build_model(tiny: bool, device: str, precision_name: str):
    """The 1.7B (or tiny) Qwen3 shape with transformers' random init (std 0.02) in the given
    precision, gradient checkpointing on (`gpu_trainer_step.build_model`), and the precision."""
    from gpu_trainer_step import build_model as build

    model, _ = build(tiny, device, precision_name)
    return model, resolve_precision(precision_name, torch.device(device))


def make_learner(
    model: torch.nn.Module,
    *,
    lr: float,
    optimizer_kind: str,
    response_len: int,
    notice=lambda text: print(text, file=sys.stderr),
) -> tuple[Learner, str]:
    """The trainer's GRPO learner at a constant `lr` (no warm-up) and its optimizer's name."""
    device = next(model.parameters()).device
    optimizer, optimizer_name = make_optimizer(
        model.parameters(),
        kind=optimizer_kind,
        lr=lr,
        betas=(0.9, 0.999),
        weight_decay=0.0,
        device=device,
        notice=notice,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    settings = LearnerSettings(
        method="grpo",
        loss=get_method("grpo").loss_config(MethodSettings(), max_length=response_len),
        advantage="paper",
        groups_per_micro=1,
        logit_chunk=4096,
        grad_clip=1.0,
    )
    return Learner(model, optimizer, scheduler, settings), optimizer_name


def run_updates(
    model: torch.nn.Module,
    batch: TrajectoryBatch,
    *,
    lr: float,
    optimizer_kind: str,
    updates: int,
    response_len: int,
    notice=lambda text: print(text, file=sys.stderr),
) -> dict:
    """`updates` GRPO updates of the trainer's learner at a constant `lr` (no warm-up), on one
    batch: the parameter change (`llm_runs.precision.parameter_change`), seconds and peak memory
    per update, the last update's metrics and the optimizer's name."""
    learner, optimizer_name = make_learner(
        model, lr=lr, optimizer_kind=optimizer_kind, response_len=response_len, notice=notice
    )
    before = parameter_snapshot(model, "cpu")
    seconds, peaks, metrics = [], [], {}
    for _ in range(updates):
        t0 = time.perf_counter()
        metrics = learner.step(batch, 0)
        seconds.append(time.perf_counter() - t0)
        peaks.append(metrics["perf/peak_memory_gb"])
    return {
        "change": parameter_change(before, model),
        "seconds": seconds,
        "peaks": peaks,
        "metrics": metrics,
        "optimizer": optimizer_name,
        "optimizer_state": learner.optimizer.state,
    }


def learning_row(args, batch: TrajectoryBatch, precision_name: str, response_len: int) -> dict:
    """3 updates at lr `args.lr` in `precision_name`: what changed, memory, time, MFU."""
    device = torch.device(args.device)
    model, precision = build_model(args.tiny, args.device, precision_name)
    params = sum(p.numel() for p in model.parameters())
    done = run_updates(
        model,
        batch,
        lr=args.lr,
        optimizer_kind=args.optimizer,
        updates=args.updates,
        response_len=response_len,
    )
    change, seconds, peaks = done["change"], done["seconds"], done["peaks"]
    metrics, optimizer_name = done["metrics"], done["optimizer"]
    timed = seconds[1:] or seconds
    step = statistics.median(timed)
    tokens = batch.num_tokens()
    group_tokens = int((batch.prompt_len + batch.response_len).sum(-1).max())
    modelled = learner_bytes(
        shape_of(model.config),
        precision=precision.name,
        optimizer="adamw8bit" if "8bit" in optimizer_name.lower() else "adamw",
        micro_tokens=group_tokens,
    )
    row = {
        "precision": precision.name,
        "param_dtype": str(precision.param_dtype),
        "compute_dtype": str(precision.compute_dtype),
        "optimizer": optimizer_name,
        "lr": args.lr,
        "updates": args.updates,
        "parameters": params,
        **change,
        "grad_norm_last": metrics["optim/grad_norm"],
        "seconds": seconds,
        "step_seconds": step,
        "real_tokens": tokens,
        "mfu": (
            6 * params * tokens / step / (args.peak_tflops * 1e12)
            if args.peak_tflops is not None
            else None
        ),
        "peak_memory_gib": max(peaks),
        "peak_memory_kind": "CUDA max allocated" if device.type == "cuda" else "process RSS",
        "modelled_peak_gib": sum(modelled.values()) / GIB,
        "dtypes_after": sorted({str(p.dtype) for p in model.parameters()}),
    }
    del done, model
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def numbered_tokenizer(vocab: int):
    """A word-level tokenizer with one token `<i>` per id of the model's vocabulary (built in
    code, nothing downloaded), so vLLM can detokenize whatever the random model samples; `<0>`
    is the end-of-sequence token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"<{i}>": i for i in range(vocab)}
    tokenizer = Tokenizer(models.WordLevel(vocab=words, unk_token="<0>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##")  # joins the words with spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<0>", pad_token="<0>", unk_token="<0>"
    )


def mismatch_row(args, prompt_len: int) -> dict:
    """Lag-0 train-inference mismatch with vLLM (bfloat16) on the same random weights."""
    import importlib.util

    if args.no_vllm:
        return {"skipped": "--no-vllm"}
    if importlib.util.find_spec("vllm") is None:
        return {"skipped": "vLLM is not installed"}
    import tempfile

    from llm_runs.engines.base import SamplingConfig
    from llm_runs.engines.vllm_engine import VLLMEngine

    model, _ = build_model(args.tiny, args.device, args.precision)
    vocab = model.config.vocab_size
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, safe_serialization=True)
        numbered_tokenizer(vocab).save_pretrained(folder)  # prompts go in as token ids
        cuda = args.device == "cuda"
        engine = VLLMEngine(
            folder,
            dtype="bfloat16",
            max_model_len=prompt_len + args.mismatch_tokens,
            gpu_memory_utilization=0.3 if cuda else 0.5,
            kv_cache_memory_bytes=None if cuda else 256 * 2**20,
        )
        gen = torch.Generator().manual_seed(1)
        prompts = [torch.randint(1, vocab, (prompt_len,), generator=gen).tolist() for _ in range(8)]
        samples = engine.generate(
            prompts, SamplingConfig(n=8, max_tokens=args.mismatch_tokens, seed=0)
        )
        engine.close()
    b, g = len(samples), len(samples[0])
    lengths = torch.tensor([[len(s.token_ids) for s in grp] for grp in samples])
    width = prompt_len + int(lengths.max())
    ids = torch.zeros(b, g, width, dtype=torch.int32)
    engine_lp = torch.zeros(b, g, int(lengths.max()))
    for i, grp in enumerate(samples):
        for j, s in enumerate(grp):
            seq = s.prompt_token_ids + s.token_ids
            ids[i, j, : len(seq)] = torch.tensor(seq, dtype=torch.int32)
            engine_lp[i, j, : len(s.token_ids)] = torch.tensor(s.logprobs)
    batch = TrajectoryBatch(
        input_ids=ids,
        prompt_len=torch.full((b, g), prompt_len, dtype=torch.long),
        response_len=lengths,
        engine_logprobs=engine_lp,
        learner_logprobs=None,
        rewards=torch.zeros(b, g),
        truncated=lengths == args.mismatch_tokens,
        prompt_index=torch.arange(b),
        behavior_version=0,
    )
    learner_lp = batch_logprobs(model, batch, 4096, 1)
    mask = batch.response_mask()
    per_token = ((engine_lp - learner_lp).abs() * mask).sum() / mask.sum()
    per_trajectory = trajectory_log_ratios(engine_lp, learner_lp, mask).abs().flatten()
    measured = mismatch_metrics(engine_lp, learner_lp, mask)  # what `mismatch_every` logs
    return {
        "trajectories": b * g,
        "response_tokens_mean": float(lengths.float().mean()),
        "per_token_abs_mean": float(per_token),
        "per_trajectory_abs_sum": {
            "mean": measured["mismatch/trajectory_abs_mean"],
            "median": float(per_trajectory.median()),
            "p99": measured["mismatch/trajectory_abs_p99"],
            "max": measured["mismatch/trajectory_abs_max"],
        },
        "trajectories_over_log_1_28": float((per_trajectory > math.log(1.28)).double().mean()),
        "gmc_capped_group_frac": measured["mismatch/gmc_capped_group_frac"],
        "tic_capped_group_frac": measured["mismatch/tic_capped_group_frac"],
    }


def overlap_row(args, batch: TrajectoryBatch, prompt_len: int, response_len: int) -> dict:
    """The two-GPU layout's step time, sequential and overlapped (item 4 of the docstring)."""
    import importlib.util
    import tempfile

    from llm_runs.engines.base import SamplingConfig
    from llm_runs.engines.remote import RemoteEngine

    two = args.device == "cuda" and torch.cuda.device_count() >= 2
    if not two and not args.overlap_on_cpu:
        return {"skipped": "needs 2 GPUs"}
    vllm = two and not args.no_vllm and importlib.util.find_spec("vllm") is not None
    kind = "vllm" if vllm else "hf"
    learner_device, engine_device = ("cuda:0", "cuda:1") if two else ("cpu", "cpu")
    model, _ = build_model(args.tiny, learner_device, args.precision)
    learner, optimizer_name = make_learner(
        model, lr=args.lr, optimizer_kind=args.optimizer, response_len=response_len
    )
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(2)
    prompts = [torch.randint(1, vocab, (prompt_len,), generator=gen).tolist() for _ in range(8)]
    sampling = SamplingConfig(n=8, max_tokens=args.mismatch_tokens, seed=0)
    # the batch stays on the CPU, where the trainer keeps it: the learner moves each micro-batch
    # to its device and brings the log-probs back (moving it to cuda:0 here once mixed devices)
    times: dict[str, list[float]] = {"sequential": [], "overlapped": []}
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, safe_serialization=True)
        numbered_tokenizer(vocab).save_pretrained(folder)
        engine = RemoteEngine(
            kind,
            folder,
            device=engine_device,
            dtype="bfloat16" if two else "float32",
            max_model_len=prompt_len + args.mismatch_tokens,
            seed=0,
            gpu_memory_utilization=0.85,
            kv_cache_memory_bytes=None if two else 256 * 2**20,
        )
        try:
            for mode in times:
                for _ in range(args.overlap_steps + 1):  # the first is a warm-up
                    t0 = time.perf_counter()
                    engine.update_weights(model.state_dict())
                    pending = engine.submit(prompts, sampling)
                    if mode == "sequential":
                        pending.result()
                    learner.step(batch, 0)
                    if mode == "overlapped":
                        pending.result()
                    if two:
                        torch.cuda.synchronize()
                    times[mode].append(time.perf_counter() - t0)
        finally:
            engine.close()
    sequential = statistics.median(times["sequential"][1:])
    overlapped = statistics.median(times["overlapped"][1:])
    return {
        "engine": kind,
        "learner_device": learner_device,
        "engine_device": engine_device,
        "optimizer": optimizer_name,
        "weights_transport": "host shared memory (llm_runs.engines.remote)",
        "generation": f"8 prompts x 8 samples x {args.mismatch_tokens} tokens",
        "seconds": times,
        "sequential_step_seconds": sequential,
        "overlapped_step_seconds": overlapped,
        "speedup": sequential / overlapped,
        "note": None if two else "CPU: both processes share the cores; the times mean nothing",
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--tiny", action="store_true", help="tiny model and short sequences")
    parser.add_argument(
        "--precision",
        default="mixed_bfloat16",
        help="learner precision (llm_runs.precision; default: CUDA's default, mixed_bfloat16)",
    )
    parser.add_argument(
        "--compare-precisions", action="store_true", help="also float32 and pure bfloat16 rows"
    )
    parser.add_argument("--optimizer", default="auto", help="auto (8-bit AdamW if available)")
    parser.add_argument("--lr", type=float, default=1e-6, help="learning rate (1e-6, B.1)")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="MFU denominator, TFLOPS (default: the datasheet's dense bf16 peak of the device "
        "by its name: H100, H200, A100, RTX 6000 Ada; none for another card)",
    )
    parser.add_argument("--no-vllm", action="store_true", help="skip the vLLM mismatch part")
    parser.add_argument(
        "--mismatch-tokens", type=int, default=512, help="tokens per vLLM sample (mismatch)"
    )
    parser.add_argument(
        "--overlap-steps", type=int, default=3, help="timed steps per overlap mode (two GPUs)"
    )
    parser.add_argument(
        "--overlap-on-cpu",
        action="store_true",
        help="run the overlap part on a CPU (HF engine in its own process): the code path only",
    )
    parser.add_argument("--out", default="gpu_smoke.json")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here (use --device cpu --tiny)")
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    peak_source = "--peak-tflops"
    if args.peak_tflops is None and args.device == "cuda":
        args.peak_tflops = peak_tflops_of(device_name)
        peak_source = "datasheet (PEAK_BF16_TFLOPS)"
        if args.peak_tflops is None:
            peak_source = "unknown card: no MFU (give --peak-tflops)"
            print(f"notice: no peak TFLOPS known for {device_name}: {peak_source}", file=sys.stderr)
    prompt_len, response_len = TINY_LENGTHS if args.tiny else PAPER_LENGTHS
    from gpu_trainer_step import make_batch

    reference, _ = build_model(args.tiny, args.device, "float32")
    batch = make_batch(reference, reference.config.vocab_size, prompt_len, response_len, 0)
    del reference
    gc.collect()
    names = [args.precision]
    if args.compare_precisions:
        names += [n for n in ("float32", "bfloat16") if n != args.precision]
    results: dict = {
        "config": vars(args),
        "device": device_name,
        "peak_tflops": args.peak_tflops,
        "peak_tflops_source": peak_source
        if args.peak_tflops is not None or args.device == "cuda"
        else None,
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "learning": [],
    }
    out = Path(args.out)
    for name in names:
        row = learning_row(args, batch, name, response_len)
        results["learning"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "seconds"}), flush=True)
        write_results(out, results)
    results["mismatch_lag0"] = mismatch_row(args, prompt_len)
    print(json.dumps({"mismatch_lag0": results["mismatch_lag0"]}), flush=True)
    write_results(out, results)  # before the next part: a crash there keeps this row
    results["two_gpu_overlap"] = overlap_row(args, batch, prompt_len, response_len)
    print(json.dumps({"two_gpu_overlap": results["two_gpu_overlap"]}), flush=True)
    write_results(out, results)
    print(summary_table(results))
    return results


def write_results(out: Path, results: dict) -> None:
    """Write the rows so far (atomically: a crash mid-write leaves the previous file)."""
    from gmc_grpo.json_files import atomic_write_json

    atomic_write_json(out, results)


def summary_table(results: dict) -> str:
    lines = [
        f"device: {results['device']}",
        "| precision | elements changed | total abs delta | s / update | peak GiB (modelled) | MFU |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["learning"]:
        mfu = "n/a" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
        lines.append(
            f"| {r['precision']} | {100 * r['fraction_changed']:.2f}% | {r['abs_delta']:.4g} "
            f"| {r['step_seconds']:.3f} | {r['peak_memory_gib']:.2f} "
            f"({r['modelled_peak_gib']:.2f}) | {mfu} |"
        )
    mismatch = results.get("mismatch_lag0", {})
    if "per_trajectory_abs_sum" in mismatch:
        d = mismatch["per_trajectory_abs_sum"]
        lines.append(
            f"lag-0 mismatch per trajectory (nats): mean {d['mean']:.4g}, median {d['median']:.4g}, "
            f"p99 {d['p99']:.4g}, max {d['max']:.4g}; groups GMC would cap "
            f"{mismatch['gmc_capped_group_frac']:.3f}, TIC {mismatch['tic_capped_group_frac']:.3f}"
        )
    overlap = results.get("two_gpu_overlap", {})
    if "speedup" in overlap:
        lines.append(
            f"two-GPU step ({overlap['engine']} on {overlap['engine_device']}): sequential "
            f"{overlap['sequential_step_seconds']:.3f} s, overlapped "
            f"{overlap['overlapped_step_seconds']:.3f} s ({overlap['speedup']:.2f}x)"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
