"""GMC-GRPO in TRL's synchronous `GRPOTrainer` (`gmc_grpo.integrations.trl.GMCGRPOTrainer`).

On GPUs, with vLLM generating (colocated):

    python examples/trl_sync_gmc.py --model Qwen/Qwen3-1.7B-Base --use-vllm --output-dir runs/trl_gmc

On a CPU, nothing downloaded (a tiny random Qwen3, transformers' generate; it checks the
plumbing, it learns nothing):

    python examples/trl_sync_gmc.py --tiny --max-steps 4 --output-dir /tmp/trl_gmc

The trained model and `log_history.jsonl` (TRL's logged rows, one per step, with the `gmc/*`
metrics) are written to `--output-dir`. Run it from anywhere in a clone (`pip install -e .` and
`trl` installed, or the project's `make venv`).

`--steps-per-generation` above the gradient-accumulation steps makes later micro-batches of a
generation one or more optimizer steps stale: the lag is at most
`steps_per_generation x num_iterations` here (use the async example for real staleness).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the clone's root on the path (`examples.tiny`)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from gmc_grpo.defaults import PAPER_EPS

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="model id or directory")
    parser.add_argument("--tiny", action="store_true", help="CPU: a tiny model built in code")
    parser.add_argument("--use-vllm", action="store_true", help="generate with vLLM (colocated)")
    parser.add_argument("--method", default="gmc", choices=["gmc", "tic", "vcpo", "is"])
    parser.add_argument("--eps", type=float, default=PAPER_EPS, help="cap 1 + eps (Appendix B.1)")
    parser.add_argument("--num-generations", type=int, default=4, help="G")
    parser.add_argument("--per-device-batch", type=int, default=8, help="a multiple of G")
    parser.add_argument("--steps-per-generation", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=512)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument(
        "--output-dir", default="runs/trl_gmc", help="the trained model and log_history.jsonl"
    )
    return parser.parse_args(argv)


def build_trainer(args: argparse.Namespace):
    from datasets import Dataset
    from trl import GRPOConfig

    from gmc_grpo.integrations.trl import GMCGRPOTrainer, GMCTRLConfig
    from gmc_grpo.losses import PolicyLossConfig

    tiny = args.tiny
    config = GRPOConfig(
        output_dir=args.output_dir,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.per_device_batch,  # must be a multiple of G
        steps_per_generation=args.steps_per_generation,
        max_completion_length=6 if tiny else args.max_completion_length,
        scale_rewards="none",  # GMC/TIC/IS use leave-one-out advantages (B.1)
        beta=0.0,
        max_steps=args.max_steps,
        learning_rate=0.1 if tiny else args.learning_rate,
        use_vllm=args.use_vllm,
        vllm_importance_sampling_correction=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        **(dict(use_cpu=True, bf16=False, disable_tqdm=True) if tiny else {}),
    )
    gmc = GMCTRLConfig(loss=PolicyLossConfig(method=args.method, eps=args.eps))
    if tiny:
        from examples.tiny import PROMPTS, count_a, tiny_model, tiny_tokenizer

        tokenizer = tiny_tokenizer()
        return GMCGRPOTrainer(
            model=tiny_model(tokenizer),
            reward_funcs=count_a,
            args=config,
            train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
            processing_class=tokenizer,
            gmc_config=gmc,
        )
    from datasets import load_dataset

    from examples.trl_async_gmc import math_reward

    data = load_dataset("openai/gsm8k", "main", split="train")
    data = data.map(
        lambda row: {"prompt": row["question"], "solution": row["answer"].split("####")[-1]}
    )
    return GMCGRPOTrainer(
        model=args.model, reward_funcs=math_reward, args=config, train_dataset=data, gmc_config=gmc
    )


def write_outputs(trainer, output_dir: str | Path) -> Path:
    """Save the trained model and TRL's logged rows (`log_history.jsonl`) under `output_dir`."""
    from examples.trl_async_gmc import write_log_history

    trainer.save_model(str(output_dir))
    return write_log_history(trainer, output_dir).parent


def main(argv: list[str] | None = None):
    args = parse_args(argv)
    if not args.tiny and not args.model:
        print(
            "trl_sync_gmc: give --model (a model id or directory) or --tiny (CPU)", file=sys.stderr
        )
        raise SystemExit(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = build_trainer(args)
        trainer.train()
        path = write_outputs(trainer, args.output_dir)
    print(f"wrote the model and log_history.jsonl ({trainer.state.global_step} steps) to {path}")
    return trainer


if __name__ == "__main__":
    main()
