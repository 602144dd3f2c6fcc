"""Kill and resume: a run stopped after a checkpoint and resumed writes the same records as an
uninterrupted run (CPU, same seed); checkpoints hold only safetensors and JSON."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import cpu_config, even_first_char, one_thread, quiet  # noqa: E402, F401
from safetensors.torch import load_file  # noqa: E402

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from llm_runs import checkpoint as ckpt  # noqa: E402
from llm_runs.config import LLMTrainConfig  # noqa: E402
from llm_runs.train import Trainer, train  # noqa: E402


class Killed(Exception):
    """Stands for the process being killed right after an update."""


def config(out, **overrides) -> LLMTrainConfig:
    values = dict(
        tiny_model={"seed": 1, "num_layers": 1, "hidden_size": 64, "intermediate_size": 128},
        task="arithmetic",
        reward="exact",
        arithmetic={"max_operand": 9, "num_train": 40, "num_eval": 6},
        num_groups=3,
        group_size=3,
        groups_per_micro=1,
        total_steps=7,
        lr=3e-3,
        max_prompt_tokens=32,
        max_completion_tokens=6,
        checkpoint_every=3,
        eval_every=3,
        eval_samples=2,
    )
    values.update(overrides)
    return cpu_config(out, **values)


def strip(rows):
    """Rows without wall-clock and memory fields (the only ones allowed to differ)."""
    return [
        {k: v for k, v in r.items() if not k.startswith("perf/") and k != "time_s"} for r in rows
    ]


@pytest.mark.parametrize(
    "overrides",
    [
        {"method": "gac", "delay": 2},  # stored queue + GAC's previous gradient
        {"method": "gmc", "schedule": "length_coupled", "lam": 2.0, "length_unit_tokens": 2.0},
        # groups in flight with their own versions, the schedule's clock and generator
        {
            "method": "a3po",
            "schedule": "workers",
            "num_workers": 5,
            "generation_time": "exponential",
            "update_time": 0.3,
        },
    ],
    ids=["gac-fixed-delay", "gmc-length-coupled", "a3po-workers"],
)
def test_killed_run_resumes_exactly(tmp_path, overrides):
    straight = tmp_path / "straight"
    train(config(straight, **overrides), reward_fn=even_first_char, notice=quiet)

    broken = tmp_path / "broken"

    def kill_after_step_4(row):
        if row["step"] == 4:  # 5 updates done; the last checkpoint is step 3
            raise Killed

    with pytest.raises(Killed):
        Trainer(config(broken, **overrides), reward_fn=even_first_char, notice=quiet).run(
            kill_after_step_4
        )
    assert sorted(ckpt.list_checkpoints(broken)) == [3]
    assert len(read_jsonl(broken / "metrics.jsonl")) == 5
    summary = train(
        config(broken, resume=True, **overrides), reward_fn=even_first_char, notice=quiet
    )
    assert summary["steps"] == 7

    want = strip(read_jsonl(straight / "metrics.jsonl"))
    # not a trivial run: the policy learns and the stale ratios move away from 1
    assert all(r["optim/grad_norm"] > 0 for r in want)
    assert max(abs(r["ratio/log_mean"]) for r in want) > 1e-4
    got = strip(read_jsonl(broken / "metrics.jsonl"))
    assert [r["step"] for r in got] == list(range(7))
    assert got == want
    assert strip(read_jsonl(broken / "evals.jsonl")) == strip(read_jsonl(straight / "evals.jsonl"))


def test_checkpoint_is_safetensors_and_json_only(tmp_path):
    out = tmp_path / "run"
    train(
        config(out, method="gmc", delay=2, total_steps=5, eval_every=0, keep_checkpoints=2),
        reward_fn=even_first_char,
        notice=quiet,
    )
    # the run's last batch was launched at step 2 (nothing is launched that no update consumes):
    # the final checkpoint's FIFO is empty, step 3's holds the batches of steps 3 and 4
    assert (
        ckpt.schedule_batches(ckpt.load_checkpoint(ckpt.latest_checkpoint(out))["schedule"]) == []
    )
    path = ckpt.list_checkpoints(out)[3]
    assert path.name == "step_000003"
    suffixes = {p.suffix for p in path.rglob("*") if p.is_file()}
    assert suffixes <= {".safetensors", ".json", ".jinja", ".txt"}, suffixes
    state = ckpt.load_checkpoint(path)
    assert state["step"] == 3
    batches = ckpt.schedule_batches(state["schedule"])
    assert len(batches) == 2  # the FIFO of D = 2 stored batches
    assert [b.behavior_version.tolist() for b in batches] == [[1, 1, 1], [2, 2, 2]]  # [B] each
    assert batches[0].engine_logprobs.shape[:2] == (3, 3)
    tensors = load_file(str(path / "schedule.safetensors"))
    assert any(k.endswith("engine_logprobs") for k in tensors)
    assert not list(out.joinpath("checkpoints").glob(".*"))  # no temp folders left behind


def test_resume_without_checkpoint_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        Trainer(config(tmp_path / "run", resume=True), reward_fn=even_first_char, notice=quiet)


def test_method_state_of_new_and_old_checkpoints():
    """The method's state is stored under `method.<key>`; a checkpoint written before the method
    registry kept GAC's previous gradient as `gac.previous_gradient` and is still read."""
    import torch

    grad = torch.arange(3.0)
    new = ckpt._method_state(
        {"method_state_keys": ["previous_gradient"]}, {"method.previous_gradient": grad}
    )
    assert torch.equal(new["previous_gradient"], grad)
    assert ckpt._method_state({"method_state_keys": []}, {}) == {}
    old = ckpt._method_state({}, {"gac.previous_gradient": grad})
    assert torch.equal(old["previous_gradient"], grad)
    assert ckpt._method_state({}, {}) == {"previous_gradient": None}


def test_a_torn_tail_is_cut_back_to_the_checkpoint_the_records_reach(tmp_path):
    """Issue 36: the last 50 bytes of a finished run's `metrics.jsonl` cut (the row of step 6
    torn): the resume continues from checkpoint 6 (the newest the records reach; checkpoint 7,
    ahead of them, is removed with a notice) and the records equal the uninterrupted run's,
    steps 0-6 without a gap. Rows missing below every checkpoint are refused, naming them."""
    import shutil

    from gmc_grpo.records import RecordGapError

    straight = tmp_path / "straight"
    train(config(straight, method="gmc", delay=1), reward_fn=even_first_char, notice=quiet)
    assert sorted(ckpt.list_checkpoints(straight)) == [6, 7]
    broken = tmp_path / "broken"
    shutil.copytree(straight, broken)
    data = (broken / "metrics.jsonl").read_bytes()
    (broken / "metrics.jsonl").write_bytes(data[:-50])
    notes: list[str] = []
    train(
        config(broken, method="gmc", delay=1, resume=True),
        reward_fn=even_first_char,
        notice=notes.append,
    )
    assert any("continuing from step_000006" in n and "step_000007" in n for n in notes)
    got = strip(read_jsonl(broken / "metrics.jsonl"))
    assert [r["step"] for r in got] == list(range(7))
    assert got == strip(read_jsonl(straight / "metrics.jsonl"))

    gapped = tmp_path / "gapped"
    shutil.copytree(straight, gapped)
    rows = (gapped / "metrics.jsonl").read_text().splitlines(keepends=True)
    (gapped / "metrics.jsonl").write_text("".join(rows[:2] + rows[4:]))  # steps 2, 3 gone
    with pytest.raises(RecordGapError, match=r"lacks 2 rows .* step_000006 covers \(steps 2-3\)"):
        Trainer(config(gapped, method="gmc", delay=1, resume=True), notice=quiet)
