"""The two-shot prompt: layout, stop string, truncation."""

from __future__ import annotations

from llm_runs.prompts import (
    DEMONSTRATIONS,
    MAX_COMPLETION_TOKENS,
    MAX_PROMPT_TOKENS,
    PROBLEM_HEADER,
    SOLUTION_HEADER,
    STOP_STRINGS,
    build_prompt,
    is_demonstration,
    truncate_prompt,
)


class CharTokenizer:
    """One token per character (enough to test truncation exactly)."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids)


def test_prompt_layout() -> None:
    prompt = build_prompt("What is $1+1$?")
    assert prompt.count(PROBLEM_HEADER) == 3
    assert prompt.count(SOLUTION_HEADER) == 3
    assert prompt.endswith("Problem:\nWhat is $1+1$?\n\nSolution:")
    assert "step by step" in prompt and "\\boxed{}" in prompt
    positions = [prompt.index(d.problem) for d in DEMONSTRATIONS]
    assert positions == sorted(positions)
    assert all(d.solution in prompt for d in DEMONSTRATIONS)


def test_stop_string_is_the_next_problem_header() -> None:
    prompt = build_prompt("x")
    # every demonstration after the first starts at a stop string: the model's own next
    # "Problem:" block is cut at the same place
    assert prompt.count(STOP_STRINGS[0]) == 3
    completion = " It is 2, so \\boxed{2}.\n\nProblem:\nWhat is 3+3?"
    cut = completion.split(STOP_STRINGS[0])[0]
    assert cut == " It is 2, so \\boxed{2}.\n"


def test_paper_limits() -> None:
    assert MAX_PROMPT_TOKENS == 1024  # Appendix B.1
    assert MAX_COMPLETION_TOKENS == 4096  # Appendix B.1


def test_truncation_keeps_the_end_by_default() -> None:
    tok = CharTokenizer()
    prompt = build_prompt("a long problem " * 10)
    text, cut = truncate_prompt(prompt, tok, 50)
    assert cut and len(text) == 50 and prompt.endswith(text)
    assert text.endswith("Solution:")
    right, cut_right = truncate_prompt(prompt, tok, 50, side="right")
    assert cut_right and prompt.startswith(right)
    same, not_cut = truncate_prompt("short", tok, 50)
    assert same == "short" and not not_cut


def test_is_demonstration_ignores_whitespace() -> None:
    demo = DEMONSTRATIONS[1].problem
    assert is_demonstration(demo)
    assert is_demonstration("  " + demo.replace(" ", "\n", 3) + "\n")
    assert not is_demonstration(demo + " Explain.")
