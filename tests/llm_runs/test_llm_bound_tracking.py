"""The bound tracker of LLM runs (`llm_runs.bound_tracking`): exact drifts, an unbiased KL estimator with
its interval, and training records left unchanged."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from llm_train_checks import TINY, one_thread, quiet, tiny_config  # noqa: E402,F401

from gmc_grpo.json_files import read_jsonl  # noqa: E402
from llm_runs import bound_tracking  # noqa: E402
from llm_runs.bound_tracking import BoundTracker, response_kl, sample_responses, stratified_mean  # noqa: E402
from llm_runs.train import train  # noqa: E402


def test_stratified_mean_by_hand():
    # prompt means 2 and 2; sample variances 2 and 0 over M = 2: se = sqrt((2 + 0) / 2) / 2 = 0.5,
    # t(0.975, B (M - 1) = 2) = 4.302653
    out = stratified_mean(torch.tensor([[1.0, 3.0], [2.0, 2.0]]))
    assert out["value"] == 2.0
    assert out["se"] == pytest.approx(0.5)
    assert out["hi"] - out["value"] == pytest.approx(0.5 * 4.302653, rel=1e-6)


class _Vector(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.theta = torch.nn.Parameter(torch.zeros(2))


class _Queue:
    def __init__(self, versions):
        self.versions = versions

    def pending_entries(self):
        return [SimpleNamespace(behavior_version=v) for v in self.versions]


def test_drift_and_its_pathwise_bound_by_hand():
    # theta_0..3 = (0,0), (1,0), (1,2), (4,2) under a fixed delay of 2 (behavior n - 2)
    model = _Vector()
    tracker = BoundTracker(
        every=100, samples=2, total_steps=100, temperature=1.0, max_tokens=1, eos_ids=[0], seed=0
    )
    path = [(0.0, 0.0), (1.0, 0.0), (1.0, 2.0), (4.0, 2.0)]
    rows = []
    for step, point in enumerate(path):
        with torch.no_grad():
            model.theta.copy_(torch.tensor(point))
        version = max(0, step - 2)
        batch = SimpleNamespace(behavior_version=torch.tensor([version]))
        rows.append(tracker.measure(model, batch, step, _Queue([step - 1, step])))
    # step 2 against theta_0: ||(1,2)||^2 = 5; path 2 (1 + 4) = 10
    assert rows[2]["bounds/drift_sq"] == pytest.approx(5.0)
    assert rows[2]["bounds/drift_path"] == pytest.approx(10.0)
    # step 3 against theta_1: ||(3,2)||^2 = 13; path 2 (4 + 9) = 26
    assert rows[3]["bounds/drift_sq"] == pytest.approx(13.0)
    assert rows[3]["bounds/drift_path"] == pytest.approx(26.0)
    assert rows[0]["bounds/kl_estimate"] == 0.0  # lag 0: the same parameters, no sampling
    assert sorted(tracker.history) == [1, 2, 3]  # version 0 is no longer pending


@pytest.fixture(scope="module")
def two_policies(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_runs.tiny import build_tiny_qwen3

    root = tmp_path_factory.mktemp("policies")
    models = []
    for seed in (0, 1):
        path = build_tiny_qwen3(root / f"m{seed}", **{**TINY, "seed": seed}, init_std=0.1)
        models.append(AutoModelForCausalLM.from_pretrained(path).eval())
    return models[0], models[1], AutoTokenizer.from_pretrained(root / "m0")


def test_response_kl_is_the_sum_of_next_token_kls(two_policies):
    current, behavior, tokenizer = two_policies
    prompts = torch.tensor([tokenizer("1+2")["input_ids"]] * 2)
    tokens = torch.tensor([[5, 7, 9], [4, 4, 4]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    got = response_kl(current, behavior, prompts, tokens, mask, 1.0)
    for row in range(2):
        expected = 0.0
        for t in range(3):
            if not mask[row, t]:
                continue
            ids = torch.cat([prompts[row], tokens[row, :t]])[None]
            with torch.no_grad():
                p = torch.log_softmax(current(input_ids=ids).logits[0, -1], -1)
                q = torch.log_softmax(behavior(input_ids=ids).logits[0, -1], -1)
            expected += float((p.exp() * (p - q)).sum())
        assert float(got[row]) == pytest.approx(expected, rel=1e-5)


def test_kl_estimate_matches_the_enumerated_sequence_kl(two_policies):
    # two-token responses: KL(p || q) of the sequences, enumerated over the first token
    current, behavior, tokenizer = two_policies
    eos = tokenizer.eos_token_id
    prompt = tokenizer("3+4")["input_ids"]
    with torch.no_grad():
        ids = torch.tensor([prompt])
        p1 = torch.log_softmax(current(input_ids=ids).logits[0, -1], -1)
        q1 = torch.log_softmax(behavior(input_ids=ids).logits[0, -1], -1)
        exact = float((p1.exp() * (p1 - q1)).sum())
        vocab = p1.shape[0]
        second = torch.tensor([[*prompt, v] for v in range(vocab)])
        p2 = torch.log_softmax(current(input_ids=second).logits[:, -1], -1)
        q2 = torch.log_softmax(behavior(input_ids=second).logits[:, -1], -1)
        kl2 = (p2.exp() * (p2 - q2)).sum(-1)
        kl2[eos] = 0.0  # a response that ended has no second token
        exact += float((p1.exp() * kl2).sum())
    generator = torch.Generator().manual_seed(0)
    count = 4000
    prompts = torch.tensor([prompt] * count)
    tokens, mask = sample_responses(current, prompts, 2, [eos], 1.0, generator)
    values = response_kl(current, behavior, prompts, tokens, mask, 1.0)
    estimate = stratified_mean(values.view(1, count))
    assert abs(estimate["value"] - exact) < 4 * estimate["se"]
    assert bool((values >= 0).all())


def test_a_tracked_run_trains_as_an_untracked_one(tmp_path):
    common = dict(delay=3, total_steps=8, run_seed=1)
    train(tiny_config(tmp_path / "plain", **common), notice=quiet)
    train(tiny_config(tmp_path / "tracked", bound_every=2, **common), notice=quiet)
    plain = read_jsonl(tmp_path / "plain" / "metrics.jsonl")
    tracked = read_jsonl(tmp_path / "tracked" / "metrics.jsonl")
    assert len(plain) == len(tracked) == 8
    for a, b in zip(plain, tracked, strict=True):
        shared = {k for k in a if not k.startswith("perf/")}
        assert {k: a[k] for k in shared} == {k: b[k] for k in shared}
    rows = {r["step"]: r for r in tracked}
    assert all(r["bounds/drift_sq"] >= 0 for r in tracked)
    assert rows[0]["bounds/drift_sq"] == 0.0  # the fill's first batch: lag 0
    # drift <= its pathwise bound (Cauchy-Schwarz), equal at lag 1
    assert all(r["bounds/drift_sq"] <= r["bounds/drift_path"] * (1 + 1e-9) for r in tracked)
    assert rows[1]["bounds/drift_sq"] == pytest.approx(rows[1]["bounds/drift_path"])
    measured = [s for s, r in rows.items() if "bounds/kl_estimate" in r]
    assert measured == [0, 2, 4, 6, 7]  # every 2 updates and the last
    for step in measured[1:]:
        r = rows[step]
        assert 0 <= r["bounds/kl_estimate_lo"] <= r["bounds/kl_estimate"]
        assert r["bounds/kl_estimate"] <= r["bounds/kl_estimate_hi"]
        assert math.isfinite(r["bounds/kl_estimate"])


def test_snapshots_that_do_not_fit_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(bound_tracking, "MAX_SNAPSHOT_BYTES", 1024)
    with pytest.raises(ValueError, match="bound_every"):
        train(tiny_config(tmp_path / "run", delay=3, bound_every=2), notice=quiet)


def test_track_bounds_fields_are_checked(tmp_path):
    with pytest.raises(ValueError, match="bound_samples"):
        tiny_config(tmp_path, bound_every=1, bound_samples=1)
    with pytest.raises(ValueError, match="bound_every"):
        tiny_config(tmp_path, bound_every=-1)


def test_a_pinned_warm_up_seed_shares_the_initial_policy(tmp_path):
    from llm_runs.cache import initial_policy_key

    def key(**values):
        return initial_policy_key(
            tiny_config(tmp_path, sft_steps=5, **values).warmup_settings(), "cpu"
        )

    assert key(run_seed=1, sft_seed=0) == key(run_seed=0, sft_seed=0) == key(run_seed=0)
    assert key(run_seed=1) != key(run_seed=0)
