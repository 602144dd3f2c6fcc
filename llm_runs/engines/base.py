"""The interface every rollout engine implements (vLLM and Hugging Face `generate`).

A learner or the evaluator hands prompts (texts, or token ids for a prompt cut at the token
limit) and a `SamplingConfig`; the engine returns, per prompt,
`n` `Sample`s with the token ids, the per-token log-probs of the sampling policy (the behavior
log-probs of the importance ratio, recorded at generation time), the text and the finish reason.
After each learner step the learner calls `update_weights` so the next batch comes from the
current policy.

`submit(engine, prompts, sampling)` starts a call and returns a handle whose `result()` gives the
samples: an engine in its own process (`remote.RemoteEngine`) keeps generating while the caller
goes on (the learner computes its update meanwhile); any other engine generates at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import torch

FinishReason = Literal["stop", "length"]
#: a prompt: its text (the engine encodes it, the tokenizer's special tokens added) or the token
#: ids fed to the model as they are (a prompt cut at `max_prompt_tokens`,
#: `llm_runs.prompts.truncate_prompt`)
Prompt = str | Sequence[int]


def prompt_ids(prompt: Prompt, encode: Callable[[str], list[int]]) -> list[int]:
    """The token ids fed to the model for `prompt`: `encode(prompt)` of a text, else its ids."""
    if isinstance(prompt, str):
        return encode(prompt)
    return [int(i) for i in prompt]


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample. Defaults are the paper's rollout settings (Appendix B.1).

    n: responses per prompt (the group size `G`; 8 in B.1).
    temperature: 1.0 in B.1; 0.0 means greedy decoding.
    top_p: 1.0 in B.1.
    max_tokens: completion budget (4,096 in B.1).
    stop: strings that end a completion (not included in the returned text).
    seed: base seed; the same seed gives the same samples on the same machine and engine.
    """

    n: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 4096
    stop: tuple[str, ...] = field(default_factory=tuple)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"SamplingConfig.n must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise ValueError(f"SamplingConfig.temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingConfig.top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"SamplingConfig.max_tokens must be >= 1, got {self.max_tokens}")


@dataclass
class Sample:
    """One sampled completion.

    token_ids: completion token ids `[L]` (prompt excluded). An EOS token that ended the
        completion is included (the policy's decision to stop is part of the trajectory); a stop
        string's tokens are excluded (see `trim_to_text` for the exact rule).
    logprobs: per-token log-probs `[L]` of `token_ids` under the sampling policy (at temperature 1
        and top-p 1 these are the policy's own log-probs; at another temperature or top-p they are
        of the distribution actually sampled from: `softmax(logits / T)` restricted to the top-p
        set and renormalised; for greedy decoding, temperature 0, of `softmax(logits)`).
    text: decoded completion (special tokens such as EOS skipped; stop string and everything after
        it excluded).
    finish_reason: "stop" (EOS or a stop string) or "length" (hit `max_tokens`).
    prompt_token_ids: the prompt's token ids `[P]` as the engine fed them to the model (the learner
        recomputes log-probs of `prompt_token_ids + token_ids`).
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: FinishReason
    prompt_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError(
                f"Sample has {len(self.token_ids)} token ids but {len(self.logprobs)} log-probs"
            )


def sample_seed(base_seed: int, prompt_index: int, n: int, sample_index: int) -> int:
    """Seed of sample `sample_index` of prompt `prompt_index` in one `generate` call.

    Both engines give sample `(p, j)` the seed `base_seed + p * n + j`, so every sample of a call
    has its own random stream, independent of the other prompts and samples in the batch (vLLM
    itself seeds the `j`-th child of a request seeded `s` with `s + j`).
    """
    return base_seed + prompt_index * n + sample_index


def find_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index in `text` where the earliest occurrence of any stop string begins, or None."""
    positions = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(positions) if positions else None


def trim_to_text(
    token_ids: Sequence[int],
    logprobs: Sequence[float],
    text: str,
    decode: Callable[[list[int]], str],
) -> tuple[list[int], list[float]]:
    """Trim a completion whose text was cut before a stop string.

    token_ids, logprobs: the generated tokens `[L]` and their log-probs `[L]`, up to (at least)
        the token in which the stop string ends.
    text: the completion text cut before the stop string.
    decode: token ids -> text (special tokens skipped), the tokenizer's decoding.
    Returns the longest prefix `token_ids[:k]` (and `logprobs[:k]`) whose decoding is a prefix of
    `text`. So the token in which the stop string begins, and every later token, are dropped.
    When the stop string begins at a token boundary (always, with a character-level tokenizer),
    `decode(token_ids[:k]) == text`. When it begins inside a token (e.g. stop `"\n"` and the
    token `".\n\n"`), that token is dropped whole and `text` keeps the characters of that token
    that precede the stop string (here `"."`), which no returned token covers.
    """
    if len(token_ids) != len(logprobs):
        raise ValueError(f"{len(token_ids)} token ids but {len(logprobs)} log-probs")
    ids = list(token_ids)
    for k in range(len(ids), -1, -1):
        if text.startswith(decode(ids[:k])):
            return ids[:k], list(logprobs[:k])
    return [], []  # unreachable: decode([]) == "" is a prefix of any text


class Finished:
    """The handle of an engine call that has already run (an engine in the caller's process)."""

    def __init__(self, samples: list[list[Sample]]) -> None:
        self.samples = samples

    def result(self) -> list[list[Sample]]:
        return self.samples


def submit(engine: RolloutEngine, prompts: Sequence[Prompt], sampling: SamplingConfig):
    """Start `engine.generate(prompts, sampling)`; the handle's `result()` gives its samples.

    An engine with a `submit` method of its own (`remote.RemoteEngine`) returns at once and
    generates in its process; any other engine generates now (`Finished`).
    """
    start = getattr(engine, "submit", None)
    if start is not None:
        return start(prompts, sampling)
    return Finished(engine.generate(prompts, sampling))


@runtime_checkable
class RolloutEngine(Protocol):
    """What the learner and the evaluator need from a rollout engine."""

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingConfig) -> list[list[Sample]]:
        """Sample `sampling.n` completions for each prompt (a text or token ids, `Prompt`):
        result `[len(prompts)][n]`."""
        ...

    def update_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load new policy weights in place (names as in the model's `state_dict()`)."""
        ...

    def close(self) -> None:
        """Release the engine's resources."""
        ...
