"""The adapter for TRL's asynchronous GRPO trainer: packed rows, stale samples kept, the core gradient.

TRL's async trainer needs a vLLM server, NCCL and the FA3 kernel; here it runs for real on the CPU
with the stand-ins of `gmc_grpo.integrations.trl_async_local` (an in-process rollout worker that
samples with a lagging copy of the policy, a weight transfer into it, tree attention in PyTorch).
The trainer's loop, queue reader (TRL's staleness drop), TRL's prefix-tree packing and collator,
our group batcher and loss, and the optimizer are TRL's and ours, unchanged.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
pytest.importorskip("trl.experimental.async_grpo")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ta = pytest.importorskip("gmc_grpo.integrations.trl_async")

from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer  # noqa: E402
from trl.experimental.async_grpo.packing import TREE_ATTENTION, TreeRow  # noqa: E402

from examples.tiny import PROMPTS, count_a, save_tiny, tiny_model, tiny_tokenizer  # noqa: E402
from gmc_grpo.advantages import compute as compute_advantages  # noqa: E402
from gmc_grpo.estimators import coefficients, token_gradient_weights  # noqa: E402
from gmc_grpo.integrations.trl_async_local import (  # noqa: E402
    LocalRolloutWorker,
    LocalWeightTransfer,
    torch_tree_attention,
    torch_varlen_attention,
)
from gmc_grpo.losses import PolicyLossConfig, policy_loss  # noqa: E402

G, PER_DEVICE, MAX_COMPLETION, STALE_LAG = 4, 8, 6, 6


def sample(ids, completion_len, group, reward, logps, lag=0):
    prompt = len(ids) - completion_len
    return {
        "input_ids": torch.tensor(ids),
        "completion_mask": torch.tensor([0] * prompt + [1] * completion_len),
        "old_log_probs": torch.tensor([0.0] * prompt + list(logps), dtype=torch.float32),
        "advantage": 0.5,
        "group_id": group,
        "metrics": {"reward": reward},
        "lag": lag,
    }


def test_packed_loss_equals_core_loss_on_trl_rows():
    """Two groups sharing a prompt prefix, packed by TRL's TreeRow: the loss terms regrouped to
    `[B, G, T]` give the core loss and gradient exactly."""
    gen = torch.Generator().manual_seed(0)
    rows, dense = TreeRow(), []
    for group in range(2):
        for i in range(G):
            length = 2 + (i + group) % 3
            ids = [3, 4, 5 + group] + torch.randint(3, 11, (length,), generator=gen).tolist()
            logps = (-torch.rand(length, generator=gen) * 2).tolist()
            s = sample(ids, length, group, float(i % 3), logps)
            rows.add(s)
            dense.append((logps, float(i % 3)))
    packed = rows.pack()
    m = packed["token_index"].numel()
    current = (packed["old_log_probs"] + 0.7 * torch.randn(m, generator=gen)).requires_grad_(True)
    config = PolicyLossConfig(method="gmc", eps=0.28, max_length=MAX_COMPLETION)
    groups = torch.tensor([s["group_id"] for s in rows.samples])
    rewards = torch.tensor([s["metrics"]["reward"] for s in rows.samples])
    out = ta.packed_policy_loss(
        current,
        packed["old_log_probs"],
        packed["segment_id"],
        groups,
        rewards,
        packed["advantages"],
        config,
        "loo",
    )
    out.loss.backward()

    # the same samples laid out by hand
    lp = torch.zeros(2, G, MAX_COMPLETION)
    beh = torch.zeros(2, G, MAX_COMPLETION)
    mask = torch.zeros(2, G, MAX_COMPLETION)
    where = {}
    for seg in range(len(rows.samples)):
        terms = (packed["segment_id"] == seg).nonzero().squeeze(-1)
        b, g = divmod(seg, G)
        where[seg] = terms
        beh[b, g, : terms.numel()] = packed["old_log_probs"][terms]
        lp[b, g, : terms.numel()] = current.detach()[terms]
        mask[b, g, : terms.numel()] = 1
    lp.requires_grad_(True)
    want, _ = policy_loss(lp, beh, compute_advantages(rewards.reshape(2, G), "loo"), mask, config)
    want.backward()
    torch.testing.assert_close(out.loss, want)
    for seg, terms in where.items():
        b, g = divmod(seg, G)
        torch.testing.assert_close(current.grad[terms], lp.grad[b, g, : terms.numel()])
    s = ((lp.detach() - beh) * mask).sum(-1)
    torch.testing.assert_close(
        out.log_coefficient.exp().float(), coefficients("gmc", s, 0.28).reshape(-1)
    )
    assert out.diagnostics["ratio/capped_frac"] > 0  # not vacuous: a group is capped


def test_group_batcher_keeps_whole_groups_in_rows():
    stream = [
        sample([3, 4, 5, 6], 2, group, 1.0, [-1.0, -1.0]) for group in range(6) for _ in range(G)
    ]
    stream.insert(3 * G, sample([3, 4, 7, 8], 2, 99, 1.0, [-1.0, -1.0]))  # a lone sample: dropped
    metrics: dict[str, list] = {"gmc/partial_groups_dropped_total": []}
    batches = list(
        ta.GroupBatcher(stream, num_processes=2, groups_per_row=1, group_size=G, metrics=metrics)
    )
    assert len(batches) == 3 and metrics["gmc/partial_groups_dropped_total"] == [1.0]
    for rows in batches:
        for row in rows:
            ids = [s["group_id"] for s in row.samples]
            assert len(ids) == G and len(set(ids)) == 1
    forked = [sample([3, 4, 5], 1, 0, 1.0, [-1.0]) for _ in range(G + 1)]
    with pytest.raises(RuntimeError, match="more than num_generations"):
        list(ta.GroupBatcher(forked, 1, 1, G, {}))


def test_torch_varlen_attention_matches_dense_causal_attention():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(7, 2, 8, generator=gen) for _ in range(3))
    cu = torch.tensor([0, 3, 7])
    out = torch_varlen_attention(q, k[:, :1].repeat(1, 1, 1), v[:, :1], cu, cu)
    for a, b in ((0, 3), (3, 7)):
        qs = q[a:b].transpose(0, 1)
        ks = k[a:b, :1].transpose(0, 1).expand(2, -1, -1)
        vs = v[a:b, :1].transpose(0, 1).expand(2, -1, -1)
        want = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
        torch.testing.assert_close(out[a:b], want.transpose(0, 1))


def test_startup_checks_name_the_setting(tmp_path):
    def args(**overrides):
        values = dict(
            output_dir=str(tmp_path),
            num_generations=G,
            per_device_train_batch_size=PER_DEVICE,
            token_budget=0,
        )
        values.update(overrides)
        return AsyncGRPOConfig(**values, report_to="none", use_cpu=True, bf16=False)

    ta.check_async_config(args())
    with pytest.raises(ValueError, match="per_device_train_batch_size=6 must be a multiple"):
        ta.check_async_config(args(per_device_train_batch_size=6))
    with pytest.raises(ValueError, match="token_budget=512"):
        ta.check_async_config(args(token_budget=512))
    with pytest.raises(ValueError, match="trajectory method"):
        ta.GMCAsyncConfig(loss=PolicyLossConfig(method="grpo"))


class Recording(ta.GMCAsyncGRPOTrainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        self.recorded.append(
            {k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()}
        )
        self.states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def async_args(tmp_path, max_staleness, steps):
    return AsyncGRPOConfig(
        output_dir=str(tmp_path),
        num_generations=G,
        per_device_train_batch_size=PER_DEVICE,
        max_completion_length=MAX_COMPLETION,
        max_staleness=max_staleness,
        max_steps=steps,
        learning_rate=0.05,
        token_budget=0,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        disable_tqdm=True,
    )


def worker_and_model(tmp_path):
    tokenizer = tiny_tokenizer()
    model_dir = save_tiny(tmp_path / "model")
    worker = LocalRolloutWorker(
        tiny_model(tokenizer), tokenizer, PROMPTS, count_a, G, MAX_COMPLETION, lag=(0, STALE_LAG)
    )
    return tokenizer, model_dir, worker


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("async")
    tokenizer, model_dir, worker = worker_and_model(tmp)
    from datasets import Dataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = Recording(
            model=str(model_dir),
            reward_funcs=count_a,
            args=async_args(tmp / "out", max_staleness=2 * STALE_LAG, steps=10),
            train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
            processing_class=tokenizer,
            rollout_worker=worker,
            weight_transfer=LocalWeightTransfer(worker),
            gmc_config=ta.GMCAsyncConfig(loss=PolicyLossConfig(method="gmc", eps=0.28)),
        )
        trainer.recorded, trainer.states = [], []
        trainer.train()
    return trainer


def test_stale_samples_are_kept_logged_and_their_groups_capped(trained):
    records = ta.read_sample_log(os.path.join(trained.args.output_dir, ta.SAMPLE_LOG))
    lags = [r["lag"] for r in records]
    assert max(lags) == STALE_LAG > ta.TRL_DEFAULT_MAX_STALENESS  # kept where TRL's default drops
    assert not any("sample/dropped_stale_total" in e for e in trained.state.log_history)
    logged = [e for e in trained.state.log_history if "gmc/lag_max" in e]
    assert max(e["gmc/lag_max"] for e in logged) == STALE_LAG
    # every group's mass is capped at 1 + eps, and the cap was active during the run
    by_group: dict[tuple[int, int], list[float]] = {}
    for r in records:
        by_group.setdefault((r["step"], r["group"]), []).append(r["coefficient"])
    masses = [np.mean(c) for c in by_group.values()]
    assert max(masses) <= 1.28 + 1e-6
    assert any(abs(m - 1.28) < 1e-6 for m in masses)


@pytest.mark.parametrize("method", ["gmc", "vcpo"])
def test_trainer_gradient_equals_core_estimator_on_a_stale_micro_batch(trained, method):
    """A micro-batch with samples six versions stale: the trainer's packed loss gradient equals the
    core estimator's on a plain (unpacked) forward of the same samples, mu = the worker's log-probs."""
    index = next(
        i for i, b in enumerate(trained.recorded) if int(b["gmc_segment_lag"].max()) == STALE_LAG
    )
    batch = trained.recorded[index]
    trainer = trained
    trainer.gmc_config = ta.GMCAsyncConfig(
        loss=PolicyLossConfig(method=method, eps=0.28, truncation=1.5), sample_log=None
    )
    model = trainer.model
    model.load_state_dict(trained.states[index])
    model.zero_grad()
    trainer.compute_loss(model, batch).backward()
    got = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    # an independent model with the same parameters and plain (not tree) attention
    plain = tiny_model(tiny_tokenizer())
    plain.load_state_dict(trained.states[index])

    # rebuild each sample from the packed row: its tokens along its trie path
    selected = batch["token_index"][0] >= 0
    segment = batch["segment_id"][0][selected]
    old = batch["old_log_probs"][0][selected]
    groups = batch["gmc_segment_group"][0]
    rewards = batch["gmc_segment_reward"][0]
    samples = trainer_samples(batch)
    num = len(samples)
    assert num == PER_DEVICE
    behavior = torch.zeros(num // G, G, MAX_COMPLETION)
    mask = torch.zeros(num // G, G, MAX_COMPLETION)
    order = sorted(range(num), key=lambda i: (int(groups[i]), i))
    rows = []
    for slot, i in enumerate(order):
        b, g = divmod(slot, G)
        ids, prompt_len = samples[i]
        out = plain(input_ids=ids.unsqueeze(0)).logits[0, prompt_len - 1 : -1].float()
        lp = torch.log_softmax(out, -1).gather(-1, ids[prompt_len:, None]).squeeze(-1)
        n = lp.numel()
        rows.append((b, g, lp))
        behavior[b, g, :n] = old[segment == i]
        mask[b, g, :n] = 1
    current = torch.stack(
        [torch.nn.functional.pad(lp, (0, MAX_COMPLETION - lp.numel())) for _, _, lp in rows]
    )
    current = current.reshape(num // G, G, MAX_COMPLETION)
    kind = {"gmc": "loo", "vcpo": "std"}[method]
    reward = torch.stack([rewards[i] for i in order]).reshape(num // G, G)
    psi = token_gradient_weights(
        method,
        current.detach(),
        behavior,
        compute_advantages(reward, kind),
        mask,
        eps=0.28,
        truncation=1.5,
        max_length=MAX_COMPLETION,
    )
    (-(psi * current * mask).sum()).backward()
    want = {n: p.grad.detach().clone() for n, p in plain.named_parameters() if p.requires_grad}
    assert set(got) == set(want)
    scale = max(w.abs().max().item() for w in want.values())
    assert scale > 0
    for name, w in want.items():
        torch.testing.assert_close(got[name], w, rtol=1e-4, atol=1e-6 * scale)


def trainer_samples(batch):
    """`[(input_ids, prompt_len)]` of each sample of row 0, read back from the packed tree: the
    sample's trained tokens are the labels at its `token_index` positions; its context is the
    trie path to its first target (positions `0..depth`)."""
    selected = batch["token_index"][0] >= 0
    token_index = batch["token_index"][0][selected]
    segment = batch["segment_id"][0][selected]
    labels = batch["shift_labels"][0]
    input_ids = batch["input_ids"][0]
    positions = batch["position_ids"][0]
    kv = batch["tree_kv_index"][0]
    cu_q = batch["tree_cu_seqlens_q"][0]
    cu_k = batch["tree_cu_seqlens_k"][0]
    out = []
    for i in range(int(segment.max()) + 1):
        targets = token_index[segment == i]
        first = int(targets[0])
        # the segment holding `first`, and its root-to-segment path
        s = int(((cu_q[cu_q >= 0] <= first).sum()) - 1)
        path = kv[int(cu_k[s]) : int(cu_k[s + 1])]
        depth = int(positions[first])
        context = input_ids[path[: depth + 1]]
        completion = labels[targets]
        out.append((torch.cat([context, completion]), depth + 1))
    return out


def test_trl_default_drops_what_gmc_keeps(tmp_path):
    """The same lagging worker under TRL's own AsyncGRPOTrainer and max_staleness=4: stale samples
    are dropped (TRL's counter), where the GMC trainer above trained on them."""
    from datasets import Dataset
    from transformers import AttentionInterface

    tokenizer, model_dir, worker = worker_and_model(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ta._without_cuda_flops_lookup():
            trainer = AsyncGRPOTrainer(
                model=str(model_dir),
                reward_funcs=count_a,
                args=async_args(
                    tmp_path / "out", max_staleness=ta.TRL_DEFAULT_MAX_STALENESS, steps=8
                ),
                train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
                processing_class=tokenizer,
                rollout_worker=worker,
                weight_transfer=LocalWeightTransfer(worker),
            )
        AttentionInterface.register(TREE_ATTENTION, torch_tree_attention)
        trainer.train()
    dropped = sum(e.get("sample/dropped_stale_total", 0) for e in trainer.state.log_history)
    assert dropped > 0 and max(worker.lags_used) == STALE_LAG
