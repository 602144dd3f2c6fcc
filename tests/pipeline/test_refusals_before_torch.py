"""Bad input to the training and evaluation commands is refused before torch loads (issues 32
and 36: it used to wait 3-6 s for torch; `docs/records.md`, Errors).

Each case runs `gmc-grpo ARGV` through `torch_free_driver.py` in a fresh interpreter, which
reports the exit status and whether `torch` is in `sys.modules` when the command returns: a
refusal must be exit status 2, one line on stderr naming what is wrong, and no torch. The control
runs a tiny toy training to the end and sees torch loaded, so the driver's "no torch" can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("torch_free_driver.py")


def gmc_grpo(args: list[str], cwd: Path, shm_free: int | None = None) -> tuple[int, bool, str]:
    """`(exit status, torch imported, stderr)` of `gmc-grpo ARGS` run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, str(DRIVER), "-" if shm_free is None else str(shm_free), "--", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["code"], report["torch"], done.stderr.strip()


def qwen3_8b_dir(path: Path) -> Path:
    """A model folder with Qwen3-8B-Base's config.json and a weight file whose safetensors
    header parses (written without torch): enough for the checks before any weight is read."""
    from llm_runs import preflight
    from llm_runs.memory import QWEN3_SHAPES

    shape = QWEN3_SHAPES["8B"]
    path.mkdir()
    (path / "config.json").write_text(json.dumps(preflight.config_json_of(shape)))
    header = json.dumps({"__metadata__": {}}).encode()
    (path / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    return path


# (id, argv with {tmp} for the test's folder, text the one-line refusal holds)
CASES = [
    ("llm-train-bad-set", ["llm", "train", "--recipe", "tiny", "--set", "lr=-1", "--out", "{tmp}/r"], "TrainConfig.lr=-1"),
    ("llm-train-size-limit", ["llm", "train", "--recipe", "tiny", "--set", "total_steps=100000000000", "--out", "{tmp}/r"], "TrainConfig.total_steps"),
    ("llm-train-unknown-field", ["llm", "train", "--recipe", "tiny", "--set", "bogus=1", "--out", "{tmp}/r"], "TrainConfig fields ['bogus']"),
    ("llm-train-unknown-recipe", ["llm", "train", "--recipe", "nosuch"], "recipe 'nosuch'"),
    ("llm-train-unknown-run", ["llm", "train", "--recipe", "simulated_async", "--run", "nosuch"], "has no run 'nosuch'"),
    ("llm-train-model-path", ["llm", "train", "--recipe", "tiny", "--model", "{tmp}/nowhere", "--out", "{tmp}/r"], "model directory '{tmp}/nowhere' does not exist"),
    ("llm-train-data-path", ["llm", "train", "--recipe", "tiny", "--set", "task=math", "--set", "sft_steps=0", "--data-dir", "{tmp}/nowhere", "--out", "{tmp}/r"], "data directory {tmp}/nowhere does not exist"),
    ("llm-train-out-is-a-file", ["llm", "train", "--recipe", "tiny", "--out", "{tmp}/afile"], "{tmp}/afile is a file, not a folder"),
    ("llm-train-suite-bad-set", ["llm", "train", "--recipe", "tiny", "--seeds", "0,1", "--set", "lr=-1", "--out", "{tmp}/s"], "TrainConfig.lr=-1"),
    ("llm-eval-model-path", ["llm", "eval", "--model", "{tmp}/nowhere", "--out", "{tmp}/e"], "--model '{tmp}/nowhere' does not exist"),
    ("llm-eval-out-is-a-file", ["llm", "eval", "--model", "{tmp}/Qwen3-8B-Base", "--out", "{tmp}/afile"], "{tmp}/afile is a file, not a folder"),
    ("llm-eval-bad-limit", ["llm", "eval", "--model", "{tmp}/Qwen3-8B-Base", "--out", "{tmp}/e", "--limit", "-3"], "EvalConfig.limit"),
    ("toy-train-bad-method", ["toy", "train", "--method", "nosuch", "--out", "{tmp}/t"], "TrainConfig.method='nosuch'"),
    ("toy-train-size-limit", ["toy", "train", "--steps", "100000000000", "--out", "{tmp}/t"], "TrainConfig.total_steps"),
    ("toy-train-enumeration-limit", ["toy", "train", "--max-length", "100000", "--out", "{tmp}/t"], "TrainConfig.max_length=100000"),
    ("toy-train-unknown-experiment", ["toy", "train", "--experiment", "nosuch"], "train_nosuch.json does not exist"),
    ("toy-train-out-is-a-file", ["toy", "train", "--steps", "2", "--out", "{tmp}/afile"], "{tmp}/afile is a file, not a folder"),
    ("toy-train-experiment-out-is-a-file", ["toy", "train", "--experiment", "delay_quick", "--out", "{tmp}/afile"], "{tmp}/afile is a file, not a folder"),
    ("toy-sweep-size-limit", ["toy", "sweep", "--group-sizes", "100000000"], "SweepConfig.group_sizes=[100000000]"),
    ("toy-sweep-bad-methods", ["toy", "sweep", "--methods", "bogus"], "SweepConfig.methods=['bogus']"),
    ("toy-sweep-missing-config", ["toy", "sweep", "--config", "{tmp}/none.json"], "{tmp}/none.json does not exist"),
    ("toy-sweep-out-is-a-file", ["toy", "sweep", "--out", "{tmp}/afile"], "{tmp}/afile is a file, not a folder"),
    ("toy-sweep-bad-jobs", ["toy", "sweep", "--jobs", "0", "--out", "{tmp}/w"], "--jobs"),
]  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with a file `afile` (an `--out` that cannot be a folder) and an 8B model."""
    (tmp_path / "afile").write_text("not a folder")
    qwen3_8b_dir(tmp_path / "Qwen3-8B-Base")
    return tmp_path


@pytest.mark.parametrize("args, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_in_one_line_before_torch_loads(folder, args, expected):
    code, torch_loaded, err = gmc_grpo([a.format(tmp=folder) for a in args], cwd=folder)
    assert code == 2, err
    assert err.count("\n") == 0, err  # one line
    assert expected.format(tmp=folder) in err, err
    assert not torch_loaded, err
    assert not (folder / "runs").exists()  # nothing written under the default output folder


def test_a_small_shared_memory_is_refused_before_torch_loads(folder):
    """The two-GPU layout with the engine on cuda:1 (so the engine process is decided without
    torch): the 8B's bfloat16 weights, 2 x 8,190,735,360 bytes = 15.26 GiB, against Docker's
    default 64 MiB of /dev/shm (0.06 GiB); the same numbers as test_llm_preflight's refusal."""
    args = ["llm", "train", "--recipe", "simulated_async", "--run", "gac_8b"]
    args += ["--model", str(folder / "Qwen3-8B-Base"), "--out", str(folder / "gac_8b")]
    args += ["--set", "engine_device=cuda:1"]
    code, torch_loaded, err = gmc_grpo(args, cwd=folder, shm_free=64 * 2**20)
    assert code == 2, err
    assert err.count("\n") == 0, err
    assert "needs 15.26 GiB of host shared memory" in err and "0.06 GiB free" in err, err
    assert "--shm-size=20g" in err
    assert not torch_loaded
    assert not (folder / "gac_8b").exists()


def test_the_shared_memory_check_is_skipped_by_name_before_torch(folder):
    """`preflight_skip=shared_memory` lets the same run past the check: it goes on to load torch
    and stops at the GPU-memory check (its 165.6 GiB on cuda:0, or, on a machine without CUDA,
    the devices it names), with one line."""
    args = ["llm", "train", "--recipe", "simulated_async", "--run", "gac_8b", "--model"]
    args += [str(folder / "Qwen3-8B-Base"), "--out", str(folder / "gac_8b")]
    args += ["--set", "engine_device=cuda:1", "--set", "preflight_skip=shared_memory"]
    code, torch_loaded, err = gmc_grpo(args, cwd=folder, shm_free=64 * 2**20)
    assert code == 2, err
    assert err.count("\n") == 0, err
    assert "host shared memory" not in err and "preflight: run gac_8b" in err, err
    assert torch_loaded


def test_plan_prints_without_torch(folder):
    code, torch_loaded, err = gmc_grpo(
        ["llm", "train", "--recipe", "simulated_async", "--run", "gac_8b", "--plan"], cwd=folder
    )
    assert code == 0, err
    assert not torch_loaded


def test_control_a_run_that_starts_loads_torch(folder):
    """The driver sees torch when a command gets that far: a one-update toy run."""
    args = ["toy", "train", "--steps", "1", "--num-prompts", "1", "--max-length", "2"]
    args += ["--seeds", "0", "--no-progress", "--out", str(folder / "t1")]
    code, torch_loaded, err = gmc_grpo(args, cwd=folder)
    assert code == 0, err
    assert torch_loaded
