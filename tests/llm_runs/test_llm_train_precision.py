"""The learner's precision (`llm_runs.precision`): updates that land at the paper's lr.

On a CPU, bfloat16 autocast emulates the CUDA default: a tiny Qwen3 at Qwen3's init scale
(hidden 256, `init_std = 0.02`), 3 AdamW updates of the real learner at lr 1e-6. Measured here
(2-core AMD EPYC, torch 2.13.0+cpu, seed 0): float32 parameters changed 93.44% of their elements
(|delta| summed 4.036), the mixed default 93.44% (4.026), pure bfloat16 1.80% (0.111). The 6.6%
float32 does not move are embedding rows of tokens the batch never holds (zero gradient).
Tolerances: mixed must move the same fraction as float32 within 0.01 and the same total within
2% (measured: equal to 4 digits, 0.24% apart: Adam normalises each step, so bfloat16 rounding of
the gradient, about 2^-8 relative, changes a step's size by far less); pure bfloat16 must stay
below 5% of the elements and 5% of float32's total (measured 1.8% and 2.7%), so the underflow
that `precision_warning` names stays pinned.
"""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import even_first_char, one_thread, quiet, tiny_config  # noqa: E402, F401

from gmc_grpo.methods import MethodSettings, get_method  # noqa: E402
from llm_runs import checkpoint as ckpt  # noqa: E402
from llm_runs.learner import (  # noqa: E402
    Learner,
    LearnerSettings,
    TrajectoryBatch,
    batch_logprobs,
    make_optimizer,
    optimizer_memory_factor,
)
from llm_runs.precision import (  # noqa: E402
    precision_warning,
    resolve_precision,
    set_compute_dtype,
    underflow_lr,
)
from llm_runs.train import Trainer, train  # noqa: E402

VOCAB, PROMPT, RESPONSE = 512, 16, 32


def tiny_model(name: str):
    """A 2-layer Qwen3, hidden 256, every matrix N(0, 0.02^2), in `name`'s precision."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    precision = resolve_precision(name, torch.device("cpu"))
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        initializer_range=0.02,
        attn_implementation="sdpa",
        use_cache=False,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        for _, param in sorted(model.named_parameters()):
            if param.ndim >= 2:
                param.normal_(0.0, 0.02)
    model.to(precision.param_dtype)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    set_compute_dtype(model, precision.compute_dtype)
    return model


def load_bench(name: str):
    """A script of `bench/` as a module (it puts `bench/` on the path for its own imports)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SMOKE = load_bench("gpu_smoke")


def synthetic_batch() -> TrajectoryBatch:
    """`bench/gpu_trainer_step.make_batch`: 4 groups of 4, responses of 8 to 32 tokens, behavior
    log-probs 0.02 nats per token off the float32 model's (a stale batch: ratios move)."""
    from gpu_trainer_step import make_batch

    return make_batch(tiny_model("float32"), VOCAB, PROMPT, RESPONSE, 0, groups=4, size=4)


def three_updates(name: str, batch: TrajectoryBatch) -> tuple[dict, dict, torch.nn.Module]:
    """3 GRPO updates at lr 1e-6, torch AdamW (`bench/gpu_smoke.run_updates`)."""
    model = tiny_model(name)
    done = SMOKE.run_updates(
        model, batch, lr=1e-6, optimizer_kind="adamw", updates=3, response_len=RESPONSE
    )
    return done["change"], done, model


def test_mixed_precision_updates_land_like_float32_and_pure_bfloat16_underflows():
    batch = synthetic_batch()
    fp32, _, _ = three_updates("float32", batch)
    mixed, done, model = three_updates("mixed_bfloat16", batch)
    pure, _, _ = three_updates("bfloat16", batch)
    print(f"\nfloat32 {fp32}\nmixed_bfloat16 {mixed}\nbfloat16 {pure}")
    assert fp32["fraction_changed"] > 0.9  # not a vacuous comparison: float32 moves
    assert abs(mixed["fraction_changed"] - fp32["fraction_changed"]) <= 0.01
    assert abs(mixed["abs_delta"] - fp32["abs_delta"]) <= 0.02 * fp32["abs_delta"]
    assert pure["fraction_changed"] < 0.05
    assert pure["abs_delta"] < 0.05 * fp32["abs_delta"]
    # the mixed learner keeps float32 parameters and float32 AdamW states
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    states = [v for s in done["optimizer_state"].values() for k, v in s.items() if k != "step"]
    assert states and {v.dtype for v in states} == {torch.float32}


def test_mixed_precision_computes_in_bfloat16():
    """Autocast is on: the log-probs differ from float32's by bfloat16 rounding (a check that
    could fail if the mixed path silently computed in float32), but not by more."""
    batch = synthetic_batch()
    fp32 = batch_logprobs(tiny_model("float32"), batch, 4096, 1)
    mixed = batch_logprobs(tiny_model("mixed_bfloat16"), batch, 4096, 1)
    gap = float((mixed - fp32).abs().max())
    assert 1e-4 < gap < 0.1, gap


@pytest.mark.parametrize("method", ["vcpo", "gac"])
def test_mixed_precision_runs_every_learner_hook(method):
    """VCPO's in-backward score norms (custom autograd functions that re-enter the forward's
    autocast in their backward) and GAC's in-place projection run under the mixed default and
    give the float32 path's gradient norm up to bfloat16 rounding."""
    batch = synthetic_batch()
    norms = {}
    for name in ("float32", "mixed_bfloat16"):
        model = tiny_model(name)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        settings = LearnerSettings(
            method=method,
            loss=get_method(method).loss_config(MethodSettings(), max_length=RESPONSE),
            advantage="paper",
            groups_per_micro=1,
            logit_chunk=4096,
            grad_clip=float("inf"),
        )
        learner = Learner(model, optimizer, scheduler, settings)
        learner.step(batch, 0)
        norms[name] = learner.step(batch, 0)["optim/grad_norm"]
    assert norms["float32"] > 0
    assert abs(norms["mixed_bfloat16"] - norms["float32"]) < 0.05 * norms["float32"], norms


def test_precision_names_and_the_underflow_lr():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_precision("auto", cpu).name == "float32"  # the CPU records stay float32
    mixed = resolve_precision("auto", cuda)
    assert (mixed.name, mixed.param_dtype, mixed.compute_dtype) == (
        "mixed_bfloat16",
        torch.float32,
        torch.bfloat16,
    )
    assert mixed.engine_dtype == "bfloat16"
    assert resolve_precision("bfloat16", cuda).compute_dtype is None
    # half the bfloat16 spacing at |w| = 0.02: 2^-6 * 2^-7 / 2 = 2^-14
    assert underflow_lr(torch.bfloat16) == 2.0**-14
    assert underflow_lr(torch.float32) == 2.0**-30
    assert precision_warning(mixed, 1e-6) is None
    warning = precision_warning(resolve_precision("bfloat16", cuda), 1e-6)
    assert "6.1e-05" in warning and "lr 1e-06 is below it" in warning
    with pytest.raises(ValueError, match="learner_dtype"):
        resolve_precision("bf16", cpu)


def test_optimizer_notice_states_the_memory_factor():
    lines: list[str] = []
    for dtype in (torch.float32, torch.bfloat16):
        param = torch.nn.Parameter(torch.zeros(3, dtype=dtype))
        make_optimizer(
            [param],
            kind="auto",
            lr=1e-6,
            betas=(0.9, 0.999),
            weight_decay=0.0,
            device=torch.device("cpu"),
            notice=lines.append,
        )
    assert "float32 states take 4x" in lines[0] and "8 bytes per parameter" in lines[0]
    assert "bfloat16 states take 2x" in lines[1] and "4 bytes per parameter" in lines[1]
    assert optimizer_memory_factor(torch.float32) == 4


def test_mixed_run_checkpoints_float32_resumes_and_syncs_bfloat16(tmp_path):
    """A mixed run on the CPU: the checkpoint holds float32 weights and states, the model copy
    of `keep_checkpoint_models` is bfloat16 and resolvable by step, the HF engine generates with
    the float32 parameters cast to bfloat16, and a resume continues exactly."""
    values = dict(learner_dtype="mixed_bfloat16", total_steps=4, checkpoint_every=2)
    values.update(keep_checkpoints=1, keep_checkpoint_models=True, delay=2)

    straight = tmp_path / "straight"
    trainer = Trainer(tiny_config(straight, **values), reward_fn=even_first_char, notice=quiet)
    gaps: list[float] = []

    def engine_weights_are_the_learners(row):
        trainer.rollouts.sync(trainer.model, trainer.step)
        engine = trainer.rollouts.engine.model.state_dict()
        for name, param in trainer.model.state_dict().items():
            assert engine[name].dtype == torch.bfloat16
            gaps.append(
                float((engine[name].float() - param.to(torch.bfloat16).float()).abs().max())
            )

    trainer.run(engine_weights_are_the_learners)
    assert gaps and max(gaps) == 0.0
    config = json.loads((straight / "config.json").read_text())["config"]
    assert config["resolved_learner_dtype"] == "torch.float32"
    assert config["resolved_learner_compute_dtype"] == "torch.bfloat16"

    from safetensors.torch import load_file

    (last,) = ckpt.list_checkpoints(straight).values()  # keep_checkpoints=1: step 4 only
    weights = load_file(str(last / "model" / "model.safetensors"))
    assert {v.dtype for v in weights.values()} == {torch.float32}
    states = load_file(str(last / "optimizer.safetensors"))
    assert {v.dtype for k, v in states.items() if not k.endswith(".step")} == {torch.float32}
    copy, step = ckpt.resolve_model(straight, 2)  # its checkpoint has rotated out
    assert step == 2 and copy == straight / "models" / "step_000002"
    copied = load_file(str(copy / "model.safetensors"))
    assert {v.dtype for v in copied.values()} == {torch.bfloat16}
    assert ckpt.resolve_model(straight, 4)[0] == last / "model"  # the float32 one wins

    broken = tmp_path / "broken"

    class Killed(Exception):
        pass

    def kill_after_step_2(row):
        if row["step"] == 2:
            raise Killed

    with pytest.raises(Killed):
        Trainer(tiny_config(broken, **values), reward_fn=even_first_char, notice=quiet).run(
            kill_after_step_2
        )
    train(tiny_config(broken, resume=True, **values), reward_fn=even_first_char, notice=quiet)

    def rows(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [
            {k: v for k, v in json.loads(x).items() if not k.startswith("perf/")} for x in lines
        ]

    assert rows(broken) == rows(straight)
    assert any(r["optim/grad_norm"] > 0 for r in rows(straight))


def test_gpu_smoke_script_runs_on_the_cpu(tmp_path):
    """`bench/gpu_smoke.py --device cpu --tiny`: the GPU check's code path, in its default
    (mixed) precision, lands its 3 updates at lr 1e-6."""
    out = tmp_path / "smoke.json"
    results = SMOKE.main(["--device", "cpu", "--tiny", "--no-vllm", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    (row,) = results["learning"]
    assert row["precision"] == "mixed_bfloat16" and row["compute_dtype"] == "torch.bfloat16"
    assert row["fraction_changed"] > 0.9 and row["abs_delta"] > 0
    assert row["dtypes_after"] == ["torch.float32"] and row["updates"] == 3
    assert row["step_seconds"] > 0 and row["peak_memory_gib"] > 0 and row["mfu"] is None
    assert results["two_gpu_overlap"] == {"skipped": "needs 2 GPUs"}
    assert results["mismatch_lag0"] == {"skipped": "--no-vllm"}


@pytest.mark.slow
def test_gpu_smoke_overlap_code_path_on_the_cpu(tmp_path):
    """`--overlap-on-cpu`: the two-GPU overlap part of the smoke check (engine in its own process,
    weights through shared memory, sequential and overlapped steps) runs on a CPU; its times are
    not asserted (both processes share the cores)."""
    out = tmp_path / "smoke.json"
    argv = ["--device", "cpu", "--tiny", "--no-vllm", "--overlap-on-cpu", "--overlap-steps", "1"]
    overlap = SMOKE.main([*argv, "--mismatch-tokens", "8", "--out", str(out)])["two_gpu_overlap"]
    assert overlap["engine"] == "hf" and overlap["engine_device"] == "cpu"
    assert [len(overlap["seconds"][m]) for m in ("sequential", "overlapped")] == [2, 2]
    assert overlap["speedup"] > 0 and overlap["note"].startswith("CPU")
