"""GMC-GRPO in TRL's asynchronous GRPO trainer (`trl.experimental.async_grpo`), stale samples kept.

On GPUs (TRL 1.16's layout: a vLLM server on its own GPU(s), the trainer on the others):

    CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen3-1.7B-Base &
    CUDA_VISIBLE_DEVICES=1 python examples/trl_async_gmc.py --model Qwen/Qwen3-1.7B-Base \
        --max-staleness 16 --output-dir runs/trl_async_gmc

On a CPU, with nothing downloaded (a tiny random Qwen3, the in-process rollout worker of
`gmc_grpo.integrations.trl_async_local` lagging 0 or 6 versions behind; it checks the plumbing,
it learns nothing):

    python examples/trl_async_gmc.py --tiny --output-dir /tmp/trl_async_gmc

`--tiny` trains 8 steps by default: the lagging groups' lag grows by one a step (a version must
be published before it can lag behind it) up to 6, so steps 7 and 8 train samples 5 and 6
versions stale, which TRL's default `max_staleness=4` would have dropped. Written to
`--output-dir`: `gmc_samples.jsonl`, one line per trained sample (the step that trained it, as in
TRL's logged rows; its lag, log-ratio and coefficient), and `log_history.jsonl`, TRL's logged
rows, whose `gmc/lag_mean`, `gmc/lag_max`, `gmc/stale_frac` (lag above 4) describe the samples
trained at that step and `gmc/ratio/capped_frac` how many were capped. At the end the script prints how many stale samples were trained. Run it from
anywhere in a clone (`pip install -e .` and `trl` installed, or the project's `make venv`).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
if __package__ in (None, ""):  # run as a script: the clone's root on the path (`examples.tiny`)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TINY_STEPS = 8  # --tiny's default --max-steps: lags 5, 6 (> TRL's max_staleness 4) at steps 7, 8


def math_reward(completions: list, solution: list, **_: object) -> list[float]:
    """1.0 when the completion's last number equals the reference answer (`solution` column)."""
    import re

    rewards = []
    for completion, answer in zip(completions, solution, strict=True):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
        rewards.append(float(bool(numbers) and numbers[-1] == str(answer).strip()))
    return rewards


def write_log_history(trainer, output_dir: str | Path) -> Path:
    """TRL's logged rows (one per step, with the `gmc/*` metrics) to `output_dir/log_history.jsonl`."""
    import json

    path = Path(output_dir) / "log_history.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in trainer.state.log_history:
            handle.write(json.dumps(row) + "\n")
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from gmc_grpo.defaults import PAPER_EPS

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="model id or directory (GPU mode)")
    parser.add_argument(
        "--dataset", default="openai/gsm8k", help="prompt/solution dataset (GPU mode)"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="CPU: tiny model built in code, in-process worker"
    )
    parser.add_argument("--method", default="gmc", choices=["gmc", "tic", "vcpo", "is"])
    parser.add_argument("--eps", type=float, default=PAPER_EPS, help="cap 1 + eps (Appendix B.1)")
    parser.add_argument(
        "--max-staleness", type=int, default=16, help="TRL drops samples older than this"
    )
    parser.add_argument("--num-generations", type=int, default=4, help="G")
    parser.add_argument("--per-device-batch", type=int, default=8, help="a multiple of G")
    parser.add_argument("--max-completion-length", type=int, default=512)
    parser.add_argument(
        "--max-steps", type=int, default=None, help=f"default 100; {TINY_STEPS} with --tiny"
    )
    parser.add_argument("--learning-rate", type=float, default=1e-6)
    parser.add_argument(
        "--output-dir", default="runs/trl_async_gmc", help="gmc_samples.jsonl (and the tiny model)"
    )
    args = parser.parse_args(argv)
    if args.max_steps is None:
        args.max_steps = TINY_STEPS if args.tiny else 100
    return args


def build_trainer(args: argparse.Namespace):
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from gmc_grpo.integrations.trl_async import GMCAsyncConfig, GMCAsyncGRPOTrainer
    from gmc_grpo.losses import PolicyLossConfig

    local = args.tiny
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


def stale_summary(path: str | Path) -> str:
    """One line: how many trained samples (of `gmc_samples.jsonl` at `path`) TRL's default
    `max_staleness` would have dropped, their largest lag and mean coefficient."""
    from gmc_grpo.integrations.trl_async import TRL_DEFAULT_MAX_STALENESS, read_sample_log

    records = read_sample_log(str(path))
    stale = [r for r in records if r["lag"] > TRL_DEFAULT_MAX_STALENESS]
    if not stale:
        return (
            f"no trained sample had a lag above {TRL_DEFAULT_MAX_STALENESS} "
            f"({len(records)} samples; train more steps)"
        )
    mean_coef = sum(r["coefficient"] for r in stale) / len(stale)
    return (
        f"trained {len(stale)} of {len(records)} samples with a lag above TRL's default "
        f"max_staleness={TRL_DEFAULT_MAX_STALENESS} (largest lag {max(r['lag'] for r in stale)}, "
        f"first at step {min(r['step'] for r in stale)}, mean coefficient {mean_coef:.3f})"
    )


def main(argv: list[str] | None = None):
    args = parse_args(argv)
    if not args.tiny and not args.model:
        print(
            "trl_async_gmc: give --model (GPU, with a vLLM server) or --tiny (CPU)", file=sys.stderr
        )
        raise SystemExit(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = build_trainer(args)
        trainer.train()
    write_log_history(trainer, args.output_dir)
    from gmc_grpo.integrations.trl_async import SAMPLE_LOG

    samples = Path(args.output_dir) / SAMPLE_LOG
    if samples.exists():
        print(stale_summary(samples))
    print(
        f"wrote {SAMPLE_LOG} (one line per trained sample) and log_history.jsonl (one row per "
        f"step) to {args.output_dir}"
    )
    return trainer


if __name__ == "__main__":
    main()
