"""verl as users run it: the entry point alone, the trainers' modules, and a training step on a CPU.

Runs in `.venv-verl` (`make test-verl`; verl 0.9.x with what its V1 trainer imports); skipped
where verl is not installed. Each fresh-process test starts Python with no
`VERL_USE_EXTERNAL_MODULES` and no `GMC_VERL_*` variable: only the `verl.plugins` entry point of
the installed project is active.

What runs on the CPU here: the entry point, the trainer modules' imports and their binding of the
group step, the fully-async / one-step-off trainers' own advantage step
(`SeparateRayPPOTrainer._fit_compute_advantage`, with verl's rollout correction and RLOO advantage)
on a real `DataProto`, and verl's registered loss with a real `ActorConfig` and `agg_loss` on a
tiny Qwen3's log-probs, whose parameter gradient is compared with the core estimator's. What does
not: Ray worker groups, the FSDP/Megatron engines' `forward_backward_batch`, TransferQueue's
storage (the V1 trainer's `_compute_advantage` reads from it) and the vLLM/SGLang rollout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

verl = pytest.importorskip("verl")

from gmc_grpo.advantages import compute as compute_advantages  # noqa: E402
from gmc_grpo.estimators import coefficients, token_gradient_weights  # noqa: E402
from gmc_grpo.integrations import verl as gv  # noqa: E402
from gmc_grpo.integrations import verl_plugin  # noqa: E402

TRAINER_MODULES = {
    # the default trainer (trainer.use_v1=true) and its three variants
    "v1_base": "verl.trainer.ppo.v1.trainer_base",
    "v1_sync": "verl.trainer.ppo.v1.trainer_sync",
    "v1_separate_async": "verl.trainer.ppo.v1.trainer_separate_async",
    "v1_colocate_async": "verl.trainer.ppo.v1.trainer_colocate_async",
    # the fully-async and one-step-off-policy trainers (both SeparateRayPPOTrainer)
    "fully_async": "verl.experimental.fully_async_policy.fully_async_trainer",
    "one_step_off": "verl.experimental.one_step_off_policy.ray_trainer",
    # the entry points that validate the config
    "main_ppo": "verl.trainer.main_ppo",
    "one_step_off_main": "verl.experimental.one_step_off_policy.main_ppo",
}


def plugin_only_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "VERL_USE_EXTERNAL_MODULES" and not k.startswith("GMC_VERL_")
    }
    env.pop("VERL_USE_EXTERNAL_PLUGINS", None)  # verl's default: auto
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
    )
    return env


def run_fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        env=plugin_only_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_entry_point_is_declared_and_names_match():
    from importlib.metadata import entry_points

    points = {ep.name: ep.value for ep in entry_points(group="verl.plugins")}
    assert points.get("gmc") == "gmc_grpo.integrations.verl_plugin", points
    assert verl_plugin.LOAD_ERROR is None
    # the loss names come from the method registry (the trajectory-level specs)
    assert set(gv.loss_names()) >= {"gmc", "tic", "vcpo", "is"}


BINDING_CHECK = """
import importlib, inspect, json, sys
import verl
from verl.trainer.ppo import core_algos, rollout_corr_helper
from verl.utils import config as verl_config
from gmc_grpo.integrations import verl as gv
out = {"version": verl.__version__}
out["losses"] = {n: core_algos.get_policy_loss_fn(n) is gv.gmc_policy_loss for n in gv.loss_names()}
step = rollout_corr_helper.compute_rollout_correction_and_add_to_batch
out["helper_wrapped"] = hasattr(step, "__gmc_original__")
out["bypass_guarded"] = hasattr(rollout_corr_helper.apply_bypass_mode, "__gmc_original__")
modules = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
for key, name in MODULES.items():
    module = importlib.import_module(name)
    out[key] = {}
    if hasattr(module, "compute_rollout_correction_and_add_to_batch"):
        out[key]["binds_step"] = module.compute_rollout_correction_and_add_to_batch is step
    if hasattr(module, "validate_config"):
        out[key]["binds_check"] = module.validate_config is verl_config.validate_config and hasattr(
            module.validate_config, "__gmc_original__")
from verl.experimental.separation.ray_trainer import SeparateRayPPOTrainer
from verl.experimental.fully_async_policy.fully_async_trainer import FullyAsyncTrainer
from verl.experimental.one_step_off_policy.ray_trainer import OneStepOffRayTrainer
method = SeparateRayPPOTrainer._fit_compute_advantage
source = inspect.getsource(method)
out["separate_imports_at_call"] = (
    "from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch" in source)
# FullyAsyncTrainer is a Ray actor class: its Python class is __ray_actor_class__
out["fully_async_inherits"] = FullyAsyncTrainer.__ray_actor_class__._fit_compute_advantage is method
out["one_step_off_inherits"] = OneStepOffRayTrainer._fit_compute_advantage is method
print("RESULT" + json.dumps(out))
"""


def test_fresh_process_entry_point_alone_binds_every_trainer():
    code = f"MODULES = {TRAINER_MODULES!r}\n" + BINDING_CHECK
    result = run_fresh(code)
    assert result.returncode == 0, result.stderr[-4000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT"))
    out = json.loads(line[len("RESULT") :])
    assert all(out["losses"].values()) and len(out["losses"]) >= 4, out["losses"]
    assert out["helper_wrapped"] and out["bypass_guarded"]
    assert out["v1_base"] == {"binds_step": True}  # the from-import got the group step
    for key in ("main_ppo", "one_step_off_main"):
        assert out[key] == {"binds_check": True}, (key, out[key])
    # the separated trainers import the step from the helper when they run it, and inherit it
    assert (
        out["separate_imports_at_call"]
        and out["fully_async_inherits"]
        and out["one_step_off_inherits"]
    )


def test_a_failing_plugin_is_reported_where_the_user_sees_it():
    """verl logs plugin errors at debug level: ours logs at ERROR and the loss names the cause."""
    code = (
        "import sys\n"
        "sys.modules['gmc_grpo.logratio'] = None  # the adapter's import fails\n"
        "import verl\n"
        "from verl.trainer.ppo.core_algos import get_policy_loss_fn\n"
        "try:\n"
        "    get_policy_loss_fn('gmc')(None, None, None, None)\n"
        "except RuntimeError as e:\n"
        "    print('LOSS-ERROR', e)\n"
    )
    result = run_fresh(code)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "gmc-grpo's verl plugin failed to load" in result.stderr  # the ERROR log line
    assert (
        "LOSS-ERROR gmc-grpo's verl plugin failed to load (ModuleNotFoundError: import of gmc_grpo.logratio"
        in result.stdout
    )


# ----------------------------------------------------------------------------------------------
# A training step: verl's advantage step of the separated trainers, verl's loss, a tiny model.
# ----------------------------------------------------------------------------------------------

GROUP, GROUPS, PROMPT, RESPONSE = 4, 3, 3, 5
VOCAB = 11  # examples.tiny: 8 words and 3 special tokens


def tiny_model() -> torch.nn.Module:
    from examples.tiny import tiny_model as build
    from examples.tiny import tiny_tokenizer

    return build(tiny_tokenizer()).float()


def response_log_probs(model, input_ids) -> torch.Tensor:
    """`[N, RESPONSE]` log-probs of the response tokens (plain forward, no padding inside)."""
    logits = model(input_ids=input_ids).logits[:, PROMPT - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, input_ids[:, PROMPT:, None]).squeeze(-1)


def verl_config(method: str, threshold: float):
    from omegaconf import OmegaConf

    path = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    config = OmegaConf.load(path)
    overrides = [
        f"actor_rollout_ref.actor.policy_loss.loss_mode={method}",
        f"algorithm.rollout_correction.rollout_is={method}",
        f"algorithm.rollout_correction.rollout_is_threshold={threshold}",
        "algorithm.rollout_correction.bypass_mode=False",
        "algorithm.adv_estimator=rloo",
        "algorithm.use_kl_in_reward=False",
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm",
        f"actor_rollout_ref.actor.loss_scale_factor={RESPONSE}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        f"actor_rollout_ref.rollout.n={GROUP}",
    ]
    return OmegaConf.merge(config, OmegaConf.from_dotlist(overrides))


@pytest.mark.parametrize("method,threshold", [("gmc", 1.28), ("vcpo", 1.5)])
def test_separated_trainer_step_and_verl_loss_give_the_core_gradient(method, threshold):
    from types import SimpleNamespace

    from verl import DataProto
    from verl.experimental.separation.ray_trainer import SeparateRayPPOTrainer
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.utils.config import omega_conf_to_dataclass

    gv.activate()  # what the entry point did at `import verl`; idempotent
    config = verl_config(method, threshold)
    gv.check_loss_matches_step(config, {})
    model = tiny_model()
    gen = torch.Generator().manual_seed(1)
    n = GROUPS * GROUP
    input_ids = torch.randint(0, VOCAB, (n, PROMPT + RESPONSE), generator=gen)
    lengths = torch.randint(2, RESPONSE + 1, (n,), generator=gen)
    mask = (torch.arange(RESPONSE) < lengths[:, None]).float()
    with torch.no_grad():
        old = response_log_probs(model, input_ids)  # pi_old: the learner's parameters now
    rollout = old + 0.8 * torch.randn(old.shape, generator=gen)  # the engine's log-probs
    rewards = torch.randint(0, 3, (n,), generator=gen).float()
    scores = torch.zeros(n, RESPONSE)
    scores[torch.arange(n), lengths - 1] = rewards
    # verl reorders rows (balance_batch): shuffle, groups found by uid
    perm = torch.randperm(n, generator=gen)
    uids = np.array([f"prompt-{i // GROUP}" for i in range(n)], dtype=object)
    batch = DataProto.from_dict(
        tensors={
            "old_log_probs": old[perm],
            "rollout_log_probs": rollout[perm],
            "response_mask": mask[perm],
        },
        non_tensors={"uid": uids[perm.numpy()]},
    )
    trainer = SimpleNamespace(
        config=config,
        metrics={},
        timing_raw={},
        reward_tensor=scores[perm],
        reward_extra_infos_dict={},
    )
    batch = SeparateRayPPOTrainer._fit_compute_advantage(trainer, batch)
    assert "gmc/cap" in trainer.metrics and "gmc/ratio/capped_frac" in trainer.metrics

    # the trainer's coefficients and advantages are the core's, in the trainer's row order
    back = torch.argsort(perm)
    shape = (GROUPS, GROUP, RESPONSE)
    s = ((old - rollout) * mask).sum(-1).reshape(GROUPS, GROUP)
    eps = threshold - 1 if method == "gmc" else 0.28
    truncation = threshold if method == "vcpo" else 8.0
    want_c = coefficients(method, s, eps, truncation=truncation).reshape(-1)
    got_c = batch.batch[gv.COEFFICIENT_KEY][back].max(dim=-1).values
    torch.testing.assert_close(got_c, want_c.float(), rtol=1e-5, atol=1e-6)
    loo = compute_advantages(rewards.reshape(GROUPS, GROUP), "loo")
    torch.testing.assert_close(batch.batch["advantages"][back][:, 0], loo.reshape(-1))
    if method == "gmc":  # not vacuous: a group is capped
        assert trainer.metrics["gmc/ratio/capped_frac"] > 0

    # verl's loss (registry, ActorConfig, agg_loss with the global batch info the V1 loss sets)
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    actor.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=n, loss_scale_factor=RESPONSE
    )
    loss_fn = get_policy_loss_fn(actor.policy_loss.loss_mode)
    params = [p for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    log_prob = response_log_probs(model, input_ids[perm])
    loss, _ = loss_fn(
        old_log_prob=batch.batch["old_log_probs"],
        log_prob=log_prob,
        advantages=batch.batch["advantages"],
        response_mask=batch.batch["response_mask"].bool(),
        loss_agg_mode=actor.loss_agg_mode,
        config=actor,
        rollout_is_weights=batch.batch[gv.COEFFICIENT_KEY],
    )
    loss.backward()
    got = [p.grad.detach().clone() for p in params]

    model.zero_grad()
    current = response_log_probs(model, input_ids)
    psi = token_gradient_weights(
        method,
        current.detach().reshape(shape),
        rollout.reshape(shape),
        loo,
        mask.reshape(shape),
        eps=eps,
        truncation=truncation,
        max_length=RESPONSE,
    )
    (-(psi * current.reshape(shape)).sum()).backward()
    want = [p.grad.detach().clone() for p in params]
    scale = max(w.abs().max().item() for w in want)
    assert scale > 0
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6 * scale)
