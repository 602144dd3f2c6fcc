"""Datasets of Appendix B.1: MATH train and the six evaluation benchmarks, as one record type.

Every loader returns `Problem` records (`id`, `problem`, `answer`, `source`, `metadata`). Each
dataset loads either from the Hugging Face hub (`datasets.load_dataset`, which also reads a local
hub cache) or, with `data_dir`, from local files that hold the same columns as the hub dataset:

```
DATA_DIR/
  math_train/<subject>.jsonl|.parquet|.json   one file per MATH subject (the seven configs)
  math500.jsonl|.parquet|.json                or a folder math500/ of such files
  gsm8k.* | gaokao2023en.* | olympiadbench.* | minerva.* | amc23.*
```

`gmc-grpo llm data --out DIR` (see `export_to_dir`) writes this layout from the hub on a
machine with network access.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_runs.prompts import DEMONSTRATIONS, is_demonstration, normalize_problem_text
from llm_runs.scoring.answers import extract_last_boxed

# The seven subject configs of `EleutherAI/hendrycks_math` (Appendix B.1).
MATH_TRAIN_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)
MATH_TRAIN_HUB_ID = "EleutherAI/hendrycks_math"
# Appendix B.1: 7,498 MATH train problems keep an extractable reference answer (of 7,500).
MATH_TRAIN_EXPECTED = 7498
LOCAL_SUFFIXES = (".jsonl", ".parquet", ".json")


class DataError(RuntimeError):
    """A dataset could not be found or read; the message names the file or hub id and the fix."""


@dataclass(frozen=True)
class Problem:
    """One problem of any dataset.

    id: stable identifier, `<source>/<original id or row index>`.
    problem: the problem statement shown to the model.
    answer: the reference answer (a LaTeX/plain string, no surrounding `$`).
    source: dataset name (`math_train`, `math500`, `gsm8k`, ...).
    metadata: dataset-specific extras (subject, level, the reference solution, ...).
    """

    id: str
    problem: str
    answer: str
    source: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)


# --------------------------------------------------------------------------------------------
# Row converters: one per dataset, shared by the hub and the local-file paths
# --------------------------------------------------------------------------------------------


def clean_reference(answer: Any) -> str:
    """A reference answer as a string: strip spaces and surrounding `$...$`; `27.0` -> `27`."""
    if isinstance(answer, float) and answer.is_integer():
        answer = int(answer)
    text = str(answer).strip()
    while len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = text[1:-1].strip()
    return text


def gsm8k_answer(solution: str) -> str | None:
    """GSM8K's final answer: the text after `####`, thousands separators removed."""
    if "####" not in solution:
        return None
    return solution.split("####")[-1].strip().replace(",", "")


def _row_id(row: Mapping[str, Any], keys: Iterable[str], index: int) -> str:
    """The first present id column among `keys`, else the row index."""
    for key in keys:
        value = row.get(key)
        if value not in (None, ""):
            return str(value)
    return str(index)


def _require(row: Mapping[str, Any], columns: Iterable[str], source: str, index: int) -> None:
    missing = [c for c in columns if c not in row]
    if missing:
        raise DataError(
            f"{source}: row {index} lacks column(s) {missing}; found {sorted(row)}. Local files "
            "must hold the hub dataset's columns (see llm_runs/data.py)"
        )


def convert_math_train(row: Mapping[str, Any], index: int, subject: str) -> Problem | None:
    """MATH train row -> Problem; the reference is the solution's last boxed expression."""
    _require(row, ("problem", "solution"), f"math_train/{subject}", index)
    answer = extract_last_boxed(row["solution"])
    if not answer:
        return None
    return Problem(
        id=f"math_train/{subject}/{index}",
        problem=row["problem"],
        answer=answer,
        source="math_train",
        metadata={
            "subject": subject,
            "level": row.get("level"),
            "type": row.get("type"),
            "solution": row["solution"],
        },
    )


def convert_math500(row: Mapping[str, Any], index: int) -> Problem | None:
    """MATH-500 row (problem, answer, solution, subject, level, unique_id) -> Problem."""
    _require(row, ("problem", "answer"), "math500", index)
    return Problem(
        id=f"math500/{_row_id(row, ('unique_id',), index)}",
        problem=row["problem"],
        answer=clean_reference(row["answer"]),
        source="math500",
        metadata={k: row.get(k) for k in ("subject", "level", "solution") if k in row},
    )


def convert_gsm8k(row: Mapping[str, Any], index: int) -> Problem | None:
    """GSM8K row (question, answer with `#### N`) -> Problem with answer N (no commas)."""
    _require(row, ("question", "answer"), "gsm8k", index)
    answer = gsm8k_answer(row["answer"])
    if answer is None:
        raise DataError(f"gsm8k: row {index} has no '####' final answer: {row['answer'][:80]!r}")
    return Problem(
        id=f"gsm8k/{index}",
        problem=row["question"],
        answer=answer,
        source="gsm8k",
        metadata={"solution": row["answer"]},
    )


def convert_gaokao(row: Mapping[str, Any], index: int) -> Problem | None:
    """Gaokao2023-Math-En row (question, answer, ...) -> Problem."""
    _require(row, ("question", "answer"), "gaokao2023en", index)
    return Problem(
        id=f"gaokao2023en/{_row_id(row, ('id', 'idx'), index)}",
        problem=row["question"],
        answer=clean_reference(row["answer"]),
        source="gaokao2023en",
        metadata={k: row.get(k) for k in ("source", "sourcename") if k in row},
    )


def convert_olympiadbench(row: Mapping[str, Any], index: int) -> Problem | None:
    """OlympiadBench OE_TO_maths_en_COMP row (question, final_answer list, ...) -> Problem.

    Several final answers (`is_multiple_answer`) are joined with ", ".
    """
    _require(row, ("question", "final_answer"), "olympiadbench", index)
    final = row["final_answer"]
    parts = [clean_reference(a) for a in (final if isinstance(final, list) else [final])]
    return Problem(
        id=f"olympiadbench/{_row_id(row, ('id',), index)}",
        problem=row["question"],
        answer=", ".join(p for p in parts if p),
        source="olympiadbench",
        metadata={
            k: row.get(k)
            for k in ("subfield", "answer_type", "unit", "is_multiple_answer")
            if k in row
        },
    )


def convert_minerva(row: Mapping[str, Any], index: int) -> Problem | None:
    """Minerva Math row (question, answer) -> Problem."""
    _require(row, ("question", "answer"), "minerva", index)
    return Problem(
        id=f"minerva/{_row_id(row, ('id', 'idx'), index)}",
        problem=row["question"],
        answer=clean_reference(row["answer"]),
        source="minerva",
    )


def convert_amc23(row: Mapping[str, Any], index: int) -> Problem | None:
    """AMC23 row (id, question, answer, url) -> Problem (`27.0` becomes `27`)."""
    _require(row, ("question", "answer"), "amc23", index)
    return Problem(
        id=f"amc23/{_row_id(row, ('id',), index)}",
        problem=row["question"],
        answer=clean_reference(row["answer"]),
        source="amc23",
        metadata={"url": row.get("url")} if "url" in row else {},
    )


@dataclass(frozen=True)
class BenchmarkSpec:
    """Where an evaluation benchmark lives and how it is scored (Appendix B.1).

    name: short name used on the command line, in file names and in `evals.jsonl`.
    hub_id, config, split: the `datasets.load_dataset` arguments.
    convert: row -> Problem.
    n_samples: outputs per problem for avg@n and pass@k (Appendix B.1).
    expected_size: number of problems reported in Appendix B.1.
    title: the benchmark's name in the paper's tables.
    """

    name: str
    hub_id: str
    config: str | None
    split: str
    convert: Callable[[Mapping[str, Any], int], Problem | None]
    n_samples: int
    expected_size: int
    title: str


# Appendix B.1: 16 outputs per problem for MATH-500, Minerva Math and AMC23; 8 for GSM8K,
# Gaokao2023-Math-En and OlympiadBench. Sizes as listed there.
BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in (
        BenchmarkSpec(
            "math500", "HuggingFaceH4/MATH-500", None, "test", convert_math500, 16, 500, "MATH500"
        ),
        BenchmarkSpec("gsm8k", "openai/gsm8k", "main", "test", convert_gsm8k, 8, 1319, "GSM8K"),
        BenchmarkSpec(
            "gaokao2023en",
            "MARIO-Math-Reasoning/Gaokao2023-Math-En",
            None,
            "train",
            convert_gaokao,
            8,
            385,
            "Gaokao2023",
        ),
        BenchmarkSpec(
            "olympiadbench",
            "Hothan/OlympiadBench",
            "OE_TO_maths_en_COMP",
            "train",
            convert_olympiadbench,
            8,
            674,
            "OlympiadBench",
        ),
        BenchmarkSpec(
            "minerva", "math-ai/minervamath", None, "test", convert_minerva, 16, 272, "Minerva"
        ),
        BenchmarkSpec("amc23", "math-ai/amc23", None, "test", convert_amc23, 16, 40, "AMC23"),
    )
}


# --------------------------------------------------------------------------------------------
# Reading rows: local files or the hub
# --------------------------------------------------------------------------------------------


def read_rows_file(path: Path) -> list[dict[str, Any]]:
    """Rows of one local file: JSON Lines, a JSON list (or JSON Lines named .json), or Parquet."""
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json" and text.lstrip().startswith("["):
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise DataError(f"could not read {path}: {exc}") from exc
    if not all(isinstance(r, dict) for r in rows):
        raise DataError(f"{path}: every row must be a JSON object")
    return rows


def _local_files(data_dir: Path, stem: str) -> list[Path]:
    """`DIR/stem.{jsonl,parquet,json}` or the files of folder `DIR/stem/` (sorted)."""
    for suffix in LOCAL_SUFFIXES:
        candidate = data_dir / f"{stem}{suffix}"
        if candidate.is_file():
            return [candidate]
    folder = data_dir / stem
    if folder.is_dir():
        files = sorted(p for p in folder.iterdir() if p.suffix in LOCAL_SUFFIXES and p.is_file())
        if files:
            return files
    return []


def _missing_local(data_dir: Path, stem: str, what: str) -> DataError:
    names = ", ".join(f"{stem}{s}" for s in LOCAL_SUFFIXES)
    return DataError(
        f"{what}: no local file in {data_dir} (looked for {names} or a folder {stem}/ of such "
        f"files). Put the dataset's rows there (`gmc-grpo llm data --out {data_dir}` "
        "writes them on a machine with network access), or drop --data-dir to use the hub"
    )


def check_data_dir(data_dir: str | Path) -> Path:
    """`data_dir` as a `Path` after checking it is a folder (`DataError` names it and the flag);
    `gmc-grpo llm train` calls it before torch loads (`llm_runs.preflight.check_before_torch`)."""
    path = Path(data_dir)
    if not path.is_dir():
        raise DataError(f"data directory {data_dir} does not exist (passed as --data-dir)")
    return path


def read_local_rows(data_dir: str | Path, stem: str, what: str) -> list[dict[str, Any]]:
    """All rows stored under `data_dir` for dataset file stem `stem` (error names the files)."""
    data_dir = check_data_dir(data_dir)
    files = _local_files(data_dir, stem)
    if not files:
        raise _missing_local(data_dir, stem, what)
    rows: list[dict[str, Any]] = []
    for path in files:
        rows.extend(read_rows_file(path))
    return rows


def read_hub_rows(hub_id: str, config: str | None, split: str) -> Iterator[dict[str, Any]]:
    """Rows of a hub dataset through `datasets.load_dataset` (network or local hub cache)."""
    try:
        from datasets import load_dataset
    except ImportError as exc:
        raise DataError(
            "the `datasets` package is needed to load from the hub: pip install -e '.[llm]' in a gmc-grpo clone, "
            "or pass --data-dir with local files"
        ) from exc
    try:
        dataset = load_dataset(hub_id, config, split=split)
    except Exception as exc:  # network errors, missing configs, offline mode
        name = f"{hub_id}" + (f" (config {config})" if config else "") + f", split {split}"
        raise DataError(
            f"could not load {name} from the Hugging Face hub: {type(exc).__name__}: {exc}. "
            "Without network access, pass --data-dir DIR holding the dataset's rows as "
            "JSONL/Parquet files (layout in llm_runs/data.py)"
        ) from exc
    yield from dataset


def _convert_all(
    rows: Iterable[Mapping[str, Any]], convert: Callable[[Mapping[str, Any], int], Problem | None]
) -> list[Problem]:
    out = []
    for index, row in enumerate(rows):
        problem = convert(row, index)
        if problem is not None:
            out.append(problem)
    return out


def load_benchmark(
    name: str, data_dir: str | Path | None = None, limit: int | None = None
) -> list[Problem]:
    """The problems of evaluation benchmark `name` (a key of `BENCHMARKS`).

    data_dir: read local files instead of the hub. limit: keep only the first `limit` problems.
    """
    if name not in BENCHMARKS:
        raise DataError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}")
    spec = BENCHMARKS[name]
    if data_dir is not None:
        rows: Iterable[Mapping[str, Any]] = read_local_rows(data_dir, name, f"benchmark {name}")
    else:
        rows = read_hub_rows(spec.hub_id, spec.config, spec.split)
    problems = _convert_all(rows, spec.convert)
    if not problems:
        raise DataError(f"benchmark {name}: no problems were read")
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise DataError(f"benchmark {name}: problem ids are not unique")
    return problems[:limit] if limit is not None else problems


@dataclass
class MathTrainReport:
    """What `load_math_train` kept and dropped."""

    total_rows: int
    no_answer: int
    demonstrations_removed: int
    kept: int


def load_math_train(
    data_dir: str | Path | None = None,
    *,
    remove_demonstrations: bool = True,
    subjects: Iterable[str] = MATH_TRAIN_SUBJECTS,
) -> tuple[list[Problem], MathTrainReport]:
    """The MATH training pool of Appendix B.1 and a report of what was dropped.

    Loads the train split of each subject config, keeps problems whose solution has an
    extractable last `\\boxed{}` (7,498 of 7,500 on the hub), then removes the prompt's two
    demonstrations (matched on whitespace-normalised problem text). Records keep the original
    dataset order (subjects in `MATH_TRAIN_SUBJECTS` order).
    """
    problems: list[Problem] = []
    total = no_answer = 0
    if data_dir is not None:
        check_data_dir(data_dir)
    for subject in subjects:
        if subject not in MATH_TRAIN_SUBJECTS:
            raise DataError(f"unknown MATH subject {subject!r}; choose from {MATH_TRAIN_SUBJECTS}")
        if data_dir is not None:
            root = Path(data_dir) / "math_train"
            if not root.is_dir():
                raise _missing_local(Path(data_dir), "math_train/", "MATH train")
            rows: Iterable[Mapping[str, Any]] = read_local_rows(
                root, subject, f"MATH train subject {subject}"
            )
        else:
            rows = read_hub_rows(MATH_TRAIN_HUB_ID, subject, "train")
        for index, row in enumerate(rows):
            total += 1
            problem = convert_math_train(row, index, subject)
            if problem is None:
                no_answer += 1
            else:
                problems.append(problem)
    removed = 0
    if remove_demonstrations:
        kept = [p for p in problems if not is_demonstration(p.problem)]
        removed = len(problems) - len(kept)
        problems = kept
        if data_dir is None and removed < len(DEMONSTRATIONS):
            wanted = [normalize_problem_text(d.problem)[:60] for d in DEMONSTRATIONS]
            warnings.warn(
                f"only {removed} of the {len(DEMONSTRATIONS)} prompt demonstrations were found in "
                f"MATH train (looked for problems starting {wanted}); check that the hub "
                "dataset has not changed",
                stacklevel=2,
            )
    report = MathTrainReport(
        total_rows=total, no_answer=no_answer, demonstrations_removed=removed, kept=len(problems)
    )
    return problems, report


# --------------------------------------------------------------------------------------------
# Export (hub -> local files), for machines that later run without network
# --------------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write rows as JSON Lines; return how many were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(dict(row), ensure_ascii=False, default=str) + "\n")
            count += 1
    return count


def export_to_dir(out_dir: str | Path, names: Iterable[str] | None = None) -> dict[str, int]:
    """Download every dataset from the hub and write the local layout `--data-dir` reads.

    names: subset of `BENCHMARKS` plus "math_train" (default: all). Returns rows per file.
    """
    out = Path(out_dir)
    wanted = list(names) if names is not None else ["math_train", *BENCHMARKS]
    written: dict[str, int] = {}
    for name in wanted:
        if name == "math_train":
            for subject in MATH_TRAIN_SUBJECTS:
                rows = read_hub_rows(MATH_TRAIN_HUB_ID, subject, "train")
                written[f"math_train/{subject}"] = write_jsonl(
                    out / "math_train" / f"{subject}.jsonl", rows
                )
        elif name in BENCHMARKS:
            spec = BENCHMARKS[name]
            rows = read_hub_rows(spec.hub_id, spec.config, spec.split)
            written[name] = write_jsonl(out / f"{name}.jsonl", rows)
        else:
            raise DataError(
                f"unknown dataset {name!r}; choose math_train or {', '.join(BENCHMARKS)}"
            )
    return written
