"""A user's own staleness schedule as one registry spec, run by both learners.

`examples/periodic_sync.py` registers "periodic sync" (the engine's weights refreshed every
`D + 1` updates, so the lags cycle `0, 1, ..., D`). Its lags are checked by hand on the schedule
alone; then the same spec drives the toy learner (rows, the bound tracker's pending versions,
a checkpoint round trip), the LLM learner (rows, summary, the behavior version of every
consumed batch) and the toy command line through `GMC_GRPO_SCHEDULES`, with no other change.
The registry's own rules (names, unknown schedules, the spec's item agreeing with the built
schedule's) are checked too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from plugin_cli import run_cli_with_plugin  # noqa: E402

from examples import periodic_sync  # noqa: E402  (registers "periodic_sync" on import)
from gmc_grpo.json_files import read_json, read_jsonl  # noqa: E402
from gmc_grpo.staleness import (  # noqa: E402
    ScheduleContext,
    ScheduleSettings,
    ScheduleSpec,
    check_schedule_fields,
    get_schedule,
    lag_statistics,
    make_schedule,
    register_schedule,
    unregister_schedule,
)
from toy_mdps.train.bound_measurement import pending_versions  # noqa: E402
from toy_mdps.train.config import ToyTrainConfig  # noqa: E402
from toy_mdps.train.learner import AsyncLearner  # noqa: E402

torch.set_num_threads(1)
unregister_schedule("periodic_sync")  # importing the example registered it: scope it here


@pytest.fixture(autouse=True, scope="module")
def registered():
    """periodic sync registered for this module's tests only (the registry is process-wide)."""
    register_schedule(periodic_sync.PERIODIC_SYNC, replace=True)
    yield
    unregister_schedule("periodic_sync")


TINY = dict(num_prompts=2, vocab_size=3, max_length=3, num_groups=2, group_size=4, seeds=[0, 1])
# D = 2: a sync every 3 updates; lags 0, 1, 2 within each cycle
CYCLE = [0, 1, 2, 0, 1, 2, 0]


def test_the_schedule_alone_cycles_its_lags():
    schedule = make_schedule(ScheduleSettings(schedule="periodic_sync", delay=2))
    made: list[int] = []

    def generate(version: int) -> int:
        made.append(version)
        return len(made) - 1

    assert schedule.launches_ahead() == 3  # the first call syncs: 3 batches at once
    lags = [entry.lag for version in range(7) for entry in schedule.next(version, generate)]
    assert lags == CYCLE
    assert made == [0, 0, 0, 3, 3, 3, 6, 6, 6]  # each sync's batches come from one snapshot
    assert [e.behavior_version for e in schedule.pending_entries()] == [6, 6]
    assert schedule.launches_ahead() == 0 and schedule.pending == 2
    assert schedule.group_lags(4)[:2] == [[0, 0, 0, 0], [1, 1, 1, 1]]
    assert lag_statistics(schedule.lags_per_batch)["mean"] == pytest.approx(6 / 7)
    again = make_schedule(ScheduleSettings(schedule="periodic_sync", delay=2))
    again.load_state_dict(schedule.state_dict())
    assert again.next(7, generate)[0].lag == schedule.next(7, generate)[0].lag == 1


def test_the_spec_reads_delay_counting_updates():
    spec = get_schedule("periodic_sync")
    assert (spec.item, spec.fields, spec.mixes_lags) == ("batch", ("delay",), False)
    schedule = make_schedule(
        ScheduleSettings(schedule="periodic_sync", delay=4), ScheduleContext(updates_per_batch=2)
    )
    assert schedule.period == 3  # 4 updates = 2 batches of 2 updates, plus the current one
    # the spec's own rule, checked with the config's other fields (LLM: `inner_steps = 2`)
    settings = ScheduleSettings(schedule="periodic_sync", delay=3)
    with pytest.raises(ValueError, match=r"delay=3: must be a multiple of inner_steps=2"):
        check_schedule_fields(settings, updates_per_batch=2)


def test_in_the_toy_learner(tmp_path):
    config = ToyTrainConfig(**TINY, schedule="periodic_sync", delay=2, total_steps=7)
    learner = AsyncLearner(config)
    rows = []
    pending = []
    for _ in range(7):
        rows += learner.train_step()
        pending.append(sorted(pending_versions(learner.schedules[0])))
    assert [r["staleness/lag"] for r in rows if r["seed"] == 0] == CYCLE
    assert [r["staleness/lag"] for r in rows if r["seed"] == 1] == CYCLE
    assert "staleness/lag_max" not in rows[0]  # a batch shares one lag
    assert pending[:3] == [[0, 0], [0], []]  # the bound tracker keeps only what is pending
    # a checkpoint round trip continues the same draws
    state = learner.state_dict()
    resumed = AsyncLearner(config)
    resumed.load_state_dict(state)
    assert resumed.train_step() == learner.train_step()


def test_in_the_toy_learner_from_a_run(tmp_path):
    from toy_mdps.train.run import train

    config = ToyTrainConfig(**TINY, schedule="periodic_sync", delay=2, total_steps=7)
    summary = train(config, tmp_path / "run")
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["staleness/lag"] for r in rows if r["seed"] == 0] == CYCLE
    assert summary["mean"]["lag_mean"]["mean"] == pytest.approx(6 / 7)


def test_in_the_llm_learner(tmp_path):
    pytest.importorskip("transformers", reason="the LLM track needs transformers")
    sys.path.insert(0, str(ROOT / "tests" / "llm_runs"))
    from llm_train_checks import even_first_char, quiet, tiny_config

    from llm_runs.train import Trainer

    config = tiny_config(
        tmp_path / "run", schedule="periodic_sync", delay=2, total_steps=6, checkpoint_every=3
    )
    consumed: list[tuple[int, int]] = []

    class Recording(Trainer):
        def update(self, minibatch):
            consumed.append((self.step, int(minibatch.behavior_version.min())))
            return super().update(minibatch)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = Recording(config, reward_fn=even_first_char, notice=quiet).run()
    finally:
        torch.set_num_threads(threads)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["staleness/lag"] for r in rows] == CYCLE[:6]
    assert consumed == [(0, 0), (1, 0), (2, 0), (3, 3), (4, 3), (5, 3)]
    assert summary["schedule"] == "periodic_sync"
    assert summary["lag_statistics"]["mean"] == pytest.approx(1.0)
    assert summary["lag_statistics"]["num_groups"] == 6 * 4  # every group of every batch
    assert read_json(tmp_path / "run" / "summary.json")["steps"] == 6


def test_from_the_toy_command_line(tmp_path):
    argv = ["toy", "train", "--schedule", "periodic_sync", "--delay", "2", "--steps", "7",
            "--seeds", "0", "--num-prompts", "2", "--max-length", "3", "--group-size", "4",
            "--num-groups", "2", "--out", str(tmp_path / "run"), "--no-progress"]  # fmt: skip
    done = run_cli_with_plugin("GMC_GRPO_SCHEDULES", "examples.periodic_sync", argv)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["staleness/lag"] for r in rows] == CYCLE


def test_registry_rules():
    with pytest.raises(ValueError, match=r"unknown schedule 'no_such'; registered: fixed_delay"):
        get_schedule("no_such")
    with pytest.raises(ValueError, match=r"'workers' is one of the paper's schedules"):
        unregister_schedule("workers")
    with pytest.raises(ValueError, match=r"already registered"):
        register_schedule(periodic_sync.PERIODIC_SYNC)
    spec = periodic_sync.PERIODIC_SYNC
    with pytest.raises(ValueError, match=r"ScheduleSpec.name='a b': use letters, digits"):
        register_schedule(ScheduleSpec(**{**vars(spec), "name": "a b"}))
    with pytest.raises(ValueError, match=r"ScheduleSpec.item='batches'"):
        register_schedule(ScheduleSpec(**{**vars(spec), "name": "x", "item": "batches"}))
    with pytest.raises(ValueError, match=r"names \['lag'\], not schedule fields"):
        register_schedule(ScheduleSpec(**{**vars(spec), "name": "x", "fields": ("lag",)}))
    # a spec whose schedule hands out something else than it says is refused when built
    register_schedule(ScheduleSpec(**{**vars(spec), "name": "liar", "item": "group"}))
    try:
        with pytest.raises(ValueError, match=r"whose item is 'batch', but its spec says 'group'"):
            make_schedule(ScheduleSettings(schedule="liar"))
    finally:
        unregister_schedule("liar")
