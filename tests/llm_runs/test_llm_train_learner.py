"""The learner's gradient on a tiny Qwen3: equal to the core estimator's hand formula, and the
same whether micro-batched or not."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import one_thread  # noqa: E402, F401

from gmc_grpo import advantages as advantage_lib  # noqa: E402
from gmc_grpo.estimators import token_gradient_weights  # noqa: E402
from gmc_grpo.hooks import vcpo_baseline_advantages  # noqa: E402
from gmc_grpo.losses import PolicyLossConfig  # noqa: E402
from gmc_grpo.lr_schedule import CosineWithWarmup, warmup_steps_for  # noqa: E402
from gmc_grpo.methods import get_method  # noqa: E402
from llm_runs.learner import (  # noqa: E402
    Learner,
    LearnerSettings,
    TrajectoryBatch,
    batch_logprobs,
    chunked_token_logprobs,
)
from llm_runs.tiny import build_tiny_qwen3, sequence_logprobs  # noqa: E402

T_MAX = 12  # the `T` of 1/(T B G)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_qwen3(
        tmp_path_factory.mktemp("learner") / "m", seed=3, hidden_size=64, intermediate_size=128
    )


def load_model(model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model


def make_batch(model, groups: int, group_size: int, seed: int, version: int = 0) -> TrajectoryBatch:
    """Random prompts/responses of varied lengths; a stale behavior policy (noisy log-probs)."""
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    prompt_len = torch.randint(2, 6, (groups, 1), generator=gen).expand(groups, group_size)
    response_len = torch.randint(1, 7, (groups, group_size), generator=gen)
    width = int((prompt_len + response_len).max())
    t = int(response_len.max())
    ids = torch.zeros(groups, group_size, width, dtype=torch.int32)
    for b in range(groups):
        prompt = torch.randint(0, vocab - 4, (int(prompt_len[b, 0]),), generator=gen)
        for j in range(group_size):
            p, n = int(prompt_len[b, j]), int(response_len[b, j])
            ids[b, j, :p] = prompt
            ids[b, j, p : p + n] = torch.randint(0, vocab - 4, (n,), generator=gen)
    rewards = torch.randint(0, 2, (groups, group_size), generator=gen).float()
    rewards[:, 0], rewards[:, 1] = 1.0, 0.0  # every group has a non-zero advantage
    batch = TrajectoryBatch(
        input_ids=ids,
        prompt_len=prompt_len.clone().long(),
        response_len=response_len.long(),
        engine_logprobs=torch.zeros(groups, group_size, t),
        learner_logprobs=None,
        rewards=rewards,
        truncated=torch.zeros(groups, group_size, dtype=torch.bool),
        prompt_index=torch.arange(groups),
        behavior_version=version,
    )
    current = batch_logprobs(model, batch, chunk=7, groups_per_micro=groups)
    noise = 0.3 * torch.randn(current.shape, generator=gen)
    batch.engine_logprobs = torch.where(batch.response_mask(), current + noise, 0.0)
    return batch


def make_learner(model, method: str, loss_method: str, groups_per_micro: int, advantage: str):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    settings = LearnerSettings(
        method=method,
        loss=PolicyLossConfig(method=loss_method, max_length=T_MAX),  # type: ignore[arg-type]
        advantage=advantage,
        groups_per_micro=groups_per_micro,
        logit_chunk=5,
        grad_clip=1.0,
    )
    return Learner(model, optimizer, scheduler, settings)


def token_scores(model, batch: TrajectoryBatch) -> dict[tuple[int, int, int], list[torch.Tensor]]:
    """`grad log pi(y_t | ...)` of every response token, one backward each, by the plain
    forward of `llm_runs.tiny.sequence_logprobs` (an implementation independent of the learner)."""
    params = [p for p in model.parameters()]
    scores = {}
    for b in range(batch.num_groups):
        for i in range(batch.group_size):
            p, n = int(batch.prompt_len[b, i]), int(batch.response_len[b, i])
            ids = batch.input_ids[b, i].long().tolist()
            lp = sequence_logprobs(model, [ids[:p]], [ids[p : p + n]])[0]
            for t in range(n):
                grads = torch.autograd.grad(
                    lp[t], params, retain_graph=t < n - 1, allow_unused=True
                )
                scores[(b, i, t)] = [
                    g if g is not None else torch.zeros_like(q)
                    for g, q in zip(grads, params, strict=True)
                ]
    return scores


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal up to float32 rounding: relative 1e-4, absolute 1e-5 of the tensor's largest entry."""
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * float(want.abs().max()) + 1e-12)


def hand_gradient(model, psi: torch.Tensor, scores) -> list[torch.Tensor]:
    """`-sum_{b,i,t} psi_{b,i,t} grad log pi(y_t)`: the gradient of the loss (= -g)."""
    out = [torch.zeros_like(p) for p in model.parameters()]
    for (b, i, t), grads in scores.items():
        for acc, g in zip(out, grads, strict=True):
            acc -= psi[b, i, t] * g
    return out


@pytest.mark.parametrize(
    ("method", "loss_method", "advantage"),
    [
        ("gmc", "gmc", "loo"),
        ("tic", "tic", "loo"),
        ("grpo", "grpo", "centered"),
        ("a3po", "a3po", "std"),
    ],
)
def test_gradient_equals_core_estimator_formula(model_dir, method, loss_method, advantage):
    """Autograd through the learner (chunked, checkpointed log-softmax) vs the core estimator's
    `token_gradient_weights` times per-token scores, on a two-trajectory batch (B=1, G=2)."""
    model = load_model(model_dir)
    batch = make_batch(model, groups=1, group_size=2, seed=11, version=0)
    learner = make_learner(model, method, loss_method, 1, advantage)
    version = 3  # A-3PO: lag 3
    learner.gradient(batch, version)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)

    mask = batch.response_mask()
    current = batch_logprobs(model, batch, chunk=3, groups_per_micro=1)
    adv = advantage_lib.compute(batch.rewards, advantage)
    psi = token_gradient_weights(
        loss_method,  # type: ignore[arg-type]
        current,
        batch.engine_logprobs,
        adv,
        mask,
        max_length=T_MAX,
        version_lag=torch.full((1, 2), version),
    )
    assert float(psi.abs().sum()) > 0
    want = hand_gradient(model, psi, token_scores(model, batch))
    for g, w in zip(got, want, strict=True):
        close(g, w)


@pytest.mark.parametrize("method", ["a3po", "gmc"])
def test_mixed_lag_batch_each_group_uses_its_own_snapshot(model_dir, method):
    """One batch of two groups generated by different snapshots (versions 1 and 3, each with its
    own engine log-probs), consumed at version 4: the gradient is the hand formula with each
    group's own lag (3 and 1) and own behavior log-probs; one shared lag gives another one."""
    model = load_model(model_dir)
    old = make_batch(model, groups=1, group_size=2, seed=11, version=1)
    new = make_batch(model, groups=1, group_size=2, seed=12, version=3)
    batch = TrajectoryBatch.concat([old, new])
    assert batch.behavior_version.tolist() == [1, 3]
    assert batch.version_lag(4).tolist() == [[3, 3], [1, 1]]
    advantage = get_method(method).advantage_kind("paper")
    learner = make_learner(model, method, method, 1, advantage)
    learner.gradient(batch, 4)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)

    mask = batch.response_mask()
    current = batch_logprobs(model, batch, chunk=3, groups_per_micro=1)
    adv = advantage_lib.compute(batch.rewards, advantage)
    # the behavior log-probs of group b are those its own snapshot recorded
    behavior = torch.zeros_like(current)
    behavior[0, :, : old.response_width] = old.engine_logprobs[0]
    behavior[1, :, : new.response_width] = new.engine_logprobs[0]
    assert torch.equal(batch.engine_logprobs, behavior)

    def psi_with(lag):
        return token_gradient_weights(
            method, current, behavior, adv, mask, max_length=T_MAX, version_lag=lag
        )

    psi = psi_with(torch.tensor([[3, 3], [1, 1]]))
    scores = token_scores(model, batch)
    want = hand_gradient(model, psi, scores)
    for g, w in zip(got, want, strict=True):
        close(g, w)
    if method == "a3po":  # A-3PO reads the lag: one shared lag would change its gradient
        shared = hand_gradient(model, psi_with(torch.full((2, 2), 3)), scores)
        assert any(not torch.allclose(g, w, rtol=1e-3) for g, w in zip(got, shared, strict=True))


def test_vcpo_gradient_with_its_baseline_equals_hand_formula(model_dir):
    """VCPO: per-trajectory score norms (one backward per trajectory) -> min-variance baseline ->
    truncated-IS gradient; everything recomputed by hand from per-token scores."""
    model = load_model(model_dir)
    batch = make_batch(model, groups=1, group_size=2, seed=5)
    learner = make_learner(model, "vcpo", "vcpo", 1, "paper")  # "paper": its own baseline
    learner.gradient(batch, 0)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)

    scores = token_scores(model, batch)
    mask = batch.response_mask()
    current = batch_logprobs(model, batch, chunk=3, groups_per_micro=1)
    log_ratio = ((current - batch.engine_logprobs) * mask).sum(-1)
    norms = torch.zeros(1, 2, dtype=torch.float64)
    for i in range(2):
        total = None
        for t in range(int(batch.response_len[0, i])):
            grads = scores[(0, i, t)]
            total = grads if total is None else [a + g for a, g in zip(total, grads, strict=True)]
        norms[0, i] = sum(float(g.pow(2).sum()) for g in total)
    adv = vcpo_baseline_advantages(batch.rewards, log_ratio, norms)
    psi = token_gradient_weights(
        "vcpo", current, batch.engine_logprobs, adv, mask, max_length=T_MAX
    )
    want = hand_gradient(model, psi, scores)
    for g, w in zip(got, want, strict=True):
        close(g, w)


def test_a_registered_method_gradient_equals_its_hand_formula(model_dir):
    """The soft GMC of docs/method-registry.md (`examples/soft_gmc.py`), one registry spec with a coefficient rule:
    the learner's gradient equals `psi` of the core hand formula with that rule."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from examples.soft_gmc import SOFT_GMC, soft_gmc_log_coefficients
    from gmc_grpo.methods import MethodSettings, register_method, unregister_method

    register_method(SOFT_GMC, replace=True)
    model = load_model(model_dir)
    batch = make_batch(model, groups=2, group_size=3, seed=7)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    settings = LearnerSettings(
        method="soft_gmc",
        loss=SOFT_GMC.loss_config(MethodSettings(), max_length=T_MAX),
        advantage="paper",
        groups_per_micro=1,
        logit_chunk=5,
        grad_clip=1.0,
    )
    try:
        Learner(model, optimizer, scheduler, settings).gradient(batch, 0)
    finally:
        unregister_method("soft_gmc")
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)

    current = batch_logprobs(model, batch, chunk=3, groups_per_micro=2)
    adv = advantage_lib.compute(batch.rewards, "loo")  # soft GMC's advantage, as GMC's
    psi = token_gradient_weights(
        "soft_gmc",
        current,
        batch.engine_logprobs,
        adv,
        batch.response_mask(),
        max_length=T_MAX,
        coefficient_rule=soft_gmc_log_coefficients,
    )
    assert float(psi.abs().sum()) > 0
    want = hand_gradient(model, psi, token_scores(model, batch))
    for g, w in zip(got, want, strict=True):
        close(g, w)


@pytest.mark.parametrize(("method", "advantage"), [("gmc", "loo"), ("grpo", "centered")])
def test_micro_batched_gradient_equals_full_batch(model_dir, method, advantage):
    model = load_model(model_dir)
    batch = make_batch(model, groups=4, group_size=3, seed=2)
    grads = {}
    for per in (1, 2, 4):
        learner = make_learner(model, method, method, per, advantage)
        metrics, _, _ = learner.gradient(batch, 0)
        grads[per] = ([p.grad.clone() for p in model.parameters()], metrics)
        model.zero_grad(set_to_none=True)
    full, full_metrics = grads[4]
    for per in (1, 2):
        for g, w in zip(grads[per][0], full, strict=True):
            close(g, w)
        assert grads[per][1]["ratio/log_max"] == pytest.approx(
            full_metrics["ratio/log_max"], abs=1e-5
        )


def test_chunked_logprobs_match_plain_log_softmax():
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(13, 8, generator=gen, requires_grad=True)
    weight = torch.randn(20, 8, generator=gen)
    targets = torch.randint(0, 20, (13,), generator=gen)
    got = chunked_token_logprobs(hidden, weight, targets, chunk=4)
    want = torch.log_softmax(hidden @ weight.T, -1).gather(-1, targets[:, None]).squeeze(-1)
    torch.testing.assert_close(got, want)
    (g1,) = torch.autograd.grad(got.sum(), hidden)
    (g2,) = torch.autograd.grad(want.sum(), hidden)
    torch.testing.assert_close(g1, g2)


def test_cosine_schedule_with_three_percent_warmup():
    warm = warmup_steps_for(800, 0.03)
    assert warm == 24
    f = CosineWithWarmup(800, warm)
    assert f(0) == pytest.approx(1 / 24)
    assert f(23) == pytest.approx(1.0)
    assert f(24) == pytest.approx(1.0)
    assert f(24 + 388) == pytest.approx(0.5, abs=1e-2)
    assert f(799) == pytest.approx(0.0, abs=1e-4)
