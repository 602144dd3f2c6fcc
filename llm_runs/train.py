"""`gmc-grpo llm train`: the asynchronous GRPO-family trainer of Appendix B.1, from its parts.

| part                 | module                  | what it does                                       |
|----------------------|-------------------------|----------------------------------------------------|
| config, recipes      | `llm_runs.config`,      | every setting, documented beside it; shipped       |
|                      | `llm_runs.recipes`      | recipes of `llm_runs/configs/`                     |
| policy model         | `llm_runs.models`       | devices/dtypes, tiny model + warm-up, loading      |
| rollout producer     | `llm_runs.rollouts`     | engine, sampling, rewards -> `TrajectoryBatch`     |
| staleness schedule   | `gmc_grpo.staleness`    | which batch each update consumes (core)            |
| learner              | `llm_runs.learner`      | one optimizer update with the method's loss/hooks  |
| evaluator            | `llm_runs.evaluation.during_training`    | greedy / sampled Pass@1 during training            |
| checkpointer         | `llm_runs.checkpoint`   | atomic, pickle-free checkpoints; `--resume`        |
| metric sinks         | `gmc_grpo.records`,     | `metrics.jsonl` / `evals.jsonl` / `summary.json`;  |
|                      | `llm_runs.sinks`        | TensorBoard, W&B                                   |
| command line         | `llm_runs.train_cli`    | `gmc-grpo llm train`                               |

Each part takes its own frozen slice of the config, built once by one `LLMTrainConfig` method
(`placement_settings`, `warmup_settings`, `problem_settings`, `rollout_settings`,
`evaluation_settings`, `bound_settings`, `sink_settings`, `schedule_settings`; the learner's
`LearnerSettings` is built here): only the trainer and the preflight's memory plan read the
config whole (`bench/config_reach.py` measures it).

The loop: the schedule asks the producer for launches of the current policy when it needs them
and hands back the batch to consume (fixed delay `D`: the one generated `D` updates ago;
length-coupled: the earliest ready one); the batch is split into `inner_steps` minibatches of
whole groups, each one optimizer update; one row per update goes to `metrics.jsonl`, evaluations
to `evals.jsonl`, checkpoints to `checkpoints/step_<N>/`. The launches one schedule call makes
together are one engine call (the FIFO's fill: `D + 1` batches), and nothing is launched that no
update of the run consumes (a fixed-delay run of `N` updates generates `N` batches).

**Layouts** (B.1). One GPU: the engine lives in this process and takes turns with the learner;
vLLM sleeps during each learner step (`vllm_sleep_mode`). Two GPUs: the engine runs in a process
of its own on its own device (`engine_process`, `llm_runs.engines.remote`) and generates the batch
launched at update `n` while the learner computes update `n`; it serves requests in order, so
every batch comes from the weights of the version that launched it and the records are the same
as in one process (the overlap does not change the sample order).

**Rollout workers** (`schedule="workers"`, §2.2 and Figure 1; `gmc_grpo.staleness.WorkerSchedule`):
the schedule asks for ONE group per launch, from the snapshot current at that launch, and the
learner takes the `num_groups` earliest completed groups. The consumed groups are joined into
one `TrajectoryBatch` whose `behavior_version` is `[B]`: each group keeps the engine log-probs its
own snapshot recorded, the learner's ratio uses them group by group and A-3PO gets each group's
lag (`TrajectoryBatch.version_lag`). The launches of one `schedule.next` call all use the same
snapshot and at least `W` (at the start) plus the groups missing from a full batch are known in
advance: those are generated in one engine call (`generate`). Group launch `k` is position
`k` of the prompt stream with its own sampling streams, so groups `l B .. l B + B - 1` hold exactly
the samples of batch launch `l` of the other schedules. Rows log the batch's mean, min, max and
std of the lags; `summary.json`'s `lag_statistics` gives their distribution over groups.

**Shared work** (`cache_dir`, `llm_runs.cache`): the runs of a suite (`llm_runs.suite`) share the
warmed-up initial policy and the rollouts of version 0 (the FIFO fill), each stored under a content
hash of everything it depends on; the records are the same with and without it.

**Which log-probs the ratio uses.** By default (`behavior_logprobs="engine"`) the ratio's `mu` is
the engine's per-token sampling log-prob recorded at generation time: the exact behavior policy
that generated the rollout (Appendix B.1). `"learner"` uses the learner's own log-probs of the
stored tokens under the behavior version (one extra forward pass per batch); the two differ by
the train-inference mismatch, logged as `mismatch/logprob_abs_mean` whenever the learner's
log-probs at the behavior version are known (always with `learner_logprobs_at_generation`, and
for free on updates with lag 0, whose current policy is the behavior policy). Every
`mismatch_every` updates the mismatch is also measured per trajectory at lag 0, with the
fraction of groups GMC and TIC would cap from it alone (`llm_runs.mismatch`).

**Simulated asynchrony: the unit of `L`.** `LengthCoupledSchedule` launches one batch per clock
tick and shows it at `tau_launch + lambda L`; here `L` is the batch's mean response length over
`length_unit_tokens` (default 100). In steady state about one batch is launched per update, so a
batch's lag is close to `lambda L = 28 L`.

**Calibration (our inference, not stated in the paper).** The paper reports mean lags of about
160 (Qwen3-1.7B) and 140 (4B, 8B) with `lambda = 28`. A run's mean lag is below `28 * mean L`,
because the first ~`28 L` updates consume the policy-0 warm-up batches with lags ramping up from
0 (and short batches overtake long ones): over 800 updates a constant `L = 5.7` gives 143.1
(`llm_runs.calibration`, measured). A mean lag of 160 needs `L` ~ 6.46 and 140 needs `L` ~ 5.54,
i.e. responses of about 650 and 550 tokens with our unit of 100 tokens. That unit is a guess: to
reproduce the paper's lags, call `llm_runs.calibration.calibrate_length_unit(lengths, 160)`
(1.7B) or `(lengths, 140)` (4B, 8B) with the `response/length_mean` values of a short run and
set `length_unit_tokens` to the result; every update logs its realised lag (`staleness/lag`).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from gmc_grpo.config_reading import resolve_aliases
from gmc_grpo.json_files import read_jsonl
from gmc_grpo.lr_schedule import CosineWithWarmup, warmup_steps_for
from gmc_grpo.records import METRIC_NAMES, check_records_reach, complete_steps, read_run_config
from gmc_grpo.resume import ResumeRequest, check_resume_config
from gmc_grpo.run_writer import RunWriter, check_fresh_run_dir
from gmc_grpo.runlock import run_lock
from gmc_grpo.seeding import check_seeding, stream_seed
from gmc_grpo.staleness import ScheduleContext, lag_statistics, make_schedule
from llm_runs import checkpoint as ckpt
from llm_runs.batch import Rollout
from llm_runs.bound_tracking import BoundTracker
from llm_runs.config import RESUME_FREE_FIELDS, LLMTrainConfig
from llm_runs.evaluation.during_training import Evaluator
from llm_runs.learner import Learner, LearnerSettings, TrajectoryBatch, make_optimizer
from llm_runs.models import (
    check_learner,
    initial_model_dir,
    load_policy,
    resolve_placement,
    transformers_progress,
)
from llm_runs.preflight import check_run
from llm_runs.rollouts import RewardFn, RolloutProducer, Task, load_problems
from llm_runs.sinks import MetricSinks

# `summary.json`'s `reward_first_10pct` / `reward_last_10pct` average a tenth of the updates
SUMMARY_PARTS = 10


class Trainer:
    """One training run: `Trainer(config).run()`. Inputs are checked in `__init__`, before any
    compute.

    engine_factory: `(model_dir) -> RolloutEngine` to override the engine (tests).
    reward_fn: `(completions, references) -> rewards` replacing `config.reward` (a custom
        verifier; the tests use one that gives a learning signal to a random-init model).
    notice: where notices go (default: stderr).
    """

    def __init__(
        self,
        config: LLMTrainConfig,
        *,
        engine_factory: Callable[[Path], Any] | None = None,
        reward_fn: RewardFn | None = None,
        notice: Callable[[str], None] | None = None,
        request: ResumeRequest | None = None,
    ) -> None:
        self.config = config
        self.out = Path(config.out)
        self.engine_factory = engine_factory
        self.reward_fn = reward_fn
        self.notice = notice or (lambda text: print(text, file=sys.stderr, flush=True))
        self.request = request or ResumeRequest()
        self.resume_from: Path | None = None
        # config changes a resume accepted, `{field: (old, new)}` (written into the history)
        self.resume_changes: dict[str, tuple[Any, Any]] = {}
        if config.resume:
            self.resume_from, self.resume_changes = self._check_resume()
        else:
            if self.request.asked:
                raise ValueError(
                    "--extend-to and --allow-config-change continue a run: add --resume"
                )
            check_fresh_run_dir(self.out)  # a fresh run erases records: refuse
            if ckpt.list_checkpoints(self.out):
                raise ValueError(
                    f"{self.out} already holds checkpoints of an earlier run: pass --resume to "
                    "continue it, or choose another --out"
                )
        if config.model is not None and self.resume_from is None:
            from llm_runs.tiny import check_model_dir

            check_model_dir(config.model)
        self.placement = resolve_placement(config.placement_settings())
        # the optimizer and the precision: checked before compute
        check_learner(config.optimizer, config.lr, self.placement, self.notice)
        check_run(config, self.placement)  # memory and shared memory vs the need (issue 32)
        self.train_problems, self.eval_sets = load_problems(config.problem_settings())
        self.sinks = MetricSinks(config.sink_settings())

    def _check_resume(self) -> tuple[Path | None, dict[str, tuple[Any, Any]]]:
        """The checkpoint to continue from (None: restart the run from step 0, e.g. when it was
        killed before its first checkpoint) and the config changes accepted; refuses a config
        that differs from the run's (`gmc_grpo.resume`, `RESUME_FREE_FIELDS`)."""
        payload = read_run_config(self.out)  # refuses a newer record schema, saying what differs
        checkpoint = ckpt.latest_checkpoint(self.out)
        if payload is None:
            raise FileNotFoundError(
                f"resume=True but {self.out} holds no checkpoint and no run (config.json is "
                "missing): start without --resume, or point --out at the run's folder"
            )
        if checkpoint is not None:  # a run restarted from step 0 keeps none of its streams
            check_seeding(payload.get("seeding"), str(self.out))
            checkpoint = self._checkpoint_the_records_reach()
        fields = [f.name for f in dataclasses.fields(LLMTrainConfig)]
        old = ckpt.checkpoint_config(checkpoint) if checkpoint is not None else None
        if old is None:  # checkpoints of older versions: the run's config.json
            stored = payload.get("config")
            if not isinstance(stored, dict) or "inner_steps" not in stored:
                raise ValueError(
                    f"{self.out} holds another kind of run (its config.json is not an `llm "
                    "train` config): choose another --out"
                )
            old = {k: v for k, v in resolve_aliases(LLMTrainConfig, stored).items() if k in fields}
            if "resolved_learner_device" not in stored:
                # written before the resolved placement had keys of its own: it overwrote these
                for key in ("learner_device", "engine_device", "learner_dtype"):
                    old.pop(key, None)
        changes = check_resume_config(
            resolve_aliases(LLMTrainConfig, old),  # records written before a rename
            dataclasses.asdict(self.config),
            free=RESUME_FREE_FIELDS,
            request=self.request,
            where=str(self.out),
            defaults={f.name: f.default for f in dataclasses.fields(LLMTrainConfig)},
            fields=fields,
        )
        if checkpoint is None:
            self.notice(
                f"{self.out} holds no checkpoint yet: the run restarts from step 0 (its earlier "
                "rows are dropped; config.json keeps the history)"
            )
        return checkpoint, changes

    def _checkpoint_the_records_reach(self) -> Path:
        """The newest checkpoint whose step `metrics.jsonl` reaches without a gap (every row
        below it present): the newest one when the records are whole; an older one (the newer
        ones, ahead of the records, removed with a notice) when a torn or cut tail lost rows
        that it does not cover; else `RecordGapError` naming the missing rows."""
        found = ckpt.list_checkpoints(self.out)
        newest = max(found)
        reach = complete_steps(read_jsonl(self.out / "metrics.jsonl"))
        usable = [step for step in found if step <= reach]
        if newest <= reach:
            return found[newest]
        if not usable:
            check_records_reach(
                self.out,
                min(found),
                covered_by=f"its oldest checkpoint {found[min(found)].name}",
                hint="no checkpoint lies before the gap: start the run again without --resume "
                "in another --out",
            )
        chosen = max(usable)
        ahead = sorted(step for step in found if step > chosen)
        for step in ahead:
            shutil.rmtree(found[step])
        self.notice(
            f"{self.out}/metrics.jsonl reaches step {reach} only (its later rows are torn or "
            f"missing): continuing from {found[chosen].name}, the newest checkpoint the records "
            f"reach; removed the checkpoints ahead of them ({', '.join(found[s].name for s in ahead)})"
            " and the updates from there on are computed again"
        )
        return found[chosen]

    # -- setup -------------------------------------------------------------------------------

    def _setup(self) -> None:
        """Model, learner, schedule, engine, producer and evaluator; restore a checkpoint."""
        config = self.config
        state = ckpt.load_checkpoint(self.resume_from) if self.resume_from else None
        if state is not None:
            model_dir = state["model_dir"]
        else:
            model_dir = initial_model_dir(
                config.warmup_settings(),
                self.out,
                self.placement.learner_device,
                self.train_problems,
                self.notice,
            )
        self.tokenizer, self.model = load_policy(
            model_dir, self.placement, config.gradient_checkpointing
        )
        task = Task(config.task, config.max_prompt_tokens, self.tokenizer)
        self.learner = self._make_learner()
        self.bounds = BoundTracker.for_run(config.bound_settings(), self.tokenizer, self.model)
        self.schedule = make_schedule(config.schedule_settings(), self.schedule_context())
        self.step, launches = 0, 0
        if state is not None:
            launches = self._restore(state)
        engine = self._make_engine(model_dir)
        self.scorer = None
        if config.reward == "math_verify" or (self.eval_sets and config.task == "math"):
            from llm_runs.scoring.pool import Scorer

            self.scorer = Scorer()
        pad = self.tokenizer.pad_token_id
        self.rollouts = RolloutProducer(
            config.rollout_settings(),
            engine,
            task,
            self.train_problems,
            pad_id=int(pad if pad is not None else 0),
            reward_fn=self.reward_fn,
            scorer=self.scorer,
            engine_version=self.step,
            launches=launches,
            cache=self._rollout_cache(),
            engine_sleeps=self.placement.engine_sleeps,
        )
        self._prefetched: deque[Rollout] = deque()
        self._launch_budget = 0
        self.evaluator = Evaluator(
            config.evaluation_settings(), self.eval_sets, engine, task, self.scorer
        )

    def _make_learner(self) -> Learner:
        """The optimizer, its warm-up + cosine schedule and the method's learner."""
        config = self.config
        optimizer, self.optimizer_name = make_optimizer(
            self.model.parameters(),
            kind=config.optimizer,
            lr=config.lr,
            betas=config.betas,  # type: ignore[arg-type]
            weight_decay=config.weight_decay,
            device=self.placement.learner_device,
            notice=self.notice,
        )
        warmup = warmup_steps_for(config.total_steps, config.warmup_ratio)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, CosineWithWarmup(config.total_steps, warmup)
        )
        settings = LearnerSettings(
            method=config.method,
            loss=config.spec.loss_config(
                config.method_settings(), max_length=config.max_completion_tokens
            ),
            advantage=config.advantage,
            groups_per_micro=config.groups_per_micro,
            logit_chunk=config.logit_chunk,
            grad_clip=config.grad_clip,
            behavior_source=config.behavior_logprobs,
            method_settings=config.method_settings(),
            packed=config.packed_sequences,
            micro_batch_tokens=config.micro_batch_tokens,
            score_norms=config.score_norms,
        )
        return Learner(self.model, optimizer, scheduler, settings)

    def schedule_context(self) -> ScheduleContext:
        """What the schedule gets besides the config's schedule fields: `B`, the updates per
        rollout batch, the run's updates (nothing is launched that no update consumes), `L` of an
        item (its mean response length in `length_unit_tokens`) and the schedule's own seed."""
        config = self.config
        return ScheduleContext(
            groups_per_batch=config.num_groups,
            updates_per_batch=config.inner_steps,
            total_updates=config.total_steps,
            length_of=self._length_of,
            length_unit=f"{config.length_unit_tokens:g} tokens of mean response length",
            seed=stream_seed(config.run_seed, "llm_schedule"),
        )

    def _restore(self, state: dict[str, Any]) -> int:
        """Load a checkpoint's optimizer, learning-rate schedule, staleness schedule, method
        state and RNG; returns the producer's launch counter."""
        learner, device = self.learner, self.placement.learner_device
        learner.optimizer.load_state_dict(state["optimizer"])
        rebuild_lr_schedule(
            learner.optimizer, learner.scheduler, state["scheduler"], self.config.lr
        )
        self.schedule.load_state_dict(state["schedule"])
        if learner.method_state is not None:
            learner.method_state.load_state_dict(
                {k: None if v is None else v.to(device) for k, v in state["method_state"].items()}
            )
        ckpt.set_rng_state(*state["rng"])
        self.step = state["step"]
        self.notice(f"resumed from {self.resume_from} at step {self.step}")
        return int(state["counters"]["launches"])

    def _rollout_cache(self) -> Any:
        """The shared cache of version-0 rollouts (`cache_dir`), or None."""
        config = self.config
        if config.cache_dir is None:
            return None
        from llm_runs.cache import RolloutCache, initial_policy_key, rollout_key

        overrides = {
            "reward_fn": getattr(self.reward_fn, "__qualname__", None),
            "engine_factory": getattr(self.engine_factory, "__qualname__", None),
            "placement": repr(self.placement),
        }
        initial = initial_policy_key(config.warmup_settings(), self.placement.learner_device)
        key = rollout_key(asdict(config), initial, overrides)
        return RolloutCache(config.cache_dir, key, notice=self.notice)

    def _length_of(self, item: Rollout) -> float:
        """`L` of a launch (a batch or one group): mean response length in units of
        `length_unit_tokens` (a schedule that reads it waits for the launch)."""
        batch = item.result()
        return float(batch.response_len.float().mean()) / self.config.length_unit_tokens

    def _make_engine(self, model_dir: Path) -> Any:
        """The rollout engine: in this process, or in its own on its own device
        (`engine_process`, `llm_runs.engines.remote`)."""
        if self.engine_factory is not None:
            return self.engine_factory(model_dir)
        config, placement = self.config, self.placement
        settings: dict[str, Any] = dict(
            max_model_len=config.max_prompt_tokens + config.max_completion_tokens,
            seed=stream_seed(config.run_seed, "llm_engine", bits=32),  # vLLM: numpy needs < 2^32
            dtype=placement.engine_dtype,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            kv_cache_memory_bytes=config.vllm_kv_cache_memory_bytes,
            enforce_eager=config.vllm_enforce_eager,
            enable_sleep_mode=placement.engine_sleeps,
        )
        if placement.engine_process:
            from llm_runs.engines.remote import RemoteEngine

            return RemoteEngine(
                config.engine,
                model_dir,
                device=str(placement.engine_device),
                timeout_per_prompt=config.engine_timeout_seconds / config.num_groups,
                start_timeout=config.engine_timeout_seconds,
                **settings,
            )
        from llm_runs.engines.factory import make_engine

        return make_engine(
            config.engine, model_dir, device=str(placement.engine_device), **settings
        )

    # -- the parts of one update -------------------------------------------------------------

    def generate(self, version: int) -> Rollout:
        """One launch (a batch, or one group under a schedule of groups) from the current policy
        (`version` must be the learner's); the schedule calls it once per launch.

        The launches of one `schedule.next` call all use the snapshot of `version`, and at least
        `_launch_budget` of them are known in advance (`schedule.launches_ahead()`: the FIFO's
        `D + 1` at the start, then 1; `W` groups at the start of the worker schedule, then the
        groups missing from a full batch): those are generated in one engine call and handed out
        one by one. Launches beyond the budget are generated one at a time, so nothing is
        generated that the schedule does not launch, and launch `k` always holds the same prompts
        and sampling streams. An engine in its own process generates while the learner updates:
        a `Rollout` is waited for when its batch is needed.
        """
        if version != self.step:
            raise RuntimeError(f"asked for a launch of version {version} at step {self.step}")
        if not self._prefetched:
            count = max(1, self._launch_budget)
            per = self.schedule.groups_per_item(self.config.num_groups)
            self._prefetched.extend(self.rollouts.launch(self.model, version, count, per))
            self._launch_budget -= count
        return self._prefetched.popleft()

    def next_batches(self) -> list[TrajectoryBatch]:
        """The batches the schedule hands the learner at the current step (a schedule of groups:
        the `B` consumed groups joined into one batch, each with its own behavior version)."""
        schedule = self.schedule
        self._launch_budget = schedule.launches_ahead()
        entries = schedule.next(self.step, self.generate)
        self._launch_budget = 0
        assert not self._prefetched, "prefetched launches left over (launch budget overestimated)"
        batches = [entry.batch.result() for entry in entries]
        if schedule.item == "group":
            return [TrajectoryBatch.concat(batches)]
        return batches

    def update(self, minibatch: TrajectoryBatch) -> dict[str, Any]:
        """One optimizer update on `minibatch`; returns its metrics row."""
        lags = self.step - minibatch.behavior_version  # [B], one per group
        self.rollouts.sleep()  # vLLM's sleep mode: the learner gets the GPU's memory
        bounds = {}  # the quantities of §4.2's chain at theta_n, before the update
        if self.bounds is not None:
            bounds = self.bounds.measure(self.model, minibatch, self.step, self.schedule)
        metrics = self.learner.step(minibatch, self.step)
        row: dict[str, Any] = {
            "step": self.step,
            "reward/mean": float(minibatch.rewards.mean()),
            "reward/std": float(minibatch.rewards.std()),
            "response/length_mean": float(minibatch.response_len.float().mean()),
            "response/truncated_frac": float(minibatch.truncated.float().mean()),
            "staleness/lag": float(lags.double().mean()),
            "staleness/lag_max": int(lags.max()),
            "staleness/behavior_version": int(minibatch.behavior_version.min()),
        }
        if self.schedule.item == "group":  # groups of one batch carry their own lags
            row["staleness/lag_min"] = int(lags.min())
            row["staleness/lag_std"] = float(lags.double().std(unbiased=False))
        learner_at_behavior = minibatch.learner_logprobs
        if learner_at_behavior is None and int(lags.max()) == 0:  # current policy = behavior
            learner_at_behavior = self.learner.last_logprobs
        if learner_at_behavior is not None:
            maskf = minibatch.response_mask().float()
            gap = (minibatch.engine_logprobs - learner_at_behavior).abs() * maskf
            row["mismatch/logprob_abs_mean"] = float(gap.sum() / maskf.sum().clamp(min=1))
        row.update(self.rollouts.take_mismatch())  # every `mismatch_every` updates, at lag 0
        row.update(metrics)
        row.update(bounds)
        row["perf/rollout_seconds"] = self.rollouts.take_seconds()
        if self.scorer is not None:  # beside reward/mean: answers a timeout scored incorrect
            row["reward/scoring_timeouts"] = self.rollouts.take_scoring_timeouts()
        self.step += 1
        return row

    def evaluate(self, writer: RunWriter) -> None:
        """Evaluate the current policy on the eval sets (greedy and/or sampled Pass@1)."""
        if self.eval_sets:
            self.rollouts.sync(self.model, self.step)
            self.evaluator.evaluate(self.step, writer)

    def save(self) -> Path:
        """A checkpoint of the current step (`llm_runs.checkpoint`)."""
        state = self.learner.method_state
        return ckpt.save_checkpoint(
            self.out,
            self.step,
            model=self.model,
            tokenizer=self.tokenizer,
            optimizer=self.learner.optimizer,
            scheduler=self.learner.scheduler,
            schedule_state=self.schedule.state_dict(),
            method_state=None if state is None else state.state_dict(),
            counters={"launches": self.rollouts.launches},
            keep=self.config.keep_checkpoints,
            config=dataclasses.asdict(self.config),
            model_copy_dtype=torch.bfloat16 if self.config.keep_checkpoint_models else None,
        )

    # -- the loop ----------------------------------------------------------------------------

    def run(self, on_step: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Train to `total_steps`; return the summary. `on_step(row)` runs after each update."""
        config = self.config
        started = time.time()
        self._setup()
        resolved = {
            **asdict(config),
            # what "auto" resolved to (the config's own values stay as given: a resume compares
            # them with its own)
            "optimizer_used": self.optimizer_name,
            "resolved_learner_device": str(self.placement.learner_device),
            "resolved_engine_device": str(self.placement.engine_device),
            "resolved_learner_dtype": str(self.placement.learner_dtype),
            "resolved_learner_compute_dtype": str(self.placement.autocast_dtype),
            "reward_fn": getattr(self.reward_fn, "__qualname__", None),
            "metric_names": METRIC_NAMES,
        }
        if config.resume:
            segment: dict[str, Any] = {
                "config_changes": {k: [a, b] for k, (a, b) in self.resume_changes.items()},
                "resumed_from_step": self.step,
            }
            if self.request.asked:
                segment["request"] = self.request.as_record()
            (self.out / "summary.json").unlink(missing_ok=True)
            writer = RunWriter.resume(
                self.out, resolved, keep_steps_below=self.step, segment=segment
            )
        else:
            writer = RunWriter.fresh(self.out, resolved)
        progress = None
        if config.progress:
            from tqdm.auto import tqdm

            progress = tqdm(total=config.total_steps, initial=self.step, desc="train", unit="step")
        try:
            if config.eval_every and self.step % config.eval_every == 0:
                self.evaluate(writer)
            while self.step < config.total_steps:
                for batch in self.next_batches():
                    per = config.minibatch_groups
                    for k in range(config.inner_steps):
                        row = self.update(batch.groups(k * per, (k + 1) * per))
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
                        every = config.checkpoint_every
                        batch_done = k == config.inner_steps - 1  # checkpoints between batches
                        if batch_done and (last or (every and self.step % every == 0)):
                            writer.sync()  # the rows it covers reach the disk before it
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
            self.rollouts.engine.close()

    def lag_statistics(self) -> dict[str, float] | None:
        """The realised lags over groups, as in Theorem 1 (`gmc_grpo.staleness.lag_statistics`:
        mean, `tau2`, `tau4`, max, within-batch spread), per consumed rollout batch; None before
        the first update. Under the fixed-delay and length-coupled schedules every group of a
        batch has the batch's lag."""
        if not self.schedule.realised_lags:
            return None
        return lag_statistics(self.schedule.group_lags(self.config.num_groups))

    def _summary(self, seconds: float) -> dict[str, Any]:
        rows = read_jsonl(self.out / "metrics.jsonl")
        rewards = [r["reward/mean"] for r in rows]
        lags = [r["staleness/lag"] for r in rows]
        k = max(1, len(rows) // SUMMARY_PARTS)
        return {
            "steps": self.step,
            "method": self.config.method,
            "schedule": self.config.schedule,
            "delay": self.config.delay,
            "reward_first_10pct": sum(rewards[:k]) / k if rewards else None,
            "reward_last_10pct": sum(rewards[-k:]) / k if rewards else None,
            # responses the scorer counted incorrect after two CPU-limit timeouts, whole run
            "reward_scoring_timeouts": sum(int(r.get("reward/scoring_timeouts", 0)) for r in rows),
            "lag_mean": sum(lags) / len(lags) if lags else None,
            "lag_statistics": self.lag_statistics(),
            "seconds_this_session": seconds,
            "optimizer": self.optimizer_name,
            "checkpoint": str(ckpt.latest_checkpoint(self.out)),
        }


def rebuild_lr_schedule(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LambdaLR,
    saved: dict[str, Any],
    peak_lr: float,
) -> None:
    """Restore a checkpoint's learning-rate scheduler with the schedule of the current config.

    `LambdaLR.state_dict()` stores the `CosineWithWarmup` settings (`total_steps`, warm-up) of
    the run that wrote it; loading them would keep the old horizon, past which the rate is 0
    (what an extended run would train with). Only the step counter is taken from the
    checkpoint; the factor is `scheduler`'s own (built from this config), the peak `peak_lr`,
    and the optimizer's rate is recomputed for the next update.
    """
    state = {**saved, "lr_lambdas": [None] * len(scheduler.lr_lambdas)}
    state["base_lrs"] = [peak_lr] * len(optimizer.param_groups)
    scheduler.load_state_dict(state)
    rates = []
    for group, factor in zip(optimizer.param_groups, scheduler.lr_lambdas, strict=True):
        group["initial_lr"] = peak_lr
        group["lr"] = peak_lr * factor(scheduler.last_epoch)
        rates.append(group["lr"])
    scheduler._last_lr = rates  # what get_last_lr() reports


def train(
    config: LLMTrainConfig,
    *,
    engine_factory: Callable[[Path], Any] | None = None,
    reward_fn: RewardFn | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    notice: Callable[[str], None] | None = None,
    request: ResumeRequest | None = None,
) -> dict[str, Any]:
    """Run one training job; return its summary (see `Trainer`).

    Holds the lock of `config.out` throughout (`gmc_grpo.runlock`: a second writer is refused);
    transformers' own bars (loading, writing weight shards) are off: the run's own bars (the
    warm-up's, the training's, with `config.progress`) say what is happening.
    """
    with run_lock(config.out), transformers_progress(False):
        trainer = Trainer(
            config,
            engine_factory=engine_factory,
            reward_fn=reward_fn,
            notice=notice,
            request=request,
        )
        return trainer.run(on_step)
