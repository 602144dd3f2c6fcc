"""Scorer: extraction, normalisation, the tricky-case table and adversarial inputs.

Adversarial inputs must return within the scorer's own timeout and never execute anything; the
tests assert verdicts and side effects, not wall-clock times (the pytest run bounds them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("math_verify")

from llm_runs.scoring import (  # noqa: E402
    MAX_ANSWER_CHARS,
    Scorer,
    extract_last_boxed,
    is_correct,
    normalize_answer,
    score_batch,
)

# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is $\\boxed{42}$.", "42"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("nested \\boxed{\\frac{\\sqrt{3}}{2}} done", "\\frac{\\sqrt{3}}{2}"),
        ("first \\boxed{1} then \\boxed{2}", "2"),
        ("a box \\fbox{7} at the end", "7"),
        ("plain \\boxed 5 then text", "5"),
        ("plain \\boxed 5$ closing math", "5"),
        ("spaced \\boxed {12}", "12"),
        ("set \\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("unclosed \\boxed{3", None),
        ("complete \\boxed{4} then unclosed \\boxed{5", "4"),
        ("no box at all", None),
        ("\\boxedfoo{3} is another command", None),
        ("\\boxed{ 8 }", "8"),
        ("\\boxed{\\text{(C)}}", "\\text{(C)}"),
        ("line break \\boxed{a \\\\ {b}}", "a \\\\ {b}"),
    ],
)
def test_extract_last_boxed(text: str, expected: str | None) -> None:
    assert extract_last_boxed(text) == expected


def test_extract_deeply_nested_braces_is_linear_and_exact() -> None:
    inner = "{" * 10_000 + "x" + "}" * 10_000
    assert extract_last_boxed("\\boxed{" + inner + "}") == inner
    assert extract_last_boxed("\\boxed{" + "{" * 10_000) is None


def test_extract_megabytes_of_text() -> None:
    text = "\\boxed{" * 200_000 + "filler " * 300_000 + "\\boxed{9}"
    assert extract_last_boxed(text) == "9"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="{}\\boxedf 12", max_size=60))
def test_extract_never_raises_and_returns_balanced_content(text: str) -> None:
    out = extract_last_boxed(text)
    if out is not None and "{" not in out and "}" not in out:
        assert out in text


# ---------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\\dfrac{1}{2}", "\\frac{1}{2}"),
        ("1,000", "1000"),
        ("1{,}000", "1000"),
        ("\\$5.00", "5.00"),
        ("30^\\circ", "30"),
        ("50\\%", "50"),
        ("\\text{(C)}", "C"),
        ("(b)", "B"),
        ("5 \\text{ cm}", "5"),
        ("12 inches", "12"),
        ("\\left( 1, 2 \\right]", "(1,2]"),
        ("7.", "7"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected
    assert normalize_answer(normalize_answer(raw)) == normalize_answer(raw)


# ---------------------------------------------------------------- the tricky-case table

# (completion, reference, expected verdict). Written for this project.
TRICKY_CASES = [
    ("so \\boxed{7}", "7", True),
    ("so \\boxed{8}", "7", False),
    ("nested \\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", True),
    ("two boxes \\boxed{3} and finally \\boxed{4}", "4", True),
    ("two boxes \\boxed{4} and finally \\boxed{3}", "4", False),
    ("unclosed \\boxed{4", "4", False),
    ("no box, the answer is 4", "4", False),
    ("\\boxed{\\dfrac{1}{2}}", "\\frac{1}{2}", True),
    ("\\boxed{0.5}", "\\frac{1}{2}", True),
    ("\\boxed{\\frac12}", "0.5", True),
    ("\\boxed{0.51}", "\\frac{1}{2}", False),
    ("\\boxed{1,000}", "1000", True),
    ("\\boxed{1000}", "1,000", True),
    ("\\boxed{1,500}", "1500", True),
    ("\\boxed{5\\text{ cm}}", "5", True),
    ("\\boxed{12 \\text{ inches}}", "12", True),
    ("\\boxed{30^\\circ}", "30", True),
    ("\\boxed{(1, 2]}", "(1,2]", True),
    ("\\boxed{[1, 2]}", "(1,2]", False),
    ("\\boxed{[0, \\infty)}", "[0,\\infty)", True),
    ("\\boxed{\\text{(C)}}", "C", True),
    ("\\boxed{(C)}", "C", True),
    ("\\boxed{C}", "C", True),
    ("\\boxed{D}", "C", False),
    ("\\boxed{\\text{Monday}}", "\\text{Monday}", True),
    ("\\boxed{\\text{no}}", "\\text{no}", True),
    ("\\boxed{x^2+2x}", "x(x+2)", True),
    ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}", True),
    ("\\boxed{-1, 1}", "1, -1", True),
    ("\\boxed{3}", "x = 3", True),
    ("\\boxed{27}", "27", True),
    ("\\fbox{16}", "16", True),
    ("\\boxed 5", "5", True),
]


@pytest.fixture(scope="module")
def scorer():
    with Scorer(num_workers=2, timeout_s=3.0, memory_mb=2048) as s:
        yield s


def test_tricky_case_table(scorer: Scorer) -> None:
    completions = [c for c, _, _ in TRICKY_CASES]
    references = [r for _, r, _ in TRICKY_CASES]
    verdicts = scorer.score(completions, references)
    wrong = [(c, r, e) for (c, r, e), v in zip(TRICKY_CASES, verdicts, strict=True) if v is not e]
    assert not wrong, f"scorer disagrees with the table on {wrong}"


def test_is_correct_single_calls() -> None:
    assert is_correct("the answer is \\boxed{\\frac{1}{2}}", "0.5") is True
    assert is_correct("the answer is \\boxed{3}", "0.5") is False


def test_score_batch_matches_scorer(scorer: Scorer) -> None:
    completions = ["\\boxed{2}", "\\boxed{3}", "none", "\\boxed{0.25}"]
    references = ["2", "2", "2", "\\frac14"]
    assert score_batch(completions, references, num_workers=2) == [True, False, False, True]


def test_identical_pairs_are_scored_once(scorer: Scorer) -> None:
    before = scorer.stats.verified
    out = scorer.score(["\\boxed{0.5}"] * 20, ["\\frac{1}{2}"] * 20)
    assert out == [True] * 20
    assert scorer.stats.verified - before == 1


def test_length_mismatch_is_an_error(scorer: Scorer) -> None:
    with pytest.raises(ValueError, match="same length"):
        scorer.score(["\\boxed{1}"], [])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"num_workers": 0}, "num_workers"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"memory_mb": -1}, "memory_mb"),
    ],
)
def test_scorer_rejects_bad_settings(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Scorer(**kwargs)


# ---------------------------------------------------------------- adversarial inputs


def test_code_strings_are_never_executed(tmp_path, scorer: Scorer) -> None:
    marker = tmp_path / "pwned"
    payloads = [
        f"\\boxed{{__import__('os').system('touch {marker}')}}",
        f"\\boxed{{eval(\"open('{marker}', 'w').write('x')\")}}",
        f"\\boxed{{exec(\"import os; os.system('touch {marker}')\")}}",
        f"\\boxed{{(lambda: __import__('pathlib').Path('{marker}').touch())()}}",
        "\\boxed{().__class__.__base__.__subclasses__()}",
    ]
    verdicts = scorer.score(payloads, ["5"] * len(payloads))
    assert verdicts == [False] * len(payloads)
    # The reference side is untrusted too in principle: swap the roles.
    assert scorer.score(["\\boxed{5}"], [payloads[0][7:-1]]) == [False]
    assert not marker.exists()


def test_power_towers_and_huge_numbers_are_bounded(scorer: Scorer) -> None:
    completions = [
        "\\boxed{9^{9^{9^{9}}}}",
        "\\boxed{9^9^9^9}",
        "\\boxed{10^{10^{10^{10}}}}",
        "\\boxed{1000000!}",
        "\\boxed{2^{2^{2^{2^{2^{2}}}}}}",
    ]
    verdicts = scorer.score(completions, ["5", "5", "1", "1", "1"])
    assert verdicts == [False] * len(completions)
    # The pool is still usable afterwards.
    assert scorer.score(["\\boxed{0.5}"], ["\\frac{1}{2}"]) == [True]


def test_deep_braces_and_megabytes(scorer: Scorer) -> None:
    nested = "\\boxed{" + "{" * 10_000 + "1" + "}" * 10_000 + "}"
    megabytes = "x = 1 + " * 400_000 + "\\boxed{3}"  # ~3 MB, answer at the very end
    megabyte_answer = "\\boxed{" + "1+" * 600_000 + "1}"
    verdicts = scorer.score([nested, megabytes, megabyte_answer], ["1", "3", "2"])
    assert verdicts == [False, True, False]
    assert len("1+" * 600_000) > MAX_ANSWER_CHARS


def test_a_hanging_comparison_is_killed_and_the_worker_replaced() -> None:
    # A timeout far below math-verify's own (1 s minimum) forces the kill path.
    with Scorer(num_workers=1, timeout_s=0.05, memory_mb=2048) as tight:
        verdicts = tight.score(["\\boxed{9^{9^{9^{9}}}}", "\\boxed{2^{3^{4^{5}}}}"], ["1", "2"])
        assert verdicts == [False, False]
        assert tight.stats.timeouts >= 1
    with Scorer(num_workers=1, timeout_s=3.0) as relaxed:
        assert relaxed.score(["\\boxed{\\frac{2}{4}}"], ["0.5"]) == [True]


def test_workers_run_under_the_memory_limit() -> None:
    with Scorer(num_workers=1, timeout_s=5.0, memory_mb=400) as small:
        # 2^(2^31) would need ~256 MB as an integer: the worker fails or times out, not the host.
        verdicts = small.score(["\\boxed{2^{2^{31}}}", "\\boxed{0.25}"], ["1", "\\frac14"])
        assert verdicts == [False, True]
        limits = Path(f"/proc/{small._workers[0].process.pid}/limits")
        if not limits.exists():
            pytest.skip("no /proc on this platform")
        line = next(x for x in limits.read_text().splitlines() if x.startswith("Max address space"))
        assert line.split()[3] == str(400 * 1024 * 1024)
