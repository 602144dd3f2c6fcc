"""Resume trusts nothing (issue 15): `llm train --resume` compares the config with the
checkpoint's; a change that alters the run is refused naming each field with its old and new
value; `--extend-to N` trains a finished run further with the learning-rate schedule of an
`N`-update run (not the old one, 0 past its end) and says so in the run's history. Also the
unit of `--delay` (learner updates, with `inner_steps > 1` too)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import cpu_config, even_first_char, one_thread, quiet  # noqa: E402, F401

from gmc_grpo.json_files import read_json, read_jsonl  # noqa: E402
from gmc_grpo.records import RecordSchemaError  # noqa: E402
from gmc_grpo.resume import ResumeConfigError, ResumeRequest  # noqa: E402
from gmc_grpo.staleness import make_schedule  # noqa: E402
from llm_runs import checkpoint as ckpt  # noqa: E402
from llm_runs.config import LLMTrainConfig  # noqa: E402
from llm_runs.train import Trainer, train  # noqa: E402

BASE = dict(
    tiny_model={"seed": 1, "num_layers": 1, "hidden_size": 64, "intermediate_size": 128},
    task="arithmetic",
    reward="exact",
    arithmetic={"max_operand": 9, "num_train": 40, "num_eval": 6},
    num_groups=2,
    group_size=3,
    total_steps=6,
    lr=3e-3,
    max_prompt_tokens=32,
    max_completion_tokens=6,
    checkpoint_every=3,
    eval_every=0,
    method="gmc",
    delay=2,
)


def config(out: Path, **overrides) -> LLMTrainConfig:
    return cpu_config(out, **{**BASE, **overrides})


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 6-update run (checkpoints at 3 and 6)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    train(config(out), reward_fn=even_first_char, notice=quiet)
    return out


def copy_of(run: Path, tmp_path: Path) -> Path:
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_changed_config_is_refused_naming_fields_and_values(finished, tmp_path):
    run = copy_of(finished, tmp_path)
    before = files(run)
    with pytest.raises(ResumeConfigError) as caught:
        Trainer(config(run, resume=True, lr=1e-2, method="tic"), notice=quiet)
    message = str(caught.value)
    assert "lr: 0.003 -> 0.01" in message and 'method: "gmc" -> "tic"' in message
    assert "--allow-config-change lr" in message and "--out" in message
    assert "\n" not in message
    with pytest.raises(ResumeConfigError, match=r"total_steps: 6 -> 9.*--extend-to N"):
        Trainer(config(run, resume=True, total_steps=9), notice=quiet)
    assert files(run) == before  # nothing written


def test_output_logging_and_cadence_may_change(finished, tmp_path):
    run = copy_of(finished, tmp_path)
    trainer = Trainer(
        config(run, resume=True, eval_every=2, checkpoint_every=6, keep_checkpoints=3),
        notice=quiet,
    )
    assert trainer.resume_from == ckpt.latest_checkpoint(run)
    assert set(trainer.resume_changes) == {"out", "resume", "eval_every", "checkpoint_every",
                                           "keep_checkpoints"}  # fmt: skip


def test_allow_config_change_and_its_checks(finished, tmp_path):
    run = copy_of(finished, tmp_path)
    request = ResumeRequest(allow=("groups_per_micro", "learner_logprobs_at_generation"))
    trainer = Trainer(
        config(run, resume=True, learner_logprobs_at_generation=True),
        notice=quiet,
        request=request,
    )
    assert trainer.resume_changes["learner_logprobs_at_generation"] == (False, True)
    with pytest.raises(ResumeConfigError, match="lrr: not a config field"):
        Trainer(config(run, resume=True), notice=quiet, request=ResumeRequest(allow=("lrr",)))
    with pytest.raises(ValueError, match="use --extend-to N"):
        ResumeRequest(allow=("total_steps",))
    with pytest.raises(ValueError, match="add --resume"):
        Trainer(config(tmp_path / "new"), notice=quiet, request=request)


def test_extend_to_rebuilds_the_learning_rate_schedule(finished, tmp_path):
    run = copy_of(finished, tmp_path)
    first = read_jsonl(run / "metrics.jsonl")
    assert first[-1]["optim/lr"] > 0 and first[-1]["step"] == 5
    summary = train(
        config(run, resume=True, total_steps=9),
        reward_fn=even_first_char,
        notice=quiet,
        request=ResumeRequest(extend_to=9),
    )
    assert summary["steps"] == 9
    rows = read_jsonl(run / "metrics.jsonl")
    assert rows[:6] == first
    assert [r["step"] for r in rows] == list(range(9))
    # the 6-update run generated no batch for steps 6 and 7 (nothing that no update consumes):
    # the extension refills the FIFO of D = 2 from the policy it resumes with
    assert [r["staleness/lag"] for r in rows] == [0, 1, 2, 2, 2, 2, 0, 1, 2]
    assert [r["staleness/behavior_version"] for r in rows[6:]] == [6, 6, 6]
    # the checkpoint's schedule (6 updates) gives 0 from step 6 on; the rebuilt one is the
    # warm-up + cosine of 9 updates (warm-up ceil(0.03 * 9) = 1): step n -> 3e-3 * (1 +
    # cos(pi (n - 1) / 8)) / 2
    for row in rows[6:]:
        n = row["step"]
        assert row["optim/lr"] == pytest.approx(3e-3 * 0.5 * (1 + math.cos(math.pi * (n - 1) / 8)))
    assert sorted(ckpt.list_checkpoints(run)) == [6, 9]
    assert ckpt.checkpoint_config(ckpt.latest_checkpoint(run))["total_steps"] == 9
    payload = read_json(run / "config.json")
    assert payload["config"]["total_steps"] == 9
    last = payload["history"][-1]
    assert last["mode"] == "resume" and last["resumed_from_step"] == 6
    assert last["request"] == {"extend_to": 9, "allow_config_change": []}
    assert last["config_changes"]["total_steps"] == [6, 9]


def test_a_newer_record_schema_is_refused_saying_what_differs(finished, tmp_path):
    run = copy_of(finished, tmp_path)
    payload = json.loads((run / "config.json").read_text())
    payload["schema_version"] = 99
    (run / "config.json").write_text(json.dumps(payload))
    with pytest.raises(RecordSchemaError, match="schema 99.*What differs"):
        Trainer(config(run, resume=True), notice=quiet)


def test_resume_before_the_first_checkpoint_restarts_from_step_zero(finished, tmp_path):
    run = copy_of(finished, tmp_path)
    shutil.rmtree(run / "checkpoints")  # as if killed before the first checkpoint
    notices = []
    trainer = Trainer(config(run, resume=True), notice=notices.append)
    assert trainer.resume_from is None
    assert "restarts from step 0" in notices[0]


def test_delay_counts_learner_updates_with_inner_steps():
    """D = 4 with inner_steps = 2: each rollout batch is first used 4 updates after its policy
    (its second minibatch 5); the FIFO holds 2 batches. Before, it held 4 batches: lag 8."""
    two = dict(num_groups=2, inner_steps=2, checkpoint_every=0)
    cfg = config(Path("unused"), **two, delay=4, total_steps=12)
    trainer = Trainer(cfg, reward_fn=even_first_char, notice=quiet)
    assert make_schedule(cfg.schedule_settings(), trainer.schedule_context()).delay == 2
    with pytest.raises(ValueError, match=r"delay=3: must be a multiple of inner_steps=2"):
        config(Path("x"), **two, delay=3, total_steps=12)
    with pytest.raises(ValueError, match=r"delay=12: must be smaller than total_steps=12"):
        config(Path("x"), **two, delay=12, total_steps=12)


def test_realised_lags_with_inner_steps_two(tmp_path):
    out = tmp_path / "run"
    cfg = config(out, num_groups=2, inner_steps=2, delay=4, total_steps=12, checkpoint_every=0)
    train(cfg, reward_fn=even_first_char, notice=quiet)
    lags = [r["staleness/lag"] for r in read_jsonl(out / "metrics.jsonl")]
    # warm-up: two batches of the initial policy (updates 0-3), then each batch is consumed
    # 4 updates after the policy that generated it: lags 4, 5 per batch
    assert lags == [0, 1, 2, 3, 4, 5, 4, 5, 4, 5, 4, 5]


# the LLM config's names before they took the toy config's words (issue 33)
OLD_NAMES = {
    "run_seed": "seed",
    "bound_every": "track_bounds_every",
    "bound_samples": "track_bounds_samples",
}


def test_a_run_stored_under_the_old_names_resumes_under_the_new_ones(finished, tmp_path):
    """Records written before `seed` and `track_bounds_*` took the toy config's words
    (`run_seed`, `bound_every`, `bound_samples`) are read back under the new names: the resume
    compares like with like (the seed, which may not change, included) and reports the change of
    the new field; a new run writes the new names."""
    stored = read_json(finished / "config.json")["config"]
    assert set(OLD_NAMES) <= set(stored) and not set(OLD_NAMES.values()) & set(stored)
    run = copy_of(finished, tmp_path)
    files = [run / "config.json", *(p / "state.json" for p in ckpt.list_checkpoints(run).values())]
    for path in files:
        payload = read_json(path)
        old = payload["config"]
        payload["config"] = {
            OLD_NAMES.get(k, k): (5 if k == "bound_samples" else v) for k, v in old.items()
        }
        path.write_text(json.dumps(payload))
    trainer = Trainer(config(run, resume=True), notice=quiet)
    changes = trainer.resume_changes
    assert changes["bound_samples"] == (5, 8)
    assert not {*OLD_NAMES.values(), "run_seed", "bound_every"} & set(changes)
