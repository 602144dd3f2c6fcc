"""Nothing unpickles (issue 15). A pickle planted where each kind of checkpoint or model file is
expected is refused with one clear line and its payload never runs; and no shipped module calls
an unpickler (`torch.load`, `pickle`, `weights_only=False`, ...), checked on the source."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from pipeline import cli

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("gmc_grpo", "toy_mdps", "llm_runs", "theory", "figures", "pipeline", "examples")
# modules whose loaders unpickle, and calls that unpickle
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "shelve"}
UNPICKLING_CALLS = {
    "torch.load",
    "torch.serialization.load",
    "pickle.load",
    "pickle.loads",
    "pandas.read_pickle",
    "pd.read_pickle",
    "joblib.load",
}


def unpickling_uses(source: str, name: str) -> list[str]:
    """`file:line what` for every import of a pickle module, call of an unpickler,
    `weights_only=False` and `allow_pickle=True` in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.append(node.module)
            for module in modules:
                if module.split(".")[0] in PICKLE_MODULES:
                    found.append(f"{name}:{node.lineno} imports {module}")
        if isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            if callee in UNPICKLING_CALLS:
                found.append(f"{name}:{node.lineno} calls {callee}")
            for keyword in node.keywords:
                value = keyword.value
                constant = value.value if isinstance(value, ast.Constant) else None
                if (keyword.arg, constant) in (("weights_only", False), ("allow_pickle", True)):
                    found.append(f"{name}:{node.lineno} passes {keyword.arg}={constant}")
    return found


def test_the_checker_finds_each_way_to_unpickle() -> None:
    planted = """
import pickle
from joblib import load
import torch, numpy as np
torch.load("x.pt", weights_only=False)
np.load("x.npy", allow_pickle=True)
pickle.loads(b"")
"""
    found = unpickling_uses(planted, "planted.py")
    assert found == [
        "planted.py:2 imports pickle",
        "planted.py:3 imports joblib",
        "planted.py:5 calls torch.load",
        "planted.py:5 passes weights_only=False",
        "planted.py:6 passes allow_pickle=True",
        "planted.py:7 calls pickle.loads",
    ]
    assert unpickling_uses("from safetensors.torch import load_file\nload_file('x')", "ok") == []


def test_no_shipped_module_unpickles() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            found += unpickling_uses(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert found == []


class Payload:
    """Unpickling this creates (opens for writing) the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (str(self.marker), "w"))


def plant(path: Path, marker: Path) -> None:
    """Replace `path` by a torch pickle carrying the payload (a live one: see the test below)."""
    path.unlink(missing_ok=True)
    torch.save({"weights": Payload(marker)}, path)


def test_the_planted_pickle_is_live(tmp_path: Path) -> None:
    marker = tmp_path / "payload-ran"
    plant(tmp_path / "x.safetensors", marker)
    with open(tmp_path / "x.safetensors", "rb") as handle:  # what a careless loader does
        torch.load(handle, weights_only=False)
    assert marker.exists()


def run_cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if line.strip()]


def test_a_pickled_toy_checkpoint_never_runs(tmp_path: Path, capsys) -> None:
    out, marker = tmp_path / "run", tmp_path / "payload-ran"
    argv = ["toy", "train", "--num-prompts", "2", "--max-length", "3", "--group-size", "4",
            "--num-groups", "2", "--seeds", "0", "--steps", "6", "--checkpoint-every", "2",
            "--out", str(out), "--no-progress"]  # fmt: skip
    assert run_cli(argv, capsys)[0] == 0
    (out / "summary.json").unlink()  # as if stopped after its last checkpoint
    # the pickled checkpoint of gmc-grpo before safetensors (what it loaded on a rerun)
    plant(out / "checkpoint.pt", marker)
    code, lines = run_cli(argv, capsys)
    assert not marker.exists()
    assert code == 2 and len(lines) == 1 and "checkpoint.pt is a pickled checkpoint" in lines[0]
    (out / "checkpoint.pt").unlink()
    # a pickle where the safetensors checkpoint belongs
    plant(max((out / "checkpoints").iterdir()) / "state.safetensors", marker)
    code, lines = run_cli(argv, capsys)
    assert not marker.exists()
    assert code == 2 and len(lines) == 1
    assert "state.safetensors is not a safetensors file" in lines[0]


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory) -> Path:
    """A finished tiny `llm train` run with its checkpoint."""
    pytest.importorskip("transformers", reason="the LLM track needs transformers")
    from llm_runs.config import LLMTrainConfig
    from llm_runs.train import train

    out = tmp_path_factory.mktemp("llm") / "run"
    config = LLMTrainConfig(
        out=str(out),
        tiny_model={"seed": 1, "num_layers": 1, "hidden_size": 64, "intermediate_size": 128},
        task="arithmetic",
        reward="exact",
        arithmetic={"max_operand": 5, "num_train": 12, "num_eval": 4},
        num_groups=2,
        group_size=2,
        total_steps=2,
        max_prompt_tokens=32,
        max_completion_tokens=4,
        optimizer="adamw",
        engine="hf",
        learner_device="cpu",
        progress=False,
    )
    train(config, notice=lambda _text: None)
    (out.parent / "train_config.json").write_text(json.dumps(dataclasses.asdict(config)))
    return out


LLM_FILES = ("optimizer.safetensors", "schedule.safetensors", "state.safetensors",
             "model/model.safetensors")  # fmt: skip


@pytest.mark.parametrize("planted", LLM_FILES)
def test_a_pickled_llm_checkpoint_file_never_runs(
    planted: str, llm_run: Path, tmp_path: Path, capsys
) -> None:
    out, marker = tmp_path / "run", tmp_path / "payload-ran"
    shutil.copytree(llm_run, out)
    config = llm_run.parent / "train_config.json"
    checkpoint = max((out / "checkpoints").iterdir())
    plant(checkpoint / planted, marker)
    code, lines = run_cli(
        ["llm", "train", "--config", str(config), "--out", str(out), "--resume", "--no-progress",
         "--extend-to", "4"],
        capsys,
    )  # fmt: skip
    assert code == 2 and len(lines) == 1, lines
    assert f"{Path(planted).name} is not a safetensors file" in lines[0]
    assert not marker.exists()


def test_a_pickled_model_folder_never_runs(llm_run: Path, tmp_path: Path, capsys) -> None:
    """A model folder for `llm eval --model` / `llm train --model`: weights as a pickle, named
    pytorch_model.bin (refused before reading) or model.safetensors (its header does not parse)."""
    marker = tmp_path / "payload-ran"
    model = tmp_path / "model"
    shutil.copytree(max((llm_run / "checkpoints").iterdir()) / "model", model)
    data = REPO / "tests" / "llm_runs" / "data"
    for name, message in (
        ("model.safetensors", "model.safetensors is not a safetensors file"),
        ("pytorch_model.bin", "only pickled weights (pytorch_model.bin)"),
    ):
        for weights in model.glob("*.safetensors"):
            weights.unlink()
        plant(model / name, marker)
        eval_argv = ["llm", "eval", "--model", str(model), "--out", str(tmp_path / "eval"),
                     "--data-dir", str(data), "--engine", "hf"]  # fmt: skip
        train_argv = ["llm", "train", "--recipe", "tiny", "--model", str(model),
                      "--set", "sft_steps=0", "--out", str(tmp_path / "train")]  # fmt: skip
        for argv in (eval_argv, train_argv):
            code, lines = run_cli(argv, capsys)
            assert code == 2 and len(lines) == 1, lines
            assert message in lines[0]
            assert not (tmp_path / "eval").exists() and not (tmp_path / "train").exists()
    assert not marker.exists()
