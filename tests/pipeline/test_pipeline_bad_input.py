"""Every command line, fed bad input, stops with exit status 2 and one line that names the field
or file and the fix, prints no traceback and writes nothing into the output folder (issue 15).

One table over `gmc-grpo toy sweep`, `toy train`, `llm train`, `llm eval`, `figures`, `theory`
and `reproduce`: malformed JSON/TOML, unknown fields, wrong types, out-of-range values (a negative
`eps`, `group_size` 1 with leave-one-out advantages, a delay larger than the run), missing model
or data folders, a data file with a malformed row, a config of the wrong kind. Argument-parser
errors (a flag's value of the wrong type) keep argparse's usage line before the one error line.

Issue 26 adds the values that used to end in a traceback or be accepted although wrong: thread
counts (`--threads 0`), NaN and infinite numbers (`eps`, temperatures, the scorer's timeout,
`theory --eps`), empty or malformed lists (`--seeds ""`, `--seeds 1,,2`, `--methods ""`), worker
counts and run lengths past their limits (`gmc_grpo.fieldchecks`), and an output folder that is a
file or cannot be written. This table is the probe list: rerun it with
`pytest tests/pipeline/test_pipeline_bad_input.py`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from cli_table import run_in_process

from gmc_grpo.run_writer import RunWriter
from pipeline import cli

DATA = Path(__file__).resolve().parents[1] / "llm_runs" / "data"
SHIPPED_TOY = Path(__file__).resolve().parents[2] / "toy_mdps" / "configs"

# name -> JSON or TOML text of the files the cases refer to as {name}
FILES = {
    "torn.json": '{"name": "x", "methods": ["gmc"',
    "array.json": "[1, 2, 3]",
    "sweep_unknown.json": '{"methodz": ["gmc"]}',
    "sweep_type.json": '{"num_groups": "four"}',
    "exp_unknown.json": '{"name": "e", "kind": "runs", "base": {"lrr": 0.1}}',
    "exp_type.json": '{"name": "e", "kind": "runs", "base": {"group_size": "8"}}',
    "run_fields.json": '{"method": "gmc", "delay": 4}',
    "train_unknown.json": '{"lrr": 0.1}',
    "recipe_torn.json": '{"config": {"lr": 0.1',
    "eval_torn.toml": 'model = "x"\nout = [',
    "eval_unknown.toml": '[eval]\nbenchmarks = ["math500"]\ntemprature = 0.5\n',
    "eval_type.toml": '[eval]\nn = "sixteen"\n',
    "not_a_folder": "a file where a folder is expected",
}

TINY_TRAIN = ["llm", "train", "--recipe", "tiny", "--out", "{out}", "--no-progress"]
TINY_EVAL = ["llm", "eval", "--model", "{model}", "--out", "{out}", "--engine", "hf"]
TOY_RUN = ["toy", "train", "--out", "{out}", "--no-progress", "--steps", "10"]

# (case id, argv, text the error line must contain)
CASES = [
    # -- toy sweep
    ("sweep-torn-json", ["toy", "sweep", "--config", "{torn.json}"], "not valid JSON"),
    ("sweep-array", ["toy", "sweep", "--config", "{array.json}"], "must hold a JSON object"),
    ("sweep-unknown", ["toy", "sweep", "--config", "{sweep_unknown.json}"], "['methodz']"),
    ("sweep-type", ["toy", "sweep", "--config", "{sweep_type.json}"],
     "SweepConfig.num_groups='four': must be a whole number"),
    ("sweep-eps", ["toy", "sweep", "--eps", "-0.1"], "SweepConfig.eps_values=[-0.1]"),
    ("sweep-g1", ["toy", "sweep", "--group-sizes", "1", "--advantage", "loo"],
     "SweepConfig.group_sizes=[1]: must be non-empty, each >= 2"),
    ("sweep-delay", ["toy", "sweep", "--delays", "100"],
     "every delay must be in [0, trajectory_steps=64]"),
    ("sweep-kind", ["toy", "sweep", "--config", str(SHIPPED_TOY / "train_delay_quick.json")],
     "is a toy experiment config, not a toy sweep config: run it with gmc-grpo toy train"),
    ("sweep-missing", ["toy", "sweep", "--config", "{tmp}/nope.json"],
     "does not exist; shipped configs: ['direct.json', 'full.json', 'quick.json']"),
    ("sweep-dir", ["toy", "sweep", "--config", "{tmp}"], "is a directory, not a file"),
    ("sweep-flag-type", ["toy", "sweep", "--num-groups", "four"], "'four': not a whole number"),
    ("sweep-threads-0", ["toy", "sweep", "--threads", "0"], "--threads 0: must be a whole number"),
    ("sweep-seeds-gap", ["toy", "sweep", "--seeds", "1,,2"], "--seeds '1,,2': an entry is empty"),
    ("sweep-eps-nan", ["toy", "sweep", "--eps", "0.2,nan"], "'nan' is not a finite number"),
    ("sweep-methods-empty", ["toy", "sweep", "--methods", ""], "--methods '': give at least one"),
    # -- toy train
    ("train-torn-json", ["toy", "train", "--config", "{torn.json}"], "not valid JSON"),
    ("train-unknown", ["toy", "train", "--config", "{exp_unknown.json}"],
     "TrainConfig fields ['lrr']"),
    ("train-type", ["toy", "train", "--config", "{exp_type.json}"],
     "TrainConfig.group_size='8': must be a whole number"),
    ("train-run-file", ["toy", "train", "--config", "{run_fields.json}"],
     'an experiment config puts them under "base"'),
    ("train-kind", ["toy", "train", "--config", str(SHIPPED_TOY / "quick.json")],
     "is a toy sweep config, not a toy experiment config: run it with gmc-grpo toy sweep"),
    ("train-missing", ["toy", "train", "--experiment", "nope"], "train_nope.json does not exist"),
    ("train-eps", [*TOY_RUN, "--eps", "-0.1"], "TrainConfig.eps=-0.1"),
    ("train-g1", [*TOY_RUN, "--group-size", "1", "--advantage", "loo"],
     "TrainConfig.group_size=1: must be >= 2"),
    ("train-delay", [*TOY_RUN, "--delay", "50"],
     "TrainConfig.delay=50: must be smaller than total_steps=10"),
    ("train-seeds", [*TOY_RUN, "--seeds", ","], "--seeds ',': an entry is empty"),
    # issue 26: tracebacks, and values accepted although wrong
    ("train-threads-0", [*TOY_RUN, "--threads", "0"], "--threads 0: must be a whole number in [1, 1,024]"),
    ("train-threads-neg", [*TOY_RUN, "--threads", "-2"], "--threads -2: must be a whole number"),
    ("train-workers-huge", [*TOY_RUN, "--schedule", "workers", "--workers", "100000000"],
     "TrainConfig.num_workers=100000000: must be a whole number in [1, 100,000]"),
    ("train-steps-huge", [*TOY_RUN, "--steps", "1000000000000"],
     "TrainConfig.total_steps=1000000000000: must be a whole number in [1, 10,000,000]"),
    ("train-seeds-gap", [*TOY_RUN, "--seeds", "1,,2"], "--seeds '1,,2': an entry is empty"),
    ("train-seeds-negative", [*TOY_RUN, "--seeds", "-1"], "TrainConfig.seeds=[-1]: must be"),
    ("train-seeds-word", [*TOY_RUN, "--seeds", "0,x"], "'x' is not a whole number"),
    ("train-eps-inf", [*TOY_RUN, "--eps", "inf"], "TrainConfig.eps=inf: must be a finite number"),
    ("train-lr-nan", [*TOY_RUN, "--lr", "nan"], "TrainConfig.lr=nan: must be a finite number > 0"),
    ("train-out-file", ["toy", "train", "--out", "{not_a_folder}", "--steps", "10"],
     "is a file, not a folder"),
    ("train-out-read-only", ["toy", "train", "--out", "{read_only}/run", "--steps", "10"],
     "cannot write into"),
    ("train-flag-type", [*TOY_RUN, "--delay", "abc"], "--delay 'abc': not a whole number"),
    ("train-extend-new", [*TOY_RUN, "--extend-to", "20"], "holds no run to continue"),
    # -- llm train
    ("llm-train-torn", [*TINY_TRAIN, "--config", "{torn.json}"], "not valid JSON"),
    ("llm-train-unknown", [*TINY_TRAIN, "--config", "{train_unknown.json}"],
     "TrainConfig fields ['lrr']"),
    ("llm-train-set-unknown", [*TINY_TRAIN, "--set", "lrr=1"], "TrainConfig fields"),
    ("llm-train-type", [*TINY_TRAIN, "--set", 'lr="fast"'],
     "TrainConfig.lr='fast': must be a number"),
    ("llm-train-eps", [*TINY_TRAIN, "--set", "eps=-0.1"], "eps=-0.1"),
    ("llm-train-g1", [*TINY_TRAIN, "--set", "group_size=1", "--set", 'advantage="loo"'],
     "TrainConfig.group_size=1: must be >= 2"),
    ("llm-train-delay", [*TINY_TRAIN, "--delay", "200"],
     "TrainConfig.delay=200: must be smaller than total_steps=150"),
    ("llm-train-model", [*TINY_TRAIN, "--model", "{tmp}/no_model"],
     "no_model' does not exist"),
    ("llm-train-data", [*TINY_TRAIN, "--set", 'task="math"', "--set", "sft_steps=0",
                        "--data-dir", "{tmp}/no_data"], "no_data does not exist"),
    ("llm-train-row", [*TINY_TRAIN, "--set", 'task="math"', "--set", "sft_steps=0",
                       "--data-dir", "{bad_data}"], "could not read"),
    ("llm-train-recipe", ["llm", "train", "--recipe", "{recipe_torn.json}", "--out", "{out}"],
     "not valid JSON"),
    ("llm-train-extend-new", [*TINY_TRAIN, "--extend-to", "200"], "holds no checkpoint"),
    ("llm-train-seeds-empty", [*TINY_TRAIN, "--seeds", ""], "--seeds '': give at least one value"),
    ("llm-train-methods-empty", [*TINY_TRAIN, "--methods", ""],
     "--methods '': give at least one value"),
    ("llm-train-seeds-gap", [*TINY_TRAIN, "--seeds", "1,,2"], "--seeds '1,,2': an entry is empty"),
    ("llm-train-seeds-negative", [*TINY_TRAIN, "--seeds", "-1"], "SuiteConfig.seeds=(-1,)"),
    ("llm-train-eps-inf", [*TINY_TRAIN, "--set", "eps=Infinity"],
     "TrainConfig.eps=inf: must be a finite number > 0"),
    ("llm-train-eps-nan", [*TINY_TRAIN, "--set", "eps=NaN"], "TrainConfig.eps=nan"),
    ("llm-train-suite-eps-inf", [*TINY_TRAIN, "--seeds", "0,1", "--set", "eps=Infinity"],
     "TrainConfig.eps=inf"),  # every run of a suite is checked before the first starts
    ("llm-train-temperature-inf", [*TINY_TRAIN, "--set", "temperature=Infinity"],
     "TrainConfig.temperature=inf: must be a finite number > 0"),
    ("llm-train-workers-huge", [*TINY_TRAIN, "--schedule", "workers", "--workers", "100000000"],
     "TrainConfig.num_workers=100000000: must be a whole number in [1, 100,000]"),
    ("llm-train-steps-huge", [*TINY_TRAIN, "--steps", "1000000000000"],
     "TrainConfig.total_steps=1000000000000: must be a whole number in [1, 10,000,000]"),
    ("llm-train-out-file", ["llm", "train", "--recipe", "tiny", "--out", "{not_a_folder}"],
     "is a file, not a folder"),
    ("llm-eval-out-read-only", ["llm", "eval", "--model", "{model}", "--out", "{read_only}/eval"],
     "cannot write into"),
    # -- llm eval
    ("llm-eval-torn-toml", [*TINY_EVAL, "--config", "{eval_torn.toml}"], "not valid TOML"),
    ("llm-eval-unknown", [*TINY_EVAL, "--config", "{eval_unknown.toml}"],
     "unknown EvalConfig fields ['temprature']"),
    ("llm-eval-type", [*TINY_EVAL, "--config", "{eval_type.toml}"],
     "EvalConfig.n='sixteen': must be null or a whole number"),
    ("llm-eval-n", [*TINY_EVAL, "--n", "0"], "EvalConfig.n must be >= 1"),
    ("llm-eval-temperature", [*TINY_EVAL, "--temperature", "-1"], "EvalConfig.temperature"),
    ("llm-eval-temperature-nan", [*TINY_EVAL, "--temperature", "nan"],
     "EvalConfig.temperature=nan: must be a finite number > 0"),
    ("llm-eval-temperature-inf", [*TINY_EVAL, "--temperature", "inf"],
     "EvalConfig.temperature=inf: must be a finite number > 0"),
    ("llm-eval-timeout-inf", [*TINY_EVAL, "--scorer-timeout-s", "inf"],
     "EvalConfig.scorer_timeout_s=inf: must be a finite number in (0, 3,600]"),
    ("llm-eval-timeout-nan", [*TINY_EVAL, "--scorer-timeout-s", "nan"],
     "EvalConfig.scorer_timeout_s=nan: must be a finite number in (0, 3,600]"),
    ("llm-eval-timeout-huge", [*TINY_EVAL, "--scorer-timeout-s", "1e9"],
     "EvalConfig.scorer_timeout_s=1000000000.0"),
    ("llm-eval-seed", [*TINY_EVAL, "--seed", "-1"], "EvalConfig.seed=-1: must be a whole number"),
    ("llm-eval-model", ["llm", "eval", "--model", "{tmp}/no_model", "--out", "{out}"],
     "no_model' does not exist"),
    ("llm-eval-pickled", ["llm", "eval", "--model", "{pickled_model}", "--out", "{out}",
                          "--data-dir", str(DATA)], "only pickled weights"),
    ("llm-eval-data", [*TINY_EVAL, "--data-dir", "{tmp}/no_data"], "no_data does not exist"),
    ("llm-eval-row", [*TINY_EVAL, "--data-dir", "{bad_data}", "--benchmarks", "math500"],
     "could not read"),
    # -- figures, theory, reproduce
    ("figures-path", ["figures", "{tmp}/no_runs", "--out", "{out}"], "no_runs"),
    ("figures-only", ["figures", "--only", "fig99", "--out", "{out}"], "unknown item(s)"),
    ("figures-formats", ["figures", "--formats", "xyz", "--out", "{out}"], "--formats 'xyz'"),
    ("figures-step", ["figures", "--step", "-1", "--out", "{out}"], "--step -1: must be >= 0"),
    ("theory-eps", ["theory", "--eps", "-1", "--out", "{out}"], "must be a finite number in (0, 1e+300]"),
    ("theory-eps-huge", ["theory", "--eps", "1e308", "--out", "{out}"], "got 1e+308"),
    ("theory-eps-nan", ["theory", "--eps", "0.28", "nan", "--out", "{out}"], "got nan"),
    ("theory-eps-inf", ["theory", "--eps", "inf", "--out", "{out}"], "--eps inf: every value"),
    ("theory-out-file", ["theory", "--out", "{not_a_folder}"], "is a file, not a folder"),
    ("theory-out-read-only", ["theory", "--out", "{read_only}"], "cannot write into"),
    ("theory-runs-missing", ["theory", "--runs", "{tmp}/no_runs", "--out", "{out}"],
     "--runs: no such folder"),
    ("figures-out-read-only", ["figures", "{runs}", "--out", "{read_only}/figs"],
     "cannot write into"),
    ("theory-flag-type", ["theory", "--eps", "abc"], "invalid float value: 'abc'"),
    ("reproduce-stage", ["reproduce", "--only", "nope", "--out", "{out}"], "--only nope: not a stage"),
    ("reproduce-out-file", ["reproduce", "--out", "{not_a_folder}"], "is a file"),
]  # fmt: skip


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, str]:
    """The files and folders the cases name: configs, a data folder with a malformed row, a
    tiny model and a model folder whose weights are a pickle."""
    root = tmp_path_factory.mktemp("inputs")
    found = {"tmp": str(root)}
    for name, text in FILES.items():
        (root / name).write_text(text)
        found[name] = str(root / name)
    bad = root / "bad_data"
    shutil.copytree(DATA, bad)
    with open(bad / "math500.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"problem": "1 + 1", "answer": \n')
    with open(bad / "math_train" / "algebra.jsonl", "a", encoding="utf-8") as handle:
        handle.write("not json\n")
    found["bad_data"] = str(bad)
    with RunWriter(root / "runs" / "toy", {"method": "gmc", "eps": 0.28}) as writer:
        for step in range(3):  # a toy training run's rows, enough for `figures` to draw
            writer.log_metrics({"step": step, "policy/objective": 0.5, "policy/grad_norm_sq": 1.0})
    found["runs"] = str(root / "runs")
    try:
        import torch

        from llm_runs.tiny import build_tiny_qwen3
    except ImportError:
        return found
    model = build_tiny_qwen3(root / "model", num_layers=1, hidden_size=64)
    found["model"] = str(model)
    pickled = build_tiny_qwen3(root / "pickled", num_layers=1, hidden_size=64)
    for weights in pickled.glob("*.safetensors"):
        weights.unlink()
    torch.save({"w": torch.zeros(1)}, pickled / "pytorch_model.bin")
    found["pickled_model"] = str(pickled)
    return found


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A folder nobody may write into: mode 0555, and for root (whom modes do not stop) every
    creation below it refused with EROFS, as on a read-only mount."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:
        real_open, real_mkdir = os.open, os.mkdir

        def refuse(path: object) -> None:
            if os.path.abspath(os.fspath(path)).startswith(str(folder)):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))

        def open_(path, flags, mode=0o777, *, dir_fd=None):  # noqa: ANN001, ANN202
            if flags & os.O_CREAT:
                refuse(path)
            return real_open(path, flags, mode, dir_fd=dir_fd)

        def mkdir_(path, mode=0o777, *, dir_fd=None):  # noqa: ANN001, ANN202
            refuse(path)
            return real_mkdir(path, mode, dir_fd=dir_fd)

        monkeypatch.setattr(os, "open", open_)
        monkeypatch.setattr(os, "mkdir", mkdir_)
    yield folder
    folder.chmod(0o755)


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_status_2(
    argv: list[str],
    expected: str,
    places: dict[str, str],
    tmp_path: Path,
    capsys,
    request: pytest.FixtureRequest,
) -> None:
    if argv[0] == "llm" and "model" not in places:
        pytest.skip("the LLM track needs transformers")
    out = tmp_path / "out"
    if argv[0] == "toy" and "--out" not in argv:
        argv = [*argv, "--out", "{out}"]
    names = {**places, "out": str(out)}
    unwritable = None
    if any("{read_only}" in arg for arg in argv):
        unwritable = request.getfixturevalue("read_only")
        names["read_only"] = str(unwritable)
    code, captured, lines = run_in_process(argv, names, capsys)
    assert code == 2, captured
    assert "Traceback" not in captured.err + captured.out
    assert lines, captured
    if not lines[0].startswith("usage:"):
        assert len(lines) == 1, lines
    assert "error:" in lines[-1]
    assert expected in lines[-1], lines[-1]
    assert not out.exists() or not any(out.iterdir()), sorted(out.rglob("*"))
    if unwritable is not None:
        assert not any(unwritable.iterdir())
    if "{not_a_folder}" in argv:
        assert Path(places["not_a_folder"]).read_text() == FILES["not_a_folder"]


def test_every_cli_is_in_the_table() -> None:
    """The table covers each command line (a new one must be added to it)."""
    covered = {" ".join(argv[:2]) if argv[0] in ("toy", "llm") else argv[0] for _, argv, _ in CASES}
    assert covered == {
        "toy sweep", "toy train", "llm train", "llm eval", "figures", "theory", "reproduce"
    }  # fmt: skip
    assert set(cli.SUBCOMMANDS) == {"theory", "toy", "llm", "figures", "reproduce"}
    for name in FILES:
        if name.endswith(".json"):
            try:
                json.loads(FILES[name])
            except json.JSONDecodeError:
                assert "torn" in name  # only the torn files are not JSON
