"""The preflight (issue 32): a paper run that cannot fit stops before anything is loaded or
generated, with one line naming the run, the need, the device and the fix; the checks can be
skipped by name; `llm train --plan` prints what a run needs. The GPU is faked (free memory, the
device's name): no test needs one."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

import torch  # noqa: E402

from llm_runs import preflight, recipe_needs  # noqa: E402
from llm_runs.memory import GIB, QWEN3_SHAPES  # noqa: E402

P_8B = 8_190_735_360  # QWEN3_SHAPES["8B"].parameters(), tests/llm_runs/test_llm_train_memory.py


def qwen3_8b_dir(path):
    """A model folder with Qwen3-8B-Base's published config.json and a placeholder weight file:
    enough for the checks that run before any weight is read."""
    path.mkdir()
    shape = QWEN3_SHAPES["8B"]
    (path / "config.json").write_text(json.dumps(preflight.config_json_of(shape)))
    from safetensors.torch import save_file

    save_file({"placeholder": torch.zeros(1)}, str(path / "model.safetensors"))
    return path


@pytest.fixture
def two_h100s(monkeypatch):
    """Two faked 80 GB GPUs (79.2 GiB each, as torch reports an H100 80GB; 78.5 free), a shared
    memory of 64 GiB, and a data loader that fails the test if the run gets that far."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(
        torch.cuda, "mem_get_info", lambda device=None: (int(78.5 * GIB), int(79.2 * GIB))
    )
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(preflight, "free_bytes_of", lambda folder: 64 * GIB)

    class Reached(Exception):
        pass

    def no_loading(config):
        raise Reached("the run passed the preflight and started loading its data")

    monkeypatch.setattr("llm_runs.train.load_problems", no_loading)
    return Reached


def train_args(tmp_path, *extra):
    model = qwen3_8b_dir(tmp_path / "Qwen3-8B-Base")
    out = tmp_path / "gac_8b"
    (tmp_path / "data").mkdir()  # a data folder is checked before torch loads (its files later)
    args = ["train", "--recipe", "simulated_async", "--run", "gac_8b", "--model", str(model)]
    return [*args, "--data-dir", str(tmp_path / "data"), "--out", str(out), *extra], out


def test_8b_gac_on_an_80_gb_card_is_refused_with_one_line_before_anything_loads(
    tmp_path, two_h100s, capsys
):
    from llm_runs.cli import main

    args, out = train_args(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err  # one line
    assert "run gac_8b needs at least 165.6 GiB on cuda:0" in err
    assert "NVIDIA H100 80GB HBM3 there has 78.5 of 79.2 GiB free" in err
    assert "--set preflight_skip=gpu_memory" in err
    assert not (out / "metrics.jsonl").exists() and not (out / "checkpoints").exists()


def test_a_small_shared_memory_is_refused_naming_dev_shm_and_shm_size(
    tmp_path, two_h100s, monkeypatch, capsys
):
    from llm_runs.cli import main

    monkeypatch.setattr(preflight, "free_bytes_of", lambda folder: 64 * 2**20)  # Docker's default
    args, _ = train_args(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    # the 8B's bfloat16 weights: 2 bytes x 8,190,735,360 parameters = 15.26 GiB
    assert f"needs {2 * P_8B / GIB:.2f} GiB of host shared memory in" in err
    assert "15.26 GiB" in err and "0.06 GiB free" in err
    assert "--shm-size=20g" in err  # 1.25 x the buffer, rounded up to whole GiB


def test_the_checks_are_skipped_by_name(tmp_path, two_h100s):
    from llm_runs.cli import main

    args, _ = train_args(tmp_path, "--set", "preflight_skip=gpu_memory,shared_memory")
    with pytest.raises(two_h100s):  # past the preflight: the run starts loading its data
        main(args)


def test_an_unknown_check_name_is_refused(tmp_path, two_h100s, capsys):
    from llm_runs.cli import main

    args, _ = train_args(tmp_path, "--set", "preflight_skip=gpu")
    assert main(args) == 2
    assert "LLMTrainConfig.preflight_skip" in capsys.readouterr().err


def test_plan_prints_the_need_and_starts_nothing(tmp_path, capsys):
    from llm_runs.cli import main

    out = tmp_path / "run"
    assert (
        main(
            ["train", "--recipe", "simulated_async", "--run", "gac_8b", "--out", str(out), "--plan"]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "Qwen3-8B-Base (8.19 B parameters), from 'gac_8b'" in text
    assert "cuda:0: at least 165.6 GiB (the learner's peak)" in text
    assert "host shared memory: 15.3 GiB" in text
    assert not out.exists()


def test_plan_needs_by_layout_hand_worked():
    """The needs are sums of the memory model's terms (pinned in test_llm_train_memory.py)."""
    from llm_runs.memory import engine_bytes, learner_bytes, resident_bytes
    from llm_runs.recipes import config_from_values, load_recipe

    def config(recipe, run):
        values = {**load_recipe(recipe, run), "model": preflight.NO_MODEL, "out": "x/" + run}
        return config_from_values(values)

    shape = QWEN3_SHAPES["1.7B"]
    options = dict(micro_tokens=8 * 5120, family="grpo/tic/gmc")
    peak = sum(learner_bytes(shape, **options).values())
    one_sequence = 2 * shape.parameters() + 2 * 28 * 8 * 128 * 2 * 5120  # weights + KV of 5,120
    assert sum(engine_bytes(shape, sequences=1).values()) == one_sequence
    one = preflight.plan(config("simulated_async", "gmc_1p7b"), names=["gmc_1p7b"])
    (need,) = one.needs
    # vLLM sleeps during the step: the larger of the peak and resident memory + vLLM's least
    assert need.need_bytes == max(peak, resident_bytes(shape, **options) + one_sequence)
    assert one.shm_bytes == 0  # vLLM in this process: no weight buffer
    two = preflight.plan(config("simulated_async", "gac_8b"), names=["gac_8b"])
    assert [n.device for n in two.needs] == ["cuda:0", "cuda:1"]
    assert two.needs[0].need_bytes == sum(
        learner_bytes(QWEN3_SHAPES["8B"], micro_tokens=8 * 5120, family="gac").values()
    )
    assert two.shm_bytes == 2 * P_8B


def test_the_table_of_every_paper_run():
    """`python -m llm_runs.recipe_needs` (docs/gpu.md): each paper run's model from its names or its
    recipe's description, its needs, and the smallest GPU class holding them."""
    rows = {
        (recipe, run): plan for recipe, runs, plan in recipe_needs.recipe_plans() for run in runs
    }
    assert len(rows) == 18 + 6 + 16  # every run of the three recipes
    assert rows[("group_size", "gmc_g8")].model.startswith("Qwen3-1.7B-Base")  # description
    assert rows[("fixed_delay_qwen3_1p7b", "gmc_d128")].model.startswith("Qwen3-1.7B-Base")
    assert recipe_needs.smallest_card(rows[("simulated_async", "gmc_4b")]).startswith("80 GB")
    assert recipe_needs.smallest_card(rows[("simulated_async", "gac_4b")]).startswith("141 GB")
    assert recipe_needs.smallest_card(rows[("simulated_async", "grpo_8b")]).startswith("141 GB")
    assert recipe_needs.smallest_card(rows[("simulated_async", "gac_8b")]).startswith("none")
    table = recipe_needs.needs_table(recipe_needs.recipe_plans())
    assert "| simulated_async | gac_8b | Qwen3-8B-Base | two_gpu | 165.6 | 16.0 | 15.3 |" in table


def test_the_preflight_module_and_its_shared_memory_check_need_no_torch(tmp_path):
    """`llm_runs.preflight` imports no torch, and its shared-memory check runs without it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys\n"
        "from llm_runs import preflight as p\n"
        "plan = p.RunPlan('r', 'm', 'two_gpu', 'gac', shm_bytes=2**50, shm_dir=sys.argv[1])\n"
        "try:\n"
        "    p.check_shared_memory(plan)\n"
        "except p.PreflightError as err:\n"
        "    print(err)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    refusal, torch_loaded = done.stdout.strip().splitlines()
    assert refusal.startswith("preflight: run r needs 1048576.00 GiB of host shared memory")
    assert torch_loaded == "False"


@pytest.mark.parametrize(
    "layout, engine_device, engine_process, expected",
    [
        ("one_gpu", "auto", None, False),
        ("one_gpu", "cuda:0", True, True),
        ("two_gpu", "auto", None, None),  # cuda:1 only where CUDA is: torch must say
        ("two_gpu", "cuda:1", None, True),
        ("two_gpu", "cpu", None, False),
        ("two_gpu", "auto", False, False),
    ],
)
def test_the_engine_process_is_decided_without_torch_where_the_config_says(
    layout, engine_device, engine_process, expected
):
    """`engine_process_without_torch` follows `resolve_placement` where the config decides."""
    from types import SimpleNamespace

    config = SimpleNamespace(
        layout=layout, engine_device=engine_device, engine_process=engine_process
    )
    assert preflight.engine_process_without_torch(config) == expected


def test_the_check_before_torch_needs_no_more_shared_memory_than_the_run_check(
    tmp_path, two_h100s, monkeypatch
):
    """Before torch the learner's precision is read as CUDA's ("auto": mixed bfloat16), so the
    buffer is counted at 2 bytes a parameter; `check_run` on the resolved placement counts the
    same here (a CUDA engine): a free space of exactly that need passes both."""
    from llm_runs.recipes import config_from_values, load_recipe

    model = qwen3_8b_dir(tmp_path / "Qwen3-8B-Base")
    values = load_recipe("simulated_async", "gac_8b")
    values.update(model=str(model), out=str(tmp_path / "gac_8b"), engine_device="cuda:1")
    values.update(tiny_model=None, preflight_skip=["gpu_memory"])
    config = config_from_values(values)
    need = 2 * P_8B
    monkeypatch.setattr(preflight, "free_bytes_of", lambda folder: need)
    preflight.check_before_torch(config)  # passes at exactly the need
    from llm_runs.models import resolve_placement

    assert (
        preflight.check_run(config, resolve_placement(config.placement_settings())).shm_bytes
        == need
    )
    monkeypatch.setattr(preflight, "free_bytes_of", lambda folder: need - 1)
    with pytest.raises(preflight.PreflightError, match="host shared memory"):
        preflight.check_before_torch(config)


@pytest.mark.parametrize("size", sorted(QWEN3_SHAPES))
def test_config_json_of_is_the_inverse_of_shape_from_config_json(tmp_path, size):
    (tmp_path / "config.json").write_text(json.dumps(preflight.config_json_of(QWEN3_SHAPES[size])))
    assert preflight.shape_from_config_json(tmp_path) == QWEN3_SHAPES[size]
