"""A synthetic arithmetic task for the CPU demonstration, and its supervised warm-up.

Problems are additions `a+b` of integers in `[0, max_operand]` (written by us, generated from a
seed), e.g. the prompt

    Problem: 17+5
    Answer:

with the target completion ` \\boxed{22}` followed by the EOS token. The reward is 1 when the
last complete `\\boxed{}` holds the exact sum (`exact_reward`: answers are integers, so a
normalised string match is exact and needs no symbolic scorer).

The tiny model first learns the answer format by a short supervised warm-up
(`supervised_warmup`: teacher forcing on prompt + target, cross-entropy on the target tokens),
stopped early on purpose so that it answers in the right format but is often wrong; RL then
raises its reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gmc_grpo.seeding import torch_generator
from llm_runs.data import Problem
from llm_runs.scoring.answers import extract_last_boxed, normalize_answer

PROMPT_TEMPLATE = "Problem: {problem}\nAnswer:"


@dataclass(frozen=True)
class ArithmeticTask:
    """The problem pool.

    max_operand: operands are drawn from `[0, max_operand]`.
    num_train: training problems (distinct pairs, drawn from the seed).
    num_eval: held-out problems (distinct pairs, disjoint from the training ones).
    seed: generator seed of the draw.
    """

    max_operand: int = 49
    num_train: int = 512
    num_eval: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_operand < 1:
            raise ValueError(f"ArithmeticTask.max_operand must be >= 1, got {self.max_operand}")
        pairs = (self.max_operand + 1) ** 2
        if self.num_train < 1 or self.num_eval < 0 or self.num_train + self.num_eval > pairs:
            raise ValueError(
                f"ArithmeticTask needs 1 <= num_train and num_train + num_eval <= {pairs} "
                f"distinct pairs, got num_train={self.num_train}, num_eval={self.num_eval}"
            )

    def problems(self) -> tuple[list[Problem], list[Problem]]:
        """`(train, eval)` problems, deterministic in `seed` (stream `llm_problems` of
        `gmc_grpo.seeding`)."""
        side = self.max_operand + 1
        gen = torch_generator(self.seed, "llm_problems")
        order = torch.randperm(side * side, generator=gen)[: self.num_train + self.num_eval]
        out = []
        for k, code in enumerate(order.tolist()):
            a, b = divmod(code, side)
            out.append(
                Problem(
                    id=f"arithmetic/{k}",
                    problem=f"{a}+{b}",
                    answer=str(a + b),
                    source="arithmetic",
                )
            )
        return out[: self.num_train], out[self.num_train :]


def build_prompt(problem: str) -> str:
    """The prompt of one problem (`PROMPT_TEMPLATE`)."""
    return PROMPT_TEMPLATE.format(problem=problem)


def target_text(answer: str) -> str:
    """The completion the warm-up teaches (the EOS token is appended as a token)."""
    return f" \\boxed{{{answer}}}"


def exact_reward(completion: str, reference: str) -> float:
    """1.0 when the last complete box of `completion` equals `reference` after normalisation."""
    predicted = extract_last_boxed(completion)
    if not predicted:
        return 0.0
    return float(normalize_answer(predicted) == normalize_answer(reference))


def supervised_warmup(
    model: torch.nn.Module,
    tokenizer,
    problems: Sequence[Problem],
    *,
    steps: int,
    lr: float,
    batch_size: int,
    seed: int,
    answer_fraction: float = 1.0,
    progress: bool = False,
) -> list[float]:
    """Teach the answer format by teacher forcing; return the loss of every step.

    Each step draws `batch_size` problems (with replacement, stream `llm_warmup` of `seed`),
    builds `prompt + target + EOS`, and minimises the mean cross-entropy of the target and EOS
    tokens with `torch.optim.AdamW(lr)`. The model is updated in place.

    answer_fraction: the chance that a prompt's target is its own sum; otherwise it is the
    target of another problem drawn from the pool (with replacement; the draws come from the
    same generator, after the prompts, only when `answer_fraction < 1`). At 1 the model learns
    the sums; at 0 only the format and the pool's distribution of sums, nothing of which sum
    goes with which prompt (its reward is then about the chance that two random sums agree,
    `sum_s p_s^2`: 0.067 for operands 0-9); in between, a weak model that puts extra mass on
    the right sum, which RL can sharpen.
    progress: a tqdm bar over the steps (to stderr) with the current loss.
    """
    if steps < 0 or batch_size < 1 or not lr > 0:
        raise ValueError(
            f"supervised_warmup needs steps >= 0, batch_size >= 1, lr > 0; got steps={steps}, "
            f"batch_size={batch_size}, lr={lr}"
        )
    if not 0 <= answer_fraction <= 1:
        raise ValueError(
            f"supervised_warmup answer_fraction must be in [0, 1], got {answer_fraction}"
        )
    device = next(model.parameters()).device
    eos = tokenizer.eos_token_id
    encoded = []
    for p in problems:
        prompt = tokenizer.encode(build_prompt(p.problem), add_special_tokens=False)
        target = tokenizer.encode(target_text(p.answer), add_special_tokens=False) + [eos]
        encoded.append((prompt, target))
    gen = torch_generator(seed, "llm_warmup")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    was_training = model.training
    model.train()
    from tqdm.auto import tqdm

    losses = []
    bar = tqdm(total=steps, desc="supervised warm-up", unit="step", disable=not progress)
    for _ in range(steps):
        picks = torch.randint(len(encoded), (batch_size,), generator=gen).tolist()
        pairs = [encoded[i] for i in picks]
        if answer_fraction < 1:  # another problem's target for some prompts
            others = torch.randint(len(encoded), (batch_size,), generator=gen).tolist()
            own = (torch.rand(batch_size, generator=gen) < answer_fraction).tolist()
            pairs = [
                (encoded[i][0], encoded[i if keep else j][1])
                for i, j, keep in zip(picks, others, own, strict=True)
            ]
        seqs = [prompt + target for prompt, target in pairs]
        width = max(len(s) for s in seqs)
        ids = torch.full((batch_size, width), eos, dtype=torch.long)
        attn = torch.zeros((batch_size, width), dtype=torch.long)
        labels = torch.full((batch_size, width), -100, dtype=torch.long)
        for r, (prompt, target) in enumerate(pairs):
            n = len(prompt) + len(target)
            ids[r, :n] = torch.tensor(prompt + target)
            attn[r, :n] = 1
            labels[r, len(prompt) : n] = torch.tensor(target)
        logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
            labels[:, 1:].reshape(-1).to(device),
            ignore_index=-100,
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
        bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
        bar.update()
    bar.close()
    model.train(was_training)
    return losses
