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


class ByteTokenizer:
    """One token per UTF-8 byte, decoding invalid bytes to U+FFFD (as byte-level BPE
    tokenizers do), with an added BOS id 0 (`add_special_tokens=True`)."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = [b + 1 for b in text.encode("utf-8")]
        return [0, *ids] if add_special_tokens else ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return bytes(i - 1 for i in ids if i > 0).decode("utf-8", errors="replace")


def test_truncation_keeps_the_end_by_default() -> None:
    tok = CharTokenizer()
    prompt = build_prompt("a long problem " * 10)
    ids, cut = truncate_prompt(prompt, tok, 50)
    assert cut and isinstance(ids, list) and len(ids) == 50
    text = tok.decode(ids)
    assert prompt.endswith(text) and text.endswith("Solution:")
    right, cut_right = truncate_prompt(prompt, tok, 50, side="right")
    assert cut_right and prompt.startswith(tok.decode(right))
    same, not_cut = truncate_prompt("short", tok, 50)
    assert same == "short" and not not_cut  # a prompt that fits stays text


def test_truncation_is_token_level_where_decoding_would_grow_the_prompt() -> None:
    """A cut through a two-byte character decodes to U+FFFD (three bytes): the old cut (11 ids
    without the BOS, decoded, re-encoded by the engine with its BOS) fed 14 ids for a limit of
    11; the token-level cut feeds exactly 11, the BOS first and the encoding's last 10 ids."""
    tok = ByteTokenizer()
    prompt = "é" * 20  # 40 bytes, 41 ids with the BOS
    ids, cut = truncate_prompt(prompt, tok, 11)
    plain = tok.encode(prompt)
    assert cut and ids == [0, *plain[-10:]] and len(ids) == 11
    old = tok.encode(tok.decode(plain[-11:]), add_special_tokens=True)
    assert tok.decode(plain[-11:]).startswith("\ufffd") and len(old) == 14
    left_alone, fits = truncate_prompt("é" * 5, tok, 11)
    assert left_alone == "é" * 5 and not fits


def test_is_demonstration_ignores_whitespace() -> None:
    demo = DEMONSTRATIONS[1].problem
    assert is_demonstration(demo)
    assert is_demonstration("  " + demo.replace(" ", "\n", 3) + "\n")
    assert not is_demonstration(demo + " Explain.")
