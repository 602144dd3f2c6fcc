"""The packed learner against its references on a tiny Qwen3 (float32, CPU): packed vs padded
log-probs, entropies, losses and gradients for every method; VCPO's in-backward score norms vs one
backward per trajectory; token-budget micro-batches vs one micro-batch; GAC's in-place projection
vs the flattened one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import one_thread  # noqa: E402, F401

from gmc_grpo.hooks import (  # noqa: E402
    GACState,
    gac_project,
    gac_project_parameters,
    vcpo_group_baseline,
)
from gmc_grpo.losses import policy_loss  # noqa: E402
from gmc_grpo.methods import MethodSettings, get_method  # noqa: E402
from llm_runs.learner import (  # noqa: E402
    Learner,
    LearnerSettings,
    TrajectoryBatch,
    batch_logprobs,
    micro_logprobs,
)
from llm_runs.packing import micro_batch_ranges, pack_micro_batch  # noqa: E402
from llm_runs.sample_norms import baseline_micro_batch  # noqa: E402
from llm_runs.tiny import EOS_TOKEN, build_tiny_qwen3, build_tokenizer  # noqa: E402

T_MAX = 12
# prompt length per group and response lengths per trajectory: very different lengths, a
# one-token response in each group, full-length (T = 12) responses, a one-token prompt
PROMPTS = (2, 9, 1)
RESPONSES = ((1, 12, 5), (7, 1, 12), (3, 12, 1))


@pytest.fixture(scope="module", params=[False, True], ids=["untied", "tied"])
def model_dir(request, tmp_path_factory):
    return build_tiny_qwen3(
        tmp_path_factory.mktemp("packing") / "m",
        seed=7,
        hidden_size=64,
        intermediate_size=128,
        tie_word_embeddings=request.param,
    )


def load_model(model_dir, checkpointing: bool = True):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model


def spread_batch(model, seed: int = 0) -> TrajectoryBatch:
    """3 groups x 3 of `PROMPTS`/`RESPONSES` lengths; responses contain the padding token (EOS,
    whose embedding row `nn.Embedding` leaves without gradient); a stale behavior policy."""
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    eos = build_tokenizer().convert_tokens_to_ids(EOS_TOKEN)
    groups, size = len(PROMPTS), len(RESPONSES[0])
    width = max(PROMPTS) + T_MAX
    ids = torch.zeros(groups, size, width, dtype=torch.int32)
    for b, p in enumerate(PROMPTS):
        prompt = torch.randint(0, vocab, (p,), generator=gen)
        for j, n in enumerate(RESPONSES[b]):
            ids[b, j, :p] = prompt
            ids[b, j, p : p + n] = torch.randint(0, vocab, (n,), generator=gen)
            ids[b, j, p + n - 1] = eos  # responses end with EOS = the padding id
    rewards = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    batch = TrajectoryBatch(
        input_ids=ids,
        prompt_len=torch.tensor(PROMPTS).unsqueeze(-1).expand(groups, size).clone(),
        response_len=torch.tensor(RESPONSES),
        engine_logprobs=torch.zeros(groups, size, T_MAX),
        learner_logprobs=None,
        rewards=rewards,
        truncated=torch.zeros(groups, size, dtype=torch.bool),
        prompt_index=torch.arange(groups),
        behavior_version=0,
    )
    current = batch_logprobs(model, batch, chunk=5, groups_per_micro=1, packed=False)
    noise = 0.3 * torch.randn(current.shape, generator=gen)
    batch.engine_logprobs = torch.where(batch.response_mask(), current + noise, 0.0)
    return batch


def learner_for(model, method: str, **settings) -> Learner:
    optimizer = torch.optim.SGD(model.parameters(), lr=settings.pop("lr", 0.0))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    values = dict(
        method=method,
        loss=get_method(method).loss_config(MethodSettings(), max_length=T_MAX),
        advantage="paper",  # each method's own (Appendix B.1); VCPO: its baseline hook
        groups_per_micro=1,
        logit_chunk=5,
        grad_clip=1.0,
    )
    values.update(settings)
    return Learner(model, optimizer, scheduler, LearnerSettings(**values))


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal up to float32 rounding: relative 1e-4, absolute 1e-5 of the tensor's largest entry."""
    want = want.detach()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * float(want.abs().max()) + 1e-12)


# --------------------------------------------------------------------------------------------
# Layout and micro-batch selection, by hand
# --------------------------------------------------------------------------------------------


def test_pack_micro_batch_layout_by_hand():
    # one group of two: prompt [11, 12] + response [13]; prompt [21, 22] + response [23, 24, 25]
    ids = torch.tensor([[[11, 12, 13, 0, 0], [21, 22, 23, 24, 25]]])
    packed = pack_micro_batch(ids, torch.tensor([[2, 2]]), torch.tensor([[1, 3]]), 3, "cpu")
    assert packed.input_ids.tolist() == [[11, 12, 13, 21, 22, 23, 24, 25]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 0, 1, 2, 3, 4]]
    assert packed.segments.bounds == ((0, 3), (3, 8))
    assert packed.response_hidden_index.tolist() == [1, 4, 5, 6]
    assert packed.response_targets.tolist() == [13, 23, 24, 25]
    assert packed.response_flat_index.tolist() == [0, 3, 4, 5]
    assert packed.response_bounds == ((0, 1), (1, 4))


def test_shared_prompt_layout_by_hand():
    # group 0 shares prompt [11, 12] (responses [13], [23, 24, 25]); group 1's prompts differ:
    # laid out whole
    ids = torch.tensor(
        [[[11, 12, 13, 0, 0], [11, 12, 23, 24, 25]], [[31, 32, 33, 0, 0], [41, 42, 43, 0, 0]]]
    )
    prompts, responses = torch.tensor([[2, 2], [2, 2]]), torch.tensor([[1, 3], [1, 1]])
    packed = pack_micro_batch(ids, prompts, responses, 3, "cpu", share_prompts=True)
    assert packed.input_ids.tolist() == [[11, 12, 13, 23, 24, 25, 31, 32, 33, 41, 42, 43]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 2, 3, 4, 0, 1, 2, 0, 1, 2]]
    assert packed.segments.bounds == ((0, 2), (2, 3), (3, 6), (6, 9), (9, 12))
    assert packed.segments.prefixes == ((0, 0), (0, 2), (0, 2), (6, 6), (9, 9))
    # both responses of group 0 are predicted first from the prompt's last token (index 1)
    assert packed.response_hidden_index.tolist() == [1, 1, 3, 4, 7, 10]
    assert packed.response_targets.tolist() == [13, 23, 24, 25, 33, 43]
    assert packed.response_flat_index.tolist() == [0, 3, 4, 5, 6, 9]
    assert packed.response_bounds == ((0, 1), (1, 4), (4, 5), (5, 6))


def test_micro_batch_ranges_by_hand():
    tokens = [10, 7, 12, 3, 30, 1]
    # 10 + 7 = 17 <= 20; 12 + 3 = 15; 30 alone (over the budget, never split); 1
    assert micro_batch_ranges(tokens, 1, 20) == [(0, 2), (2, 4), (4, 5), (5, 6)]
    assert micro_batch_ranges(tokens, 4) == [(0, 4), (4, 6)]
    assert micro_batch_ranges(tokens, 1, 1000) == [(0, 6)]
    with pytest.raises(ValueError, match="token_budget"):
        micro_batch_ranges(tokens, 1, -1)


# --------------------------------------------------------------------------------------------
# Packed == padded
# --------------------------------------------------------------------------------------------


def test_packed_logprobs_and_entropies_equal_padded(model_dir):
    model = load_model(model_dir)
    batch = spread_batch(model)
    mask = batch.response_mask()
    with torch.no_grad():
        packed_lp, packed_ent = micro_logprobs(model, batch, 5, packed=True)
        padded_lp, padded_ent = micro_logprobs(model, batch, 5, packed=False)
    close(packed_lp[mask], padded_lp[mask])
    close(packed_ent[mask], padded_ent[mask])
    assert float(packed_lp[~mask].abs().max()) == 0.0  # zeros past each response's end
    assert float(padded_lp[mask].std()) > 0.1  # a model far from uniform: a meaningful check


def test_shared_prompts_give_the_unshared_logprobs_and_gradients(model_dir):
    """Each group's prompt once vs every trajectory whole (both packed): the response tokens'
    log-probs, and the gradient of their weighted sum in every parameter, agree to float32
    rounding: relative 1e-4, absolute 1e-5 of the tensor's largest entry (`close`); the
    shared layout processes fewer tokens."""
    from llm_runs.logprobs import chunked_token_logprobs_entropy, output_embedding
    from llm_runs.packing import packed_hidden_states

    model = load_model(model_dir, checkpointing=False)
    batch = spread_batch(model)
    weights = torch.randn(3, 3, T_MAX, generator=torch.Generator().manual_seed(1))
    runs = {}
    for share in (True, False):
        packed = pack_micro_batch(
            batch.input_ids, batch.prompt_len, batch.response_len, T_MAX, "cpu", share_prompts=share
        )
        hidden = packed_hidden_states(model, packed)
        lp, _ = chunked_token_logprobs_entropy(
            hidden.index_select(0, packed.response_hidden_index),
            output_embedding(model),
            packed.response_targets,
            5,
        )
        (weights.flatten()[packed.response_flat_index] * lp).sum().backward()
        runs[share] = (lp.detach(), [q.grad.clone() for q in model.parameters()], packed)
        model.zero_grad(set_to_none=True)
    (got_lp, got_grads, shared), (want_lp, want_grads, whole) = runs[True], runs[False]
    close(got_lp, want_lp)
    for got, want in zip(got_grads, want_grads, strict=True):
        close(got, want)
    # 3 groups of 3: the prompts (2, 9, 1 tokens) once instead of three times
    assert whole.num_tokens - shared.num_tokens == 2 * sum(PROMPTS)


@pytest.mark.parametrize("method", ["grpo", "tic", "gmc", "vcpo", "gac", "a3po"])
def test_packed_losses_and_gradients_equal_padded(model_dir, method):
    """Every method through `Learner.gradient`: packed (VCPO: in-backward norms) vs padded (VCPO:
    one backward per trajectory) give the same loss diagnostics, entropy and gradient."""
    model = load_model(model_dir)
    batch = spread_batch(model)
    runs = {}
    for packed in (True, False):
        norms = "in_backward" if packed else "per_trajectory"
        learner = learner_for(model, method, packed=packed, score_norms=norms)
        metrics, current, _ = learner.gradient(batch, 3)  # version lag 3 (A-3PO)
        runs[packed] = (metrics, current, [p.grad.clone() for p in model.parameters()])
        model.zero_grad(set_to_none=True)
    (got_metrics, got_lp, got_grads), (want_metrics, want_lp, want_grads) = runs[True], runs[False]
    close(got_lp, want_lp)
    assert set(got_metrics) == set(want_metrics)
    for name, value in want_metrics.items():
        assert got_metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-5), name
    for got, want in zip(got_grads, want_grads, strict=True):
        close(got, want)
    mask = batch.response_mask()
    loss_args = (batch.engine_logprobs, torch.ones(3, 3), mask, learner.settings.loss)
    got_loss, _ = policy_loss(got_lp, *loss_args, version_lag=torch.full((3, 3), 3))
    want_loss, _ = policy_loss(want_lp, *loss_args, version_lag=torch.full((3, 3), 3))
    close(got_loss, want_loss)


# --------------------------------------------------------------------------------------------
# VCPO's score norms inside the backward
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("checkpointing", [True, False], ids=["checkpointed", "plain"])
def test_vcpo_in_backward_norms_equal_one_backward_per_trajectory(model_dir, checkpointing):
    model = load_model(model_dir, checkpointing)
    batch = spread_batch(model, seed=1)
    behavior = batch.engine_logprobs
    learner = learner_for(model, "vcpo", score_norms="per_trajectory")
    _, want = learner.trajectory_scores(batch, behavior)
    assert all(p.grad is None for p in model.parameters())  # the reference leaves .grad alone
    norms = []
    for g in range(batch.num_groups):  # one micro-batch per group, and all groups in one
        norms.append(
            baseline_micro_batch(
                model,
                batch.groups(g, g + 1),
                behavior[g : g + 1],
                learner.settings.loss,
                vcpo_group_baseline,
                scale=1 / 3,
                chunk=5,
            )[3]
        )
    per_group_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    *_, together = baseline_micro_batch(
        model, batch, behavior, learner.settings.loss, vcpo_group_baseline, scale=1.0, chunk=5
    )
    close(torch.cat(norms), want)
    close(together, want)
    assert float(want.min()) > 0
    for got, ref in zip(per_group_grads, [p.grad for p in model.parameters()], strict=True):
        close(got, ref)  # the b/B scaling: three micro-batches = one


def test_token_budget_micro_batches_give_the_full_batch_gradient(model_dir):
    model = load_model(model_dir)
    batch = spread_batch(model, seed=2)
    group_tokens = (batch.prompt_len + batch.response_len).sum(-1).tolist()  # [24, 47, 19]
    assert group_tokens == [24, 47, 19]
    for method in ("gmc", "vcpo"):
        grads = {}
        for budget in (45, 0):  # [group 0], [group 1 alone, over budget], [group 2] vs one
            learner = learner_for(model, method, micro_batch_tokens=budget, groups_per_micro=3)
            expected = [(0, 1), (1, 2), (2, 3)] if budget else [(0, 3)]
            assert learner.micro_batches(batch) == expected
            metrics, _, _ = learner.gradient(batch, 0)
            grads[budget] = ([p.grad.clone() for p in model.parameters()], metrics)
            model.zero_grad(set_to_none=True)
        for got, want in zip(grads[45][0], grads[0][0], strict=True):
            close(got, want)
        assert grads[45][1]["policy/entropy"] == pytest.approx(grads[0][1]["policy/entropy"])


def test_in_backward_norms_refuse_the_padded_path(model_dir):
    model = load_model(model_dir)
    with pytest.raises(ValueError, match="score_norms='in_backward' needs packed=True"):
        learner_for(model, "vcpo", packed=False)


# --------------------------------------------------------------------------------------------
# GAC in place, parameter by parameter
# --------------------------------------------------------------------------------------------


def _flattened_gac(params, state, low=0.05, high=0.30):
    """The learner's projection before this change: one flattened float32 copy, `gac_project`."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1).float() for g in grads])
    projected, info = gac_project(flat, state, low=low, high=high)
    if info["gac/removed_frac"] > 0:
        offset = 0
        for p, g in zip(params, grads, strict=True):
            p.grad = projected[offset : offset + g.numel()].view_as(g).to(g.dtype)
            offset += g.numel()
    return info


def test_gac_in_place_equals_flattened_projection():
    gen = torch.Generator().manual_seed(0)
    shapes = [(5, 3), (7,), (4, 4, 2), (1,)]
    dtypes = [torch.float32, torch.float32, torch.bfloat16, torch.float32]

    def params():
        return [
            torch.nn.Parameter(torch.zeros(s, dtype=d)) for s, d in zip(shapes, dtypes, strict=True)
        ]

    new, old = params(), params()
    first = [torch.randn(s, generator=gen) for s in shapes]
    second = [g + 6 * torch.randn(g.shape, generator=gen) for g in first]
    steps = [
        first,  # no previous gradient: nothing removed
        second,  # cosine with `first` between 0.05 and 0.30: part removed
        [2 * g for g in second],  # cosine 1: the parallel component removed entirely
        [-2 * g for g in second],  # cosine -1: unchanged
        [torch.zeros(s) for s in shapes],  # zero gradient
        [0.1 * first[0], 2 * first[1], None, torch.ones(1)],  # a missing gradient
        # missing gradients whose previous entries are not 0: the projection creates them
        [None, 2 * first[1], None, torch.ones(1)],
        first,
    ]
    new_state, old_state = GACState(), GACState()
    fractions = []
    for grads in steps:
        for group in (new, old):
            for p, g in zip(group, grads, strict=True):
                p.grad = None if g is None else g.to(p.dtype).clone()
        got = gac_project_parameters(new, new_state, piece=4)  # pieces smaller than a parameter
        want = _flattened_gac(old, old_state)
        assert got["gac/cosine"] == pytest.approx(want["gac/cosine"], rel=1e-5, abs=1e-7)
        assert got["gac/removed_frac"] == pytest.approx(want["gac/removed_frac"], abs=1e-5)
        fractions.append(want["gac/removed_frac"])
        for a, b in zip(new, old, strict=True):
            assert (a.grad is None) == (b.grad is None)
            if b.grad is not None:
                torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(new_state.previous_gradient, old_state.previous_gradient)
    assert fractions[0] == fractions[3] == fractions[4] == fractions[5] == 0.0
    assert 0.0 < fractions[1] < 1.0 and fractions[2] == 1.0  # the ramp and full removal occur
    assert fractions[6] == 1.0 and float(new[0].grad.abs().max()) > 0


def test_gac_learner_steps_equal_flattened_reference(model_dir):
    class FlattenedGAC(Learner):
        def _gac_project(self):
            return _flattened_gac(self.params, self.gac)

    runs = []
    for cls in (Learner, FlattenedGAC):
        model = load_model(model_dir)
        learner = learner_for(model, "gac", lr=0.05)
        learner.__class__ = cls
        batch = spread_batch(model, seed=3)
        metrics = [learner.step(batch, v) for v in range(3)]
        runs.append((metrics, [p.detach().clone() for p in model.parameters()]))
    (got_metrics, got_params), (want_metrics, want_params) = runs
    assert [m["gac/removed_frac"] for m in want_metrics][1] > 0  # the projection acted
    for got, want in zip(got_metrics, want_metrics, strict=True):
        assert got["gac/cosine"] == pytest.approx(want["gac/cosine"], rel=1e-4, abs=1e-6)
    for got, want in zip(got_params, want_params, strict=True):
        close(got, want)


# --------------------------------------------------------------------------------------------
# The GPU benchmark's code path, on the CPU
# --------------------------------------------------------------------------------------------


def test_gpu_trainer_step_benchmark_runs_on_cpu(tmp_path):
    path = Path(__file__).resolve().parents[2] / "bench" / "gpu_trainer_step.py"
    spec = importlib.util.spec_from_file_location("gpu_trainer_step", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "table.json"
    argv = ["--device", "cpu", "--tiny", "--steps", "1", "--groups", "2", "--group-size", "2"]
    results = bench.main([*argv, "--out", str(out)])
    assert json.loads(out.read_text())["table"] == results["table"]
    names = [row["name"] for row in results["rows"]]
    assert names == ["grpo", "gmc", "tic", "gac", "vcpo", "grpo (padded)"]
    assert all("error" not in row for row in results["rows"]), results["rows"]
    # 2 x 2 trajectories of 16 prompt tokens + 48 response slots: S = 64 each
    assert results["padded_tokens"] == 4 * 64
    lengths = results["real_tokens"] - 4 * 16
    assert 4 * 12 <= lengths <= 4 * 48  # responses drawn from [T/4, T]
    for row in results["rows"]:
        mfu = 6 * results["params"] * results["real_tokens"] / row["seconds_median"] / 790e12
        assert row["mfu"] == pytest.approx(mfu)
    assert results["table"][2].startswith("| grpo | ") and results["table"][2].endswith("| 1.000 |")
    assert len(results["table"]) == 2 + len(names)
