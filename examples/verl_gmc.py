"""GMC-GRPO in verl 0.9: the overrides that switch it on, and a check of them against verl's schema.

After `pip install -e ".[verl]"` in a clone (the `verl.plugins` entry point registers the losses in every
verl process, no environment variable), a training run is verl's own command plus these
overrides; print them, or run verl with them:

    python examples/verl_gmc.py --print                       # the overrides, one per line
    python examples/verl_gmc.py --run data.train_files=... data.val_files=... \
        actor_rollout_ref.model.path=Qwen/Qwen3-1.7B-Base     # python -m verl.trainer.main_ppo ...
    python examples/verl_gmc.py --check                       # CPU: compose verl's config with them

`--check` composes verl's own `ppo_trainer` config with Hydra and the overrides, builds verl's
`ActorConfig` and `AlgoConfig` from it and runs the adapter's loss/step consistency check: what a
CPU can verify of a verl launch (the training itself needs GPUs, Ray and vLLM/SGLang).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the clone's root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gmc_grpo.defaults import PAPER_EPS, VCPO_TRUNCATION  # noqa: E402
from gmc_grpo.methods import get_method  # noqa: E402


def gmc_overrides(
    method: str = "gmc",
    cap: float = 1.0 + PAPER_EPS,
    max_response_length: int = 4096,
    train_batch_size: int = 128,
    group_size: int = 8,
) -> list[str]:
    """Hydra overrides for `method` (`gmc`, `tic`, `vcpo`, `is`).

    cap: `rollout_is_threshold`, the cap `1 + eps` for gmc/tic (1.28: eps = 0.28, Appendix B.1),
        the truncation for vcpo (8).
    max_response_length: `T` of the paper's `1/(T B G)` (verl's `loss_scale_factor`).
    train_batch_size: prompts per step; one optimizer step per batch (the paper's setting).
    """
    return [
        # the switch: GMC's group step and its loss
        f"algorithm.rollout_correction.rollout_is={method}",
        f"algorithm.rollout_correction.rollout_is_threshold={cap}",
        f"actor_rollout_ref.actor.policy_loss.loss_mode={method}",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "algorithm.rollout_correction.bypass_mode=False",
        # the paper's setting (Appendix B.1): leave-one-out advantages, 1/(T B G), no KL, one step
        "algorithm.adv_estimator=rloo",
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm",
        f"actor_rollout_ref.actor.loss_scale_factor={max_response_length}",
        f"data.max_response_length={max_response_length}",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "algorithm.use_kl_in_reward=False",
        "actor_rollout_ref.actor.ppo_epochs=1",
        f"data.train_batch_size={train_batch_size}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={train_batch_size}",
        f"actor_rollout_ref.rollout.n={group_size}",
    ]


def check(overrides: list[str]) -> dict:
    """Compose verl's `ppo_trainer` config with `overrides` and validate what a CPU can."""
    import verl
    from hydra import compose, initialize_config_dir
    from verl.utils.config import omega_conf_to_dataclass

    from gmc_grpo.integrations.verl import check_loss_matches_step, resolve_method

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    extra = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4"]
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(config_name="ppo_trainer", overrides=overrides + extra)
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    algorithm = omega_conf_to_dataclass(config.algorithm)
    check_loss_matches_step(config)
    method, eps, truncation = resolve_method(config.algorithm.rollout_correction, {})
    return {
        "verl": verl.__version__,
        "loss_mode": actor.policy_loss.loss_mode,
        "rollout_is": algorithm.rollout_correction.get("rollout_is"),
        "method": method,
        "eps": eps,
        "truncation": truncation,
        "loss_agg_mode": actor.loss_agg_mode,
        "adv_estimator": str(algorithm.adv_estimator),
    }


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--print", action="store_true", help="print the overrides")
    mode.add_argument("--check", action="store_true", help="compose verl's config with them (CPU)")
    mode.add_argument("--run", action="store_true", help="run verl.trainer.main_ppo with them")
    parser.add_argument("--method", default="gmc", choices=["gmc", "tic", "vcpo", "is"])
    parser.add_argument(
        "--cap", type=float, default=None, help="1 + eps (gmc/tic) or the truncation (vcpo)"
    )
    parser.add_argument("--max-response-length", type=int, default=4096)
    args, rest = parser.parse_known_args(argv)
    if args.cap is not None:
        cap = args.cap
    else:  # the spec says what the threshold is: VCPO's truncation c, else the cap 1 + eps
        cap = VCPO_TRUNCATION if get_method(args.method).uses_truncation else 1.0 + PAPER_EPS
    overrides = gmc_overrides(args.method, cap, args.max_response_length)
    if args.print:
        print("\n".join(overrides))
        return None
    if args.check:
        result = check(overrides + rest)
        print(result)
        return result
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides, *rest]
    raise SystemExit(subprocess.call(command))


if __name__ == "__main__":
    main()
