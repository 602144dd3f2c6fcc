"""The asynchronous toy learner: exact quantities, estimator plumbing, hooks, optimizer, seeds."""

from __future__ import annotations

import math

import pytest
import torch

from gmc_grpo import hooks
from gmc_grpo.methods import PAPER_METHODS
from toy_mdps.behavior import reference_trajectory
from toy_mdps.enumeration import exact_gradient, exact_objective, exact_token_entropy
from toy_mdps.policies import make_policy
from toy_mdps.statistics import squared_bias
from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.learner import AsyncLearner, exact_state, lr_at, trajectory_score_norm_sq

torch.set_num_threads(1)

TINY = dict(num_prompts=2, vocab_size=3, max_length=3, num_groups=2, group_size=4)


def _config(**kw: object) -> ToyTrainConfig:
    return ToyTrainConfig(**{**TINY, "total_steps": 6, "seeds": [0, 1], **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["tabular", "loglinear"])
def test_batched_exact_state_matches_exact_module(policy: str) -> None:
    cfg = _config(policy=policy)
    learner = AsyncLearner(cfg)
    pol = make_policy(learner.mdp, policy)
    theta = torch.stack([pol.random_parameters(s, 1.5) for s in range(3)])
    state = exact_state(learner.mdp, pol, theta)
    for s in range(3):
        assert torch.allclose(state.objective[s], exact_objective(learner.mdp, theta[s], pol))
        assert torch.allclose(state.gradient[s], exact_gradient(learner.mdp, theta[s], pol))
        ent = exact_token_entropy(learner.mdp, theta[s], pol).mean()
        assert torch.allclose(state.entropy[s], ent)


@pytest.mark.parametrize("policy", ["tabular", "loglinear"])
def test_trajectory_score_norm_matches_autograd(policy: str) -> None:
    cfg = _config(policy=policy)
    learner = AsyncLearner(cfg)
    mdp, pol = learner.mdp, make_policy(learner.mdp, policy)
    theta = pol.random_parameters(3, 1.0)
    responses = torch.tensor([[[0, 5, 9, 14]], [[2, 7, 11, 20]]])  # [S=2, B=1, G=4]
    states, tokens = mdp.response_states[responses], mdp.response_tokens[responses]
    mask = mdp.response_mask[responses]
    log_table = torch.log_softmax(pol.logits(theta), -1).unsqueeze(0).expand(2, -1, -1)
    got = trajectory_score_norm_sq(pol, log_table, states, tokens, mask)
    for idx in responses.reshape(-1).tolist():
        th = theta.clone().requires_grad_(True)
        table = torch.log_softmax(pol.logits(th), -1)
        m = mdp.response_mask[idx]
        lp = table[mdp.response_states[idx], mdp.response_tokens[idx]][m].sum()
        (grad,) = torch.autograd.grad(lp, th)
        where = (responses == idx).nonzero()[0].tolist()
        assert math.isclose(float(got[tuple(where)]), float(grad.pow(2).sum()), rel_tol=1e-9)


def test_is_at_zero_delay_matches_exact_gradient_ascent_in_expectation() -> None:
    """Many seeds of IS with D = 0 (SGD, no clipping) vs the deterministic exact-gradient run."""
    lr, steps, seeds = 2.0, 4, list(range(600))
    cfg = _config(
        method="is",
        delay=0,
        optimizer="sgd",
        lr=lr,
        lr_schedule="constant",
        grad_clip=None,
        total_steps=steps,
        seeds=seeds,
        num_groups=4,
    )
    learner = AsyncLearner(cfg)
    theta0 = learner.theta[0].clone()
    T = cfg.max_length
    # The exact target of one step: E[theta_1 - theta_0] = lr grad J(theta_0) / T (eq. 2).
    learner.train_step()
    steps_taken = (learner.theta - theta0).reshape(len(seeds), -1) / lr
    target = exact_gradient(learner.mdp, theta0).reshape(-1) / T
    bias = squared_bias(steps_taken, target, level=0.99)
    assert bias.interval.lo <= 0.0 <= bias.interval.hi
    assert bias.interval.hi < 0.05 * float(target.pow(2).sum())
    # A wrong target (half the gradient) is rejected by the same test.
    wrong = squared_bias(steps_taken, 0.5 * target, level=0.99)
    assert wrong.interval.lo > 0
    for _ in range(steps - 1):
        learner.train_step()
    reference = reference_trajectory(learner.mdp, theta0, steps, lr / T)
    j_det = float(exact_objective(learner.mdp, reference[-1]))
    j0 = float(exact_objective(learner.mdp, theta0))
    js = exact_state(learner.mdp, learner.policy, learner.theta).objective
    se = float(js.std()) / math.sqrt(len(seeds))
    assert abs(float(js.mean()) - j_det) <= 4 * se + 0.05 * abs(j_det - j0)
    assert abs(j_det - j0) > 10 * se  # the comparison has power: the learner moved


def test_realised_lag_equals_delay_in_steady_state() -> None:
    learner = AsyncLearner(_config(delay=3, total_steps=10))
    lags = [learner.train_step()[0]["staleness/lag"] for _ in range(10)]
    assert lags == [0, 1, 2, 3, 3, 3, 3, 3, 3, 3]
    assert learner.schedules[1].realised_lags == [int(x) for x in lags]


def test_vcpo_step_size_equals_its_formula() -> None:
    # hand-computed batch: rho = 1, 2, 3, 4 -> ESS = 10^2 / (4 * 30) = 5/6
    log_ratio = torch.log(torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64))
    assert math.isclose(hooks.vcpo_step_scale(log_ratio), math.sqrt(5 / 6), rel_tol=1e-12)
    cfg = _config(method="vcpo", delay=2, optimizer="sgd", lr_schedule="constant", grad_clip=None)
    learner = AsyncLearner(cfg)
    for n in range(5):
        rows = learner.train_step()
        for s, row in enumerate(rows):
            rho = learner.last["log_ratio"][s].reshape(-1).exp()
            ess = float(rho.sum() ** 2 / (rho.numel() * rho.pow(2).sum()))
            expected = lr_at(cfg, n) * math.sqrt(min(1.0, ess))
            assert math.isclose(row["optim/lr"], expected, rel_tol=1e-9)
    # SGD takes exactly that step along the (unclipped) direction.
    before = learner.theta.clone()
    rows = learner.train_step()
    moved = (learner.theta - before).reshape(2, -1)
    for s in range(2):
        assert torch.allclose(moved[s], rows[s]["optim/lr"] * learner.last["direction"][s])


def test_gac_removes_exactly_the_parallel_component_above_the_threshold() -> None:
    state = hooks.GACState()
    hooks.gac_project(torch.tensor([1.0, 0.0]), state)
    out, info = hooks.gac_project(torch.tensor([1.0, 1.0]), state)  # cos = 0.707 > 0.30
    assert info["gac/removed_frac"] == 1.0
    assert torch.allclose(out, torch.tensor([0.0, 1.0]))
    learner = AsyncLearner(_config(method="gac", delay=1, total_steps=30, grad_clip=None))
    previous = None
    seen_high = seen_low = False
    for _ in range(30):
        rows = learner.train_step()
        raw, direction = learner.last["raw_direction"], learner.last["direction"]
        for s, row in enumerate(rows):
            if previous is None or previous[s].norm() == 0 or raw[s].norm() == 0:
                continue  # no previous direction (or a batch with all-equal rewards)
            u = previous[s] / previous[s].norm()
            cos = float(raw[s] @ u / raw[s].norm())
            assert math.isclose(row["gac/cosine"], cos, rel_tol=1e-9, abs_tol=1e-12)
            if cos >= 0.30:
                seen_high = True
                assert abs(float(direction[s] @ u)) < 1e-9 * float(raw[s].norm())
                parallel = float(raw[s] @ u) * u
                assert torch.allclose(direction[s], raw[s] - parallel)
            elif cos <= 0.05:
                seen_low = True
                assert torch.equal(direction[s], raw[s])
        previous = raw.clone()
    assert seen_high and seen_low


def test_vectorised_seeds_equal_runs_one_by_one() -> None:
    together = AsyncLearner(_config(method="gmc", delay=2, seeds=[0, 1, 2]))
    alone = AsyncLearner(_config(method="gmc", delay=2, seeds=[1]))
    for _ in range(6):
        rows = together.train_step()
        single = alone.train_step()[0]
        row = rows[1]
        assert row["seed"] == single["seed"] == 1
        for key in ("policy/objective", "policy/grad_norm_sq", "ratio/kl_exact", "optim/lr"):
            assert math.isclose(row[key], single[key], rel_tol=1e-9, abs_tol=1e-15)
    assert torch.allclose(together.theta[1], alone.theta[0], atol=1e-12)


def test_adam_matches_torch_adam_per_seed() -> None:
    cfg = _config(method="is", lr_schedule="constant", grad_clip=None, lr=0.1)
    learner = AsyncLearner(cfg)
    params = [torch.nn.Parameter(learner.theta[s].clone()) for s in range(2)]
    optims = [
        torch.optim.Adam([p], lr=0.1, betas=(0.9, 0.999), eps=1e-8, maximize=True) for p in params
    ]
    for _ in range(4):
        learner.train_step()
        for s in range(2):
            optims[s].zero_grad()
            params[s].grad = learner.last["direction"][s].view_as(params[s]).clone()
            optims[s].step()
    for s in range(2):
        assert torch.allclose(learner.theta[s], params[s].detach(), atol=1e-10)


@pytest.mark.parametrize("method", [s.name for s in PAPER_METHODS])
def test_every_method_writes_every_metric(method: str) -> None:
    learner = AsyncLearner(_config(method=method, delay=2))
    for _ in range(4):
        rows = learner.train_step()
    for row in rows:
        for key in (
            "policy/objective",
            "policy/grad_norm_sq",
            "policy/entropy",
            "staleness/lag",
            "ratio/kl_exact",
            "optim/lr",
        ):
            assert math.isfinite(row[key])
        assert row["ratio/kl_exact"] > 0  # stale batch, the policy has moved
        if method in ("is", "tic", "gmc", "vcpo"):
            assert row["ratio/removed_mass"] is not None and row["ratio/capped_frac"] is not None
    assert torch.isfinite(learner.theta).all()


def test_length_coupled_lags_follow_lengths() -> None:
    cfg = _config(schedule="length_coupled", lam=2.0, total_steps=40, seeds=[0, 1, 2])
    learner = AsyncLearner(cfg)
    lags = [[r["staleness/lag"] for r in learner.train_step()] for _ in range(40)]
    late = [lag for step in lags[20:] for lag in step]
    lengths = torch.tensor([float(learner.mdp.response_length.double().mean())])
    assert min(late) >= 1
    assert sum(late) / len(late) < 4 * cfg.lam * float(lengths)
    assert len({tuple(step) for step in lags}) > 1  # lags vary (per seed, per step)


def test_config_errors_name_field_and_value() -> None:
    with pytest.raises(ValueError, match=r"ToyTrainConfig.method='ppo'"):
        ToyTrainConfig(method="ppo")
    with pytest.raises(ValueError, match=r"ToyTrainConfig.delay=-1"):
        ToyTrainConfig(delay=-1)
    with pytest.raises(ValueError, match=r"ToyTrainConfig.seeds=\[1, 1\]"):
        ToyTrainConfig(seeds=[1, 1])
    with pytest.raises(ValueError, match="unknown ToyTrainConfig fields"):
        ToyTrainConfig.from_dict({"delays": [1]})
