"""Bound tracking of toy learners (`toy_mdps.train.bound_measurement`): every recorded quantity against an
independent computation, the learner left untouched, resumption, and the config checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gmc_grpo.json_files import read_jsonl
from gmc_grpo.records import METRIC_NAMES
from toy_mdps.enumeration import exact_gradient, exact_kl, log_policy_table
from toy_mdps.statistics import exact_estimator_moments
from toy_mdps.train.bound_measurement import BoundTracker, pending_versions
from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.learner import AsyncLearner
from toy_mdps.train.run import train

torch.set_num_threads(1)

TINY = dict(num_prompts=2, vocab_size=3, max_length=3, num_groups=1, group_size=4)
SGD = dict(optimizer="sgd", lr=4.0, lr_schedule="constant", grad_clip=None)


def _config(**kw: object) -> ToyTrainConfig:
    base = dict(TINY, **SGD, method="gmc", eps=0.05, delay=2, total_steps=8, seeds=[0, 1])
    base.update(bound_every=3, bound_minibatches=400, checkpoint_every=1000)
    base.update(kw)
    return ToyTrainConfig(**base)  # type: ignore[arg-type]


def _learner_fields(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("bounds/")}


def test_tracking_leaves_the_learner_untouched_and_names_every_field(tmp_path: Path) -> None:
    tracked = _config()
    plain = _config(bound_every=0)
    train(tracked, tmp_path / "tracked")
    train(plain, tmp_path / "plain")
    rows = read_jsonl(tmp_path / "tracked" / "metrics.jsonl")
    plain_rows = read_jsonl(tmp_path / "plain" / "metrics.jsonl")
    assert [_learner_fields(r) for r in rows] == plain_rows
    for row in rows:
        for key in row:
            name = key.removesuffix("_lo").removesuffix("_hi")
            assert key in ("step", "seed") or name in METRIC_NAMES, key
    recorded = sorted({r["step"] for r in rows if r.get("bounds/bias_sq") is not None})
    assert recorded == [0, 3, 6, 7]  # every 3 steps and the last


def test_per_step_quantities_match_an_independent_replay() -> None:
    """Replay the learner step by step, keeping every theta: drift, coverage, update size,
    first-order gain and the exact KL of the batch match the tracker's fields."""
    cfg = _config(total_steps=6)
    learner = AsyncLearner(cfg)
    tracker = BoundTracker(learner)
    thetas = []
    L = learner.policy.lipschitz_constant()
    for n in range(cfg.total_steps):
        thetas.append(learner.theta.clone())
        grad = learner.current_exact().gradient.clone()
        tracker.before_step(learner)
        rows = learner.train_step()
        tracker.after_step(learner, rows)
        lag = min(n, cfg.delay)  # FIFO fill: lag n, then D
        for s, row in enumerate(rows):
            behavior = thetas[n - lag][s]
            drift = float((thetas[n][s] - behavior).pow(2).sum())
            assert row["bounds/drift_sq"] == pytest.approx(drift, rel=1e-12, abs=1e-15)
            step = learner.theta[s] - thetas[n][s]
            assert row["bounds/step_sq"] == pytest.approx(float(step.pow(2).sum()), rel=1e-12)
            assert row["bounds/grad_dot_step"] == pytest.approx(
                float((grad[s] * step).sum()), rel=1e-10, abs=1e-15
            )
            table = log_policy_table(learner.mdp, thetas[n][s], learner.policy)
            assert row["bounds/log_coverage"] == pytest.approx(-float(table.min()), rel=1e-12)
            assert row["bounds/lag_sq"] == lag**2 and row["bounds/lag_fourth"] == lag**4
            assert row["bounds/lipschitz_L"] == L == 0.5
            # step 3 of the chain holds at every step: KL <= (T L / 2) ||dtheta||^2
            assert row["ratio/kl_exact"] <= cfg.max_length * L / 2 * drift * (1 + 1e-9) + 1e-15
            if row.get("bounds/kl_max") is not None:
                kl = exact_kl(learner.mdp, thetas[n][s], behavior, learner.policy)
                assert row["bounds/kl_max"] == pytest.approx(float(kl.max()), rel=1e-10)
                assert row["bounds/kl_mean"] == pytest.approx(float(kl.mean()), rel=1e-10)
            # GMC's group mass never exceeds its cap 1 + eps (eq. 5)
            assert row["bounds/group_coef_max"] <= 1.05 + 1e-12
    # the FIFO holds batches of the last D versions only: the history is pruned to D + 1
    assert len(tracker.history) <= cfg.delay + 1
    assert sorted(pending_versions(learner.schedules[0])) == [4, 5]


def test_statistics_agree_with_exact_enumeration_of_all_groups() -> None:
    """At a recorded step the tracker's bias, second moment and removed mass (M = 4000
    minibatches) contain the exact values from enumerating every group (B = 1)."""
    cfg = _config(total_steps=4, bound_every=3, bound_minibatches=4000, seeds=[0])
    learner = AsyncLearner(cfg)
    tracker = BoundTracker(learner)
    thetas = []
    for _ in range(cfg.total_steps):
        thetas.append(learner.theta.clone())
        tracker.before_step(learner)
        rows = learner.train_step()
        tracker.after_step(learner, rows)
    row = rows[0]
    assert row["step"] == 3 and row.get("bounds/bias_sq") is not None
    loss = learner.spec.loss_config(learner.settings, max_length=cfg.max_length)
    exact = exact_estimator_moments(
        learner.mdp,
        thetas[3][0],
        thetas[1][0],  # lag D = 2
        loss,
        group_size=cfg.group_size,
        advantage="loo",
        policy=learner.policy,
    )
    assert exact.bias_sq > 0 and exact.removed_mass > 0  # a stale, capped point
    for name, value in (
        ("bias_sq", exact.bias_sq),
        ("second_moment", exact.second_moment),
        ("removed_mass", exact.removed_mass),
    ):
        assert row[f"bounds/{name}_lo"] <= value <= row[f"bounds/{name}_hi"], name
        if name != "bias_sq":  # a squared bias of 7e-6 is resolved only to its interval
            assert row[f"bounds/{name}"] == pytest.approx(value, rel=0.1)
    grad_j = exact_gradient(learner.mdp, thetas[3][0], learner.policy).reshape(-1)
    inner = float(grad_j @ (exact.mean - grad_j / cfg.max_length))
    assert row["bounds/grad_dot_bias_lo"] <= inner <= row["bounds/grad_dot_bias_hi"]


def test_killed_tracked_run_resumes_to_identical_records(tmp_path: Path) -> None:
    cfg = _config(total_steps=10, checkpoint_every=4, method="tic")
    full = train(cfg, tmp_path / "full")
    killed = tmp_path / "killed"
    assert train(cfg, killed, stop_after=7) is None  # checkpoint at 4, rows up to 6
    resumed = train(cfg, killed)
    assert (killed / "metrics.jsonl").read_text() == (
        tmp_path / "full" / "metrics.jsonl"
    ).read_text()
    assert resumed == full


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(method="gac"), "gradient edit"),
        (dict(method="vcpo", advantage="paper"), "advantage = 'loo'"),
        (dict(bound_every=-1), "bound_every"),
        (dict(bound_minibatches=2), "bound_minibatches"),
    ],
)
def test_config_errors_name_the_field(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match="ToyTrainConfig.bound") as err:
        _config(**kw)
    assert message in str(err.value)


def test_vcpo_with_loo_advantages_is_tracked(tmp_path: Path) -> None:
    cfg = _config(method="vcpo", advantage="loo", truncation=1.05, total_steps=4)
    train(cfg, tmp_path)
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    # min(rho_i, c) <= c: every group mass stays below the truncation c = 1.05
    assert max(r["bounds/group_coef_max"] for r in rows) <= 1.05 + 1e-12
