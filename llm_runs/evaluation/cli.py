"""`gmc-grpo llm eval`: the command line of the evaluation (`llm_runs.evaluation.protocol.run_eval`).

Flags override the fields of a TOML/JSON config file (`--config`); defaults come from
`llm_runs.evaluation.config.EvalConfig`, whose fields document themselves.
"""

from __future__ import annotations

import argparse
from typing import Any

from gmc_grpo.config_reading import check_field_types
from llm_runs.data import BENCHMARKS
from llm_runs.evaluation.config import DTYPES, ENGINES, EvalConfig, read_config_file

DESCRIPTION = """Evaluate a model on the six benchmarks of Appendix B.1: greedy accuracy, avg@n
(n = 16 for MATH500/Minerva/AMC23, 8 for GSM8K/Gaokao/OlympiadBench), unbiased pass@k
(k in 1,2,4,8,16) and the macro average. Writes OUT/evals.jsonl, OUT/outputs/ and
OUT/summary.json; rerunning with the same --out resumes per benchmark."""

EPILOG = """examples:
  gmc-grpo llm eval --model models/Qwen3-1.7B-Base --out runs/eval-base --engine vllm
  gmc-grpo llm eval --model runs/gmc-sim --step 800 --out runs/gmc-sim/eval-800
  gmc-grpo llm eval --model DIR --out runs/smoke --benchmarks math500 --limit 5 --n 2 \\
      --data-dir data/ --engine hf --max-completion-tokens 64
  gmc-grpo llm eval --config llm_runs/configs/eval_b1.toml --model DIR --out runs/x
"""


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `gmc-grpo llm eval` (defaults come from `EvalConfig`; see its docstring)."""
    S = argparse.SUPPRESS
    parser.add_argument("--config", help="TOML or JSON file of EvalConfig fields (flags override)")
    parser.add_argument("--model", default=S, help="model directory or training run directory")
    parser.add_argument("--out", default=S, help="output run directory")
    _add_protocol_arguments(parser)
    _add_engine_arguments(parser)
    _add_scorer_arguments(parser)
    parser.add_argument(
        "--overwrite",
        action="store_true",
        default=S,
        help="replace the evaluation in --out instead of continuing it",
    )


def _add_protocol_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of what is evaluated and how it is decoded: benchmarks, decodings, sampling,
    prompt and completion lengths, batches and the seed."""
    S = argparse.SUPPRESS
    parser.add_argument(
        "--benchmarks",
        type=_csv,
        default=S,
        help=f"comma-separated subset of {','.join(BENCHMARKS)} (default: all six)",
    )
    parser.add_argument("--data-dir", dest="data_dir", default=S, help="local JSONL/Parquet files")
    parser.add_argument("--engine", choices=ENGINES, default=S, help="rollout engine (default hf)")
    parser.add_argument("--step", type=int, default=S, help="checkpoint step to evaluate/record")
    parser.add_argument("--decodings", type=_csv, default=S, help="greedy,sampled (default: both)")
    parser.add_argument("--n", type=int, default=S, help="override outputs per problem (sampled)")
    parser.add_argument("--temperature", type=float, default=S, help="sampled temperature (1.0)")
    parser.add_argument("--top-p", dest="top_p", type=float, default=S, help="top-p (1.0)")
    parser.add_argument(
        "--max-prompt-tokens",
        dest="max_prompt_tokens",
        type=int,
        default=S,
        help="prompt truncation length in tokens (1024, Appendix B.1)",
    )
    parser.add_argument(
        "--max-completion-tokens",
        dest="max_completion_tokens",
        type=int,
        default=S,
        help="completion budget in tokens (4096, Appendix B.1)",
    )
    parser.add_argument(
        "--truncation-side",
        dest="truncation_side",
        choices=("left", "right"),
        default=S,
        help="which end of an over-long prompt is dropped (left: keeps the problem's end)",
    )
    parser.add_argument("--limit", type=int, default=S, help="first N problems per benchmark")
    parser.add_argument(
        "--batch-size",
        dest="batch_size",
        type=int,
        default=S,
        help="prompts per engine call (64); part of the sampling seed, so it changes the samples",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=S,
        help="root sampling seed (0); chunk i of benchmark b samples from its own stream (b, i) "
        "of this seed",
    )


def _add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of the rollout engine's model and memory: dtype, device, vLLM's memory shares."""
    S = argparse.SUPPRESS
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default=S,
        help="model dtype (engine default: vLLM bf16, HF fp32)",
    )
    parser.add_argument("--device", default=S, help="HF engine device (default: cuda if available)")
    parser.add_argument(
        "--gpu-memory-utilization",
        dest="gpu_memory_utilization",
        type=float,
        default=S,
        help="vLLM's share of the accelerator memory (0.85)",
    )
    parser.add_argument(
        "--kv-cache-memory-bytes",
        dest="kv_cache_memory_bytes",
        type=int,
        default=S,
        help="vLLM KV-cache size (use on a CPU, e.g. 67108864)",
    )


def _add_scorer_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of the answer-scoring pool (`llm_runs.scoring.pool.Scorer`)."""
    S = argparse.SUPPRESS
    parser.add_argument(
        "--scorer-workers",
        dest="scorer_workers",
        type=int,
        default=S,
        help="answer-scoring processes (default: all cores)",
    )
    parser.add_argument(
        "--scorer-timeout-s",
        dest="scorer_timeout_s",
        type=float,
        default=S,
        help="CPU seconds allowed to compare one answer (retried once at twice that, then "
        "counted incorrect and in scoring_timeouts) (5)",
    )
    parser.add_argument(
        "--scorer-memory-mb",
        dest="scorer_memory_mb",
        type=int,
        default=S,
        help="address-space limit of each scoring process in MiB (2048; 0: none)",
    )
    parser.add_argument(
        "--scorer-decimal-rel-tol",
        dest="scorer_decimal_rel_tol",
        type=float,
        default=S,
        help="let a decimal answer match a fraction or constant within this relative difference "
        "(e.g. 1e-5: 0.333333 = 1/3); default: exact (docs/scoring.md)",
    )


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """Merge the config file (if any) and the flags given (flags win) into an `EvalConfig`."""
    values: dict[str, Any] = {}
    if getattr(args, "config", None):
        values.update(read_config_file(args.config))
    values.update({k: v for k, v in vars(args).items() if k != "config"})
    missing = [k for k in ("model", "out") if k not in values]
    if missing:
        raise ValueError(f"missing required option(s): {', '.join('--' + m for m in missing)}")
    check_field_types(EvalConfig, values)
    return EvalConfig(**values)


def run(args: argparse.Namespace) -> int:
    """Entry point of `gmc-grpo llm eval`."""
    config = config_from_args(args)
    from llm_runs.evaluation.protocol import run_eval

    summary = run_eval(config)
    for decoding, macro in summary["macro"].items():
        metric = "accuracy" if decoding == "greedy" else "avg_at_n"
        print(f"macro {decoding} {metric}: {macro[metric]:.4f}")
    for name, entry in summary["results"].items():
        parts = [f"{k}={v:.4f}" for k, v in entry.items() if isinstance(v, float)]
        print(f"{name}: {' '.join(parts)}")
    print(f"records written to {config.out}")
    return 0
