"""The worked example of docs/method-registry.md: a user's own estimator, registered as one spec,
runs in the toy sweep, the toy learner and the LLM learner without any other change.

`examples/soft_gmc.py` registers "soft GMC" (a smooth group-mass cap). Its coefficients are
checked against hand values and the weighted class; a second user rule written to equal GMC
reproduces the built-in GMC through every track (same seeds, same numbers), which shows that a
spec alone drives the whole path; soft GMC itself runs through each track with its own
numbers checked (the LLM learner's gradient against the hand formula is in
`tests/llm_runs/test_llm_train_learner.py`, its full trainer run in `test_llm_train_loop.py`).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from plugin_cli import run_cli_with_plugin  # noqa: E402

from examples import soft_gmc  # noqa: E402  (registers "soft_gmc" on import)
from gmc_grpo.estimators import coefficients  # noqa: E402
from gmc_grpo.json_files import read_jsonl  # noqa: E402
from gmc_grpo.methods import MethodSettings, MethodSpec, register_method, unregister_method  # noqa: E402
from toy_mdps.reference import loop_gradient_estimates  # noqa: E402
from toy_mdps.statistics import gradient_estimates, sample_groups  # noqa: E402
from toy_mdps.sweep.config import SweepConfig  # noqa: E402
from toy_mdps.sweep.run import run_sweep  # noqa: E402
from toy_mdps.train.config import ToyTrainConfig  # noqa: E402
from toy_mdps.train.learner import AsyncLearner  # noqa: E402

torch.set_num_threads(1)
unregister_method("soft_gmc")  # importing the example registered it: scope it to this module


@pytest.fixture(autouse=True, scope="module")
def registered():
    """soft GMC registered for this module's tests only (the registry is process-wide)."""
    register_method(soft_gmc.SOFT_GMC, replace=True)
    yield
    unregister_method("soft_gmc")


TINY = dict(num_prompts=2, vocab_size=3, max_length=3, num_groups=2, group_size=4)
SWEEP = dict(num_prompts=2, vocab_size=3, max_length=3, num_groups=2, trajectory_steps=6)
RULE = soft_gmc.soft_gmc_log_coefficients


def test_soft_gmc_coefficients_by_hand():
    # G = 2, rho = (3, 1): rho_bar = 2; alpha = (1 + (2 / 1.28)^4)^(-1/4) with k = 4
    s = torch.tensor([[math.log(3.0), 0.0]], dtype=torch.float64)
    alpha = (1 + (2 / 1.28) ** 4) ** -0.25
    got = coefficients("soft_gmc", s, 0.28, rule=RULE)
    torch.testing.assert_close(got, torch.tensor([[3 * alpha, alpha]], dtype=torch.float64))


def test_soft_gmc_is_in_the_weighted_class_and_below_gmc():
    gen = torch.Generator().manual_seed(0)
    s = 6 * torch.randn(200, 8, generator=gen, dtype=torch.float64)
    soft = coefficients("soft_gmc", s, 0.28, rule=RULE)
    hard = coefficients("gmc", s, 0.28)
    rho = s.exp()
    assert bool((soft <= rho * (1 + 1e-12)).all())  # w_i <= 1
    assert bool((soft.mean(-1) <= 1.28 * (1 + 1e-12)).all())  # group mass <= 1 + eps
    assert bool((soft <= hard * (1 + 1e-12)).all())  # below GMC's scale everywhere


def gmc_by_hand(log_ratio: torch.Tensor, eps: float) -> torch.Tensor:
    """GMC's log-coefficients written out (eq. 9): `s_i + min{0, log(1+eps) - log rho_bar}`."""
    log_rho_bar = torch.logsumexp(log_ratio, -1) - math.log(log_ratio.shape[-1])
    return log_ratio + (math.log1p(eps) - log_rho_bar).clamp(max=0.0).unsqueeze(-1)


@pytest.fixture
def gmc_copy():
    """GMC re-registered by a user as a coefficient rule (its spec otherwise GMC's)."""
    spec = register_method(
        MethodSpec(
            name="gmc_copy",
            label="GMC (user copy)",
            loss="gmc_copy",
            advantage="loo",
            source="test",
            uses_eps=True,
            class_cap=lambda settings: settings.eps,
            removed_mass_bound="gmc",
            coefficient_rule=gmc_by_hand,
        ),
        replace=True,
    )
    yield spec
    unregister_method("gmc_copy")


# The user copy counts capped trajectories (the built-in GMC counts capped groups); everything
# else of a row must be equal.
DIFFERENT = {"method", "step", "perf/wall_s", "ratio/capped_frac", "ratio/capped_frac_lo",
             "ratio/capped_frac_hi"}  # fmt: skip


def test_a_rule_equal_to_gmc_reproduces_gmc_in_the_sweep(tmp_path, gmc_copy):
    config = SweepConfig.from_dict(
        {**SWEEP, "delays": [0, 6], "group_sizes": [2, 4],
         "num_minibatches": 30, "methods": ["gmc", "gmc_copy"], "figures": False}
    )  # fmt: skip
    rows = run_sweep(config, tmp_path / "sweep", progress=False)
    by_method = {m: [r for r in rows if r["method"] == m] for m in ("gmc", "gmc_copy")}
    assert len(by_method["gmc"]) == len(by_method["gmc_copy"]) == 4
    for a, b in zip(by_method["gmc"], by_method["gmc_copy"], strict=True):
        assert {k: v for k, v in a.items() if k not in DIFFERENT} == {
            k: v for k, v in b.items() if k not in DIFFERENT
        }


def test_a_rule_equal_to_gmc_reproduces_gmc_in_the_toy_learner(gmc_copy):
    runs = {}
    for method in ("gmc", "gmc_copy"):
        learner = AsyncLearner(ToyTrainConfig(**TINY, method=method, delay=2, total_steps=8))
        runs[method] = [row for _ in range(8) for row in learner.train_step()]
    for a, b in zip(runs["gmc"], runs["gmc_copy"], strict=True):
        assert {k: v for k, v in a.items() if k not in DIFFERENT} == {
            k: v for k, v in b.items() if k not in DIFFERENT
        }


def test_soft_gmc_estimates_equal_the_per_group_autograd_loop():
    """The sweep's vectorised estimator (the rule's psi) against one `policy_loss` + backward
    per group (the rule inside the core surrogate), on a stale behavior policy."""
    from toy_mdps.enumeration import log_policy_table, response_token_logprobs
    from toy_mdps.mdp import TokenMDP

    mdp = TokenMDP(num_prompts=2, vocab_size=3, max_length=3, seed=0)
    theta = mdp.random_parameters(0)
    behavior = theta + 0.8 * mdp.random_parameters(1)
    lt, lb = log_policy_table(mdp, theta), log_policy_table(mdp, behavior)
    lp_b = response_token_logprobs(mdp, lb).sum(-1)
    _, responses = sample_groups(mdp, lp_b, 6, 3, 4, torch.Generator().manual_seed(0))
    config = soft_gmc.SOFT_GMC.loss_config(MethodSettings(), max_length=mdp.max_length)
    fast = gradient_estimates(mdp, responses, lt, lb, config)
    slow = loop_gradient_estimates(mdp, responses, theta, behavior, config)
    assert torch.allclose(fast.gradients, slow, rtol=1e-10, atol=1e-15)
    assert float(fast.gradients.abs().sum()) > 0
    assert bool((fast.removed_mass > 0).all())  # alpha < 1 in every group: mass is removed


def test_soft_gmc_in_the_sweep_removes_more_mass_than_gmc(tmp_path):
    config = SweepConfig.from_dict(
        {**SWEEP, "delays": [6], "group_sizes": [4],
         "num_minibatches": 30, "methods": ["gmc", "soft_gmc"], "figures": False}
    )  # fmt: skip
    rows = {r["method"]: r for r in run_sweep(config, tmp_path / "sweep", progress=False)}
    assert rows["soft_gmc"]["eps"] == 0.28  # uses_eps: measured per eps value
    # the same minibatches (common random numbers); a smaller scale removes more mass
    assert rows["soft_gmc"]["ratio/removed_mass"] > rows["gmc"]["ratio/removed_mass"]
    assert rows["soft_gmc"]["chain/removed_mass_bound"] is None  # GMC's bound is not claimed
    assert not rows["soft_gmc"]["chain/second_moment_exceeds"]  # in the class: Prop. 1 holds


def test_soft_gmc_in_the_toy_learner_logs_its_own_removed_mass():
    learner = AsyncLearner(ToyTrainConfig(**TINY, method="soft_gmc", delay=2, total_steps=6))
    for _ in range(4):
        rows = learner.train_step()
    s = learner.last["log_ratio"]  # [S, B, G] of the last step
    c = coefficients("soft_gmc", s, 0.28, rule=RULE)
    removed = (s.exp() - c).mean(-1).mean(-1)  # mean over groups of (1/G) sum (rho_i - c_i)
    for row, want in zip(rows, removed.tolist(), strict=True):
        assert row["ratio/removed_mass"] == pytest.approx(want, rel=1e-9)
        assert row["ratio/capped_frac"] == 1.0  # the smooth scale is below 1 for every group


def test_soft_gmc_from_the_command_line(tmp_path):
    argv = ["toy", "train", "--method", "soft_gmc", "--delay", "2", "--steps", "4", "--seeds",
            "0,1", "--num-prompts", "2", "--max-length", "3", "--group-size", "4",
            "--num-groups", "2", "--out", str(tmp_path / "run"), "--no-progress"]  # fmt: skip
    done = run_cli_with_plugin("GMC_GRPO_METHODS", "examples.soft_gmc", argv)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert len(rows) == 8 and all(r["ratio/removed_mass"] > 0 for r in rows)


# -- plugin modules that fail to import (issue 26): shown as such, at the first use, in every CLI

BAD_PLUGIN_CASES = [
    ("toy-train", ["toy", "train", "--method", "gmc", "--steps", "3", "--out", "{tmp}/run"]),
    ("toy-sweep", ["toy", "sweep", "--quick", "--out", "{tmp}/run", "--no-progress"]),
    ("llm-train", ["llm", "train", "--recipe", "tiny", "--out", "{tmp}/run", "--no-progress"]),
    ("llm-suite", ["llm", "train", "--recipe", "tiny", "--seeds", "0,1", "--out", "{tmp}/run"]),
    ("figures", ["figures", "{tmp}/runs", "--out", "{tmp}/run"]),
    ("reproduce", ["reproduce", "--out", "{tmp}/run", "--only", "toy_sweep"]),
]


@pytest.fixture
def toy_run_root(tmp_path):
    """A folder with one finished toy run (what `figures` draws with the method registry)."""
    from gmc_grpo.plugins import reset_plugins
    from pipeline import cli

    reset_plugins("GMC_GRPO_METHODS")
    argv = ["toy", "train", "--method", "gmc", "--delay", "1", "--steps", "3", "--num-prompts",
            "2", "--max-length", "3", "--out", str(tmp_path / "runs" / "toy"), "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    return tmp_path


@pytest.mark.parametrize(
    "argv", [c[1] for c in BAD_PLUGIN_CASES], ids=[c[0] for c in BAD_PLUGIN_CASES]
)
@pytest.mark.parametrize(
    ("module", "source", "shown"),
    [
        ("no.such.mod", None, "ModuleNotFoundError: No module named 'no'"),
        ("broken_plugin", "raise ValueError('boom')\n", "ValueError: boom"),
    ],
    ids=["missing", "raises"],
)
def test_a_plugin_that_fails_to_import_is_named_with_its_error(
    argv, module, source, shown, toy_run_root, monkeypatch, capsys
):  # fmt: skip
    from gmc_grpo.plugins import reset_plugins
    from pipeline import cli

    tmp = toy_run_root
    if source is not None:
        (tmp / f"{module}.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp))
    monkeypatch.setenv("GMC_GRPO_METHODS", module)
    reset_plugins("GMC_GRPO_METHODS")
    capsys.readouterr()
    try:
        code = cli.main([w.format(tmp=tmp) for w in argv])
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, lines
        assert f"GMC_GRPO_METHODS names the module {module!r}, which cannot be imported" in lines[0]
        assert shown in lines[0] and "must be a registered method" not in lines[0]
        assert not (tmp / "run").exists()  # stopped before anything was written
        from gmc_grpo.methods import get_method
        from gmc_grpo.plugins import PluginImportError

        with pytest.raises(PluginImportError, match=shown):  # and at every later look-up
            get_method("gmc")
    finally:
        monkeypatch.delenv("GMC_GRPO_METHODS")
        reset_plugins("GMC_GRPO_METHODS")


PLUGIN = (
    "import dataclasses\n"
    "from gmc_grpo.methods import get_method, register_method\n"
    "register_method(dataclasses.replace(get_method('gmc'), name='my_gmc', label='my GMC'),"
    " replace=True)\n"
)
# what the `gmc-grpo` console script runs: its own folder, not the current one, on sys.path
LAUNCHER = "import sys\nfrom pipeline.cli import main\nsys.exit(main())\n"
TOY_ARGS = ["toy", "train", "--delay", "1", "--steps", "3", "--num-prompts", "2", "--max-length",
            "3", "--seeds", "0", "--no-progress"]  # fmt: skip


def _launch(tmp_path, cwd, module, argv):
    launcher = tmp_path / "bin" / "gmc_grpo_launcher.py"
    launcher.parent.mkdir(exist_ok=True)
    launcher.write_text(LAUNCHER)
    env = {**os.environ, "GMC_GRPO_METHODS": module, "PYTHONPATH": str(ROOT)}
    env.pop("GMC_GRPO_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, str(launcher), *argv], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def test_plugins_outside_the_repository_root(tmp_path):
    """Run as the console script runs (the current folder not on sys.path), outside the
    repository: the soft-GMC example of docs/method-registry.md works with the repository on
    PYTHONPATH; a user's module is found in the folder the command runs from, and named with its
    error elsewhere."""
    done = _launch(tmp_path, tmp_path, "examples.soft_gmc",
                   [*TOY_ARGS, "--method", "soft_gmc", "--out", str(tmp_path / "soft")])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(read_jsonl(tmp_path / "soft" / "metrics.jsonl")) == 3
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "my_plugin.py").write_text(PLUGIN)
    done = _launch(tmp_path, plugins, "my_plugin",
                   [*TOY_ARGS, "--method", "my_gmc", "--out", str(tmp_path / "mine")])  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(read_jsonl(tmp_path / "mine" / "metrics.jsonl")) == 3
    done = _launch(tmp_path, tmp_path, "my_plugin",
                   [*TOY_ARGS, "--method", "my_gmc", "--out", str(tmp_path / "elsewhere")])  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "GMC_GRPO_METHODS names the module 'my_plugin', which cannot be imported" in lines[0]
    assert "ModuleNotFoundError" in lines[0] and str(tmp_path) in lines[0]
    assert not (tmp_path / "elsewhere").exists()


# -- the spec's fields answer where a method's name used to be asked (issue 33, item 4): a new
# method declares them once and each site handles it: the capped-fraction unit of the core loss
# (`caps_group_mass`), the lag-0 mismatch (`uses_eps`), the verl adapter's loss names
# (`trajectory_level`) and its one threshold (`uses_eps` / `uses_truncation`).


def top_scaled(log_ratio: torch.Tensor, eps: float) -> torch.Tensor:
    """A group-mass cap that scales only the ratios above `1 + eps`: one factor per group,
    `alpha = min{1, (G (1+eps) - small mass) / large mass}`, so a capped group keeps its small
    ratios (its capped trajectories are a part of the group, unlike GMC's)."""
    rho, cap = log_ratio.exp(), 1.0 + eps
    large = rho > cap
    small_mass = torch.where(large, 0.0, rho).sum(-1)
    large_mass = torch.where(large, rho, 0.0).sum(-1).clamp(min=1e-300)
    alpha = ((log_ratio.shape[-1] * cap - small_mass) / large_mass).clamp(max=1.0)
    return torch.where(large, log_ratio + alpha.log().unsqueeze(-1), log_ratio)


@pytest.fixture
def new_methods():
    """Two user methods: a group-mass cap (`top_scaled`) and VCPO's truncated IS under another
    name."""
    group_cap = register_method(
        MethodSpec(
            name="group_cap", label="group cap", loss="group_cap", advantage="loo",
            source="test", uses_eps=True, caps_group_mass=True, coefficient_rule=top_scaled,
        ),
        replace=True,
    )  # fmt: skip
    my_trunc = register_method(
        MethodSpec(
            name="my_trunc", label="my truncation", loss="vcpo", advantage="std",
            source="test", uses_truncation=True,
        ),
        replace=True,
    )  # fmt: skip
    yield group_cap, my_trunc
    unregister_method("group_cap")
    unregister_method("my_trunc")


def stale_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    """`B = 6` groups of `G = 4`, `T = 3`: log-ratios large enough that some groups are capped and
    others are not, and some trajectories of the capped groups are below the cap."""
    gen = torch.Generator().manual_seed(seed)
    behavior = -torch.rand(6, 4, 3, generator=gen, dtype=torch.float64)
    current = behavior + 0.6 * torch.randn(6, 4, 3, generator=gen, dtype=torch.float64)
    mask = torch.ones(6, 4, 3, dtype=torch.bool)
    return {"logprobs": current, "behavior_logprobs": behavior, "mask": mask}


def test_a_new_method_is_handled_at_every_site_by_its_spec(new_methods):
    from gmc_grpo.integrations import verl as gv
    from gmc_grpo.losses import policy_loss
    from gmc_grpo.methods import get_method
    from llm_runs.mismatch import mismatch_methods, mismatch_metrics

    group_cap, my_trunc = new_methods
    batch = stale_batch()
    s = (batch["logprobs"] - batch["behavior_logprobs"]).sum(-1)  # [B, G]
    over = s.exp().mean(-1) > 1.28  # [B] the groups whose mass exceeds the cap
    groups = over.double().mean()
    trajectories = (over.unsqueeze(-1) & (s.exp() > 1.28)).double().mean()
    assert 0 < trajectories < groups < 1  # the two units differ on this batch

    # the core loss counts capped groups for a group-mass cap (its spec, through loss_config)
    adv = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    frac = {}
    for spec in (get_method("gmc"), group_cap, dataclasses_replace(group_cap, False)):
        config = spec.loss_config(MethodSettings())
        frac[spec.caps_group_mass] = policy_loss(**batch, advantages=adv, config=config)[1]
    assert float(frac[True]["ratio/capped_frac"]) == pytest.approx(float(groups))
    assert float(frac[False]["ratio/capped_frac"]) == pytest.approx(float(trajectories))

    # the lag-0 mismatch reports every method with a cap 1 + eps, the group-mass caps first
    # (soft GMC, registered for this module, has a cap 1 + eps but does not declare a group unit)
    names = [spec.name for spec in mismatch_methods()]
    assert names == ["gmc", "group_cap", "tic", "soft_gmc"]
    metrics = mismatch_metrics(batch["behavior_logprobs"], batch["logprobs"], batch["mask"])
    assert metrics["mismatch/group_cap_capped_group_frac"] == metrics[
        "mismatch/gmc_capped_group_frac"
    ] == pytest.approx(float(groups))  # fmt: skip

    # verl: both are loss names; the threshold is the cap 1 + eps or the truncation c
    assert {"group_cap", "my_trunc"} <= set(gv.loss_names())
    assert gv.resolve_method({"rollout_is": "group_cap", "rollout_is_threshold": 1.5}, {}) == (
        "group_cap", 0.5, 8.0,
    )  # fmt: skip
    assert gv.resolve_method({"rollout_is": "my_trunc", "rollout_is_threshold": 3.0}, {}) == (
        "my_trunc", 0.28, 3.0,
    )  # fmt: skip
    uids = [b for b in range(6) for _ in range(4)]
    flat = {k: v.reshape(24, 3) for k, v in batch.items()}
    _, verl_metrics = gv.trajectory_coefficients(
        flat["logprobs"], flat["behavior_logprobs"], flat["mask"], uids, "group_cap", 0.28
    )
    assert verl_metrics["gmc/ratio/capped_frac"] == pytest.approx(float(groups))


def dataclasses_replace(spec: MethodSpec, caps_group_mass: bool) -> MethodSpec:
    """`spec` with another `caps_group_mass` (not registered: the loss config carries it)."""
    import dataclasses

    return dataclasses.replace(spec, caps_group_mass=caps_group_mass)
