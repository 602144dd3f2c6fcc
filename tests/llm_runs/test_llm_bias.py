"""`llm_runs.lm_bias`: the target's squared norm (`gmc_grpo.stats.gram_statistics`) against the
toy's closed-form jackknife, and the estimators on a tiny Qwen3: on-policy every method's estimate is
the IS one (computed by hand) and every bias is 0 within its interval; with a stale behavior
policy IS stays unbiased."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import even_first_char  # noqa: E402

from gmc_grpo.stats import gram_matrix, gram_statistics  # noqa: E402
from llm_runs.lm_bias import BiasSettings, measure_bias  # noqa: E402


def test_target_norm_matches_the_toy_squared_bias_and_its_jackknife():
    from toy_mdps.statistics import squared_bias

    gen = torch.Generator().manual_seed(0)
    y = torch.randn(12, 5, generator=gen, dtype=torch.float64) + 0.3
    gram = gram_matrix(list(y))
    stats = gram_statistics(gram, {"m": [0, 1, 2]}, list(range(12)), 0.95, pairs=())
    toy = squared_bias(y, torch.zeros(5, dtype=torch.float64))
    norm = stats["target_norm_sq"]
    assert norm["value"] == pytest.approx(toy.interval.value)
    assert norm["lo"] == pytest.approx(toy.interval.lo) and norm["hi"] == pytest.approx(
        toy.interval.hi
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_runs.arithmetic import ArithmeticTask
    from llm_runs.recipes import config_from_values, load_recipe
    from llm_runs.tiny import build_tiny_qwen3

    root = tmp_path_factory.mktemp("bias")
    model_dir = build_tiny_qwen3(root / "model", seed=0, init_std=0.2)
    values = load_recipe("tiny")
    values.update(out=str(root / "run"), max_completion_tokens=6, sft_steps=0, tiny_model=None)
    values["model"] = str(model_dir)
    config = config_from_values(values)
    problems, _ = ArithmeticTask(**config.arithmetic).problems()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return config, problems, tokenizer, model


def _settings(**kw):
    values = dict(
        methods=("is", "tic", "gmc", "grpo", "vcpo"),
        group_sizes=(4,),
        trajectories_per_block=16,
        blocks=6,
        target_blocks=6,
        target_group_size=4,
    )
    values.update(kw)
    return BiasSettings(**values)


def test_on_policy_every_estimate_is_the_is_one_and_unbiased(tiny):
    from llm_runs.batch import micro_logprobs
    from llm_runs.engines.hf import HFEngine
    from llm_runs.lm_bias import block_estimates, draw_block, estimators_of
    from llm_runs.rollouts import RolloutProducer, Task

    config, problems, tokenizer, model = tiny
    torch.set_num_threads(1)
    producer = RolloutProducer(
        dataclasses.replace(config, group_size=4).rollout_settings(),
        HFEngine.from_model(model, tokenizer),
        Task(config.task, config.max_prompt_tokens, tokenizer),
        problems,
        pad_id=tokenizer.pad_token_id,
        reward_fn=even_first_char,
    )
    from gmc_grpo.methods import MethodSettings

    batch = draw_block(producer, problems, 4, seed=3)
    assert batch.rewards.std() > 0  # the reward gives a signal
    estimators = estimators_of(_settings(), MethodSettings.of(config), config.max_completion_tokens)
    block = block_estimates(model, None, batch, estimators, lag=0, chunk=4096)
    # by hand: g = 1/(T m G) sum_i A_i^LOO grad log pi(y_i), m = 4 groups of G = 4
    lp, _ = micro_logprobs(model, batch, 4096)
    adv = batch.rewards * 4 / 3 - batch.rewards.mean(-1, keepdim=True) * 4 / 3
    mask = batch.response_mask()
    params = [p for p in model.parameters() if p.requires_grad]
    hand = torch.autograd.grad((adv.unsqueeze(-1) * lp * mask).sum() / (6 * 4 * 4), params)
    hand = torch.cat([g.reshape(-1) for g in hand])
    for name, g in block.gradients.items():  # the same up to float rounding
        assert float((g - hand).norm()) <= 1e-5 * float(hand.norm()), name
    assert block.log_ratio_mean == 0.0
    # on-policy, every method's squared bias interval contains 0
    out = measure_bias(
        model, None, tokenizer, config, problems, _settings(), lag=0, reward_fn=even_first_char
    )
    stats = out["by_group_size"][4]
    for name, row in stats["methods"].items():
        assert row["bias_sq"]["lo"] <= 0 <= row["bias_sq"]["hi"], name
    assert stats["paired"]["gmc - tic"]["bias_sq"]["value"] == pytest.approx(0.0, abs=1e-15)
    assert out["kl"]["value"] == 0.0


@pytest.mark.slow
def test_stale_behavior_is_stays_unbiased_and_gmc_caps(tiny):
    config, problems, tokenizer, model = tiny
    torch.set_num_threads(1)
    behavior = copy.deepcopy(model)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(1)
        for p in behavior.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=gen))
    out = measure_bias(
        model,
        behavior,
        tokenizer,
        config,
        problems,
        _settings(level=0.99, blocks=12),
        lag=4,
        reward_fn=even_first_char,
    )
    stats = out["by_group_size"][4]
    assert out["kl"]["lo"] > 0  # stale: the policies differ
    assert stats["methods"]["is"]["bias_sq"]["lo"] <= 0 <= stats["methods"]["is"]["bias_sq"]["hi"]
    assert stats["methods"]["tic"]["removed_mass"]["value"] > 0
    assert stats["methods"]["gmc"]["removed_mass"]["value"] > 0
    assert stats["methods"]["is"]["removed_mass"]["value"] == 0.0


def test_bias_command_help(capsys):
    from llm_runs.cli import main

    with pytest.raises(SystemExit):
        main(["bias", "--help"])
    text = capsys.readouterr().out
    assert "--recipe" in text and "--lag" in text and "bias.json" in text


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("--steps", "48,a", "'a' is not a whole number"),
        ("--group-sizes", "4,,16", "an entry is empty"),
        ("--methods", "gmc,", "an entry is empty"),
    ],
)
def test_bias_command_refuses_a_bad_list_in_one_line(tmp_path, capsys, flag, value, why):
    from llm_runs.cli import main

    argv = ["bias", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "out"), flag, value]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and why in err[0]


@pytest.mark.slow
def test_bias_command_end_to_end(tmp_path):
    """Train a tiny delayed run with checkpoints, measure it, read the written report (rendered
    by the pipeline's renderer, which `gmc-grpo llm` hands the track: `pipeline.llm`)."""
    import json

    from pipeline.llm import main

    out = tmp_path / "bias"
    argv = ["bias", "--recipe", "tiny_delay", "--train-steps", "8", "--out", str(out)]
    argv += ["--blocks", "3", "--target-blocks", "3", "--group-sizes", "4"]
    argv += ["--trajectories-per-block", "8", "--lag", "4", "--steps", "8", "--no-progress"]
    # the recipe's delay is 16: train with delay 4 instead, through a recipe file of our own
    from llm_runs.recipes import load_recipe

    values = load_recipe("tiny_delay", "gmc")
    values.update(delay=4, sft_steps=20, max_completion_tokens=6)
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"config": values}))
    argv[2] = str(recipe)
    assert main(argv) == 0
    result = json.loads((out / "bias.json").read_text())
    assert [c["step"] for c in result["checkpoints"]] == [8]
    assert result["checkpoints"][0]["behavior_step"] == 4
    assert "IS unbiased" in (out / "bias.md").read_text()


def test_train_for_bias_runs_seeds_from_one_cached_initial_policy(tmp_path):
    """Two training seeds through one cache folder: each run records its `run_seed`, the warm-up
    (the recipe's `sft_seed`) is built once, and each run gets the cached initial policy as
    `initial_model/` (hard links or a copy, the same bytes), so step 0 can be a behavior policy."""
    import json

    from llm_runs.bias_cli import train_for_bias
    from llm_runs.recipes import load_recipe
    from llm_runs.run_policies import policy_dir, run_config

    values = load_recipe("tiny_delay", "gmc")
    values.update(
        sft_steps=10,
        sft_seed=0,
        total_steps=4,
        max_completion_tokens=4,
        num_groups=2,
        groups_per_micro=2,
    )
    recipe = tmp_path / "recipe.json"
    recipe.write_text(json.dumps({"config": values}))
    cache = tmp_path / "cache"
    runs = [
        train_for_bias(
            str(recipe),
            "gmc",
            tmp_path / f"run_s{seed}",
            None,
            progress=False,
            delay=2,
            seed=seed,
            cache_dir=cache,
        )
        for seed in (0, 1)
    ]
    assert len(list((cache / "initial_models").glob("*/key.json"))) == 1  # one warm-up
    (entry,) = (cache / "initial_models").glob("*/initial_model")
    for seed, run in zip((0, 1), runs, strict=True):
        config = run_config(run)
        assert config.run_seed == seed and config.checkpoint_every == 2
        assert policy_dir(run, 0) == run / "initial_model"
        for file in entry.iterdir():
            assert (run / "initial_model" / file.name).read_bytes() == file.read_bytes()
    rows = [(run / "metrics.jsonl").read_text() for run in runs]
    assert rows[0] != rows[1]  # independent runs
    again = train_for_bias(str(recipe), "gmc", runs[1], None, seed=1, cache_dir=cache)
    assert again == runs[1] and (runs[1] / "metrics.jsonl").read_text() == rows[1]  # reused
