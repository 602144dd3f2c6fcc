"""GMC-GRPO in TRL's asynchronous GRPO trainer (`trl.experimental.async_grpo`), stale samples kept.

On GPUs (TRL 1.16's layout: a vLLM server on its own GPU(s), the trainer on the others):

    CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen3-1.7B-Base &
    CUDA_VISIBLE_DEVICES=1 python examples/trl_async_gmc.py --model Qwen/Qwen3-1.7B-Base \
        --max-staleness 16 --output-dir runs/trl_async_gmc

On a CPU, with nothing downloaded (a tiny random Qwen3, the in-process rollout worker of
`gmc_grpo.integrations.trl_async_local` lagging 0 or 6 versions behind; it checks the plumbing,
it learns nothing):

    python examples/trl_async_gmc.py --local-tiny --max-steps 6 --output-dir /tmp/trl_async_gmc

Each trained sample's lag, log-ratio and coefficient go to `<output-dir>/gmc_samples.jsonl`; the
metrics `gmc/lag_max`, `gmc/stale_frac` and `gmc/ratio/capped_frac` show stale samples kept and
capped where TRL's default (`max_staleness=4`) would have dropped them.
"""

from __future__ import annotations

import argparse
import os
import warnings

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def math_reward(completions: list, solution: list, **_: object) -> list[float]:
    """1.0 when the completion's last number equals the reference answer (`solution` column)."""
    import re

    rewards = []
    for completion, answer in zip(completions, solution, strict=True):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
        rewards.append(float(bool(numbers) and numbers[-1] == str(answer).strip()))
    return rewards


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="model id or directory (GPU mode)")
    parser.add_argument(
        "--dataset", default="openai/gsm8k", help="prompt/solution dataset (GPU mode)"
    )
    parser.add_argument(
        "--local-tiny", action="store_true", help="CPU: tiny model, in-process worker"
    )
    parser.add_argument("--method", default="gmc", choices=["gmc", "tic", "vcpo", "is"])
    parser.add_argument("--eps", type=float, default=0.28, help="cap 1 + eps (Appendix B.1)")
    parser.add_argument(
        "--max-staleness", type=int, default=16, help="TRL drops samples older than this"
    )
    parser.add_argument("--num-generations", type=int, default=4, help="G")
    parser.add_argument("--per-device-batch", type=int, default=8, help="a multiple of G")
    parser.add_argument("--max-completion-length", type=int, default=512)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument("--output-dir", default="runs/trl_async_gmc")
    return parser.parse_args(argv)


def build_trainer(args: argparse.Namespace):
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from gmc_grpo.integrations.trl_async import GMCAsyncConfig, GMCAsyncGRPOTrainer
    from gmc_grpo.losses import PolicyLossConfig

    local = args.local_tiny
    config = AsyncGRPOConfig(
        output_dir=args.output_dir,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.per_device_batch,
        max_completion_length=6 if local else args.max_completion_length,
        max_staleness=args.max_staleness,  # GMC caps stale samples instead of dropping them
        max_steps=args.max_steps,
        learning_rate=0.05 if local else args.learning_rate,
        token_budget=0,  # rows of whole groups
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        **(dict(use_cpu=True, bf16=False, gradient_checkpointing=False) if local else {}),
    )
    gmc = GMCAsyncConfig(loss=PolicyLossConfig(method=args.method, eps=args.eps))
    if not local:
        from datasets import load_dataset

        data = load_dataset(args.dataset, "main", split="train")
        data = data.map(
            lambda row: {"prompt": row["question"], "solution": row["answer"].split("####")[-1]}
        )
        return GMCAsyncGRPOTrainer(
            model=args.model,
            reward_funcs=math_reward,
            args=config,
            train_dataset=data,
            gmc_config=gmc,
        )

    from datasets import Dataset

    from examples.tiny import PROMPTS, count_a, save_tiny, tiny_model, tiny_tokenizer
    from gmc_grpo.integrations.trl_async_local import LocalRolloutWorker, LocalWeightTransfer

    model_dir = save_tiny(os.path.join(args.output_dir, "tiny_model"))
    tokenizer = tiny_tokenizer()
    worker = LocalRolloutWorker(
        tiny_model(tokenizer),
        tokenizer,
        PROMPTS,
        count_a,
        num_generations=args.num_generations,
        max_completion_length=config.max_completion_length,
        lag=(0, 6),  # every other group six versions stale: TRL's default would drop it
    )
    return GMCAsyncGRPOTrainer(
        model=str(model_dir),
        reward_funcs=count_a,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tokenizer,
        rollout_worker=worker,
        weight_transfer=LocalWeightTransfer(worker),
        gmc_config=gmc,
    )


def main(argv: list[str] | None = None):
    args = parse_args(argv)
    if not args.local_tiny and not args.model:
        raise SystemExit("give --model (GPU, with a vLLM server) or --local-tiny (CPU)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = build_trainer(args)
        trainer.train()
    return trainer


if __name__ == "__main__":
    main()
