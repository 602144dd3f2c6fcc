"""The toy learner with per-group behavior versions (the worker schedule of §2.2 / Figure 1)."""

from __future__ import annotations

import math

import pytest
import torch

import toy_mdps.train.learner as learner_module
from gmc_grpo import advantages as adv_lib
from gmc_grpo.losses import policy_loss
from toy_mdps.enumeration import log_policy_table, response_token_logprobs
from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.learner import AsyncLearner

torch.set_num_threads(1)

# 6 workers, 2 groups per update: steady-state mean lag 3, exponential times mix the lags
MIXED = dict(
    num_prompts=2,
    vocab_size=3,
    max_length=3,
    num_groups=2,
    group_size=3,
    schedule="workers",
    num_workers=6,
    generation_time="exponential",
    optimizer="sgd",
    lr=2.0,
    lr_schedule="constant",
    grad_clip=None,
    total_steps=40,
    seeds=[0, 1, 2],
)


def _run_with_history(cfg: ToyTrainConfig, steps: int) -> tuple[AsyncLearner, list, list]:
    """Run `steps` steps; return the learner, `theta_n` before each step, and `last` of each."""
    learner = AsyncLearner(cfg)
    thetas, lasts = [], []
    for _ in range(steps):
        thetas.append(learner.theta.clone())
        learner.train_step()
        lasts.append(dict(learner.last))
    return learner, thetas, lasts


def _brute_log_ratio(cfg: ToyTrainConfig, learner: AsyncLearner, theta_now, theta_then, responses):
    """`log pi_now(y) - log pi_then(y)` of `[G]` responses from the exact module, token by token."""
    mdp, pol = learner.mdp, learner.policy
    now = response_token_logprobs(mdp, log_policy_table(mdp, theta_now, pol)).sum(-1)
    then = response_token_logprobs(mdp, log_policy_table(mdp, theta_then, pol)).sum(-1)
    return now[responses] - then[responses]


def test_a_batch_mixes_lags_and_each_group_uses_its_own_snapshot() -> None:
    cfg = ToyTrainConfig(**MIXED, method="gmc")
    learner, thetas, lasts = _run_with_history(cfg, 30)
    mixed_seen = distinguished = 0
    for n, last in enumerate(lasts):
        lag = last["lag"]  # [S, B]
        for s in range(len(cfg.seeds)):
            # the lags the learner used are the schedule's own record of those groups
            recorded = learner.schedules[s].lags_per_batch[n]
            assert lag[s].tolist() == [float(x) for x in recorded]
            if lag[s].max() == lag[s].min():
                continue
            mixed_seen += 1
            for b in range(cfg.num_groups):
                version = n - int(lag[s, b])
                want = _brute_log_ratio(
                    cfg, learner, thetas[n][s], thetas[version][s], last["responses"][s, b]
                )
                assert torch.allclose(last["log_ratio"][s, b], want, rtol=0, atol=1e-12)
                # the other group's snapshot gives other ratios (where the policy moved on
                # these responses' states in between): the check can fail
                other = n - int(lag[s, 1 - b])
                wrong = _brute_log_ratio(
                    cfg, learner, thetas[n][s], thetas[other][s], last["responses"][s, b]
                )
                distinguished += not torch.allclose(wrong, want, rtol=0, atol=1e-9)
    assert mixed_seen >= 10  # exponential times: most batches hold two different lags
    assert distinguished >= 10


def test_gmc_direction_equals_autograd_through_the_loss_with_per_group_behavior() -> None:
    """The update direction of a mixed batch is minus the gradient of the core GMC surrogate
    whose behavior log-probs come from each group's own snapshot (autograd, one seed)."""
    cfg = ToyTrainConfig(**{**MIXED, "seeds": [4]}, method="gmc", eps=0.05)
    learner, thetas, lasts = _run_with_history(cfg, 25)
    mdp, pol = learner.mdp, learner.policy
    checked = 0
    for n in range(8, 25):
        last = lasts[n]
        lag = last["lag"][0]
        if lag.max() == lag.min():
            continue
        theta = thetas[n][0].clone().requires_grad_(True)
        table = torch.log_softmax(pol.logits(theta), dim=-1)
        responses = last["responses"][0]  # [B, G]
        states, tokens = mdp.response_states[responses], mdp.response_tokens[responses]
        mask = mdp.response_mask[responses]
        lp = torch.where(mask, table[states, tokens], torch.zeros((), dtype=table.dtype))
        behavior = []
        for b in range(cfg.num_groups):
            then = log_policy_table(mdp, thetas[n - int(lag[b])][0], pol)
            behavior.append(torch.where(mask[b], then[states[b], tokens[b]], 0.0))
        lb = torch.stack(behavior)
        adv = adv_lib.compute(mdp.rewards[responses], "loo")
        loss_cfg = learner.spec.loss_config(learner.settings, max_length=cfg.max_length)
        loss, _ = policy_loss(lp, lb, adv, mask, loss_cfg)
        (grad,) = torch.autograd.grad(loss, theta)
        assert torch.allclose(last["raw_direction"][0], -grad.reshape(-1), rtol=1e-10, atol=1e-14)
        checked += 1
    assert checked >= 3


def test_a3po_gets_each_group_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    original = learner_module.gradient_weights

    def spy(*args, version_lag=None, **kwargs):
        seen.append(version_lag.clone())
        return original(*args, version_lag=version_lag, **kwargs)

    monkeypatch.setattr(learner_module, "gradient_weights", spy)
    cfg = ToyTrainConfig(**MIXED, method="a3po")
    learner = AsyncLearner(cfg)
    distinct = 0
    for _ in range(20):
        learner.train_step()
        lag = learner.last["lag"]  # [S, B]
        assert torch.equal(seen[-1], lag.unsqueeze(-1).expand(-1, -1, cfg.group_size))
        distinct += int((lag.max(dim=1).values > lag.min(dim=1).values).sum())
    assert distinct > 0


def test_constant_times_give_the_fixed_delay_lags() -> None:
    """`W = B D` workers with constant times: lags 0, 1, ..., D - 1 (the initial groups), then
    exactly `D`, the FIFO's sequence (derivation in `gmc_grpo.staleness.WorkerSchedule`)."""
    D = 3
    cfg = ToyTrainConfig(
        **{**MIXED, "generation_time": "constant", "num_workers": 2 * D}, method="tic"
    )
    learner = AsyncLearner(cfg)
    rows = [learner.train_step() for _ in range(8)]
    assert [r[0]["staleness/lag"] for r in rows] == [0, 1, 2, 3, 3, 3, 3, 3]
    assert all(r[0]["staleness/lag_max"] == r[0]["staleness/lag_min"] for r in rows)
    assert [r[0]["staleness/lag4_mean"] for r in rows] == [0, 1, 16, 81, 81, 81, 81, 81]


def test_drift_record_matches_a_brute_force_recount() -> None:
    H = 4
    cfg = ToyTrainConfig(**MIXED, method="gmc", drift_max_lag=H)
    learner, thetas, lasts = _run_with_history(cfg, 20)
    S = len(cfg.seeds)
    groups = torch.zeros(S, H + 1)
    own = torch.zeros(S, H + 1, dtype=torch.float64)
    others = torch.zeros(S, H + 1, dtype=torch.float64)
    time_sum = torch.zeros(S, H + 1, dtype=torch.float64)
    beyond = [0] * S
    flat = [t.reshape(S, -1) for t in thetas]

    def drift(seed: int, t: int, n: int) -> float:
        return float((flat[n][seed] - flat[n - t][seed]).pow(2).sum())

    for n, last in enumerate(lasts):
        for s in range(S):
            for t in range(1, min(n, H) + 1):
                time_sum[s, t] += drift(s, t, n)
            for lag in last["lag"][s].tolist():
                t = int(lag)
                if t > H:
                    beyond[s] += 1
                elif 1 <= t <= n:
                    groups[s, t] += 1
                    own[s, t] += drift(s, t, n)
                    others[s, t] += sum(drift(o, t, n) for o in range(S) if o != s) / (S - 1)
    summary = learner.drift_summary()
    for s, seed in enumerate(cfg.seeds):
        mine = summary["per_seed"][str(seed)]
        assert mine["groups"] == groups[s].tolist()
        assert torch.allclose(
            torch.tensor(mine["own_sum"], dtype=torch.float64), own[s], rtol=1e-12
        )
        assert torch.allclose(
            torch.tensor(mine["others_sum"], dtype=torch.float64), others[s], rtol=1e-12
        )
        assert torch.allclose(
            torch.tensor(mine["time_sum"], dtype=torch.float64), time_sum[s], rtol=1e-12
        )
        assert mine["beyond_max_lag"] == beyond[s]
    assert summary["time_count"] == [0.0] + [float(20 - t) for t in range(1, H + 1)]
    assert sum(beyond) > 0 and groups.sum() > 0  # both branches exercised


def test_worker_config_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"ToyTrainConfig.generation_time='sampled'"):
        ToyTrainConfig(schedule="workers", generation_time="sampled")
    with pytest.raises(ValueError, match=r"ToyTrainConfig.num_workers=0"):
        ToyTrainConfig(schedule="workers", num_workers=0)
    with pytest.raises(ValueError, match=r"ToyTrainConfig.time_scale=0"):
        ToyTrainConfig(schedule="workers", generation_time="exponential", time_scale=0.0)
    with pytest.raises(ValueError, match=r"ToyTrainConfig.time_scale=0"):
        ToyTrainConfig(schedule="workers", update_time=1.0, time_scale=0.0)
    with pytest.raises(ValueError, match=r"ToyTrainConfig.drift_max_lag=-1"):
        ToyTrainConfig(drift_max_lag=-1)
    assert math.isfinite(ToyTrainConfig(schedule="workers").time_scale)


def test_a_delay_under_a_schedule_that_does_not_read_it_is_refused():
    """One check for both tracks (`gmc_grpo.staleness.check_schedule_fields`): a nonzero delay
    would be recorded beside lags that do not depend on it."""
    for schedule in ("length_coupled", "workers"):
        with pytest.raises(
            ValueError, match=rf"ToyTrainConfig.delay=3: must be 0 with schedule '{schedule}'"
        ):
            ToyTrainConfig(schedule=schedule, delay=3)
