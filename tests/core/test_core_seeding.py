"""One seeding mechanism (`gmc_grpo.seeding`): every stream from a `SeedSequence` spawn key.

The streams of a run and of its neighbouring seeds (`r - 1, r, r + 1`, every learner seed,
every step, every grid cell, every LLM stream) are pairwise distinct; the collision of the hand-
mixed seeds (the bound statistics of toy run seed `r` at step `k` drew the learner stream of run
seed `r + k + 1`) is shown to have existed and to be gone; the table of spawn keys is the
module's documented one; a run, sweep or suite of the old seeding is refused on resume.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from gmc_grpo import seeding
from gmc_grpo.seeding import (
    BASE_SEED_BITS,
    SEEDING,
    STREAMS,
    base_seed,
    check_seeding,
    numpy_generator,
    seed_sequence,
    stream_seed,
    torch_generator,
)

ROOTS = (0, 1, 2)  # a run seed r = 1 and its neighbours r - 1, r + 1
LEARNER_SEEDS = range(5)
STEPS = range(160)  # past the quick experiments' 150 steps


def every_stream(root: int) -> dict[tuple, int]:
    """Every generator seed a run with seed `root` draws (toy and LLM), by what it is."""
    out: dict[tuple, int] = {}
    for s in LEARNER_SEEDS:
        out["toy_learner", root, s] = stream_seed(root, "toy_learner", s)
        out["toy_schedule", root, s] = stream_seed(root, "toy_schedule", s)
        for k in STEPS:
            out["toy_statistics", root, s, k] = stream_seed(root, "toy_statistics", s, k)
        for name in ("sweep_theta0", "sweep_direction", "sweep_trajectory"):
            out[name, root, s] = stream_seed(root, name, s)
        for si in range(4):
            for group_size in (2, 4, 8, 32):
                out["sweep_cell", root, s, si, group_size] = stream_seed(
                    root, "sweep_cell", s, si, group_size
                )
    for name in ("toy_mdp", "toy_init", "llm_model_init", "llm_problems", "llm_warmup"):
        out[name, root] = stream_seed(root, name)
    for name in ("llm_schedule", "llm_engine"):
        out[name, root] = stream_seed(root, name)
    for epoch in range(10):
        out["llm_data_order", root, epoch] = stream_seed(root, "llm_data_order", epoch)
    out["llm_sampling", root] = base_seed(root, "llm_sampling")
    for k in range(3):
        for chunk in range(8):
            out["llm_evaluation", root, k, chunk] = base_seed(root, "llm_evaluation", k, chunk)
    return out


def test_the_streams_of_a_run_and_its_neighbours_are_pairwise_distinct():
    seeds = {key: value for root in ROOTS for key, value in every_stream(root).items()}
    assert len(seeds) == 3 * (5 * (2 + 160 + 3 + 16) + 42)  # 947 streams per root
    assert len(set(seeds.values())) == len(seeds)  # no two streams share a generator seed
    assert all(0 <= value < 2**63 for value in seeds.values())
    # and they are streams, not just numbers: the first draws differ too
    firsts = {torch_generator(r, "toy_learner", s).initial_seed() for r in ROOTS for s in range(5)}
    assert len(firsts) == 15
    draws = [
        float(torch.rand(1, generator=torch_generator(r, "toy_statistics", 0, k)))
        for r in ROOTS
        for k in range(20)
    ]
    assert len(set(draws)) == len(draws)


def test_the_old_collision_is_gone():
    """Before: `generator_seed(r, s) = r * 1_000_003 + s * 7_919 + 17` and `statistics_seed(r,
    s, k) = generator_seed(r, s) + (k + 1) * 1_000_003`, so step `k` of run `r` drew the learner
    stream of run `r + k + 1` (`--seed 1` is one of those)."""

    def old_learner(r: int, s: int) -> int:
        return (r * 1_000_003 + s * 7_919 + 17) % (2**62)

    def old_statistics(r: int, s: int, k: int) -> int:
        return (old_learner(r, s) + (k + 1) * 1_000_003) % (2**62)

    assert old_statistics(0, 3, 0) == old_learner(1, 3)  # the collision existed
    from toy_mdps.train.bound_measurement import statistics_seed
    from toy_mdps.train.learner import generator_seed

    for r in range(3):
        for s in range(5):
            for k in range(40):
                assert statistics_seed(r, s, k) != generator_seed(r + k + 1, s)
                assert statistics_seed(r, s, k) == stream_seed(r, "toy_statistics", s, k)
    learners = {generator_seed(r, s) for r in range(50) for s in range(10)}
    statistics = {statistics_seed(r, s, k) for r in range(3) for s in range(10) for k in range(50)}
    assert not learners & statistics


def test_sampling_ranges_of_neighbouring_seeds_do_not_overlap():
    """A base seed is offset by a sample's position (`base + k G + j`); a run of a million
    groups of 32 stays inside its own range, apart from the neighbouring seeds' ranges."""
    span = 1_000_000 * 32
    bases = sorted(base_seed(r, "llm_sampling") for r in range(200))
    assert all(b < 2**BASE_SEED_BITS for b in bases)
    assert all(later - earlier > span for earlier, later in zip(bases, bases[1:], strict=False))


def test_a_stream_is_a_pure_function_of_its_key():
    assert stream_seed(7, "llm_data_order", 3) == stream_seed(7, "llm_data_order", 3)
    a = numpy_generator(4, "toy_schedule", 2).random(3)
    b = numpy_generator(4, "toy_schedule", 2).random(3)
    np.testing.assert_array_equal(a, b)
    state = seed_sequence(4, "toy_schedule", 2).generate_state(1)
    assert seed_sequence(4, "toy_schedule", 2).spawn_key == (STREAMS["toy_schedule"], 2)
    assert state.tolist() == np.random.SeedSequence(4, spawn_key=(4, 2)).generate_state(1).tolist()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stream_seed(-1, "toy_learner", 0), r"root seed of random stream 'toy_learner'"),
        (lambda: stream_seed(0, "toy_learner", -2), r"path of random stream 'toy_learner'"),
        (lambda: stream_seed(0, "toy_learner", 1.5), r"must be an integer >= 0, got 1.5"),
        (lambda: stream_seed(0, "no_such"), r"unknown random stream 'no_such'"),
    ],
)
def test_bad_seeds_name_the_stream(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_spawn_keys_are_the_documented_table():
    table = dict(re.findall(r"^\| `(\w+)`\s+\| (\d+)\s+\|", seeding.__doc__, flags=re.M))
    assert {name: int(key) for name, key in table.items()} == STREAMS
    assert len(set(STREAMS.values())) == len(STREAMS)


def test_records_of_another_seeding_are_refused():
    check_seeding(SEEDING, "run")
    with pytest.raises(ValueError, match=r"written before gmc-grpo drew its random streams"):
        check_seeding(None, "runs/x")
    with pytest.raises(ValueError, match=r"with the seeding scheme 'other'"):
        check_seeding("other", "runs/x", what="suite")


def test_a_toy_run_of_the_old_seeding_is_refused_on_resume(tmp_path):
    from toy_mdps.train.config import ToyTrainConfig
    from toy_mdps.train.learner import AsyncLearner
    from toy_mdps.train.run import train

    config = ToyTrainConfig(
        num_prompts=2, vocab_size=3, max_length=3, num_groups=2, group_size=4, seeds=[0],
        delay=1, total_steps=4, checkpoint_every=2,
    )  # fmt: skip
    run = tmp_path / "run"
    assert train(config, run, stop_after=3) is None  # killed after a checkpoint
    payload = json.loads((run / "config.json").read_text())
    assert payload["seeding"] == SEEDING
    payload.pop("seeding")  # as written by the versions before
    (run / "config.json").write_text(json.dumps(payload))
    with pytest.raises(ValueError, match=r"cannot be continued or reused exactly"):
        train(config, run)
    state = AsyncLearner(config).state_dict()
    assert state["seeding"] == SEEDING
    state.pop("seeding")
    with pytest.raises(ValueError, match=r"holds a checkpoint written before"):
        AsyncLearner(config).load_state_dict(state)
    assert train(config, run, resume=False) is not None  # --fresh reruns it


def test_a_sweep_and_a_suite_of_the_old_seeding_are_refused(tmp_path):
    from llm_runs.suite import SuiteConfig, _check_suite_file
    from toy_mdps.sweep.config import SweepConfig
    from toy_mdps.sweep.run import run_sweep

    sweep = SweepConfig(
        num_prompts=2, vocab_size=3, max_length=3, num_groups=2, trajectory_steps=4,
        delays=[0], group_sizes=[2], methods=["gmc"], num_minibatches=3, figures=False,
    )  # fmt: skip
    run_sweep(sweep, tmp_path / "sweep", progress=False)
    payload = json.loads((tmp_path / "sweep" / "config.json").read_text())
    payload.pop("seeding")
    (tmp_path / "sweep" / "config.json").write_text(json.dumps(payload))
    with pytest.raises(ValueError, match=r"holds a sweep written before"):
        run_sweep(sweep, tmp_path / "sweep", progress=False)
    suite = SuiteConfig(
        out=str(tmp_path / "suite"), base={"delay": 0}, seeds=(0, 1), methods=("gmc",)
    )
    _check_suite_file(suite)
    stored = json.loads((tmp_path / "suite" / "suite.json").read_text())
    assert stored["seeding"] == SEEDING
    stored.pop("seeding")
    (tmp_path / "suite" / "suite.json").write_text(json.dumps(stored))
    with pytest.raises(ValueError, match=r"holds a suite written before"):
        _check_suite_file(suite)
