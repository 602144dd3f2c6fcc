"""Loaders on the project's fixture files (tests/llm_runs/data), and the hub path's errors."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from llm_runs import data as data_lib
from llm_runs.data import (
    BENCHMARKS,
    MATH_TRAIN_SUBJECTS,
    DataError,
    Problem,
    clean_reference,
    gsm8k_answer,
    load_benchmark,
    load_math_train,
)
from llm_runs.prompts import DEMONSTRATIONS, is_demonstration

DATA = Path(__file__).parent / "data"


def test_paper_sizes_and_sample_counts() -> None:
    # Appendix B.1: sizes of the six benchmarks and n of avg@n.
    assert {k: v.expected_size for k, v in BENCHMARKS.items()} == {
        "math500": 500,
        "gsm8k": 1319,
        "gaokao2023en": 385,
        "olympiadbench": 674,
        "minerva": 272,
        "amc23": 40,
    }
    assert {k: v.n_samples for k, v in BENCHMARKS.items()} == {
        "math500": 16,
        "gsm8k": 8,
        "gaokao2023en": 8,
        "olympiadbench": 8,
        "minerva": 16,
        "amc23": 16,
    }
    assert BENCHMARKS["olympiadbench"].config == "OE_TO_maths_en_COMP"
    assert BENCHMARKS["gsm8k"].config == "main" and BENCHMARKS["gsm8k"].split == "test"
    assert len(MATH_TRAIN_SUBJECTS) == 7


def test_math_train_extracts_answers_and_removes_demonstrations() -> None:
    problems, report = load_math_train(DATA)
    assert report.total_rows == 14
    assert report.no_answer == 1  # the geometry row without a box
    assert report.demonstrations_removed == 2  # one of them differs only in whitespace
    assert report.kept == len(problems) == 11
    assert not any(is_demonstration(p.problem) for p in problems)
    by_id = {p.id: p for p in problems}
    assert by_id["math_train/algebra/0"].answer == "7"
    assert by_id["math_train/counting_and_probability/1"].answer == "\\frac{1}{2}"
    assert by_id["math_train/intermediate_algebra/0"].answer == "-1, 1"
    assert by_id["math_train/number_theory/1"].answer == "\\text{no}"
    assert by_id["math_train/prealgebra/1"].metadata["level"] == "Level 1"
    assert all(p.source == "math_train" for p in problems)
    kept_all, report_all = load_math_train(DATA, remove_demonstrations=False)
    assert len(kept_all) == 13 and report_all.demonstrations_removed == 0


def test_math_train_missing_subject_names_the_file(tmp_path: Path) -> None:
    shutil.copytree(DATA / "math_train", tmp_path / "math_train")
    (tmp_path / "math_train" / "geometry.jsonl").unlink()
    with pytest.raises(DataError, match=r"geometry\.jsonl"):
        load_math_train(tmp_path)
    with pytest.raises(DataError, match="math_train"):
        load_math_train(tmp_path / "nothing-here")


@pytest.mark.parametrize(
    ("name", "count", "first_answer"),
    [
        ("math500", 3, "4"),
        ("gsm8k", 2, "7"),
        ("gaokao2023en", 2, "C"),
        ("olympiadbench", 2, "3, -3"),
        ("minerva", 2, "60"),
        ("amc23", 2, "25"),
    ],
)
def test_every_benchmark_loader(name: str, count: int, first_answer: str) -> None:
    problems = load_benchmark(name, DATA)
    assert len(problems) == count
    assert problems[0].answer == first_answer
    assert all(isinstance(p, Problem) and p.source == name and p.problem for p in problems)
    assert all(p.id.startswith(f"{name}/") for p in problems)
    assert len({p.id for p in problems}) == count


def test_specific_conversions() -> None:
    gsm = load_benchmark("gsm8k", DATA)
    assert gsm[1].answer == "1500"  # thousands separator removed
    gaokao = load_benchmark("gaokao2023en", DATA)
    assert gaokao[1].answer == "4"  # surrounding $ stripped
    math500 = load_benchmark("math500", DATA)
    assert math500[0].id == "math500/test/prealgebra/1.json"
    assert load_benchmark("math500", DATA, limit=2) == math500[:2]


def test_parquet_and_json_list_files_load_the_same(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (DATA / "math500.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "math500.parquet")
    (tmp_path / "amc23.json").write_text(json.dumps([{"question": "q", "answer": 3.0, "id": 7}]))
    assert load_benchmark("math500", tmp_path) == load_benchmark("math500", DATA)
    assert load_benchmark("amc23", tmp_path)[0].answer == "3"


def test_missing_files_and_columns_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"math500\.jsonl.*--data-dir|math500\.jsonl"):
        load_benchmark("math500", tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        load_benchmark("math500", tmp_path / "absent")
    with pytest.raises(DataError, match="unknown benchmark"):
        load_benchmark("aime", DATA)
    (tmp_path / "gsm8k.jsonl").write_text(json.dumps({"problem": "x"}) + "\n")
    with pytest.raises(DataError, match="question"):
        load_benchmark("gsm8k", tmp_path)
    (tmp_path / "minerva.jsonl").write_text("{not json\n")
    with pytest.raises(DataError, match="could not read"):
        load_benchmark("minerva", tmp_path)


def test_hub_failure_names_the_dataset_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match=r"HuggingFaceH4/MATH-500.*--data-dir"):
        load_benchmark("math500")
    with pytest.raises(DataError, match=r"EleutherAI/hendrycks_math.*algebra"):
        load_math_train()


def test_hub_path_uses_the_same_converters(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    calls = []

    def fake_load(hub_id, config=None, split=None):
        calls.append((hub_id, config, split))
        rows = [json.loads(x) for x in (DATA / "gsm8k.jsonl").read_text().splitlines()]
        return rows

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    assert load_benchmark("gsm8k") == load_benchmark("gsm8k", DATA)
    assert calls == [("openai/gsm8k", "main", "test")]


def test_hub_without_datasets_says_to_install_the_extra_from_a_clone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` fails
    with pytest.raises(DataError) as error:
        list(data_lib.read_hub_rows("openai/gsm8k", "main", "test"))
    message = str(error.value)
    assert "pip install -e '.[llm]' in a gmc-grpo clone" in message and "--data-dir" in message
    assert "gmc-grpo[" not in message  # the package is not published


def test_export_writes_the_local_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_rows(hub_id, config, split):
        if hub_id == data_lib.MATH_TRAIN_HUB_ID:
            return data_lib.read_rows_file(DATA / "math_train" / f"{config}.jsonl")
        name = next(k for k, v in BENCHMARKS.items() if v.hub_id == hub_id)
        return data_lib.read_local_rows(DATA, name, name)

    monkeypatch.setattr(data_lib, "read_hub_rows", fake_rows)
    written = data_lib.export_to_dir(tmp_path)
    assert written["math_train/algebra"] == 3 and written["minerva"] == 2
    assert load_math_train(tmp_path)[1].kept == 11
    for name in BENCHMARKS:
        assert load_benchmark(name, tmp_path) == load_benchmark(name, DATA)


def test_answer_helpers() -> None:
    assert gsm8k_answer("work\n#### 1,234") == "1234"
    assert gsm8k_answer("no marker") is None
    assert clean_reference(27.0) == "27"
    assert clean_reference(" $\\frac{1}{2}$ ") == "\\frac{1}{2}"
    assert clean_reference(2.5) == "2.5"


def test_demonstrations_are_well_formed() -> None:
    from llm_runs.scoring.answers import extract_last_boxed

    assert len(DEMONSTRATIONS) == 2
    for demo in DEMONSTRATIONS:
        assert demo.subject in MATH_TRAIN_SUBJECTS
        assert extract_last_boxed(demo.solution) == demo.answer
