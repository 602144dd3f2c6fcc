"""The LLM trainer under the worker schedule (§2.2, Figure 1): each group of a batch keeps the
engine log-probs of the snapshot that generated it and its own lag; the launches of one refill
are generated in one engine call; the groups of a batch join into one `TrajectoryBatch`."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import (  # noqa: E402, F401
    assert_same_rollouts,
    even_first_char,
    one_thread,
    quiet,
    tiny_config,
)

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from gmc_grpo.records import METRIC_NAMES  # noqa: E402
from gmc_grpo.staleness import lag_statistics  # noqa: E402
from llm_runs.batch import TrajectoryBatch, batch_from, batch_logprobs, tensors_of  # noqa: E402
from llm_runs.config import LLMTrainConfig  # noqa: E402
from llm_runs.engines.hf import HFEngine  # noqa: E402
from llm_runs.train import Trainer, train  # noqa: E402


def workers_config(out, **overrides) -> LLMTrainConfig:
    """4 groups of 3 per update, 7 workers whose groups take as long as their responses."""
    values = dict(
        group_size=3,
        total_steps=6,
        lr=3e-3,
        max_completion_tokens=6,
        method="a3po",
        schedule="workers",
        num_workers=7,
        generation_time="length_proportional",
        length_unit_tokens=1.0,
    )
    return tiny_config(out, **{**values, **overrides})


class Recording(Trainer):
    """Keeps the weights of every version and each consumed batch with its version."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.snapshots: dict[int, dict[str, torch.Tensor]] = {}
        self.consumed: list[tuple[int, TrajectoryBatch]] = []

    def next_batches(self):
        self.snapshots[self.step] = {k: v.clone() for k, v in self.model.state_dict().items()}
        return super().next_batches()

    def update(self, minibatch):
        self.consumed.append((self.step, minibatch))
        return super().update(minibatch)


def test_each_group_keeps_the_logprobs_and_lag_of_its_own_snapshot(tmp_path, monkeypatch):
    """Every consumed group's engine log-probs are the log-probs of the snapshot at its
    behavior version (not of the consuming one), the learner's ratio and A-3PO's lag use them
    group by group, and some batches mix lags."""
    import llm_runs.learner as learner_module

    seen = []
    loss = learner_module.policy_loss

    def spy(logprobs, behavior, advantages, mask, config, version_lag=None):
        if logprobs.requires_grad is False:  # the full-batch diagnostics call, once per update
            seen.append((behavior.clone(), version_lag.clone()))
        return loss(logprobs, behavior, advantages, mask, config, version_lag=version_lag)

    monkeypatch.setattr(learner_module, "policy_loss", spy)
    trainer = Recording(workers_config(tmp_path / "run"), reward_fn=even_first_char, notice=quiet)
    trainer.run()
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert len(trainer.consumed) == len(seen) == len(rows) == 6
    assert any(r["staleness/lag_max"] > r["staleness/lag_min"] for r in rows)  # mixed batches
    assert all(
        set(r) - {"perf/learner_seconds", "perf/rollout_seconds"} <= set(METRIC_NAMES) for r in rows
    )

    probe = trainer.model  # reuse its architecture; reload each snapshot's weights into it
    mixed = 0
    for (step, batch), (behavior, lag), row in zip(trainer.consumed, seen, rows, strict=True):
        versions = batch.behavior_version
        assert lag.tolist() == [[step - int(v)] * batch.group_size for v in versions]
        assert torch.equal(behavior, batch.engine_logprobs)  # the ratio's mu: engine log-probs
        assert row["staleness/lag"] == pytest.approx(float((step - versions).double().mean()))
        mixed += len(set(versions.tolist())) > 1
        mask = batch.response_mask()
        for b in range(batch.num_groups):
            group = batch.groups(b, b + 1)
            probe.load_state_dict(trainer.snapshots[int(versions[b])])
            own = batch_logprobs(probe, group, chunk=16, groups_per_micro=1)
            gap = ((own - group.engine_logprobs).abs() * mask[b]).max()
            assert float(gap) < 1e-4, (step, b)
            if int(versions[b]) != step:  # a stale group: the current snapshot differs
                probe.load_state_dict(trainer.snapshots[step])
                now = batch_logprobs(probe, group, chunk=16, groups_per_micro=1)
                assert float(((now - group.engine_logprobs).abs() * mask[b]).max()) > 1e-3
    assert mixed >= 2
    stats = lag_statistics(trainer.schedule.lags_per_batch)
    assert stats["num_groups"] == 24 and stats["spread_range"] > 0


def test_refill_launches_share_one_engine_call(tmp_path):
    """W + B groups at the start, then B per update, each refill in ONE engine call; the records
    equal those of a run that generates every group alone (launch k is the same group)."""
    calls: list[int] = []

    class Counting(HFEngine):
        def generate(self, prompts, sampling):
            calls.append(len(prompts))
            return super().generate(prompts, sampling)

    # mismatch_every=0: the lag-0 measurement takes the groups of the first call of an update,
    # which differ when every call holds one group
    config = workers_config(
        tmp_path / "batched", generation_time="constant", total_steps=4, mismatch_every=0
    )
    train(config, engine_factory=lambda d: Counting(d), reward_fn=even_first_char, notice=quiet)
    assert calls == [7 + 4, 4, 4, 4]

    class OneAtATime(Trainer):
        def generate(self, version):
            self._launch_budget = 0  # never generate ahead: one engine call per launch
            return super().generate(version)

    calls.clear()
    single = workers_config(
        tmp_path / "single", generation_time="constant", total_steps=4, mismatch_every=0
    )
    OneAtATime(
        single, engine_factory=lambda d: Counting(d), reward_fn=even_first_char, notice=quiet
    ).run()
    assert calls == [1] * (7 + 4 * 4)

    def strip(rows):
        return [{k: v for k, v in r.items() if not k.startswith("perf/")} for r in rows]

    got = strip(read_jsonl(tmp_path / "batched" / "metrics.jsonl"))
    assert_same_rollouts(got, strip(read_jsonl(tmp_path / "single" / "metrics.jsonl")))
    # constant times: W / B = 7 / 4, lags floor and ceil of it once the first groups are used
    assert [(r["staleness/lag_min"], r["staleness/lag_max"]) for r in got[2:]] == [(1, 2)] * 2


def test_group_launches_hold_the_batch_launch_samples(tmp_path):
    """Group launches `l B .. l B + B - 1` are batch launch `l` (same prompts, same sampled tokens,
    same engine log-probs), so a worker run and a fixed-delay run draw from one sample stream."""
    groups_run = Trainer(workers_config(tmp_path / "g"), reward_fn=even_first_char, notice=quiet)
    batch_run = Trainer(
        workers_config(tmp_path / "b", schedule="fixed_delay", method="gmc"),
        reward_fn=even_first_char,
        notice=quiet,
    )
    for trainer in (groups_run, batch_run):
        trainer._setup()
    groups = [r.result() for r in groups_run.rollouts.launch(groups_run.model, 0, 8, 1)]
    batches = [batch_run.rollouts.launch(batch_run.model, 0, 1, 4)[0].result() for _ in range(2)]
    for launch, batch in enumerate(batches):
        joined = TrajectoryBatch.concat(groups[4 * launch : 4 * launch + 4])
        for name in ("input_ids", "prompt_len", "response_len", "engine_logprobs", "rewards"):
            assert torch.equal(getattr(joined, name), getattr(batch, name)), name
        assert torch.equal(joined.prompt_index, batch.prompt_index)
    for trainer in (groups_run, batch_run):
        trainer.rollouts.engine.close()


def test_batch_versions_concat_trim_and_old_checkpoints():
    """`behavior_version` is `[B]`; an int broadcasts; `concat` pads and keeps each group's
    version; `trimmed` drops padding; a batch stored with one int version (older checkpoints)
    reads back with that version for every group."""

    def group(width: int, t: int, version: int, fill: int) -> TrajectoryBatch:
        return TrajectoryBatch(
            input_ids=torch.full((1, 2, width), fill, dtype=torch.int32),
            prompt_len=torch.tensor([[2, 2]]),
            response_len=torch.tensor([[t, t - 1]]),
            engine_logprobs=torch.full((1, 2, t), -0.5),
            learner_logprobs=None,
            rewards=torch.tensor([[1.0, 0.0]]),
            truncated=torch.zeros(1, 2, dtype=torch.bool),
            prompt_index=torch.tensor([fill]),
            behavior_version=version,
            pad_id=9,
        )

    a, b = group(5, 3, 2, 1), group(7, 5, 4, 2)
    assert a.behavior_version.tolist() == [2]
    joined = TrajectoryBatch.concat([a, b])
    assert joined.input_ids.shape == (2, 2, 7) and joined.response_width == 5
    assert joined.input_ids[0, 0, 5:].tolist() == [9, 9]  # padded with pad_id
    assert joined.engine_logprobs[0, 0, 3:].tolist() == [0.0, 0.0]
    assert joined.behavior_version.tolist() == [2, 4]
    assert joined.version_lag(6).tolist() == [[4, 4], [2, 2]]
    assert joined.groups(1, 2).behavior_version.tolist() == [4]
    trimmed = joined.groups(0, 1).trimmed()
    assert trimmed.input_ids.shape == (1, 2, 5) and trimmed.response_width == 3
    tensors, meta = tensors_of(joined)
    assert torch.equal(batch_from(tensors, meta).behavior_version, joined.behavior_version)
    old_tensors = {k: v for k, v in tensors_of(a)[0].items() if k != "behavior_version"}
    old = batch_from(old_tensors, {"behavior_version": 7, "pad_id": 9, "learner_logprobs": None})
    assert old.behavior_version.tolist() == [7]
    with pytest.raises(ValueError, match=r"behavior_version has shape \(3,\)"):
        TrajectoryBatch(**{**vars(a), "behavior_version": torch.tensor([1, 2, 3])})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"inner_steps": 2, "num_groups": 4, "total_steps": 6}, "inner_steps=2"),
        ({"delay": 3}, "delay=3"),
        ({"num_workers": 0}, "num_workers=0"),
        ({"generation_time": "sampled"}, "generation_time='sampled'"),
        ({"update_time": 1.0, "time_scale": 0.0}, "time_scale=0.0"),
    ],
)
def test_worker_config_errors_name_the_field(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        workers_config(tmp_path / "run", **overrides)
