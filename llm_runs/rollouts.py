"""The rollout producer: engine, sampling and rewards -> a `TrajectoryBatch` of `B` groups of `G`.

`RolloutProducer.launch(model, version, count, k)` makes the next `count` launches of `k` groups
each (a batch of `num_groups` groups, or one group under the worker schedule) in ONE engine call:
it takes the next problems of the training pool (consecutive slices of a seeded permutation per
epoch, the "prompt stream"), samples `group_size` completions of each from the rollout engine
(temperature and top-p of its `RolloutSettings`, B.1: 1.0 and 1.0), checks the engine's output, scores it
and packs everything into tensors: token ids, the engine's per-token sampling log-probs (the
behavior policy's, recorded at generation), rewards, truncation flags. Launch `l` holds stream
positions `[l k, (l + 1) k)` and every sample has its own seed, so a launch holds the same samples
whether it was generated alone or with others (the FIFO's fill is one call of `D + 1` batches).
Before generating, the engine is given the learner's weights when the learner has moved since
the last copy (`sync`), so every batch comes from the current policy version. Each launch is a
`Rollout`: an engine in its own process (`llm_runs.engines.remote`) keeps generating while the
learner updates, and the batch is scored when first asked for. Rollouts of version 0 (the initial
policy) come from the shared cache when the run has one (`llm_runs.cache.RolloutCache`).

Every `mismatch_every` updates the first `num_groups` groups launched at that version are also
scored by the learner (one forward pass) to measure the train-inference mismatch at lag 0
(`llm_runs.mismatch`); `take_mismatch` hands the metrics to the update's row. With vLLM's sleep
mode (`engine_sleeps`), `sleep` frees the engine's memory for the learner's step and `sync` wakes
it before the next weight update.

The task decides the prompt, the stop strings and the reward (`Task`): "math" is the two-shot
prompt of `llm_runs.prompts` (cut at `max_prompt_tokens` tokens, at the token level: a cut prompt
goes to the engine as token ids, never decoded and re-encoded) scored by math-verify
(`llm_runs.scoring.pool.Scorer`); "arithmetic" is the CPU demonstration of `llm_runs.arithmetic`
with an exact-match reward.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from gmc_grpo.seeding import base_seed, torch_generator
from llm_runs.batch import PendingBlock, Rollout, TrajectoryBatch, batch_logprobs
from llm_runs.config import ProblemSettings, RolloutSettings

# `(completions, references) -> rewards`, e.g. a custom verifier
RewardFn = Callable[[Sequence[str], Sequence[str]], Sequence[float]]


def load_problems(settings: ProblemSettings) -> tuple[list[Any], dict[str, list[Any]]]:
    """The task's `(training problems, {eval set name: problems})`; evaluation sets only when
    the run evaluates (`settings.eval_benchmarks` not empty; read before any compute, so a
    missing dataset stops the run early)."""
    if settings.task == "arithmetic":
        from llm_runs.arithmetic import ArithmeticTask

        train, held_out = ArithmeticTask(**settings.arithmetic).problems()
        evals = {"arithmetic": held_out} if settings.eval_benchmarks and held_out else {}
        return train, evals
    from llm_runs.data import load_benchmark, load_math_train

    train, _report = load_math_train(settings.data_dir)
    if not train:
        raise ValueError("the MATH training pool is empty: check --data-dir")
    evals = {}
    for name in settings.eval_benchmarks:
        evals[name] = load_benchmark(name, settings.data_dir, settings.eval_limit)
    return train, evals


@dataclass(frozen=True)
class Task:
    """What the task decides about a rollout: the prompt (math: cut at `max_prompt_tokens` with
    the policy's `tokenizer`) and the stop strings. The problems come from `load_problems`.

    name: `LLMTrainConfig.task` ("math" or "arithmetic"); max_prompt_tokens: the prompt budget.
    """

    name: str
    max_prompt_tokens: int
    tokenizer: Any

    def prompt(self, problem: str) -> str | list[int]:
        """The prompt of one problem (math: the two-shot prompt; one longer than
        `max_prompt_tokens` comes back as its token ids cut to that many, which the engine feeds
        as they are: `llm_runs.prompts.truncate_prompt`)."""
        if self.name == "arithmetic":
            from llm_runs.arithmetic import build_prompt

            return build_prompt(problem)
        from llm_runs import prompts

        text = prompts.build_prompt(problem)
        return prompts.truncate_prompt(text, self.tokenizer, self.max_prompt_tokens)[0]

    @property
    def stop(self) -> tuple[str, ...]:
        """Stop strings of a completion (math: the next `Problem:` header)."""
        if self.name == "arithmetic":
            return ()
        from llm_runs.prompts import STOP_STRINGS

        return STOP_STRINGS


class RolloutProducer:
    """Makes the rollout batches of a run (see the module docstring).

    settings: the run's `RolloutSettings`; engine: a `RolloutEngine` (`llm_runs.engines`); task:
    prompts and stops; problems: the training pool; reward_fn: replaces `settings.reward` when
    given; scorer: the math-verify
    `Scorer` (reward "math_verify"); cache: a `llm_runs.cache.RolloutCache` that stores and
    serves the version-0 rollouts; engine_sleeps: the engine sleeps during learner steps
    (`sleep`). `launches` counts the batches launched, or the groups under the worker schedule
    (checkpointed).
    """

    def __init__(
        self,
        settings: RolloutSettings,
        engine: Any,
        task: Task,
        problems: Sequence[Any],
        *,
        pad_id: int,
        reward_fn: RewardFn | None = None,
        scorer: Any = None,
        engine_version: int = 0,
        launches: int = 0,
        cache: Any = None,
        engine_sleeps: bool = False,
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.task = task
        self.problems = problems
        self.pad_id = pad_id
        self.reward_fn = reward_fn
        self.scorer = scorer
        self.engine_version = engine_version  # learner version whose weights the engine holds
        self.launches = launches
        self.cache = cache  # `llm_runs.cache.RolloutCache` of version-0 rollouts, or None
        self.engine_sleeps = engine_sleeps  # vLLM's sleep mode during learner steps
        self._asleep = False
        self.seconds = 0.0  # rollout time since the last `take_seconds`
        self.scoring_timeouts = 0  # since the last `take_scoring_timeouts`
        self._clock_depth = 0
        self._perms: dict[int, list[int]] = {}
        self._mismatch: dict[str, float] = {}  # the last lag-0 measurement, until taken
        self._measured_version: int | None = None

    # -- engine weights and memory ------------------------------------------------------------

    def sync(self, model: torch.nn.Module, version: int) -> None:
        """Give the engine the learner's weights of `version` unless it holds them already (an
        engine asleep, `engine_sleeps`, is woken first)."""
        if self.engine_sleeps and self._asleep:
            if torch.cuda.is_available():  # the learner's cached blocks go back to the driver,
                torch.cuda.empty_cache()  # which vLLM's own allocator wakes into
            self.engine.wake_up()
            self._asleep = False
        if self.engine_version != version:
            self.engine.update_weights(model.state_dict())
            self.engine_version = version

    def sleep(self) -> None:
        """Let the engine free its accelerator memory during the learner's step (vLLM's sleep
        mode, `vllm_sleep_mode`); a no-op for an engine that does not sleep. The next
        `sync` wakes it before the weight update."""
        if self.engine_sleeps and not self._asleep:
            self.engine.sleep()
            self._asleep = True

    def take_seconds(self) -> float:
        """Seconds the trainer spent on rollouts since the last call (launching, waiting for an
        engine in its own process, scoring; logged as `perf/rollout_seconds`)."""
        seconds, self.seconds = self.seconds, 0.0
        return seconds

    def take_mismatch(self) -> dict[str, float]:
        """The lag-0 mismatch metrics measured since the last call (`mismatch_every`), or {}."""
        metrics, self._mismatch = self._mismatch, {}
        return metrics

    # -- launches --------------------------------------------------------------------------------

    def stream_indices(self, start: int, count: int) -> list[int]:
        """Problems at positions `[start, start + count)` of the run's prompt stream: consecutive
        slices of per-epoch permutations of the training pool (stream `llm_data_order` of
        `gmc_grpo.seeding`, path `(epoch,)`)."""
        n = len(self.problems)
        out = []
        for k in range(start, start + count):
            epoch, pos = divmod(k, n)
            if epoch not in self._perms:
                gen = torch_generator(self.settings.run_seed, "llm_data_order", epoch)
                self._perms = {epoch: torch.randperm(n, generator=gen).tolist()}
            out.append(self._perms[epoch][pos])
        return out

    def launch(
        self, model: torch.nn.Module, version: int, count: int, groups_per_launch: int
    ) -> list[Rollout]:
        """The next `count` launches of `groups_per_launch` groups each (a batch of
        `num_groups`, or one group under the worker schedule) from the learner's policy at
        `version` (`model` holds its weights), in ONE engine call.

        Launch `l` holds stream positions `[l k, (l + 1) k)` (`k = groups_per_launch`), each
        sample with its own seed, so a launch holds the same samples whichever call generated it
        (`Rollout` trims it to its own lengths). An engine in its own process keeps generating
        after this returns (`Rollout.result()` waits); what needs the tokens at once waits here:
        the learner's log-probs at generation (`learner_logprobs_at_generation`,
        `behavior_logprobs="learner"`), a mismatch measurement (`mismatch_every`) and the
        version-0 cache.
        """
        first, k = self.launches, groups_per_launch
        self.launches += count
        with self._clock():
            return self._launch(model, version, first, count, k)

    def _launch(
        self, model: torch.nn.Module, version: int, first: int, count: int, k: int
    ) -> list[Rollout]:
        self.sync(model, version)
        starts = [(first + i) * k for i in range(count)]
        if version == 0 and self.cache is not None:
            rollouts = self._from_cache(version, starts, k)
        else:
            block = self._submit(version, starts[0], count * k, f"launches {first}..")
            rollouts = [Rollout(block, i * k, (i + 1) * k) for i in range(count)]
        settings = self.settings
        if settings.learner_logprobs_at_generation or settings.behavior_logprobs == "learner":
            for rollout in rollouts:
                batch = rollout.result()
                batch.learner_logprobs = self._learner_logprobs(model, batch)
        if settings.mismatch_every and version % settings.mismatch_every == 0:
            self._measure_mismatch(model, version, rollouts)
        return rollouts

    @contextmanager
    def _clock(self) -> Iterator[None]:
        """Add the block's wall time to `seconds` (once: nested blocks are not added again)."""
        self._clock_depth += 1
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._clock_depth -= 1
            if self._clock_depth == 0:
                self.seconds += time.perf_counter() - t0

    def _from_cache(self, version: int, starts: list[int], k: int) -> list[Rollout]:
        """Version-0 launches from the shared cache, one entry per launch; when any is missing
        the whole call is generated (one engine call) and the missing entries stored."""
        cache = self.cache
        if not all(cache.usable(start, k) for start in starts):  # drops a damaged entry
            block = self._submit(version, starts[0], len(starts) * k, "version-0 launches").result()
            made = {
                start: block.groups(i * k, (i + 1) * k).trimmed() for i, start in enumerate(starts)
            }
        else:
            made = {}

        def build(start: int) -> TrajectoryBatch:
            if start not in made:  # an entry found damaged and dropped: generated alone
                one = self._submit(version, start, k, "a version-0 launch").result()
                made[start] = one.groups(0, k).trimmed()
            return made[start]

        return [
            Rollout.ready(cache.get_or_build(start, k, lambda start=start: build(start)))
            for start in starts
        ]

    def _submit(self, version: int, start: int, count: int, what: str) -> PendingBlock:
        """Start the engine call of `count` groups at stream positions `[start, start + count)`;
        the block's batch is scored when first asked for."""
        from llm_runs.engines.base import Finished, SamplingConfig, submit

        settings = self.settings
        indices = self.stream_indices(start, count)
        problems = [self.problems[i] for i in indices]
        g = settings.group_size
        sampling = SamplingConfig(
            n=g,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_completion_tokens,
            stop=self.task.stop,
            # one stream per sample across the whole run: stream position k's sample j has seed
            # base + k G + j (`llm_sampling`'s 62-bit base; `engines.base.sample_seed`)
            seed=base_seed(settings.run_seed, "llm_sampling") + start * g,
        )
        handle = submit(self.engine, [self.task.prompt(p.problem) for p in problems], sampling)

        def finish() -> TrajectoryBatch:
            with self._clock():
                return self._to_batch(handle.result(), problems, indices, version, what)

        block = PendingBlock(finish)
        if isinstance(handle, Finished):  # generated already (in this process): score it now
            block.result()
        return block

    def _learner_logprobs(self, model: torch.nn.Module, batch: TrajectoryBatch) -> torch.Tensor:
        """The learner's log-probs of `batch` under `model` (one forward pass, no gradient)."""
        settings = self.settings
        return batch_logprobs(
            model,
            batch,
            settings.logit_chunk,
            settings.groups_per_micro,
            packed=settings.packed_sequences,
        )

    def _measure_mismatch(
        self, model: torch.nn.Module, version: int, rollouts: Sequence[Rollout]
    ) -> None:
        """The lag-0 mismatch (`llm_runs.mismatch`) of the first `num_groups` groups launched
        at `version`, against the learner's log-probs of the same weights (once per version)."""
        if version == self._measured_version:
            return
        self._measured_version = version
        from llm_runs.mismatch import mismatch_metrics

        groups, taken = 0, []
        for rollout in rollouts:
            if groups >= self.settings.num_groups:
                break
            taken.append(rollout.result())
            groups += taken[-1].num_groups
        batch = TrajectoryBatch.concat(taken)
        learner = batch.learner_logprobs
        if learner is None:
            learner = self._learner_logprobs(model, batch)
        self._mismatch = mismatch_metrics(
            batch.engine_logprobs, learner, batch.response_mask(), self.settings.method_settings
        )

    def batch_of(
        self,
        samples: Sequence[Sequence[Any]],
        problems: Sequence[Any],
        indices: Sequence[int],
        version: int,
    ) -> TrajectoryBatch:
        """Check and pack engine samples `[len(problems)][G]` of `problems` (pool positions
        `indices`) into a scored batch of the policy at `version` (the `llm bias` draws)."""
        return self._to_batch(samples, problems, indices, version, f"a draw of version {version}")

    def rewards(self, texts: Sequence[str], references: Sequence[str]) -> list[float]:
        """The reward of each completion: `reward_fn`, exact match, or math-verify."""
        if self.reward_fn is not None:
            rewards = [float(r) for r in self.reward_fn(texts, references)]
            if len(rewards) != len(texts):
                raise ValueError(
                    f"reward_fn returned {len(rewards)} rewards for {len(texts)} texts"
                )
            return rewards
        if self.settings.reward == "exact":
            from llm_runs.arithmetic import exact_reward

            return [exact_reward(t, r) for t, r in zip(texts, references, strict=True)]
        assert self.scorer is not None
        verdicts, timed_out = self.scorer.score_counted(list(texts), list(references))
        self.scoring_timeouts += sum(timed_out)
        return [float(v) for v in verdicts]

    def take_scoring_timeouts(self) -> int:
        """Responses scored incorrect since the last call only because their comparison reached
        the scorer's CPU limit twice (`llm_runs.scoring.pool.Scorer.score_counted`)."""
        count, self.scoring_timeouts = self.scoring_timeouts, 0
        return count

    def _to_batch(self, samples, problems, indices, version: int, what: str) -> TrajectoryBatch:
        """Check the engine's output (counts, NaN log-probs) and pack it into tensors."""
        g = self.settings.group_size
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
                        f"{p} sample {j} of {what}: the behavior log-probs "
                        "are unusable; check the engine's dtype and sampling settings"
                    )
                if not s.prompt_token_ids:
                    raise ValueError(f"the engine returned no prompt token ids for prompt {p}")
        b = len(problems)
        prompt_len = torch.tensor([[len(s.prompt_token_ids) for s in grp] for grp in samples])
        response_len = torch.tensor([[len(s.token_ids) for s in grp] for grp in samples])
        width = int((prompt_len + response_len).max())
        t = max(1, int(response_len.max()))
        input_ids = torch.full((b, g, width), self.pad_id, dtype=torch.int32)
        logprobs = torch.zeros((b, g, t), dtype=torch.float32)
        for i, grp in enumerate(samples):
            for j, s in enumerate(grp):
                seq = list(s.prompt_token_ids) + list(s.token_ids)
                input_ids[i, j, : len(seq)] = torch.tensor(seq, dtype=torch.int32)
                logprobs[i, j, : len(s.token_ids)] = torch.tensor(s.logprobs, dtype=torch.float32)
        texts = [s.text for grp in samples for s in grp]
        refs = [p.answer for p in problems for _ in range(g)]
        rewards = torch.tensor(self.rewards(texts, refs), dtype=torch.float32).view(b, g)
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
            pad_id=self.pad_id,
        )
