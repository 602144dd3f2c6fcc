"""The probes of issue 36, as a table beside the bad-input table (`test_pipeline_bad_input.py`):
each is a command line, the exit code it must end with, the text of its one error line, and
nothing written into its output folder. Families: size fields past the memory they imply (and
values whose check used to hang or hit Python's int-string limit), flags in the wrong form,
deeply nested or mistyped JSON and TOML, `--fresh` against another kind of run. The records
probes (torn and gapped records) are in `tests/toy_mdps/test_toy_train_record_gaps.py` and
`tests/llm_runs/test_llm_train_resume.py`, the loaded scorer in
`tests/llm_runs/test_llm_scoring.py`, `--fresh` in `tests/toy_mdps/test_toy_fresh_kind.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_table import run_in_process

from gmc_grpo.run_writer import RunWriter
from pipeline import cli

DEEP = "[" * 100_000 + "]" * 100_000  # nested 100,000 deep: Python's parser recurses on it
FILES = {
    "deep.json": DEEP,
    "deep_object.json": '{"a": ' * 200 + "1" + "}" * 200,
    "deep.toml": "x = " + "[" * 5_000 + "]" * 5_000 + "\n",
    "list.json": "[1, 2]",
    "digits.json": '{"num_groups": ' + "9" * 5_000 + "}",
    "long_method.json": '{"methods": ["' + "x" * 100_000 + '"]}',
}
HUGE = "9" * 5_000  # past Python's 4,300-digit int-string limit

# (case id, argv, exit code, text the one error line must contain)
PROBES = [
    # -- sizes: limited by the memory they imply, checked before anything is written
    ("sweep-num-groups", ["toy", "sweep", "--quick", "--num-groups", "99999999999"], 2,
     "SweepConfig.num_groups=99999999999: num_minibatches (400) x num_groups (99999999999)"),
    ("sweep-group-sizes", ["toy", "sweep", "--quick", "--group-sizes", "100000000"], 2,
     "use a smaller group_sizes (--group-sizes)"),
    ("sweep-minibatches-float", ["toy", "sweep", "--num-minibatches", "1e10"], 2,
     "--num-minibatches '1e10': not a whole number; write it in digits, e.g. --num-minibatches 400"),
    ("sweep-minibatches-big", ["toy", "sweep", "--num-minibatches", "10000000000"], 2,
     "use a smaller num_minibatches (--num-minibatches)"),
    ("train-group-size", ["toy", "train", "--group-size", "100000000"], 2,
     "TrainConfig.group_size=100000000: seeds (5) x num_groups (8) x group_size (100000000)"),
    ("train-max-length-hang", ["toy", "train", "--max-length", "100000"], 2,
     "TrainConfig.max_length=100000: num_prompts 8 x the responses of vocab_size 4"),
    ("train-max-length-digits", ["toy", "train", "--max-length", "20000"], 2,
     "more than the 2,000,000 the exact tables enumerate; use a smaller max_length, e.g. 6"),
    ("sweep-vocab", ["toy", "sweep", "--config", "{vocab.json}"], 2,
     "SweepConfig.vocab_size=1000000: num_prompts 8 x the responses of vocab_size 1000000"),
    ("train-huge-int", ["toy", "train", "--num-groups", HUGE], 2,
     "--num-groups: 5000 digits, past every limit of this value; e.g. --num-groups 4"),
    ("llm-group-size", ["llm", "train", "--recipe", "tiny", "--set", "group_size=100000000"], 2,
     "TrainConfig.group_size=100000000: a rollout batch of num_groups (8) x group_size"),
    ("llm-completion", ["llm", "train", "--recipe", "tiny", "--set",
                        "max_completion_tokens=100000000000"], 2,
     "use a smaller max_completion_tokens (--set max_completion_tokens=...)"),
    # -- messages: the side of the range, a correct example, values cut to a readable length
    ("train-steps-0", ["toy", "train", "--steps", "0"], 2,
     "must be a whole number in [1, 10,000,000]; a run makes at least one update, e.g. 400"),
    ("llm-steps", ["llm", "train", "--recipe", "tiny", "--set", "total_steps=-5"], 2,
     "TrainConfig.total_steps=-5: must be a whole number in [1, 10,000,000]; a run makes at least "
     "one update, e.g. 400"),
    ("sweep-group-sizes-empty", ["toy", "sweep", "--group-sizes", ""], 2,
     "give at least one value, e.g. --group-sizes 2,8,32"),
    ("sweep-long-value", ["toy", "sweep", "--seeds", "x" * 100_000], 2,
     "xxx... (100002 characters)"),
    ("reproduce-only", ["reproduce", "--only", "nope", "--out", "{out}"], 2,
     "--only nope: not a stage; choose from bounds,"),
    ("train-grad-clip", ["toy", "train", "--grad-clip", "-1"], 2,
     "or none to disable clipping (--grad-clip none; null in a JSON config)"),
    # -- readers: nesting and type checked, one line naming the file
    ("sweep-deep-config", ["toy", "sweep", "--config", "{deep.json}"], 2,
     "deep.json is nested deeper than 64 levels"),
    ("train-deep-config", ["toy", "train", "--config", "{deep_object.json}"], 2,
     "deep_object.json is nested deeper than 64 levels"),
    ("eval-deep-toml", ["llm", "eval", "--config", "{deep.toml}"], 2,
     "deep.toml is nested deeper than 64 levels"),
    ("sweep-digits-config", ["toy", "sweep", "--config", "{digits.json}"], 2,
     "digits.json holds a number of more than 4,300 digits"),
    ("sweep-long-config-value", ["toy", "sweep", "--config", "{long_method.json}"], 2,
     "SweepConfig.methods=['xxxx"),
    ("theory-deep-run", ["theory", "--runs", "{deep_run}"], 2, "no toy run the claims table"),
]  # fmt: skip


@pytest.fixture
def places(tmp_path: Path) -> dict[str, str]:
    names = {}
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
        names[name] = str(tmp_path / name)
    (tmp_path / "vocab.json").write_text(json.dumps({"vocab_size": 10**6, "max_length": 3}))
    names["vocab.json"] = str(tmp_path / "vocab.json")
    deep_run = tmp_path / "deep_run" / "run"
    deep_run.mkdir(parents=True)
    (deep_run / "config.json").write_text(DEEP)
    (deep_run / "metrics.jsonl").write_text("")
    names["deep_run"] = str(tmp_path / "deep_run")
    return names


@pytest.mark.parametrize(
    ("argv", "code", "expected"), [p[1:] for p in PROBES], ids=[p[0] for p in PROBES]
)
def test_probe_is_one_line_with_its_exit_code_and_writes_nothing(
    argv: list[str], code: int, expected: str, places: dict[str, str], tmp_path: Path, capsys
) -> None:
    if argv[0] == "llm":
        pytest.importorskip("transformers", reason="the LLM track needs transformers")
    out = tmp_path / "out"
    if argv[0] in ("toy", "llm") and "--out" not in argv:
        argv = [*argv, "--out", "{out}"]
    names = {**places, "out": str(out)}
    got, captured, lines = run_in_process(argv, names, capsys)
    assert got == code, captured
    assert "Traceback" not in captured.err + captured.out
    assert len(lines) == 1, lines
    assert expected in lines[0], lines[0]
    assert len(lines[0]) < 800  # echoed values are cut
    assert not out.exists(), sorted(out.rglob("*"))


def test_figures_skip_a_deeply_nested_run_and_draw_the_rest(tmp_path: Path, capsys) -> None:
    """One bad run (a 100,000-deep `config.json`, or one that is a JSON list) never sinks the
    others: `figures` and `figures --list` name it in one line and go on."""
    root = tmp_path / "runs"
    with RunWriter(root / "good", {"num_prompts": 4, "method": "gmc"}) as writer:
        for step in range(3):
            writer.log_metrics({"step": step, "seed": 0, "policy/objective": 0.1 * step})
        writer.write_summary({})
    for name, text in (("deep", DEEP), ("listed", "[1, 2]")):
        (root / name).mkdir()
        (root / name / "config.json").write_text(text)
        (root / name / "metrics.jsonl").write_text('{"step": 0}\n')
    assert cli.main(["figures", str(root), "--list"]) == 0
    printed = capsys.readouterr()
    assert "good" in printed.out and "Traceback" not in printed.err
    assert "nested deeper than 64 levels" in printed.out + printed.err
    assert "not a run record (a JSON list" in printed.out + printed.err
    code = cli.main(["figures", str(root), "--out", str(tmp_path / "figs")])
    printed = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in printed.err
    skipped = [line for line in printed.out.splitlines() if line.startswith("skipped damaged run")]
    assert len(skipped) == 2, printed.out


TOY = ["toy", "train", "--num-prompts", "2", "--max-length", "3", "--num-groups", "2",
       "--group-size", "4", "--seeds", "0", "--steps", "4", "--checkpoint-every", "2",
       "--no-progress", "--no-figures"]  # fmt: skip


def test_a_full_disk_is_one_line_naming_the_checkpoint_and_the_rerun_continues(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """safetensors reports a full disk as a `SafetensorError` (a 40-line traceback before): now
    exit status 1 and one line naming the checkpoint folder and the fix; after space is freed
    the same command continues and writes the records of an uninterrupted run."""
    import safetensors.torch
    from safetensors import SafetensorError

    from gmc_grpo.json_files import read_jsonl

    straight, full = tmp_path / "straight", tmp_path / "full"
    assert cli.main([*TOY, "--out", str(straight)]) == 0
    real = safetensors.torch.save_file
    calls = []

    def fills_up(tensors, filename, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(filename)
        if len(calls) == 2:  # the second checkpoint: the disk is full
            raise SafetensorError(
                "Error while serializing: I/O error: No space left on device (os error 28)"
            )
        return real(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_file", fills_up)
    capsys.readouterr()
    assert cli.main([*TOY, "--out", str(full)]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "checkpoints/step_000004: No space left on device [errno 28]" in lines[0]
    assert "free space on that disk" in lines[0]
    monkeypatch.setattr(safetensors.torch, "save_file", real)
    assert cli.main([*TOY, "--out", str(full)]) == 0
    assert read_jsonl(full / "metrics.jsonl") == read_jsonl(straight / "metrics.jsonl")


def test_ctrl_c_is_exit_130_without_a_traceback(tmp_path: Path, capsys, monkeypatch) -> None:
    from toy_mdps.train.learner import AsyncLearner

    def interrupted(self):  # noqa: ANN001, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(AsyncLearner, "train_step", interrupted)
    assert cli.main([*TOY, "--out", str(tmp_path / "run")]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "interrupted (Ctrl-C)" in err


def test_a_failed_command_removes_the_folders_it_created(tmp_path: Path, capsys) -> None:
    pytest.importorskip("transformers", reason="the LLM track needs transformers")
    toy_run = tmp_path / "toy"
    assert cli.main([*TOY, "--out", str(toy_run)]) == 0
    for run in ("/nonexistent", str(toy_run)):
        out = tmp_path / "o" / "deeper"
        assert cli.main(["llm", "bias", "--run", run, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert not (tmp_path / "o").exists()
    assert "holds another kind of run" in err


def test_an_over_long_folder_name_is_bad_input(tmp_path: Path, capsys) -> None:
    out = tmp_path / ("a" * 300)
    assert cli.main([*TOY, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and "too long for the file system" in err and "free space" not in err
    )
    assert "(" in err and len(err) < 400  # the name is cut
