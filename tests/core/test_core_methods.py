"""The method registry: the paper's seven specs pinned by hand, the registry API, the plugins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gmc_grpo import estimators
from gmc_grpo.methods import (
    CORE_LOSSES,
    PAPER_METHODS,
    TRAJECTORY_LOSSES,
    MethodSettings,
    MethodSpec,
    check_spec,
    get_method,
    method_names,
    paper_advantage,
    register_method,
    unregister_method,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_paper_methods_in_figure_order():
    assert tuple(s.name for s in PAPER_METHODS) == (
        "is",
        "grpo",
        "tic",
        "gmc",
        "vcpo",
        "gac",
        "a3po",
    )
    assert method_names()[:7] == ("is", "grpo", "tic", "gmc", "vcpo", "gac", "a3po")
    for spec in PAPER_METHODS:
        check_spec(spec)


def test_losses_and_advantages_of_appendix_b1():
    # loss: GAC projects the gradient of the GRPO loss; every other method has its own
    assert {s.name: s.loss for s in PAPER_METHODS} == {
        "is": "is",
        "grpo": "grpo",
        "tic": "tic",
        "gmc": "gmc",
        "vcpo": "vcpo",
        "gac": "grpo",
        "a3po": "a3po",
    }
    # Appendix B.1: centered for GRPO (and GAC's GRPO loss), leave-one-out for TIC and GMC;
    # IS as GMC (reference); VCPO's code and AReaL's A-3PO normalise by the group std
    assert {s.name: paper_advantage(s.name) for s in PAPER_METHODS} == {
        "is": "loo",
        "grpo": "centered",
        "tic": "loo",
        "gmc": "loo",
        "vcpo": "std",
        "gac": "centered",
        "a3po": "std",
    }


def test_flags_and_hooks():
    assert [s.name for s in PAPER_METHODS if s.uses_eps] == ["tic", "gmc"]
    assert [s.name for s in PAPER_METHODS if s.needs_version_lag] == ["a3po"]
    assert [s.name for s in PAPER_METHODS if s.trajectory_level] == ["is", "tic", "gmc", "vcpo"]
    assert [s.name for s in PAPER_METHODS if s.baseline] == ["vcpo"]
    assert get_method("vcpo").baseline.needs_score_norms  # type: ignore[union-attr]
    assert [s.name for s in PAPER_METHODS if s.step_scale] == ["vcpo"]
    assert get_method("vcpo").step_scale.metric == "vcpo/step_scale"  # type: ignore[union-attr]
    assert [s.name for s in PAPER_METHODS if s.gradient_edit] == ["gac"]
    assert {s.name: s.removed_mass_bound for s in PAPER_METHODS if s.removed_mass_bound} == {
        "tic": "tic",
        "gmc": "gmc",
    }
    settings = MethodSettings(eps=0.5, truncation=8.0)
    caps = {s.name: s.class_cap(settings) for s in PAPER_METHODS if s.class_cap}
    assert caps == {"tic": 0.5, "gmc": 0.5, "vcpo": 7.0}  # VCPO: min(rho, c) <= 1 + (c - 1)
    assert get_method("vcpo").class_cap(MethodSettings(truncation=0.5)) == 0.28  # type: ignore[misc]


def test_registry_lists_agree_with_the_core_losses():
    assert CORE_LOSSES == estimators.METHODS
    assert TRAJECTORY_LOSSES == estimators.TRAJECTORY_METHODS


def test_hooks_call_the_core_functions():
    from gmc_grpo import hooks

    s = torch.tensor([[0.0, 1.0, -2.0, 0.5]], dtype=torch.float64)
    settings = MethodSettings(vcpo_rho_ref=0.5)
    vcpo = get_method("vcpo")
    assert vcpo.step_scale.compute(s, settings) == hooks.vcpo_step_scale(s, 0.5)  # type: ignore[union-attr]
    rewards = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    norms = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    torch.testing.assert_close(
        vcpo.baseline.compute(rewards, s, norms, settings),  # type: ignore[union-attr]
        hooks.vcpo_baseline_advantages(rewards, s, norms),
    )
    gac = get_method("gac").gradient_edit
    state = gac.init_state()  # type: ignore[union-attr]
    g1 = torch.tensor([1.0, 0.0])
    g2 = torch.tensor([1.0, 1.0])  # cosine 0.707 > 0.30: the parallel part is removed
    gac.apply(g1, state, settings)  # type: ignore[union-attr]
    edited, info = gac.apply(g2, state, settings)  # type: ignore[union-attr]
    torch.testing.assert_close(edited, torch.tensor([0.0, 1.0]))
    assert info["gac/removed_frac"] == 1.0


def test_loss_config_carries_the_settings():
    settings = MethodSettings(eps=0.4, clip_low=0.1, clip_high=0.3, truncation=5.0)
    config = get_method("gac").loss_config(settings, max_length=64)
    assert (config.method, config.eps, config.clip_low, config.clip_high) == ("grpo", 0.4, 0.1, 0.3)
    assert (config.truncation, config.max_length, config.aggregation) == (5.0, 64, "paper")


def test_register_and_unregister_a_method():
    def rule(s, eps):
        return s  # plain IS weights under another name

    spec = MethodSpec(
        name="my_is", label="my IS", loss="my_is", advantage="loo", source="test",
        coefficient_rule=rule,
    )  # fmt: skip
    register_method(spec)
    try:
        assert get_method("my_is") is spec
        assert "my_is" in method_names()
        with pytest.raises(ValueError, match="already registered"):
            register_method(spec)
        register_method(spec, replace=True)
        config = spec.loss_config(MethodSettings())
        assert config.trajectory_level and config.coefficient_rule is rule
    finally:
        unregister_method("my_is")
    with pytest.raises(ValueError, match=r"unknown method 'my_is'; registered: is, grpo"):
        get_method("my_is")
    with pytest.raises(ValueError, match="cannot be unregistered"):
        unregister_method("gmc")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"loss": "ppo"}, r"MethodSpec.loss='ppo'"),
        ({"advantage": "paper"}, r"MethodSpec.advantage='paper'"),
        ({"name": "has space"}, r"MethodSpec.name='has space'"),
        ({"removed_mass_bound": "is"}, r"MethodSpec.removed_mass_bound='is'"),
    ],
)
def test_bad_specs_name_the_field(fields, message):
    base = {"name": "bad", "label": "bad", "loss": "gmc", "advantage": "loo", "source": "test"}
    with pytest.raises(ValueError, match=message):
        register_method(MethodSpec(**{**base, **fields}))
    assert "bad" not in method_names()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"eps": 0.0}, r"MethodSettings.eps=0.0: must be a finite number > 0"),
        ({"eps": float("nan")}, r"MethodSettings.eps=nan: must be a finite number > 0"),
        ({"clip_low": 1.0}, r"MethodSettings.clip_low=1.0: must be in \[0, 1\)"),
        ({"truncation": -1.0}, r"MethodSettings.truncation=-1.0: must be > 0"),
        ({"gac_low": 0.5, "gac_high": 0.3}, r"MethodSettings.gac_low=0.5"),
    ],
)
def test_settings_checks_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        MethodSettings(**fields)


def test_plugin_module_named_in_the_environment_is_registered():
    code = (
        "from gmc_grpo.methods import get_method, method_names\n"
        "assert 'soft_gmc' in method_names()\n"
        "print(get_method('soft_gmc').label)\n"
    )
    env = {**os.environ, "GMC_GRPO_METHODS": "examples.soft_gmc", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "soft GMC"
    env["GMC_GRPO_METHODS"] = "no_such_module_xyz"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert "GMC_GRPO_METHODS names the module 'no_such_module_xyz'" in done.stderr


def test_registry_imports_no_torch():
    code = (
        "import sys, gmc_grpo.methods, gmc_grpo.config_reading; assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
