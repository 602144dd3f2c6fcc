"""The LLM config hands each part of the trainer its own frozen slice (issue 33), and the
settings it shares with the toy config carry the toy config's word: the old LLM names (`seed`,
`track_bounds_every`, `track_bounds_samples`) are read as the new ones in recipes and `--set`
(the stored records' direction is tested in `test_llm_train_resume_config.py`, figures and
suites reading `seed` in `test_llm_suite.py` and `tests/figures`)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from llm_runs.config import (
    BoundSettings,
    EvaluationSettings,
    LLMTrainConfig,
    PlacementSettings,
    ProblemSettings,
    RolloutSettings,
    SinkSettings,
    WarmupSettings,
)
from llm_runs.recipes import config_from_values, load_recipe
from llm_runs.train_cli import add_arguments, config_from_args

SLICES = {
    "placement_settings": PlacementSettings,
    "warmup_settings": WarmupSettings,
    "problem_settings": ProblemSettings,
    "rollout_settings": RolloutSettings,
    "evaluation_settings": EvaluationSettings,
    "bound_settings": BoundSettings,
    "sink_settings": SinkSettings,
}
# slice fields that are not a config field of the same name, and what they hold
DERIVED = {"seed", "method_settings", "largest_lag", "record", "eval_benchmarks"}


def tiny(tmp_path, **values) -> LLMTrainConfig:
    return config_from_values({**load_recipe("tiny"), "out": str(tmp_path / "r"), **values})


def test_every_slice_is_frozen_and_carries_the_config_values_under_their_names(tmp_path):
    config = tiny(tmp_path, delay=2, eval_every=5, bound_every=3, temperature=0.7, run_seed=4)
    for method, cls in SLICES.items():
        part = getattr(config, method)()
        assert type(part) is cls
        for field in dataclasses.fields(part):
            if field.name not in DERIVED:
                assert getattr(part, field.name) == getattr(config, field.name), field.name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(part, dataclasses.fields(part)[0].name, None)
    rollouts = config.rollout_settings()
    assert rollouts.run_seed == config.run_seed
    assert rollouts.method_settings == config.method_settings()
    assert config.warmup_settings().seed == config.warmup_seed
    assert config.bound_settings().largest_lag == 2  # the fixed delay's D
    assert config.problem_settings().eval_benchmarks == config.eval_benchmarks
    assert tiny(tmp_path, eval_every=0).problem_settings().eval_benchmarks == ()
    assert config.sink_settings().record == dataclasses.asdict(config)
    assert config.schedule_settings().delay == 2


def test_make_schedule_takes_the_schedule_settings_not_the_config(tmp_path):
    from gmc_grpo.staleness import make_schedule

    config = tiny(tmp_path, delay=2)
    with pytest.raises(TypeError, match=r"ScheduleSettings.*got a LLMTrainConfig"):
        make_schedule(config)  # type: ignore[arg-type]
    assert make_schedule(config.schedule_settings()).delay == 2


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [
        ("seed", "run_seed", 3),
        ("track_bounds_every", "bound_every", 4),
        ("track_bounds_samples", "bound_samples", 5),
    ],
)
def test_old_names_in_a_recipe_and_in_set_are_read_as_the_new_ones(tmp_path, old, new, value):
    recipe = {**load_recipe("tiny"), "out": str(tmp_path / "r"), old: value}
    assert getattr(config_from_values(recipe), new) == value
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--recipe", "tiny", "--set", f"{old}={value}", "--out", "x"])
    config = config_from_args(args)
    assert getattr(config, new) == value
    assert old not in dataclasses.asdict(config)  # written under the new name


def test_the_seed_flag_sets_run_seed_and_a_recipe_seed_seeds_a_suite(tmp_path):
    from llm_runs.train_cli import suite_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--recipe", "tiny", "--seed", "7", "--out", "x"])
    assert config_from_args(args).run_seed == 7
    recipe = tmp_path / "old.json"
    recipe.write_text('{"config": {"tiny_model": {"seed": 0}, "seed": 2}}')
    args = parser.parse_args(["--recipe", str(recipe), "--methods", "gmc", "--out", "x"])
    assert suite_from_args(args).seeds == (2,)  # the old name, read as run_seed


def test_figures_group_llm_runs_by_their_seed_under_either_name(tmp_path):
    """A suite's runs written under the new name (`run_seed`) and the old one (`seed`) are the
    seeds of one setting for the figures (`figures.common.pick_seed_runs`)."""
    from figures.common import llm_run_seed, pick_seed_runs
    from figures.discover import Run
    from gmc_grpo.records import RunRecord

    base = {"method": "gmc", "delay": 2, "inner_steps": 1}
    runs = [
        Run(
            RunRecord(tmp_path / "a", {"config": {**base, "run_seed": 1, "out": "a"}}), "llm_train"
        ),
        Run(RunRecord(tmp_path / "b", {"config": {**base, "seed": 0, "out": "b"}}), "llm_train"),
    ]
    assert [llm_run_seed(run) for run in runs] == [1, 0]
    assert [run.name for run in pick_seed_runs(runs, [], "cell")] == ["b", "a"]
