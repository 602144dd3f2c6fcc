"""The two-shot prompt of Appendix B.1, used for training and evaluation alike.

The paper says only that "training and evaluation use the same two-shot prompt, which instructs
the model to reason step by step and place its final answer in \\boxed{}"; it does not print the
demonstrations. What follows is our interpretation, fixed here so every run uses the same text:

- an instruction line, then two worked demonstrations and the target problem, each introduced by
  the header `Problem:` and answered after the header `Solution:`;
- the demonstrations are two MATH *training* problems chosen by a fixed rule: the precalculus
  problem about `det(AB)` and the algebra problem about Terrell's weights (short, one-step,
  integer answers; both appear in a widely used public few-shot prompt for MATH). The problem
  statements are MATH's; the worked solutions are our own wording. `llm_runs.data` removes both
  from the training pool (matched on whitespace-normalised problem text);
- generation stops at the next demonstration header: the stop string is `"\\nProblem:"`
  (`STOP_STRINGS`), so a base model that starts a new problem is cut there;
- prompts are truncated to 1,024 tokens and completions to 4,096 tokens (Appendix B.1); both
  limits are configurable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

PROBLEM_HEADER = "Problem:"
SOLUTION_HEADER = "Solution:"
# Generation stops at the next demonstration header (not included in the completion).
STOP_STRINGS: tuple[str, ...] = ("\n" + PROBLEM_HEADER,)
# Appendix B.1: "Prompts and completions are truncated at 1,024 and 4,096 tokens, respectively."
MAX_PROMPT_TOKENS = 1024
MAX_COMPLETION_TOKENS = 4096

INSTRUCTION = (
    "Solve each math problem. Reason step by step, then write the final answer inside \\boxed{}."
)


@dataclass(frozen=True)
class Demonstration:
    """A worked example of the prompt: a MATH training problem and our own worked solution.

    subject: the MATH subject config the problem comes from (`EleutherAI/hendrycks_math`).
    problem: the problem statement as in MATH train.
    solution: our step-by-step solution, ending with the answer in `\\boxed{}`.
    answer: the boxed answer (checked against `solution` by the tests).
    """

    subject: str
    problem: str
    solution: str
    answer: str


DEMONSTRATIONS: tuple[Demonstration, Demonstration] = (
    Demonstration(
        subject="precalculus",
        problem=(
            "If $\\det \\mathbf{A} = 2$ and $\\det \\mathbf{B} = 12,$ then find "
            "$\\det (\\mathbf{A} \\mathbf{B}).$"
        ),
        solution=(
            "The determinant of a product is the product of the determinants, so "
            "$\\det (\\mathbf{A} \\mathbf{B}) = (\\det \\mathbf{A})(\\det \\mathbf{B})$. "
            "With the given values this is $2 \\cdot 12 = 24$. "
            "The final answer is $\\boxed{24}$."
        ),
        answer="24",
    ),
    Demonstration(
        subject="algebra",
        problem=(
            "Terrell usually lifts two 20-pound weights 12 times. If he uses two 15-pound "
            "weights instead, how many times must Terrell lift them in order to lift the same "
            "total weight?"
        ),
        solution=(
            "One lift of the two 20-pound weights moves $2 \\cdot 20 = 40$ pounds, so 12 lifts "
            "move $12 \\cdot 40 = 480$ pounds in all. One lift of the two 15-pound weights moves "
            "$2 \\cdot 15 = 30$ pounds. To move 480 pounds he needs $480 / 30 = 16$ lifts. "
            "The final answer is $\\boxed{16}$."
        ),
        answer="16",
    ),
)


def normalize_problem_text(text: str) -> str:
    """Whitespace-collapsed problem text, the key that matches a demonstration to MATH train."""
    return " ".join(text.split())


DEMONSTRATION_KEYS = frozenset(normalize_problem_text(d.problem) for d in DEMONSTRATIONS)


def is_demonstration(problem: str) -> bool:
    """Whether `problem` is one of the two demonstrations (so it must leave the training pool)."""
    return normalize_problem_text(problem) in DEMONSTRATION_KEYS


def _block(problem: str, solution: str | None) -> str:
    """One `Problem:` / `Solution:` block; the target block ends right after the header."""
    head = f"{PROBLEM_HEADER}\n{problem.strip()}\n\n{SOLUTION_HEADER}"
    return head if solution is None else f"{head}\n{solution.strip()}"


def build_prompt(problem: str) -> str:
    """The full two-shot prompt for `problem` (instruction, two demonstrations, the problem).

    The model continues after the final `Solution:` header.
    """
    blocks = [INSTRUCTION]
    blocks += [_block(d.problem, d.solution) for d in DEMONSTRATIONS]
    blocks.append(_block(problem, None))
    return "\n\n".join(blocks)


class _Tokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


def truncate_prompt(
    prompt: str,
    tokenizer: _Tokenizer,
    max_tokens: int = MAX_PROMPT_TOKENS,
    side: Literal["left", "right"] = "left",
) -> tuple[str | list[int], bool]:
    """Fit `prompt` into `max_tokens` tokens; return `(prompt or token ids, was_truncated)`.

    A prompt that fits comes back as its text. A longer one comes back as token ids: its encoding
    as the engine feeds it (`add_special_tokens=True`), cut to exactly `max_tokens` ids, special
    tokens the tokenizer adds at either end kept. The rollout engines take token ids as a prompt
    (`llm_runs.engines.base.Prompt`), so the cut prompt is never decoded and re-encoded: a text
    decoded from a cut encoding can re-encode to more tokens (a multi-byte character split by
    the cut decodes to U+FFFD, three bytes; merges differ at the new start), and the engine
    would then refuse a prompt over `max_prompt_tokens` (tested).

    side: "left" (default) drops the beginning (instruction and demonstrations go first, the
    problem's end and the `Solution:` header are kept so the model still answers); "right" drops
    the end. Appendix B.1 truncates prompts at 1,024 tokens without saying which side; keeping
    the end is our choice.
    """
    if max_tokens < 1:
        raise ValueError(f"truncate_prompt: max_tokens must be >= 1, got {max_tokens}")
    if side not in ("left", "right"):
        raise ValueError(f"truncate_prompt: side must be 'left' or 'right', got {side!r}")
    full = list(tokenizer.encode(prompt, add_special_tokens=True))
    if len(full) <= max_tokens:
        return prompt, False
    plain = list(tokenizer.encode(prompt, add_special_tokens=False))
    head, tail = _special_ends(full, plain)
    budget = max_tokens - len(head) - len(tail)
    if budget < 1:
        raise ValueError(
            f"truncate_prompt: max_tokens={max_tokens} leaves no room for the prompt beside the "
            f"{len(head) + len(tail)} special tokens the tokenizer adds"
        )
    kept = plain[-budget:] if side == "left" else plain[:budget]
    return head + kept + tail, True


def _special_ends(full: list[int], plain: list[int]) -> tuple[list[int], list[int]]:
    """The ids the tokenizer adds before and after `plain` in `full` (none when not found)."""
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start], full[start + len(plain) :]
    return [], []
