"""Checkpoints hold any optimizer's state (issue 32): bitsandbytes >= 0.49.2 nests its 8-bit
AdamW states in a dict under `"__bnb_optimizer_quant_state__"`; the checkpoint flattens the state
recursively (`gmc_grpo.state_files.flatten_state`), stores every tensor in safetensors and
refuses to write a tensor as JSON. Run with the real `bitsandbytes.optim.AdamW8bit` on the CPU
(its CPU kernels, bitsandbytes >= 0.49): save, resume, and the next update equals an
uninterrupted run's; `gmc-grpo llm train --set optimizer=adamw8bit` end to end, resumed."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")
bnb = pytest.importorskip("bitsandbytes", reason="the 8-bit AdamW tests need bitsandbytes")

from llm_train_checks import one_thread, strip  # noqa: E402, F401
from safetensors.torch import load_file, save_file  # noqa: E402

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from gmc_grpo.state_files import CheckpointError, check_json_state, read_safetensors  # noqa: E402
from llm_runs import checkpoint as ckpt  # noqa: E402
from llm_runs.learner import BNB_MIN_8BIT_SIZE, bitsandbytes_8bit_failure  # noqa: E402

if bitsandbytes_8bit_failure("cpu") is not None:
    pytest.skip(
        f"8-bit AdamW does not run on this CPU: {bitsandbytes_8bit_failure('cpu')}",
        allow_module_level=True,
    )

QUANT_KEY = "__bnb_optimizer_quant_state__"


def model_and_optimizer():
    """A [4096] and a [64, 64] parameter (both reach bitsandbytes' 8-bit threshold) and a
    [7] one (kept in 32 bits), with the recipe's betas."""
    torch.manual_seed(0)
    params = [
        torch.nn.Parameter(torch.randn(BNB_MIN_8BIT_SIZE)),
        torch.nn.Parameter(torch.randn(64, 64)),
        torch.nn.Parameter(torch.randn(7)),
    ]
    optimizer = bnb.optim.AdamW8bit(params, lr=1e-2, betas=(0.9, 0.999), weight_decay=0.0)
    return params, optimizer


def gradients(step):
    generator = torch.Generator().manual_seed(100 + step)
    return [
        torch.randn(BNB_MIN_8BIT_SIZE, generator=generator),
        torch.randn(64, 64, generator=generator),
        torch.randn(7, generator=generator),
    ]


def update(params, optimizer, step):
    for param, grad in zip(params, gradients(step), strict=True):
        param.grad = grad.clone()
    optimizer.step()


def test_adamw8bit_state_round_trips_and_the_next_update_equals_an_uninterrupted_one(tmp_path):
    straight, straight_opt = model_and_optimizer()
    for step in range(3):
        update(straight, straight_opt, step)

    params, optimizer = model_and_optimizer()
    for step in range(2):
        update(params, optimizer, step)
    state = optimizer.state_dict()
    assert QUANT_KEY in state["state"][0]  # the nesting of bitsandbytes >= 0.49.2
    tensors, meta = ckpt._optimizer_to_flat(state)
    save_file(tensors, str(tmp_path / "optimizer.safetensors"))
    (tmp_path / "state.json").write_text(json.dumps(meta))

    stored = load_file(str(tmp_path / "optimizer.safetensors"))
    for pid in (0, 1):  # every 8-bit state of both large parameters is a safetensors tensor
        for key in ("state1", "state2", "absmax1", "absmax2", "qmap1", "qmap2"):
            assert f"state.{pid}.{QUANT_KEY}.{key}" in stored
    assert stored[f"state.0.{QUANT_KEY}.state1"].dtype == torch.uint8
    # 256-element blocks: 4096 / 256 = 16 block maxima per state
    assert stored[f"state.0.{QUANT_KEY}.absmax1"].shape == (16,)
    assert stored[f"state.2.{QUANT_KEY}.state1"].dtype == torch.float32  # the small one: 32-bit
    # the JSON part is the manifest only: 4096 + 4096 + 7 parameters' states are not in it
    assert (tmp_path / "state.json").stat().st_size < 4096

    resumed, resumed_opt = model_and_optimizer()
    with torch.no_grad():
        for target, source in zip(resumed, params, strict=True):
            target.copy_(source)
    loaded = ckpt._optimizer_from_flat(
        read_safetensors(tmp_path / "optimizer.safetensors"),
        json.loads((tmp_path / "state.json").read_text()),
    )
    assert loaded["param_groups"][0]["betas"] == (0.9, 0.999)
    resumed_opt.load_state_dict(loaded)
    update(resumed, resumed_opt, 2)
    for got, want in zip(resumed, straight, strict=True):
        assert torch.equal(got, want)
    # not vacuous: the third update moved the parameters
    assert not torch.equal(resumed[0], params[0])


def test_a_tensor_is_never_written_as_json():
    with pytest.raises(CheckpointError, match=r"optimizer: state\.0\.exp_avg is a Tensor"):
        check_json_state({"state": {0: {"exp_avg": torch.zeros(3)}}}, "optimizer")
    with pytest.raises(CheckpointError, match=r"1\.4 MiB of JSON \(largest part: 'big'\)"):
        check_json_state({"big": [0.5] * 300_000, "small": 1}, "x", limit=2**20)
    check_json_state({"step": 3, "betas": (0.9, 0.999)}, "ok")  # scalars pass


def test_a_checkpoint_of_the_earlier_flat_format_still_loads():
    """Checkpoints written before issue 32: top-level tensors and a `scalars` map."""
    tensors = {"state.0.exp_avg": torch.ones(2), "state.0.step": torch.tensor(3.0)}
    meta = {"scalars": {"0.note": "x"}, "param_groups": [{"lr": 0.1, "betas": [0.9, 0.99]}]}
    state = ckpt._optimizer_from_flat(tensors, meta)
    assert state["state"][0]["note"] == "x"
    assert torch.equal(state["state"][0]["exp_avg"], torch.ones(2))
    assert state["param_groups"][0]["betas"] == (0.9, 0.99)


def cli(out, *extra):
    from llm_runs.train_cli import main

    small = {"seed": 0, "num_layers": 1, "hidden_size": 64, "intermediate_size": 128}
    args = ["--recipe", "tiny", "--out", str(out), "--no-progress"]
    for key, value in {
        "optimizer": "adamw8bit",
        "tiny_model": json.dumps(small),
        "sft_steps": 10,  # a short warm-up: reward, and so gradient, from the first update
        "sft_lr": 0.01,
        "sft_batch_size": 16,
        "num_groups": 2,
        "group_size": 4,
        "groups_per_micro": 2,
        "max_completion_tokens": 6,
        "checkpoint_every": 2,
        "eval_every": 0,
        "lr": 0.01,
    }.items():
        args += ["--set", f"{key}={value}"]
    assert main(args + list(extra)) == 0


def test_llm_train_with_adamw8bit_resumes_exactly(tmp_path, capsys):
    """`gmc-grpo llm train --recipe tiny --set optimizer=adamw8bit`: a 2-update run extended to
    4 (`--resume --extend-to 4`) writes the rows of an uninterrupted 4-update run. The
    warm-up + cosine schedule gives steps 0 and 1 the same rate for 2 and 4 updates (warm-up of
    ceil(0.03 N) = 1 update, then cos(0)), so the rows compare whole."""
    straight = tmp_path / "straight"
    cli(straight, "--steps", "4")
    assert "optimizer='adamw8bit' on cpu" in capsys.readouterr().err
    broken = tmp_path / "broken"
    cli(broken, "--steps", "2")
    state = ckpt.load_checkpoint(ckpt.latest_checkpoint(broken))
    assert state["step"] == 2
    assert any(QUANT_KEY in entry for entry in state["optimizer"]["state"].values())
    cli(broken, "--resume", "--extend-to", "4")

    want = strip(read_jsonl(straight / "metrics.jsonl"))
    got = strip(read_jsonl(broken / "metrics.jsonl"))
    assert [r["step"] for r in got] == [0, 1, 2, 3]
    assert want[0]["optim/grad_norm"] > 0  # a gradient before the checkpoint: 8-bit moments
    assert got == want
    # the weights after update 4 are the uninterrupted run's, bit for bit, and the two updates
    # after the resume moved them (AdamW's restored moments move them even where a group's
    # rewards tie and its gradient is 0)
    weights = {
        name: load_file(str(ckpt.list_checkpoints(run)[step] / "model" / "model.safetensors"))
        for name, run, step in [
            ("straight", straight, 4),
            ("resumed", broken, 4),
            ("at 2", broken, 2),
        ]
    }
    assert weights["resumed"].keys() == weights["straight"].keys()
    for key, value in weights["straight"].items():
        assert torch.equal(weights["resumed"][key], value), key
    assert any(not torch.equal(weights["at 2"][k], v) for k, v in weights["resumed"].items())
    summary = json.loads((straight / "summary.json").read_text())
    assert summary["optimizer"] == "bitsandbytes.AdamW8bit"
