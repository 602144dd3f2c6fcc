"""`gmc-grpo llm eval`: the evaluation protocol of the paper's tables (Appendix B.1).

For a model directory (or a training run's checkpoint) and the six benchmarks:

- greedy accuracy: temperature 0, one output per problem;
- avg@n: mean correctness over `n` outputs at temperature 1.0, top-p 1.0 (`n` = 16 for MATH500,
  Minerva and AMC23; 8 for GSM8K, Gaokao2023 and OlympiadBench);
- unbiased pass@k for k in {1, 2, 4, 8, 16} with k <= n, from the same sampled outputs;
- the unweighted macro average over the benchmarks, separately for greedy accuracy and avg@n.

The two-shot prompt (`llm_runs.prompts`), truncated at 1,024 prompt tokens (the token ids are cut
and fed as they are, never decoded and re-encoded); completions stop at
the next `Problem:` header or 4,096 tokens; the answer is the last complete `\\boxed{}`
(`llm_runs.scoring`).

Records (`gmc_grpo.records`): `OUT/config.json`, one `evals.jsonl` row per
(step, benchmark, decoding) plus a `benchmark = "macro"` row per (step, decoding), per-problem
outputs in `OUT/outputs/`, and `summary.json` last. A rerun with the same `--out` resumes: every
(step, benchmark, decoding) already in `evals.jsonl` is skipped.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gmc_grpo.json_files import atomic_write_text, read_jsonl, to_json
from gmc_grpo.records import read_run_config
from gmc_grpo.run_writer import RunWriter
from gmc_grpo.runlock import locks_folder
from gmc_grpo.seeding import base_seed, stream_seed
from llm_runs import prompts as prompt_lib
from llm_runs.data import BENCHMARKS, Problem, load_benchmark
from llm_runs.evaluation.config import EvalConfig
from llm_runs.metrics import PASS_AT_K, avg_at_n, macro_average, mean_pass_at_k
from llm_runs.model_files import check_model_dir, resolve_model
from llm_runs.scoring.answers import extract_last_boxed
from llm_runs.scoring.pool import Scorer

if TYPE_CHECKING:
    from llm_runs.engines.base import Prompt, RolloutEngine, Sample, SamplingConfig

MACRO = "macro"
# how a refused fresh evaluation continues (records but no config.json in --out)
EVAL_FRESH_HINT = (
    "pass --overwrite to replace them, or choose another folder, e.g. --out {out}/eval"
)

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
    "scorer_decimal_rel_tol",  # a verdict policy: one evaluation keeps one
)


def engine_for(config: EvalConfig, model_dir: Path) -> RolloutEngine:
    """The rollout engine of an evaluation (`llm_runs.engines.factory.make_engine`)."""
    from llm_runs.engines.factory import make_engine

    return make_engine(
        config.engine,
        model_dir,
        max_model_len=config.max_prompt_tokens + config.max_completion_tokens,
        seed=stream_seed(config.seed, "llm_engine", bits=32),  # vLLM: numpy needs < 2^32
        dtype=config.dtype,
        device=config.device,
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


def sampling_config(
    decoding: str,
    *,
    n: int,
    temperature: float,
    top_p: float,
    max_tokens: int,
    stop: Sequence[str],
    seed: int,
) -> SamplingConfig:
    """The `SamplingConfig` of one evaluation: greedy is one output at temperature 0 (top-p 1),
    sampled is `n` outputs at `temperature` and `top_p`. Training's evaluations use it too."""
    from llm_runs.engines.base import SamplingConfig

    greedy = decoding == "greedy"
    return SamplingConfig(
        n=1 if greedy else n,
        temperature=0.0 if greedy else temperature,
        top_p=1.0 if greedy else top_p,
        max_tokens=max_tokens,
        stop=tuple(stop),
        seed=seed,
    )


def sampling_for(config: EvalConfig, benchmark: str, decoding: str, seed: int) -> SamplingConfig:
    """The `SamplingConfig` of one (benchmark, decoding) evaluation of `gmc-grpo llm eval`."""
    return sampling_config(
        decoding,
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


def _check_resumable(out: Path, config: EvalConfig) -> bool:
    """Whether the evaluation in `out` is continued (False: a new one is started there, or
    `overwrite`). Stops if `out` holds an evaluation made with different settings (unless
    overwriting), another kind of run, or records of a newer schema."""
    payload = read_run_config(out)
    if payload is None:
        return False
    stored = payload.get("config", {})
    if not {"benchmarks", "decodings", "model"} <= set(stored):
        raise ValueError(
            f"{out} is another kind of run directory (its config.json is not an evaluation's); "
            "write the evaluation elsewhere, e.g. --out " + str(out / "eval")
        )
    if config.overwrite:
        return False
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
    return True


def _rows_kept(out: Path, step: int | None) -> list[dict[str, Any]]:
    """The rows of `out/evals.jsonl` a resumed evaluation keeps (this step's macro rows are
    recomputed at the end)."""
    rows = read_jsonl(out / "evals.jsonl")
    return [r for r in rows if not (r.get("benchmark") == MACRO and r.get("step") == step)]


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
    prompts: Sequence[Prompt],
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
    timed_out: list[int] | None = None,
) -> list[list[bool]]:
    """Correctness of every sample (scored in chunks of problems, with a progress bar).
    `timed_out` (when given) receives the number of samples scored incorrect only because their
    comparison reached the scorer's CPU limit twice (`Scorer.score_counted`)."""
    correct: list[list[bool]] = []
    chunks = chunked(list(range(len(samples))), batch_size)
    for chunk in _progress(chunks, desc=description, unit="batch"):
        texts = [s.text for i in chunk for s in samples[i]]
        refs = [references[i] for i in chunk for _ in samples[i]]
        verdicts, late = scorer.score_counted(texts, refs)
        if timed_out is not None:
            timed_out.append(sum(late))
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
    engine: RolloutEngine,
    scorer: Scorer,
    problems: Sequence[Problem],
    prompts: Sequence[Prompt],
    prompt_truncated: Sequence[bool],
    decoding: str,
    *,
    sampling_for_chunk: Callable[[int], SamplingConfig],
    batch_size: int,
    description: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate, score and summarise one (benchmark, decoding); return (row, output rows).

    `sampling_for_chunk(i)` is the sampling of the `i`-th chunk of `batch_size` prompts (its
    seed makes the chunk's samples reproducible).
    """
    samples = generate_outputs(
        engine, prompts, sampling_for_chunk, batch_size, f"{description}: generate"
    )
    timed_out: list[int] = []
    correct = score_outputs(
        scorer,
        samples,
        [p.answer for p in problems],
        batch_size,
        f"{description}: score",
        timed_out,
    )
    row = summarize_benchmark(
        correct,
        decoding,
        finish_reasons=[[s.finish_reason for s in outs] for outs in samples],
        num_tokens=[[len(s.token_ids) for s in outs] for outs in samples],
    )
    row["prompt_truncated_frac"] = sum(prompt_truncated) / len(prompt_truncated)
    # beside Pass@1: samples scored incorrect because their comparison timed out twice
    row["scoring_timeouts"] = sum(timed_out)
    row["no_answer_frac"] = sum(
        extract_last_boxed(s.text) is None for outs in samples for s in outs
    ) / sum(len(outs) for outs in samples)
    return row, output_records(problems, samples, correct, prompt_truncated)


@locks_folder(lambda arguments: arguments["config"].out)
def run_eval(
    config: EvalConfig,
    *,
    engine: RolloutEngine | None = None,
    tokenizer: Any = None,
    engine_factory: Callable[[EvalConfig, Path], RolloutEngine] = engine_for,
) -> dict[str, Any]:
    """Run the evaluation of `config`; write the records; return the summary.

    engine: an already built engine (tests pass a fake one); otherwise `engine_factory` builds one
        from the model directory, after the data has been loaded and checked.
    tokenizer: used to truncate prompts (default: the model directory's tokenizer).

    Holds the lock of `config.out` throughout (`gmc_grpo.runlock`: a second writer is refused).
    """
    out = Path(config.out)
    model_dir, step = resolve_model(config.model, config.step)
    resuming = _check_resumable(out, config)
    previous = [] if config.overwrite else _rows_kept(out, step)
    done = done_keys(previous)
    todo = [(b, d) for b in config.benchmarks for d in config.decodings if (step, b, d) not in done]
    if todo and engine is None:
        check_model_dir(model_dir)  # safetensors only, before anything is written
    # Load every benchmark still to do before any compute or write: a missing file or a
    # malformed row stops the run here, with the output folder as it was.
    pending = list(dict.fromkeys(b for b, _ in todo))
    problems = {b: load_benchmark(b, config.data_dir, config.limit) for b in pending}
    resolved = {**asdict(config), "model_dir": str(model_dir), "resolved_step": step}
    started = time.time()
    with _open_writer(out, config, resolved, step, resuming) as writer:
        if todo:
            _evaluate_pending(
                writer,
                config,
                todo,
                problems,
                engine=engine,
                tokenizer=tokenizer,
                engine_factory=engine_factory,
                model_dir=model_dir,
                step=step,
            )
        all_rows = read_jsonl(out / "evals.jsonl")
        summary = _summary(all_rows, config, step, model_dir, time.time() - started)
        _log_macro_rows(writer, all_rows, config, step, summary)
        writer.write_summary(summary)
    return summary


def _open_writer(
    out: Path, config: EvalConfig, resolved: Mapping[str, Any], step: int | None, resuming: bool
) -> RunWriter:
    """The records' writer of `out`: a resumed run (the step's macro rows dropped, computed again
    at the end) or a fresh one (with `overwrite`, the previous per-problem outputs removed)."""
    if resuming:
        _drop_macro_rows(out, step)
        return RunWriter.resume(out, resolved)
    if config.overwrite:
        shutil.rmtree(out / "outputs", ignore_errors=True)
    return RunWriter.fresh(
        out, resolved, overwrite=config.overwrite, hint=EVAL_FRESH_HINT.format(out=out)
    )


def _evaluate_pending(
    writer: RunWriter,
    config: EvalConfig,
    todo: Sequence[tuple[str, str]],
    problems: Mapping[str, Sequence[Any]],
    *,
    engine: RolloutEngine | None,
    tokenizer: Any,
    engine_factory: Callable[[EvalConfig, Path], RolloutEngine],
    model_dir: Path,
    step: int | None,
) -> None:
    """Evaluate the `(benchmark, decoding)` pairs of `todo` on one engine and one scorer pool,
    benchmark by benchmark in `config.benchmarks`' order (an engine built here is closed here)."""
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
            decimal_rel_tol=config.scorer_decimal_rel_tol,
        ) as scorer:
            for benchmark in config.benchmarks:
                decodings = [d for b, d in todo if b == benchmark]
                if decodings:
                    _evaluate_benchmark(
                        writer,
                        config,
                        engine,
                        scorer,
                        tokenizer,
                        benchmark,
                        problems[benchmark],
                        decodings,
                        model_dir=model_dir,
                        step=step,
                    )
    finally:
        if own_engine and engine is not None:
            engine.close()


def _truncated_prompts(
    items: Sequence[Any], tokenizer: Any, config: EvalConfig
) -> tuple[list[str], list[bool]]:
    """The two-shot prompts of `items` cut at `config.max_prompt_tokens` (`texts`) and whether
    each was cut (`flags`)."""
    truncated = [
        prompt_lib.truncate_prompt(
            prompt_lib.build_prompt(p.problem),
            tokenizer,
            config.max_prompt_tokens,
            config.truncation_side,  # type: ignore[arg-type]
        )
        for p in items
    ]
    return [t for t, _ in truncated], [f for _, f in truncated]


def _evaluate_benchmark(
    writer: RunWriter,
    config: EvalConfig,
    engine: RolloutEngine,
    scorer: Scorer,
    tokenizer: Any,
    benchmark: str,
    items: Sequence[Any],
    decodings: Sequence[str],
    *,
    model_dir: Path,
    step: int | None,
) -> None:
    """One benchmark under each of `decodings`: its per-problem outputs written to `outputs/`
    and one `evals.jsonl` row per decoding."""
    out = Path(config.out)
    texts, flags = _truncated_prompts(items, tokenizer, config)
    # benchmark b's chunk i samples from stream llm_evaluation at (b, i)
    index = list(BENCHMARKS).index(benchmark)
    for decoding in decodings:
        t0 = time.time()
        row, outputs = evaluate_one(
            engine,
            scorer,
            items,
            texts,
            flags,
            decoding,
            sampling_for_chunk=lambda i, b=benchmark, d=decoding, k=index: sampling_for(
                config, b, d, base_seed(config.seed, "llm_evaluation", k, i)
            ),
            batch_size=config.batch_size,
            description=f"{benchmark} {decoding}",
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


def _log_macro_rows(
    writer: RunWriter,
    all_rows: Sequence[Mapping[str, Any]],
    config: EvalConfig,
    step: int | None,
    summary: dict[str, Any],
) -> None:
    """Per decoding with a row for every benchmark of `config` at `step`: the macro row, logged
    and put in `summary["macro"]`."""
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
