"""`gmc-grpo llm train`: the asynchronous GRPO-family trainer of Appendix B.1.

The loop (one process; rollouts and learner take turns):

1. The staleness schedule (`gmc_grpo.staleness`) asks for a batch from the current policy when it
   needs one: `rollout_prompts` prompts x `group_size` responses from the rollout engine
   (temperature 1.0, top-p 1.0), which records each token's sampling log-prob (the behavior
   log-probs). The engine is given the learner's weights before every generation, so every new
   batch comes from the current policy version. Rewards come from the verifier.
2. The schedule hands back the batch to consume (fixed delay `D`: the one generated `D` updates
   ago; length-coupled: the earliest ready one) with its behavior version.
3. The batch is split into `inner_steps` minibatches of whole groups; each gives one optimizer
   update (`llm_runs.learner.Learner.step`) with the selected method.
4. One row per update goes to `RUN/metrics.jsonl`; evaluations to `RUN/evals.jsonl`;
   checkpoints to `RUN/checkpoints/step_<N>/` (`llm_runs.checkpoint`).

**Which log-probs the ratio uses.** By default (`behavior_logprobs="engine"`) the ratio's `mu` is
the engine's per-token sampling log-prob recorded at generation time: the exact behavior policy
that generated the rollout (Appendix B.1). `behavior_logprobs="learner"` uses the learner's own
log-probs of the stored tokens under the behavior version instead (one extra forward pass per
batch at generation time); the two differ by the train-inference mismatch (kernels, dtype),
which is logged as `mismatch/logprob_abs_mean` whenever the learner's log-probs at the behavior
version are known (always with `learner_logprobs_at_generation`, and for free on updates with
lag 0, whose current policy is the behavior policy).

**Simulated asynchrony: time unit of `L`.** `LengthCoupledSchedule` (core) launches one batch per
clock tick and makes it visible at `tau_launch + lambda L`; here `L` is the batch's mean response
length divided by `length_unit_tokens` (default 100 tokens). In steady state about one batch is
launched per update, so a batch's lag is close to `lambda L = 28 L`.

**Calibration (our inference, not stated in the paper).** The paper reports mean lags of about
160 (Qwen3-1.7B) and 140 (4B, 8B) with `lambda = 28`. The run's mean lag is below `28 * mean L`
because the first ~`28 L` updates consume the warm-up batches of policy 0 with lags ramping up
from 0 (and short batches overtake long ones): over 800 updates a constant `L = 5.7` gives 143.1
(`llm_runs.calibration`, measured). With batch-mean lengths that vary little, a mean lag of 160
needs `L` ~ 6.46 and 140 needs `L` ~ 5.54, i.e. mean responses of about 650 and 550 tokens with
our default unit of 100 tokens. That unit is a guess: to reproduce the paper's lags, take the
`response/length_mean` values of a short run of your model and call
`llm_runs.calibration.calibrate_length_unit(lengths, 160)` (1.7B) or `(lengths, 140)` (4B, 8B),
then set `length_unit_tokens` to the result; the realised lag of every update is logged
(`staleness/lag`), so the calibration can be checked.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from gmc_grpo.losses import PAPER_ADVANTAGE, PolicyLossConfig
from gmc_grpo.records import METRIC_NAMES, RunWriter, read_jsonl
from gmc_grpo.staleness import FixedDelaySchedule, LengthCoupledSchedule
from llm_runs import checkpoint as ckpt
from llm_runs.learner import (
    LEARNER_METHODS,
    METHOD_LOSS,
    CosineWithWarmup,
    Learner,
    LearnerSettings,
    TrajectoryBatch,
    batch_logprobs,
    make_optimizer,
    warmup_steps_for,
)

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
SCHEDULES = ("fixed_delay", "length_coupled")
TASKS = ("math", "arithmetic")
REWARDS = ("math_verify", "exact")
ENGINES = ("hf", "vllm")
LAYOUTS = ("one_gpu", "two_gpu")
DTYPES = ("auto", "float32", "bfloat16", "float16")
LOGGERS = ("tensorboard", "wandb")


@dataclass
class TrainConfig:
    """Everything `gmc-grpo llm train` needs. Paper values are marked with their source.

    Run and model
    - out: run directory (`config.json`, `metrics.jsonl`, `evals.jsonl`, `checkpoints/`,
      `summary.json`).
    - model: local Hugging Face model directory of the initial policy (e.g. Qwen3-1.7B-Base,
      B.1); nothing is downloaded. Must be None when `tiny_model` is set.
    - tiny_model: build a tiny random-init Qwen3 (`llm_runs.tiny.build_tiny_qwen3` with these
      keyword arguments) into `out/base_model` instead of reading `model` (CPU demonstration).
    - seed: seed of the data order, the rollouts' sampling streams and the warm-up.
    - resume: continue from the newest checkpoint in `out/checkpoints/` (error when none).

    Task and data
    - task: "math" (MATH train, the two-shot prompt and the math-verify scorer, B.1) or
      "arithmetic" (`llm_runs.arithmetic`, the CPU demonstration).
    - data_dir: local folder of the datasets (`gmc-grpo llm data`); None reads the hub cache.
    - reward: "math_verify" (`llm_runs.scoring.Scorer`) or "exact" (normalised string match;
      exact for integer answers).
    - arithmetic: keyword arguments of `llm_runs.arithmetic.ArithmeticTask`.
    - sft_steps, sft_lr, sft_batch_size: supervised warm-up on the arithmetic task before RL
      (0 steps: none). Only for task "arithmetic".

    Batches and staleness
    - rollout_prompts: prompts per rollout batch (8, B.1; 32 for D = 0 with inner_steps = 4).
    - group_size: responses per prompt `G` (8, B.1; 4/8/32 in the group-size study, B.2.2).
    - inner_steps: optimizer updates per rollout batch, each on `rollout_prompts / inner_steps`
      groups (1, B.1; 4 for D = 0).
    - groups_per_micro: groups per micro-batch of the learner (memory only; the gradient is the
      full-minibatch one).
    - total_steps: optimizer updates (800, B.1 evaluates checkpoint 800).
    - schedule: "fixed_delay" (FIFO of `delay` batches from the initial policy, B.1) or
      "length_coupled" (`tau_ready = tau_launch + lam * L`, B.1).
    - delay: `D` of the fixed-delay suite ({0, 32, 64, 128, 256, 512}, B.1).
    - lam: `lambda` of the simulated pipeline (28, B.1).
    - max_launches: cap of launches per warm-up or refill (400, B.1).
    - length_unit_tokens: tokens per unit of `L` (our calibration; see the module docstring).

    Sampling
    - temperature, top_p: 1.0 and 1.0 (B.1). With other values the engine's log-probs are those
      of the tempered / truncated distribution actually sampled from, so with
      `behavior_logprobs="engine"` the ratio also corrects for the temperature and top-p.
    - max_prompt_tokens, max_completion_tokens: 1,024 and 4,096 (B.1).

    Method
    - method: one of grpo, tic, gmc, vcpo, gac, a3po.
    - advantage: advantage kind; None uses the paper's per method (`losses.PAPER_ADVANTAGE`:
      centered for GRPO and GAC, leave-one-out for TIC/GMC, B.1; VCPO uses its baseline).
    - eps_high: cap `1 + eps_high` of TIC and GMC (0.28, B.1).
    - clip_eps: two-sided token clip of GRPO, GAC's base loss and A-3PO (0.2, B.1; A-3PO's
      value is our choice).
    - vcpo_truncation: VCPO's sequence-level truncation (8, VCPO's code).
    - vcpo_rho_ref: VCPO's reference ESS (1, VCPO's code).
    - gac_low, gac_high: GAC's cosine thresholds (0.05, 0.30, B.1).
    - a3po_mask_threshold: A-3PO masks tokens with `pi_prox / mu` above it (5, AReaL).
    - behavior_logprobs: "engine" (default, the exact behavior policy, B.1) or "learner".
    - learner_logprobs_at_generation: also compute the learner's log-probs at generation time
      (one forward per batch) so the mismatch is logged for every batch.

    Optimisation (all B.1)
    - lr: 1e-6. betas: (0.9, 0.999). weight_decay: 0. warmup_ratio: 0.03 (cosine schedule).
    - grad_clip: 1.0 (gradient-norm clip).
    - optimizer: "auto" (8-bit AdamW via bitsandbytes on CUDA, else torch AdamW with a notice),
      "adamw8bit" or "adamw".

    Hardware
    - engine: "vllm" (B.1) or "hf" (`llm_runs.engines.hf.HFEngine`, CPU demonstration).
    - layout: "one_gpu" (rollouts and learner take turns on one device, B.1 for 1.7B) or
      "two_gpu" (engine on `engine_device`, learner on `learner_device`, B.1 for 4B). The loop
      is sequential in both; B.1 notes the overlap does not change the sample order.
    - learner_device, engine_device: "auto" (cuda:0 / cpu; two_gpu: cuda:0 learner, cuda:1
      engine) or a torch device string.
    - learner_dtype: "auto" (bfloat16 on CUDA, float32 on CPU) or a dtype name.
    - engine_dtype: "auto" (vLLM: bfloat16, B.1; HF: the learner's dtype) or a dtype name.
    - gradient_checkpointing: activation checkpointing of the decoder layers.
    - logit_chunk: positions per chunk of the log-softmax over the vocabulary.
    - packed_sequences: pack each micro-batch's real tokens into one sequence, attention kept
      within each trajectory (`llm_runs.packing`; default); False pads (the reference path).
    - micro_batch_tokens: 0 (default): micro-batches of `groups_per_micro` groups; > 0:
      consecutive whole groups up to this many real (prompt + response) tokens each.
    - vcpo_norms: VCPO's per-trajectory score norms: "in_backward" (default, read off each
      micro-batch's own backward, `llm_runs.sample_norms`; needs packed_sequences) or
      "per_trajectory" (one extra backward per trajectory).
    - vllm_gpu_memory_utilization, vllm_kv_cache_memory_bytes: passed to `VLLMEngine`.

    Evaluation, logging, checkpoints
    - eval_every: evaluate every N updates (and at 0 and at the end); 0 disables.
    - eval_benchmarks: benchmarks of the periodic evaluation (MATH500 for Figure 2's Pass@1;
      task "arithmetic" uses its held-out problems).
    - eval_limit: evaluate only the first N problems (None: all).
    - eval_samples: samples per problem for sampled Pass@1 (16, B.1).
    - eval_decodings: "greedy" and/or "sampled".
    - checkpoint_every: write a checkpoint every N updates (0: only at the end).
    - keep_checkpoints: newest checkpoints kept.
    - log_to: extra metric sinks, "tensorboard" and/or "wandb" (must be installed).
    - wandb_project: W&B project when "wandb" is in `log_to`.
    - progress: show a progress bar.
    """

    out: str
    model: str | None = None
    tiny_model: dict[str, Any] | None = None
    seed: int = 0
    resume: bool = False
    task: str = "math"
    data_dir: str | None = None
    reward: str = "math_verify"
    arithmetic: dict[str, Any] = field(default_factory=dict)
    sft_steps: int = 0
    sft_lr: float = 3e-3
    sft_batch_size: int = 32
    rollout_prompts: int = 8
    group_size: int = 8
    inner_steps: int = 1
    groups_per_micro: int = 1
    total_steps: int = 800
    schedule: str = "fixed_delay"
    delay: int = 0
    lam: float = 28.0
    max_launches: int = 400
    length_unit_tokens: float = 100.0
    temperature: float = 1.0
    top_p: float = 1.0
    max_prompt_tokens: int = 1024
    max_completion_tokens: int = 4096
    method: str = "gmc"
    advantage: str | None = None
    eps_high: float = 0.28
    clip_eps: float = 0.2
    vcpo_truncation: float = 8.0
    vcpo_rho_ref: float = 1.0
    gac_low: float = 0.05
    gac_high: float = 0.30
    a3po_mask_threshold: float = 5.0
    behavior_logprobs: str = "engine"
    learner_logprobs_at_generation: bool = False
    lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    warmup_ratio: float = 0.03
    grad_clip: float = 1.0
    optimizer: str = "auto"
    engine: str = "vllm"
    layout: str = "one_gpu"
    learner_device: str = "auto"
    engine_device: str = "auto"
    learner_dtype: str = "auto"
    engine_dtype: str = "auto"
    gradient_checkpointing: bool = True
    logit_chunk: int = 4096
    packed_sequences: bool = True
    micro_batch_tokens: int = 0
    vcpo_norms: str = "in_backward"
    vllm_gpu_memory_utilization: float = 0.35
    vllm_kv_cache_memory_bytes: int | None = None
    eval_every: int = 0
    eval_benchmarks: tuple[str, ...] = ("math500",)
    eval_limit: int | None = None
    eval_samples: int = 16
    eval_decodings: tuple[str, ...] = ("greedy", "sampled")
    checkpoint_every: int = 0
    keep_checkpoints: int = 2
    log_to: tuple[str, ...] = ()
    wandb_project: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)  # type: ignore[assignment]
        self.eval_benchmarks = tuple(self.eval_benchmarks)
        self.eval_decodings = tuple(self.eval_decodings)
        self.log_to = tuple(self.log_to)

        def bad(name: str, rule: str) -> ValueError:
            return ValueError(f"TrainConfig.{name} {rule}, got {getattr(self, name)!r}")

        if not self.out:
            raise bad("out", "must name the run directory")
        if (self.model is None) == (self.tiny_model is None):
            raise ValueError(
                "TrainConfig: give exactly one of model (a local model directory) and tiny_model "
                f"(build a tiny Qwen3), got model={self.model!r}, tiny_model={self.tiny_model!r}"
            )
        if self.method not in LEARNER_METHODS:
            raise bad("method", f"must be one of {', '.join(LEARNER_METHODS)}")
        if self.task not in TASKS:
            raise bad("task", f"must be one of {TASKS}")
        if self.reward not in REWARDS:
            raise bad("reward", f"must be one of {REWARDS}")
        if self.sft_steps < 0:
            raise bad("sft_steps", "must be >= 0")
        if self.sft_steps and self.task != "arithmetic":
            raise bad("sft_steps", "must be 0 unless task is 'arithmetic' (the warm-up task)")
        if self.sft_batch_size < 1 or not self.sft_lr > 0:
            raise ValueError(
                f"TrainConfig.sft_batch_size must be >= 1 and sft_lr > 0, got "
                f"{self.sft_batch_size} and {self.sft_lr}"
            )
        if self.group_size < 2:
            raise bad("group_size", "must be >= 2 (group-relative advantages need G >= 2)")
        if self.rollout_prompts < 1:
            raise bad("rollout_prompts", "must be >= 1")
        if self.inner_steps < 1:
            raise bad("inner_steps", "must be >= 1")
        if self.rollout_prompts % self.inner_steps:
            raise ValueError(
                f"TrainConfig: a rollout batch of rollout_prompts={self.rollout_prompts} groups "
                f"is not divisible into inner_steps={self.inner_steps} minibatches"
            )
        minibatch = self.rollout_prompts // self.inner_steps
        if self.groups_per_micro < 1 or minibatch % self.groups_per_micro:
            raise ValueError(
                f"TrainConfig.groups_per_micro={self.groups_per_micro} must be >= 1 and divide the "
                f"minibatch of {minibatch} groups (rollout_prompts / inner_steps)"
            )
        if self.total_steps < 1 or self.total_steps % self.inner_steps:
            raise ValueError(
                f"TrainConfig.total_steps={self.total_steps} must be >= 1 and a multiple of "
                f"inner_steps={self.inner_steps} (whole rollout batches)"
            )
        if self.schedule not in SCHEDULES:
            raise bad("schedule", f"must be one of {SCHEDULES}")
        if self.delay < 0:
            raise bad("delay", "must be >= 0")
        if self.schedule == "length_coupled" and self.delay:
            raise bad("delay", "must be 0 with schedule 'length_coupled' (its lag is simulated)")
        if not self.lam >= 0:
            raise bad("lam", "must be >= 0")
        if self.max_launches < 1:
            raise bad("max_launches", "must be >= 1")
        if not self.length_unit_tokens > 0:
            raise bad("length_unit_tokens", "must be > 0")
        if not self.temperature > 0:
            raise bad("temperature", "must be > 0 (rollouts are sampled)")
        if not 0 < self.top_p <= 1:
            raise bad("top_p", "must be in (0, 1]")
        if self.max_prompt_tokens < 1 or self.max_completion_tokens < 1:
            raise ValueError(
                "TrainConfig.max_prompt_tokens and max_completion_tokens must be >= 1, got "
                f"{self.max_prompt_tokens} and {self.max_completion_tokens}"
            )
        if self.advantage is not None and self.advantage not in ("centered", "loo", "std"):
            raise bad("advantage", "must be None, 'centered', 'loo' or 'std'")
        if self.advantage is not None and self.method == "vcpo":
            raise bad("advantage", "must be None for vcpo (it uses its own baseline)")
        for name in ("eps_high", "vcpo_truncation", "vcpo_rho_ref", "a3po_mask_threshold"):
            if not getattr(self, name) > 0:
                raise bad(name, "must be > 0")
        if not 0 <= self.clip_eps < 1:
            raise bad("clip_eps", "must be in [0, 1)")
        if not 0 <= self.gac_low < self.gac_high <= 1:
            raise ValueError(
                f"TrainConfig needs 0 <= gac_low < gac_high <= 1, got {self.gac_low}, {self.gac_high}"
            )
        if self.behavior_logprobs not in ("engine", "learner"):
            raise bad("behavior_logprobs", "must be 'engine' or 'learner'")
        if not self.lr > 0:
            raise bad("lr", "must be > 0")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise bad("betas", "must be two numbers in [0, 1)")
        if self.weight_decay < 0:
            raise bad("weight_decay", "must be >= 0")
        if not 0 <= self.warmup_ratio < 1:
            raise bad("warmup_ratio", "must be in [0, 1)")
        if not self.grad_clip > 0:
            raise bad("grad_clip", "must be > 0 (use a large value to disable clipping)")
        if self.optimizer not in ("auto", "adamw", "adamw8bit"):
            raise bad("optimizer", "must be 'auto', 'adamw' or 'adamw8bit'")
        if self.engine not in ENGINES:
            raise bad("engine", f"must be one of {ENGINES}")
        if self.layout not in LAYOUTS:
            raise bad("layout", f"must be one of {LAYOUTS}")
        for name in ("learner_dtype", "engine_dtype"):
            if getattr(self, name) not in DTYPES:
                raise bad(name, f"must be one of {DTYPES}")
        if self.logit_chunk < 1:
            raise bad("logit_chunk", "must be >= 1")
        if self.micro_batch_tokens < 0:
            raise bad("micro_batch_tokens", "must be >= 0 (0: groups_per_micro groups each)")
        if self.vcpo_norms not in ("in_backward", "per_trajectory"):
            raise bad("vcpo_norms", "must be 'in_backward' or 'per_trajectory'")
        if self.vcpo_norms == "in_backward" and not self.packed_sequences:
            raise bad("vcpo_norms", "must be 'per_trajectory' when packed_sequences is False")
        if self.eval_every < 0:
            raise bad("eval_every", "must be >= 0")
        if self.eval_limit is not None and self.eval_limit < 1:
            raise bad("eval_limit", "must be >= 1 or None")
        if self.eval_samples < 1:
            raise bad("eval_samples", "must be >= 1")
        if not self.eval_decodings or any(
            d not in ("greedy", "sampled") for d in self.eval_decodings
        ):
            raise bad("eval_decodings", "must be a non-empty subset of ('greedy', 'sampled')")
        if self.checkpoint_every < 0 or self.checkpoint_every % self.inner_steps:
            raise ValueError(
                f"TrainConfig.checkpoint_every={self.checkpoint_every} must be >= 0 and a multiple "
                f"of inner_steps={self.inner_steps} (checkpoints fall between rollout batches)"
            )
        if self.keep_checkpoints < 1:
            raise bad("keep_checkpoints", "must be >= 1")
        if any(name not in LOGGERS for name in self.log_to):
            raise bad("log_to", f"must be a subset of {LOGGERS}")
        if "wandb" in self.log_to and not self.wandb_project:
            raise bad("wandb_project", "must be set when log_to contains 'wandb'")

    @property
    def minibatch_groups(self) -> int:
        """Groups per optimizer update, `B = rollout_prompts / inner_steps`."""
        return self.rollout_prompts // self.inner_steps

    def loss_config(self) -> PolicyLossConfig:
        """The core loss of `method` with the B.1 constants and `T = max_completion_tokens`."""
        return PolicyLossConfig(
            method=METHOD_LOSS[self.method],  # type: ignore[arg-type]
            eps=self.eps_high,
            clip_low=self.clip_eps,
            clip_high=self.clip_eps,
            truncation=self.vcpo_truncation,
            a3po_mask_threshold=self.a3po_mask_threshold,
            aggregation="paper",
            max_length=self.max_completion_tokens,
        )

    def advantage_kind(self) -> str:
        if self.advantage is not None:
            return self.advantage
        return PAPER_ADVANTAGE[METHOD_LOSS[self.method]]


# --------------------------------------------------------------------------------------------
# Recipes
# --------------------------------------------------------------------------------------------


def recipe_path(recipe: str) -> Path:
    """A recipe name in `llm_runs/configs/` (without `.json`) or a path to a JSON file."""
    path = Path(recipe)
    if path.suffix == ".json" and path.is_file():
        return path
    shipped = CONFIG_DIR / f"{recipe}.json"
    if shipped.is_file():
        return shipped
    names = sorted(p.stem for p in CONFIG_DIR.glob("*.json"))
    raise FileNotFoundError(
        f"recipe {recipe!r} is neither a JSON file nor a shipped recipe; shipped: {', '.join(names)}"
    )


def load_recipe(recipe: str, run: str | None = None) -> dict[str, Any]:
    """The config values of a recipe (and of one of its runs).

    A recipe file holds `config` (base values), optionally `runs` (name -> values that override
    the base) and `sources` (field -> where the value comes from; documentation only).
    """
    path = recipe_path(recipe)
    data = json.loads(path.read_text())
    values = dict(data.get("config", {}))
    runs = data.get("runs", {})
    if run is not None:
        if run not in runs:
            raise ValueError(
                f"recipe {path.stem!r} has no run {run!r}; runs: {', '.join(runs) or '(none)'}"
            )
        values.update(runs[run])
    elif runs and data.get("default_run") is not None:
        values.update(runs[data["default_run"]])
    elif runs:
        raise ValueError(
            f"recipe {path.stem!r} is a suite: choose one of its runs with --run "
            f"({', '.join(runs)})"
        )
    return values


def config_from_values(values: Mapping[str, Any]) -> TrainConfig:
    """`TrainConfig(**values)` with a clear error for unknown keys."""
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown TrainConfig fields {unknown}; see `gmc-grpo llm train --help`")
    return TrainConfig(**values)


# --------------------------------------------------------------------------------------------
# Metric sinks
# --------------------------------------------------------------------------------------------


class ExtraSinks:
    """TensorBoard / W&B logging when asked (checked at start, before any compute)."""

    def __init__(self, config: TrainConfig) -> None:
        self.tb = None
        self.wandb = None
        if "tensorboard" in config.log_to:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as err:
                raise RuntimeError(
                    "log_to contains 'tensorboard' but tensorboard is not installed: "
                    "`pip install tensorboard`, or drop it from log_to"
                ) from err
            self.tb = SummaryWriter(str(Path(config.out) / "tensorboard"))
        if "wandb" in config.log_to:
            try:
                import wandb  # type: ignore[import-not-found]
            except ImportError as err:
                raise RuntimeError(
                    "log_to contains 'wandb' but wandb is not installed: `pip install wandb`"
                ) from err
            self.wandb = wandb.init(
                project=config.wandb_project, name=Path(config.out).name, config=asdict(config)
            )

    def log(self, row: Mapping[str, Any]) -> None:
        step = int(row["step"])
        scalars = {k: v for k, v in row.items() if isinstance(v, (int, float)) and k != "step"}
        if self.tb is not None:
            for key, value in scalars.items():
                self.tb.add_scalar(key, value, step)
        if self.wandb is not None:
            self.wandb.log(scalars, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------


def _dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


class Trainer:
    """One training run. `Trainer(config).run()`; inputs are checked in `__init__`.

    engine_factory: `(model_dir) -> RolloutEngine` to override the engine (tests).
    reward_fn: `(completions, references) -> rewards` replacing `config.reward` (a custom
        verifier; the tests use one that gives a learning signal to a random-init model).
    notice: where notices go (default: stderr).
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        engine_factory: Callable[[Path], Any] | None = None,
        reward_fn: Callable[[Sequence[str], Sequence[str]], Sequence[float]] | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.reward_fn = reward_fn
        self.out = Path(config.out)
        self.notice = notice or (lambda text: print(text, file=sys.stderr, flush=True))
        self.engine_factory = engine_factory
        # -- checks before any compute --
        self.resume_from: Path | None = None
        if config.resume:
            self.resume_from = ckpt.latest_checkpoint(self.out)
            if self.resume_from is None:
                raise FileNotFoundError(
                    f"resume=True but {self.out / ckpt.CHECKPOINT_DIR} holds no checkpoint; "
                    "start without --resume"
                )
        else:
            if ckpt.list_checkpoints(self.out):
                raise ValueError(
                    f"{self.out} already holds checkpoints of an earlier run: pass --resume to "
                    "continue it, or choose another --out"
                )
            if config.model is not None:
                from llm_runs.tiny import check_model_dir

                check_model_dir(config.model)
        cuda = torch.cuda.is_available()
        if config.learner_device == "auto":
            self.learner_device = torch.device("cuda:0" if cuda else "cpu")
        else:
            self.learner_device = torch.device(config.learner_device)
        if config.engine_device == "auto":
            two = config.layout == "two_gpu" and cuda
            self.engine_device = torch.device("cuda:1" if two else str(self.learner_device))
        else:
            self.engine_device = torch.device(config.engine_device)
        if config.layout == "two_gpu" and cuda and torch.cuda.device_count() < 2:
            raise ValueError("layout 'two_gpu' needs two CUDA devices; use layout 'one_gpu'")
        if config.learner_dtype == "auto":
            self.learner_dtype = (
                torch.bfloat16 if self.learner_device.type == "cuda" else torch.float32
            )
        else:
            self.learner_dtype = _dtype(config.learner_dtype)
        self.train_problems, self.eval_sets = self._load_problems()
        self.sinks = ExtraSinks(config)

    # -- data --------------------------------------------------------------------------------

    def _load_problems(self):
        config = self.config
        if config.task == "arithmetic":
            from llm_runs.arithmetic import ArithmeticTask

            train, held_out = ArithmeticTask(**config.arithmetic).problems()
            evals = {"arithmetic": held_out} if config.eval_every and held_out else {}
            return train, evals
        from llm_runs.data import load_benchmark, load_math_train

        train, _report = load_math_train(config.data_dir)
        if not train:
            raise ValueError("the MATH training pool is empty: check --data-dir")
        evals = {}
        if config.eval_every:
            for name in config.eval_benchmarks:
                evals[name] = load_benchmark(name, config.data_dir, config.eval_limit)
        return train, evals

    def _build_prompt(self, problem: str) -> str:
        if self.config.task == "arithmetic":
            from llm_runs.arithmetic import build_prompt

            return build_prompt(problem)
        from llm_runs import prompts

        text = prompts.build_prompt(problem)
        return prompts.truncate_prompt(text, self.tokenizer, self.config.max_prompt_tokens)[0]

    # -- setup -------------------------------------------------------------------------------

    def _initial_model_dir(self) -> Path:
        """The policy at version 0 (building the tiny model and running the warm-up if asked)."""
        config = self.config
        if config.tiny_model is None and not config.sft_steps:
            return Path(config.model)  # type: ignore[arg-type]
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from llm_runs.tiny import build_tiny_qwen3

        base = Path(config.model) if config.model else self.out / "base_model"
        if config.tiny_model is not None:
            build_tiny_qwen3(base, **config.tiny_model)
        if not config.sft_steps:
            return base
        from llm_runs.arithmetic import supervised_warmup

        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(base)
        losses = supervised_warmup(
            model.to(self.learner_device),
            tokenizer,
            self.train_problems,
            steps=config.sft_steps,
            lr=config.sft_lr,
            batch_size=config.sft_batch_size,
            seed=config.seed,
        )
        self.notice(
            f"supervised warm-up: {config.sft_steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}"
        )
        initial = self.out / "initial_model"
        model.save_pretrained(initial, safe_serialization=True)
        tokenizer.save_pretrained(initial)
        (initial / "warmup_losses.json").write_text(json.dumps(losses))
        return initial

    def _setup(self) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        config = self.config
        state = None
        if self.resume_from is not None:
            state = ckpt.load_checkpoint(self.resume_from)
            model_dir = state["model_dir"]
        else:
            model_dir = self._initial_model_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=self.learner_dtype)
        model.to(self.learner_device)
        model.config.use_cache = False
        if config.gradient_checkpointing:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        model.train()
        self.model = model
        optimizer, self.optimizer_name = make_optimizer(
            model.parameters(),
            kind=config.optimizer,
            lr=config.lr,
            betas=config.betas,  # type: ignore[arg-type]
            weight_decay=config.weight_decay,
            device=self.learner_device,
            notice=self.notice,
        )
        warmup = warmup_steps_for(config.total_steps, config.warmup_ratio)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, CosineWithWarmup(config.total_steps, warmup)
        )
        settings = LearnerSettings(
            method=config.method,
            loss=config.loss_config(),
            advantage=config.advantage_kind(),
            groups_per_micro=config.groups_per_micro,
            logit_chunk=config.logit_chunk,
            grad_clip=config.grad_clip,
            behavior_source=config.behavior_logprobs,
            vcpo_rho_ref=config.vcpo_rho_ref,
            gac_low=config.gac_low,
            gac_high=config.gac_high,
            packed=config.packed_sequences,
            micro_batch_tokens=config.micro_batch_tokens,
            vcpo_norms=config.vcpo_norms,
        )
        self.learner = Learner(model, optimizer, scheduler, settings)
        if config.schedule == "fixed_delay":
            self.schedule: Any = FixedDelaySchedule(config.delay)
        else:
            self.schedule = LengthCoupledSchedule(
                self._length_of,
                lam=config.lam,
                max_launches=config.max_launches,
                length_unit=f"{config.length_unit_tokens:g} tokens of mean response length",
            )
        self.step = 0
        self.launches = 0
        if state is not None:
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            self.schedule.load_state_dict(state["schedule"])
            previous = state["gac_previous"]
            if previous is not None:
                previous = previous.to(self.learner_device)
            self.learner.gac.previous_gradient = previous
            ckpt.set_rng_state(*state["rng"])
            self.step = state["step"]
            self.launches = int(state["counters"]["launches"])
            self.notice(f"resumed from {self.resume_from} at step {self.step}")
        self.engine = self._make_engine(model_dir)
        self.engine_version = self.step
        self.scorer = None
        if config.reward == "math_verify" or (self.eval_sets and config.task == "math"):
            from llm_runs.scoring import Scorer

            self.scorer = Scorer()
        self._perms: dict[int, list[int]] = {}
        self.rollout_seconds = 0.0

    def _make_engine(self, model_dir: Path):
        if self.engine_factory is not None:
            return self.engine_factory(model_dir)
        config = self.config
        if config.engine == "hf":
            from llm_runs.engines.hf import HFEngine

            dtype = (
                self.learner_dtype if config.engine_dtype == "auto" else _dtype(config.engine_dtype)
            )
            return HFEngine(model_dir, device=self.engine_device, dtype=dtype)
        from llm_runs.engines.vllm_engine import VLLMEngine

        return VLLMEngine(
            model_dir,
            dtype="bfloat16" if config.engine_dtype == "auto" else config.engine_dtype,  # type: ignore[arg-type]
            max_model_len=config.max_prompt_tokens + config.max_completion_tokens,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            kv_cache_memory_bytes=config.vllm_kv_cache_memory_bytes,
            seed=config.seed,
        )

    # -- rollouts ----------------------------------------------------------------------------

    def _length_of(self, batch: TrajectoryBatch) -> float:
        """`L` of a batch: mean response length in units of `length_unit_tokens`."""
        return float(batch.response_len.float().mean()) / self.config.length_unit_tokens

    def _prompt_indices(self, launch: int) -> list[int]:
        """Problems of launch `launch`: consecutive slices of seeded per-epoch permutations."""
        n = len(self.train_problems)
        r = self.config.rollout_prompts
        out = []
        for k in range(launch * r, (launch + 1) * r):
            epoch, pos = divmod(k, n)
            if epoch not in self._perms:
                gen = torch.Generator().manual_seed(self.config.seed * 1_000_003 + epoch)
                self._perms = {epoch: torch.randperm(n, generator=gen).tolist()}
            out.append(self._perms[epoch][pos])
        return out

    def _sync_engine(self) -> None:
        if self.engine_version != self.step:
            self.engine.update_weights(self.model.state_dict())
            self.engine_version = self.step

    def generate(self, version: int) -> TrajectoryBatch:
        """A rollout batch from the current policy (`version` must be the learner's)."""
        from llm_runs.engines.base import SamplingConfig

        if version != self.step:
            raise RuntimeError(f"asked for a batch of version {version} at step {self.step}")
        t0 = time.perf_counter()
        self._sync_engine()
        config = self.config
        launch = self.launches
        self.launches += 1
        indices = self._prompt_indices(launch)
        problems = [self.train_problems[i] for i in indices]
        g = config.group_size
        sampling = SamplingConfig(
            n=g,
            temperature=config.temperature,
            top_p=config.top_p,
            max_tokens=config.max_completion_tokens,
            stop=self._stop_strings(),
            seed=config.seed * 1_000_003 + launch * len(indices) * g,
        )
        samples = self.engine.generate([self._build_prompt(p.problem) for p in problems], sampling)
        batch = self._to_batch(samples, problems, indices, version)
        if config.learner_logprobs_at_generation or config.behavior_logprobs == "learner":
            batch.learner_logprobs = batch_logprobs(
                self.model,
                batch,
                config.logit_chunk,
                config.groups_per_micro,
                packed=config.packed_sequences,
            )
        self.rollout_seconds += time.perf_counter() - t0
        return batch

    def _stop_strings(self) -> tuple[str, ...]:
        if self.config.task == "arithmetic":
            return ()
        from llm_runs.prompts import STOP_STRINGS

        return STOP_STRINGS

    def _rewards(self, texts: Sequence[str], references: Sequence[str]) -> list[float]:
        if self.reward_fn is not None:
            rewards = [float(r) for r in self.reward_fn(texts, references)]
            if len(rewards) != len(texts):
                raise ValueError(
                    f"reward_fn returned {len(rewards)} rewards for {len(texts)} texts"
                )
            return rewards
        if self.config.reward == "exact":
            from llm_runs.arithmetic import exact_reward

            return [exact_reward(t, r) for t, r in zip(texts, references, strict=True)]
        assert self.scorer is not None
        return [float(v) for v in self.scorer.score(list(texts), list(references))]

    def _to_batch(self, samples, problems, indices, version: int) -> TrajectoryBatch:
        """Check the engine's output (counts, NaN log-probs) and pack it into tensors."""
        g = self.config.group_size
        if len(samples) != len(problems) or any(len(s) != g for s in samples):
            raise RuntimeError(
                f"the rollout engine returned {len(samples)} prompt results with "
                f"{[len(s) for s in samples]} samples; expected {len(problems)} x {g}"
            )
        for p, group in enumerate(samples):
            for j, s in enumerate(group):
                values = torch.tensor(s.logprobs, dtype=torch.float64)
                if not bool(torch.isfinite(values).all()):
                    raise ValueError(
                        f"the rollout engine returned non-finite (NaN/inf) log-probs for prompt "
                        f"{p} sample {j} of launch {self.launches - 1}: the behavior log-probs "
                        "are unusable; check the engine's dtype and sampling settings"
                    )
                if not s.prompt_token_ids:
                    raise ValueError(f"the engine returned no prompt token ids for prompt {p}")
        b = len(problems)
        prompt_len = torch.tensor([[len(s.prompt_token_ids) for s in grp] for grp in samples])
        response_len = torch.tensor([[len(s.token_ids) for s in grp] for grp in samples])
        width = int((prompt_len + response_len).max())
        t = max(1, int(response_len.max()))
        pad = int(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0)
        input_ids = torch.full((b, g, width), pad, dtype=torch.int32)
        logprobs = torch.zeros((b, g, t), dtype=torch.float32)
        for i, grp in enumerate(samples):
            for j, s in enumerate(grp):
                seq = list(s.prompt_token_ids) + list(s.token_ids)
                input_ids[i, j, : len(seq)] = torch.tensor(seq, dtype=torch.int32)
                logprobs[i, j, : len(s.token_ids)] = torch.tensor(s.logprobs, dtype=torch.float32)
        texts = [s.text for grp in samples for s in grp]
        refs = [p.answer for p in problems for _ in range(g)]
        rewards = torch.tensor(self._rewards(texts, refs), dtype=torch.float32).view(b, g)
        truncated = torch.tensor([[s.finish_reason == "length" for s in grp] for grp in samples])
        return TrajectoryBatch(
            input_ids=input_ids,
            prompt_len=prompt_len.long(),
            response_len=response_len.long(),
            engine_logprobs=logprobs,
            learner_logprobs=None,
            rewards=rewards,
            truncated=truncated,
            prompt_index=torch.tensor(indices, dtype=torch.long),
            behavior_version=version,
            pad_id=pad,
        )

    # -- one update --------------------------------------------------------------------------

    def _update(self, minibatch: TrajectoryBatch) -> dict[str, Any]:
        lag = self.step - minibatch.behavior_version
        metrics = self.learner.step(minibatch, self.step)
        mask = minibatch.response_mask()
        maskf = mask.float()
        tokens = maskf.sum().clamp(min=1)
        rewards = minibatch.rewards
        row: dict[str, Any] = {
            "step": self.step,
            "reward/mean": float(rewards.mean()),
            "reward/std": float(rewards.std()),
            "response/length_mean": float(minibatch.response_len.float().mean()),
            "response/truncated_frac": float(minibatch.truncated.float().mean()),
            "staleness/lag": float(lag),
            "staleness/lag_max": lag,
            "staleness/behavior_version": minibatch.behavior_version,
        }
        learner_at_behavior = minibatch.learner_logprobs
        if learner_at_behavior is None and lag == 0:
            learner_at_behavior = self.learner.last_logprobs
        if learner_at_behavior is not None:
            gap = (minibatch.engine_logprobs - learner_at_behavior).abs() * maskf
            row["mismatch/logprob_abs_mean"] = float(gap.sum() / tokens)
        row.update(metrics)
        row["perf/rollout_seconds"] = self.rollout_seconds
        self.rollout_seconds = 0.0
        self.step += 1
        return row

    # -- evaluation --------------------------------------------------------------------------

    def evaluate(self, writer: RunWriter) -> None:
        """Evaluate the current policy on the eval sets (greedy and/or sampled Pass@1)."""
        if not self.eval_sets:
            return
        self._sync_engine()
        config = self.config
        for index, (name, problems) in enumerate(self.eval_sets.items()):
            prompts = [self._build_prompt(p.problem) for p in problems]
            for decoding in config.eval_decodings:
                t0 = time.time()
                if config.task == "math":
                    row = self._evaluate_math(name, problems, prompts, decoding, index)
                else:
                    row = self._evaluate_exact(problems, prompts, decoding, index)
                writer.log_eval(
                    {"step": self.step, "benchmark": name, **row, "time_s": time.time() - t0}
                )

    def _eval_sampling(self, decoding: str, index: int):
        from llm_runs.engines.base import SamplingConfig

        greedy = decoding == "greedy"
        return SamplingConfig(
            n=1 if greedy else self.config.eval_samples,
            temperature=0.0 if greedy else self.config.temperature,
            top_p=1.0 if greedy else self.config.top_p,
            max_tokens=self.config.max_completion_tokens,
            stop=self._stop_strings(),
            seed=self.config.seed + 1000 * index,
        )

    def _evaluate_exact(self, problems, prompts, decoding: str, index: int) -> dict[str, Any]:
        from llm_runs.arithmetic import exact_reward
        from llm_runs.evaluate import summarize_benchmark

        samples = self.engine.generate(prompts, self._eval_sampling(decoding, index))
        correct = [
            [exact_reward(s.text, p.answer) > 0 for s in outs]
            for p, outs in zip(problems, samples, strict=True)
        ]
        return summarize_benchmark(
            correct,
            decoding,
            finish_reasons=[[s.finish_reason for s in outs] for outs in samples],
            num_tokens=[[len(s.token_ids) for s in outs] for outs in samples],
        )

    def _evaluate_math(self, name, problems, prompts, decoding: str, index: int) -> dict[str, Any]:
        from llm_runs.evaluate import EvalConfig, evaluate_one

        eval_config = EvalConfig(
            model=str(self.out),
            out=str(self.out),
            benchmarks=(name,),
            data_dir=self.config.data_dir,
            decodings=(decoding,),
            n=self.config.eval_samples,
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            max_prompt_tokens=self.config.max_prompt_tokens,
            max_completion_tokens=self.config.max_completion_tokens,
            limit=self.config.eval_limit,
            seed=self.config.seed,
        )
        flags = [False] * len(prompts)
        row, _outputs = evaluate_one(
            eval_config, self.engine, self.scorer, problems, prompts, flags, name, decoding, index
        )
        return row

    # -- checkpoints -------------------------------------------------------------------------

    def save(self) -> Path:
        previous = self.learner.gac.previous_gradient
        return ckpt.save_checkpoint(
            self.out,
            self.step,
            model=self.model,
            tokenizer=self.tokenizer,
            optimizer=self.learner.optimizer,
            scheduler=self.learner.scheduler,
            schedule_state=self.schedule.state_dict(),
            gac_previous=previous,
            counters={"launches": self.launches},
            keep=self.config.keep_checkpoints,
        )

    # -- the loop ----------------------------------------------------------------------------

    def run(self, on_step: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train to `total_steps`; return the summary. `on_step(row)` runs after each update."""
        config = self.config
        started = time.time()
        self._setup()
        resolved = {
            **asdict(self.config),
            "optimizer_used": self.optimizer_name,
            "learner_device": str(self.learner_device),
            "engine_device": str(self.engine_device),
            "learner_dtype": str(self.learner_dtype),
            "reward_fn": getattr(self.reward_fn, "__qualname__", None),
            "metric_names": METRIC_NAMES,
        }
        writer = RunWriter(
            self.out, resolved, resume=self.resume_from is not None, keep_steps_below=self.step
        )
        progress = None
        if config.progress:
            from tqdm.auto import tqdm

            progress = tqdm(total=config.total_steps, initial=self.step, desc="train", unit="step")
        try:
            if config.eval_every and self.step % config.eval_every == 0:
                self.evaluate(writer)
            while self.step < config.total_steps:
                for entry in self.schedule.next(self.step, self.generate):
                    batch: TrajectoryBatch = entry.batch
                    per = config.minibatch_groups
                    for k in range(config.inner_steps):
                        row = self._update(batch.groups(k * per, (k + 1) * per))
                        writer.log_metrics(row)
                        self.sinks.log(row)
                        if progress is not None:
                            progress.update(1)
                            progress.set_postfix(
                                reward=f"{row['reward/mean']:.3f}",
                                lag=row["staleness/lag_max"],
                                lr=f"{row['optim/lr']:.2e}",
                                len=f"{row['response/length_mean']:.0f}",
                                ent=f"{row['policy/entropy']:.2f}",
                            )
                        last = self.step == config.total_steps
                        if config.eval_every and (self.step % config.eval_every == 0 or last):
                            self.evaluate(writer)
                        if last or (
                            config.checkpoint_every and self.step % config.checkpoint_every == 0
                        ):
                            if k == config.inner_steps - 1:
                                self.save()
                        if on_step is not None:
                            on_step(row)
            summary = self._summary(time.time() - started)
            writer.write_summary(summary)
            return summary
        finally:
            if progress is not None:
                progress.close()
            writer.close()
            self.sinks.close()
            if self.scorer is not None:
                self.scorer.close()
            self.engine.close()

    def _summary(self, seconds: float) -> dict[str, Any]:
        rows = read_jsonl(self.out / "metrics.jsonl")
        rewards = [r["reward/mean"] for r in rows]
        lags = [r["staleness/lag"] for r in rows]
        k = max(1, len(rows) // 10)
        return {
            "steps": self.step,
            "method": self.config.method,
            "schedule": self.config.schedule,
            "delay": self.config.delay,
            "reward_first_10pct": sum(rewards[:k]) / k if rewards else None,
            "reward_last_10pct": sum(rewards[-k:]) / k if rewards else None,
            "lag_mean": sum(lags) / len(lags) if lags else None,
            "seconds_this_session": seconds,
            "optimizer": self.optimizer_name,
            "checkpoint": str(ckpt.latest_checkpoint(self.out)),
        }


def train(
    config: TrainConfig,
    *,
    engine_factory: Callable[[Path], Any] | None = None,
    reward_fn: Callable[[Sequence[str], Sequence[str]], Sequence[float]] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    notice: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run one training job; return its summary (see `Trainer`)."""
    trainer = Trainer(config, engine_factory=engine_factory, reward_fn=reward_fn, notice=notice)
    return trainer.run(on_step)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------

DESCRIPTION = """Train a causal LM with GRPO, TIC-GRPO, GMC-GRPO, VCPO, GAC or A-3PO under a
fixed delay or the simulated length-coupled asynchronous pipeline (Appendix B.1). Writes
OUT/config.json, OUT/metrics.jsonl (one row per update), OUT/evals.jsonl, OUT/checkpoints/ and
OUT/summary.json. Values come from a recipe (llm_runs/configs/*.json) and/or a JSON config file;
flags override both."""

EPILOG = """examples:
  gmc-grpo llm train --recipe tiny                       # CPU demonstration, minutes
  gmc-grpo llm train --recipe tiny_delay --run gmc       # tiny model under delay 8
  gmc-grpo llm train --recipe fixed_delay_qwen3_1p7b --run gmc_d128 \\
      --model models/Qwen3-1.7B-Base --data-dir data/ --out runs/gmc_d128
  gmc-grpo llm train --out runs/gmc_d128 --resume ...    # continue from the newest checkpoint
  gmc-grpo llm train --recipe tiny --set lr=3e-4 --set total_steps=50
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", help="shipped recipe name or a JSON recipe file")
    parser.add_argument("--run", help="one run of a suite recipe (e.g. gmc_d128)")
    parser.add_argument("--config", help="a JSON file of TrainConfig values (after the recipe)")
    parser.add_argument("--out", help="run directory (default: runs/<recipe>[_<run>])")
    parser.add_argument("--model", help="local model directory of the initial policy")
    parser.add_argument("--data-dir", help="local dataset folder (`gmc-grpo llm data`)")
    parser.add_argument("--method", choices=LEARNER_METHODS)
    parser.add_argument("--delay", type=int, help="fixed delay D (learner updates)")
    parser.add_argument("--steps", type=int, help="total optimizer updates")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--engine", choices=ENGINES)
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override any TrainConfig field (VALUE parsed as JSON, else taken as a string)",
    )


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    values: dict[str, Any] = {}
    if args.recipe:
        values.update(load_recipe(args.recipe, args.run))
    elif args.run:
        raise ValueError("--run needs --recipe")
    if args.config:
        path = Path(args.config)
        if not path.is_file():
            raise FileNotFoundError(f"--config {str(path)!r} does not exist")
        data = json.loads(path.read_text())
        values.update(data["config"] if isinstance(data.get("config"), dict) else data)
    flags = {
        "out": args.out,
        "model": args.model,
        "data_dir": args.data_dir,
        "method": args.method,
        "delay": args.delay,
        "total_steps": args.steps,
        "seed": args.seed,
        "engine": args.engine,
    }
    values.update({k: v for k, v in flags.items() if v is not None})
    if args.model is not None:
        values["tiny_model"] = None
    if args.resume:
        values["resume"] = True
    if args.no_progress:
        values["progress"] = False
    for item in args.set:
        if "=" not in item:
            raise ValueError(f"--set expects FIELD=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    if "out" not in values:
        if not args.recipe:
            raise ValueError(
                "give --out (or a --recipe, whose name makes the default run directory)"
            )
        name = Path(args.recipe).stem + (f"_{args.run}" if args.run else "")
        values["out"] = str(Path("runs") / name)
    return config_from_values(values)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    summary = train(config)
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo llm train",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
