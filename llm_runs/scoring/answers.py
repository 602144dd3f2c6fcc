"""Answers: the last complete `\\boxed{...}` of a completion and the string rules that compare it
with a reference answer (pure functions, no processes; `llm_runs.scoring.pool` runs the
symbolic comparisons these rules leave open).

Model text is untrusted. The rules this module keeps:

- Nothing is ever evaluated as code. Extraction and normalisation are linear-time string scans.
- Normalisation only rewrites what is provably equivalent (`rewrite_answer`, `compare_locally`):
  thousands separators only inside one number, `\\left(` only as a delimiter, units only after a
  number and only when both answers agree on them (`\\%` is a unit: `50\\%` equals `50`, not
  `0.5`).
- Numbers are compared exactly: a decimal equals a fraction or a constant only when it is exactly
  that value (`exact_decimals` hands math-verify `0.333333` as `333333/1000000`, so its
  6-place rounding never applies). docs/scoring.md states the policy and where it differs from
  math-verify's defaults. Agreement with hand labels on 249 answer pairs in the styles of MATH,
  OlympiadBench, AMC and Minerva: `tests/llm_runs/data/answer_pairs.jsonl`.
- Answers longer than `MAX_ANSWER_CHARS` are never handed to sympy (only compared as strings).

Public API: `extract_last_boxed`, `rewrite_answer`, `normalize_answer`, `split_choice`,
`split_unit`, `compare_locally`.
"""

from __future__ import annotations

import re
from fractions import Fraction

# Boxed answers longer than this are judged by string comparison only (no parser, no sympy):
# every reference answer of the seven datasets is far shorter.
MAX_ANSWER_CHARS = 1000

# Box commands recognised by `extract_last_boxed`, longest first so `\boxed` is not read as a
# prefix of a longer command name.
_BOX_COMMANDS = ("\\boxed", "\\fbox")


# --------------------------------------------------------------------------------------------
# Extraction (pure, linear time)
# --------------------------------------------------------------------------------------------


_BRACE_TOKENS = re.compile(r"\\[{}\\]|[{}]")


def _match_braces(text: str, start: int = 0) -> dict[int, int]:
    """Map the index of every `{` at or after `start` to the index of its matching `}`.

    One left-to-right pass over brace tokens only. Escaped braces `\\{` and `\\}` are literal
    characters and take no part in matching; `\\\\` (a LaTeX line break) is skipped as a unit so
    `\\\\{` opens a group. Unmatched `{` are absent from the result.
    """
    matches: dict[int, int] = {}
    stack: list[int] = []
    for token in _BRACE_TOKENS.finditer(text, start):
        ch = token.group()
        if ch == "{":
            stack.append(token.start())
        elif ch == "}" and stack:
            matches[stack.pop()] = token.start()
    return matches


def _box_starts(text: str) -> list[tuple[int, int]]:
    """Positions `(start, end_of_command)` of every `\\boxed` / `\\fbox` command, in text order.

    A command must not continue with a letter (`\\boxedfoo` is another command).
    """
    starts: list[tuple[int, int]] = []
    for command in _BOX_COMMANDS:
        pos = text.find(command)
        while pos != -1:
            end = pos + len(command)
            if end >= len(text) or not text[end].isalpha():
                starts.append((pos, end))
            pos = text.find(command, end)
    starts.sort()
    return starts


def _unbraced_argument(text: str, pos: int) -> str | None:
    """The argument of `\\boxed 5`: after at least one space, up to whitespace, `$` or end."""
    if pos >= len(text) or text[pos] != " ":
        return None
    while pos < len(text) and text[pos] == " ":
        pos += 1
    end = pos
    while end < len(text) and not text[end].isspace() and text[end] != "$":
        end += 1
    token = text[pos:end]
    return token if token and token[0] not in "{}" else None


def extract_last_boxed(text: str) -> str | None:
    """Content of the last complete `\\boxed{...}` (or `\\fbox{...}`, or `\\boxed 5`) in `text`.

    Braces are matched (nested groups are kept, escaped `\\{ \\}` are literal). A box whose brace is
    never closed is not complete and is skipped; if no complete box exists the result is `None`.
    Whitespace around the content is stripped. Runs in time linear in `len(text)`.
    Call it on the completion only, never on prompt + completion (the demonstrations are boxed).
    """
    starts = _box_starts(text)
    if not starts:
        return None
    # Braces before the first box cannot change how braces after it are matched.
    matches = _match_braces(text, starts[0][0])
    for _, end in reversed(starts):
        brace = end
        while brace < len(text) and text[brace] in " \t":
            brace += 1
        if brace < len(text) and text[brace] == "{":
            close = matches.get(brace)
            if close is not None:
                return text[brace + 1 : close].strip()
            continue
        token = _unbraced_argument(text, end)
        if token is not None:
            return token.strip()
    return None


# --------------------------------------------------------------------------------------------
# Normalisation (pure string rules, applied before any symbolic comparison)
# --------------------------------------------------------------------------------------------
#
# Every rule below rewrites an answer into a form with the same mathematical meaning, under the
# benchmarks' conventions (an answer's unit, dollar sign or degree sign is not part of its
# value). What is deliberately not done, because it is not an equivalence: removing the spaces
# or commas between numbers (`1, 2` is two answers, `12` one), removing `\left`/`\right` where
# they begin another command (`\leftarrow`), stripping single-letter "units" (`2m` may be a
# variable), upper-casing letters (`c` and `C` are different variables).

_WRAPPER = r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathbf|mathit|mbox|rm)\s*"
_TEXT_WRAPPERS = re.compile(_WRAPPER + r"\{([^{}]*)\}")
# \left( \right] \bigl\{ ...: sizing commands before a delimiter; `\left.` is an invisible one.
_SIZING = re.compile(r"\\(?:left|right|middle|[bB]igg?[lr]?)(?![A-Za-z])\s*(\.(?!\d))?")
_FRAC = re.compile(r"\\[dtc]frac(?![A-Za-z])")
# a degree mark after a number, at the end of the answer or of one item of a list (`30^\circ`,
# `30^{\circ}, 60^\circ`); inside an expression (`\cos 60^\circ`) it changes the value: kept
_DEGREE = re.compile(
    r"(?<=[\d}])\s*(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])|\\degree(?![A-Za-z])|°)"
    r"(?=\s*(?:,|$))"
)
_TRIG = re.compile(r"\\(?:arc)?(?:sin|cos|tan|cot|sec|csc)h?(?![A-Za-z])")
_SPACING = re.compile(r"(?<!\\)\\[,;: ]|\\q?quad(?![A-Za-z])|~")
# one number with thousands separators: `1,000`, `1{,}000`, `10\,000`, `-1,234.5`
_THOUSANDS = re.compile(r"^([+-]?\d{1,3})((?:(?:,|\{,\}|\\,)\d{3})+)(\.\d+)?$")
# one number in E notation: `6.5e-27` (read as 6.5 x 10^-27, never as 6.5 e - 27 with Euler's e)
_E_NOTATION = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))[eE]([+-]?\d{1,4})$")
# a plain number: `-2.70`, `6.5 \times 10^{-27}`, `10^{8}` (compared exactly: `numeric_value`)
_NUMBER = re.compile(
    r"^([+-]?)(\d{1,100}(?:\.\d{0,100})?|\.\d{1,100})?"
    r"\s*(?:(?:\\times|\\cdot)?\s*10\s*\^\s*(?:\{\s*([+-]?\d{1,3})\s*\}|(\d)))?$"
)
# a number written in a base: `1011_2`, `1A_{16}`
_BASE = re.compile(r"^([0-9A-F]*[0-9][0-9A-F]*)\s*_\s*\{?\s*(\d{1,2})\s*\}?$")
_CHOICE_ONLY = re.compile(r"^(?:" + _WRAPPER + r"\{\s*\(?([A-E])\)?\s*\}|\(([A-E])\)|([A-E]))$")
_CHOICE_WITH_VALUE = re.compile(
    r"^(?:" + _WRAPPER + r"\{\s*\(([A-E])\)\s*\}|\(([A-E])\))\s*(\S.*)$"
)
_UNIT_WORDS = (
    "units?|square|sq|cubic|inch(?:es)?|feet|foot|ft|cm|mm|km|kg|meters?|metres?|miles?|mph|"
    "hours?|minutes?|seconds?|degrees?|dollars?|cents?|pounds?|days?|weeks?|years?|grams?|"
    "liters?|litres?|gallons?|ounces?"
)
_TEXT_UNIT = _WRAPPER + r"\{\s*[A-Za-z][A-Za-z .]*\}"
# A trailing unit: wrapped words (`\text{ cm}^2`, `\mathrm{~m} / \mathrm{s}`) or, after a space,
# unit words of two letters or more (`12 inches`, `4 square units`).
_UNIT_TAIL = re.compile(
    r"(?:\s*"
    + _TEXT_UNIT
    + r"(?:\s*(?:/|\\cdot|\^\s*\{?-?\d\}?|"
    + _TEXT_UNIT
    + r"))*"
    + r"|\s+(?:(?:square|sq|cubic)\s+)?(?:"
    + _UNIT_WORDS
    + r")(?:\s*\^\s*\{?[23]\}?)?)\s*$"
)
_SPACE_RUNS = re.compile(r"\s+")
# a trailing percent sign (or word): the answer's unit, "percent" (docs/scoring.md: `50\%` is 50
# of the unit percent, equal to `50`, not to `0.5`)
_PERCENT_TAIL = re.compile(
    r"\s*(?:\\%|%|" + _WRAPPER + r"\{\s*(?:\\%|%|percent)\s*\}|\s(?:percent|per\s+cent))\s*$"
)
# a decimal literal in an answer (`0.333333`, `.5`); not right after `^`/`_` without braces
_DECIMAL = re.compile(r"(?<![\w.\\^])(\d*)\.(\d+)(?![\d.])")


def rewrite_answer(answer: str) -> str:
    """An answer in a form with the same meaning that math-verify reads more reliably.

    Removes `$`, `\\$`, `\\displaystyle`, `\\!`, degree marks (`^\\circ`) and a final period
    after a number or group (`7.`); turns `\\dfrac`/`\\tfrac`/`\\cfrac` into `\\frac`,
    `\\varnothing` into `\\emptyset`, spacing commands (`\\,` `\\;` `\\quad` `~`) into spaces;
    removes `\\left`/`\\right`/`\\bigl`... only as delimiter sizes (not `\\leftarrow`); joins
    thousands separators (`,` `{,}` `\\,`) only when the whole answer is one number with groups
    of three digits (`10,\\!000`; `1, 234` stays two numbers). Linear time.
    """
    s = answer.strip()
    s = s.replace("\\$", "").replace("$", "").replace("\\displaystyle", "").replace("\\!", "")
    s = _SIZING.sub("", s)
    s = _FRAC.sub(r"\\frac", s)
    s = s.replace("\\varnothing", "\\emptyset")
    if not _TRIG.search(s):
        s = _DEGREE.sub("", s).strip()
    thousands = _THOUSANDS.match(s)
    if thousands:
        digits = re.sub(r"\D", "", thousands.group(2))
        s = thousands.group(1) + digits + (thousands.group(3) or "")
    s = _SPACE_RUNS.sub(" ", _SPACING.sub(" ", s)).strip()
    if s.endswith("."):
        head = s[:-1].rstrip()
        if head and head[-1] in "0123456789})]":
            s = head
    e_notation = _E_NOTATION.match(s)
    if e_notation:
        mantissa = e_notation.group(1).rstrip(".")
        s = f"{mantissa} \\times 10^{{{int(e_notation.group(2))}}}"
    return s


def split_choice(answer: str) -> tuple[str | None, str]:
    """`(letter, value)` of a multiple-choice answer, else `(None, answer)`.

    `(C)`, `\\text{(C)}`, `\\textbf{C}` and a lone `C` give `("C", "")`; `(C) 12` and
    `\\textbf{(C) }12` give `("C", "12")`. Letters A-E, upper case only. `answer` is rewritten
    (`rewrite_answer`) first.
    """
    s = rewrite_answer(answer)
    match = _CHOICE_ONLY.match(s)
    if match:
        return next(g for g in match.groups() if g), ""
    match = _CHOICE_WITH_VALUE.match(s)
    if match:
        return match.group(1) or match.group(2), match.group(3).strip()
    return None, s


def split_unit(answer: str) -> tuple[str, str | None]:
    """`(value, unit)` of an answer that ends in a unit after a number, else `(answer, None)`.

    A unit is text in `\\text{}`/`\\mathrm{}`/`\\mbox{}` (with `/`, `\\cdot` and powers between:
    `\\mathrm{~m} / \\mathrm{s}`), or, after a space, a unit word of two letters or more
    (`cm`, `inches`, `square units`, ...); a digit string's base subscript (`1011_2`) counts as
    the unit "base 2", a trailing `\\%` (or `percent`) as the unit "%". The value must contain a digit and not end in an operator. The unit comes
    back in a canonical spelling (`unit_key`). `answer` is rewritten (`rewrite_answer`) first.
    """
    s = rewrite_answer(answer)
    base = _BASE.match(s)
    if base:
        return base.group(1), f"base {int(base.group(2))}"
    percent = _PERCENT_TAIL.search(s)
    if percent is not None and _can_carry_unit(s[: percent.start()].rstrip()):
        return s[: percent.start()].rstrip(), "%"
    match = _UNIT_TAIL.search(s)
    if match is None or match.start() == 0:
        return s, None
    value = s[: match.start()].rstrip()
    if not _can_carry_unit(value):
        return s, None
    return value, unit_key(match.group())


def _can_carry_unit(value: str) -> bool:
    return bool(value) and any(c.isdigit() for c in value) and value[-1] not in "+-*/=^_,({[\\"


# Spellings of one unit (after `unit_key` lower-cases and singularises a word).
_UNIT_ALIASES = {
    "second": "s",
    "sec": "s",
    "meter": "m",
    "metre": "m",
    "centimeter": "cm",
    "centimetre": "cm",
    "millimeter": "mm",
    "millimetre": "mm",
    "kilometer": "km",
    "kilometre": "km",
    "kilogram": "kg",
    "gram": "g",
    "hour": "h",
    "hr": "h",
    "minute": "min",
    "foot": "ft",
    "feet": "ft",
    "inch": "in",
    "degree": "deg",
    "kelvin": "K",
    "year": "yr",
    "dollar": "$",
    "liter": "L",
    "litre": "L",
}


def unit_key(unit: str) -> str:
    """Canonical spelling of a unit: wrappers and spaces removed, words singular, one name per
    unit (`seconds`, `sec`, `s` -> `s`; `\\mathrm{~km}` -> `km`). Symbols keep their case
    (`K` kelvin, `mHz`/`MHz`)."""
    text = _TEXT_WRAPPERS.sub(r" \1 ", unit).replace("\\cdot", " * ")
    out = []
    for token in re.findall(r"[A-Za-z]+|[0-9]+|[/*^-]", text):
        word = token.lower()
        if len(word) > 3 and word.endswith(("ches", "shes")):
            word = word[:-2]
        elif len(word) > 3 and word.endswith("s"):
            word = word[:-1]
        out.append(_UNIT_ALIASES.get(word, token if len(token) <= 3 else word))
    return " ".join(out)


def _strip_named_unit(value: str, unit: str) -> str | None:
    """`value` without a trailing bare word that spells `unit` (`2 m` with unit `m`), else None."""
    head, _, last = value.rpartition(" ")
    head = head.rstrip()
    if head and _can_carry_unit(head) and unit_key(last) == unit:
        return head
    return None


def numeric_value(answer: str) -> Fraction | None:
    """The exact value of a plain number (`-2.70`, `6.5 \\times 10^{-27}`, `6.5e-27`), else None.

    Decimal digits and exponents are bounded (100 digits, |exponent| < 1000), so the value is
    cheap to build. Used to compare two plain numbers exactly: math-verify rounds to 6 decimal
    places, so it calls 6.5e-27 and 6.5e-26 equal.
    """
    match = _NUMBER.match(rewrite_answer(answer))
    if match is None:
        return None
    sign, mantissa, exponent, digit_exponent = match.groups()
    if mantissa is None and exponent is None and digit_exponent is None:
        return None
    value = Fraction(mantissa) if mantissa else Fraction(1)
    power = exponent if exponent is not None else digit_exponent
    if power is not None:
        if mantissa and not re.search(r"\\times|\\cdot", match.group(0)):
            return None  # `2 10^3` is not a plain number
        value *= Fraction(10) ** int(power)
    return -value if sign == "-" else value


def _canonical_spacing(s: str) -> str:
    """Spaces kept only between two letters/digits (`\\pi r`, `1 2`); `, ` after every comma."""
    out: list[str] = []
    for i, ch in enumerate(s):
        if ch == " ":
            before, after = s[i - 1 : i], s[i + 1 : i + 2]
            if before.isalnum() and after.isalnum():
                out.append(" ")
            continue
        out.append(ch)
        if ch == ",":
            out.append(" ")
    return "".join(out).rstrip()


def normalize_answer(answer: str) -> str:
    """Canonical string form of an answer, for a cheap exact comparison.

    `rewrite_answer`, then a multiple-choice answer becomes its letter (`\\text{(C)}` -> `C`),
    text wrappers keep their content (`\\text{Monday}` -> `Monday`) and spaces are kept only
    between two letters or digits, with `, ` after every comma. Units are not removed here (that
    depends on the other answer: `compare_locally`). Idempotent.
    """
    s = answer
    for _ in range(5):  # to a fixed point: removing a space can make a new rule apply (`0 .`)
        previous, s = s, _normalize_once(s)
        if s == previous:
            break
    return s


def _normalize_once(answer: str) -> str:
    letter, value = split_choice(answer)
    if letter is not None and not value:
        return letter
    s = rewrite_answer(answer)
    for _ in range(3):  # nested wrappers such as \text{\textbf{C}}
        s = _TEXT_WRAPPERS.sub(r"\1", s)
    return _canonical_spacing(_SPACE_RUNS.sub(" ", s).strip())


def exact_decimals(answer: str) -> str:
    """`answer` with every decimal literal written as the fraction it denotes (`0.333333` ->
    `\\frac{333333}{1000000}`), so that math-verify compares it exactly: it reads a decimal as a
    float and rounds both sides to 6 places (`0.333333` would equal `\\frac{1}{3}`, `3.1415926`
    would equal `\\pi`). A literal right after `^` or `_` without braces is left as written."""

    def fraction(match: re.Match[str]) -> str:
        whole, digits = match.groups()
        numerator = int((whole or "0") + digits)
        return f"\\frac{{{numerator}}}{{1{'0' * len(digits)}}}"

    return _DECIMAL.sub(fraction, answer)


def is_decimal_number(answer: str) -> bool:
    """Whether `answer` is one plain number written with a decimal point (`0.5`, `6.5e-27`,
    `1.5 \\times 10^{8}`), the side a tolerance (`Scorer.decimal_rel_tol`) applies to."""
    return numeric_value(answer) is not None and "." in rewrite_answer(answer)


def compare_locally(prediction: str, reference: str) -> bool | tuple[str, str]:
    """Decide a pair by string rules where they suffice, else say what math-verify should compare.

    Returns `True`/`False`, or `(reference_form, prediction_form)` for math-verify, with every
    decimal written as its exact fraction (`exact_decimals`). Rules, in order:
    1. a multiple-choice reference is matched by the predicted letter (`C`, `(C)`,
       `\\text{(C) }12`); a predicted `(C) 12` against a plain reference compares `12`;
    2. two different explicit units are different answers (`5 cm` vs `5 m`, `1011_2` vs
       `1011_3`, `50\\%` vs `50 cm`); a unit on one side only, or the same unit on both, is dropped
       (also a bare `2 m` when the other side says `\\mathrm{m}`; `50\\%` against `50` is `50`);
    3. equal `normalize_answer` forms are equal answers; two plain numbers are compared exactly
       (`numeric_value`).
    docs/scoring.md states the whole policy.
    """
    decided = decide_locally(prediction, reference)
    if isinstance(decided, bool):
        return decided
    reference_form, prediction_form = decided
    return exact_decimals(reference_form), exact_decimals(prediction_form)


def decide_locally(prediction: str, reference: str) -> bool | tuple[str, str]:
    """`compare_locally` before the decimals are made exact (the forms as the rules leave them)."""
    pred_letter, pred_value = split_choice(prediction)
    ref_letter, ref_value = split_choice(reference)
    if ref_letter is not None and pred_letter is not None:
        return ref_letter == pred_letter
    if not pred_value:  # a lone predicted letter against a value: compare as written
        pred_value = rewrite_answer(prediction)
    if not ref_value:
        ref_value = rewrite_answer(reference)
    pred_value, pred_unit = split_unit(pred_value)
    ref_value, ref_unit = split_unit(ref_value)
    if pred_unit is not None and ref_unit is not None and pred_unit != ref_unit:
        return False
    if ref_unit is not None and pred_unit is None:
        pred_value = _strip_named_unit(pred_value, ref_unit) or pred_value
    if pred_unit is not None and ref_unit is None:
        ref_value = _strip_named_unit(ref_value, pred_unit) or ref_value
    if normalize_answer(pred_value) == normalize_answer(ref_value):
        return True
    pred_number, ref_number = numeric_value(pred_value), numeric_value(ref_value)
    if pred_number is not None and ref_number is not None:
        return pred_number == ref_number
    return ref_value, pred_value
