"""The range rules every config and command line shares: counts, run lengths, seeds, finite
numbers, thread counts, and the comma-separated lists the flags parse.

One rule per kind of value, used by `ToyTrainConfig` (and through it the experiment grids),
the toy `SweepConfig`, `LLMTrainConfig`, the LLM `SuiteConfig`, `EvalConfig`, the schedule
fields (`gmc_grpo.staleness.check_schedule_fields`) and the flag parsers of `gmc-grpo toy`,
`gmc-grpo llm` and `gmc-grpo theory`: the two learners refuse the same values with the same words,
and a value a config file may not hold cannot come in through a flag either. Every refusal is a
one-line `ValueError` naming the field (or flag), the value, the rule and the fix; the command
lines turn it into exit status 2 before anything is written (`gmc_grpo.errors`).

The upper limits, with the reason for each:

| limit                  | value      | why                                                       |
|------------------------|------------|-----------------------------------------------------------|
| `MAX_TOTAL_STEPS`      | 10,000,000 | past what any run finishes (below)                        |
| `MAX_NUM_WORKERS`      | 100,000    | past what a worker schedule holds in memory (below)       |
| `MAX_THREADS`          | 1,024      | more torch threads than any CPU has cores                 |
| `MAX_SCORER_TIMEOUT_S` | 3,600      | a comparison still running after an hour is a hang        |
| `MAX_TOY_MEMORY_BYTES` | 16 GiB     | the sampled responses a toy size field implies (below)    |
| `MAX_LLM_BATCH_TOKENS` | 2**30      | token slots of an LLM rollout batch (12 GiB on the host)  |

The toy size fields (`seeds`, `num_groups`, `group_size`, `group_sizes`, `num_minibatches`,
`max_length`) are limited by the memory their product implies (`toy_memory_problem`), computed
before anything is sampled or written, and with no arithmetic on the values' size that could
itself hang (the product stops at the limit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any

from gmc_grpo.config_reading import config_error, echo

# A toy step on the default MDP takes about 7 ms on one core and writes about 450 bytes of
# `metrics.jsonl` per learner seed (400 steps x 5 seeds: 0.9 MB, 2-core AMD EPYC): 10 million
# steps are about 20 hours and 22 GB of records for 5 seeds, and an LLM update takes seconds to
# minutes (Appendix B.1 trains 800). A larger `total_steps` is a typo, not a run.
MAX_TOTAL_STEPS = 10_000_000
# Every rollout worker holds one group in flight, in memory and in every checkpoint, and all of
# them launch before the first update: measured on the default toy MDP (`--schedule workers
# --workers 10000`, one seed) about 34 KB of memory and 10 KB of checkpoint per worker, so 100,000
# workers are about 3.4 GB per learner seed; an LLM group (G responses of up to 4,096 tokens) is
# far larger. `toy train --workers 100000000` used to write config.json and hang.
MAX_NUM_WORKERS = 100_000
# torch's intra-op pool: more threads than cores only slows a run; no CPU we know has 1,024 cores.
MAX_THREADS = 1_024
# CPU seconds one answer comparison may take (`EvalConfig.scorer_timeout_s`, counted in the
# scoring worker): a comparison still running after an hour is a hang, not a verdict
MAX_SCORER_TIMEOUT_S = 3_600.0
# Memory of the sampled responses of a toy step (`toy train`: seeds x B x G responses) or of a
# sweep cell (`toy sweep`: M x B x G), each with `max_length + 1` token slots. Measured on the
# shared 2-core AMD EPYC (peak RSS above a G = 4 run): `toy train --group-size 1000000
# --num-groups 2 --seeds 0` (T = 6) about 480 bytes per response, 69 per slot; `toy sweep` with
# M = 1000, B = 10, G = 100 about 420 bytes per response, 60 per slot; the larger is used.
TOY_BYTES_PER_TOKEN_SLOT = 70
# An LLM rollout batch (`llm_runs.batch.TrajectoryBatch`) holds, per token slot of its B x G
# sequences of up to max_prompt_tokens + max_completion_tokens tokens, an int32 token id and two
# float32 log-probs: 12 bytes (our reading of its documented dtypes). 2**30 slots are 12 GiB on
# the host before any model memory: past every recipe (the paper's batch is 64 x 8 x 5,120 =
# 2.6 million slots) and short of a `group_size=100000000` that ran on without end.
MAX_LLM_BATCH_TOKENS = 2**30
# The most memory a toy config may ask for: beyond it `toy sweep --num-groups 99999999999` ended
# in a RuntimeError from torch after writing config.json.
MAX_TOY_MEMORY_BYTES = 16 * 2**30


# -- predicates --------------------------------------------------------------------------------


def is_finite_at_least(value: Any, minimum: float) -> bool:
    """`value` is a real number, finite and `>= minimum` (False for NaN, inf, strings, None)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and number >= minimum


def is_int_at_least(value: Any, minimum: int) -> bool:
    """`value` is an integer (not a bool) and `>= minimum`."""
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= minimum


def count_problem(value: Any, low: int, high: int | None = None) -> str | None:
    """None when `value` is a whole number in `[low, high]` (`high=None`: no upper limit), else
    the rule in words ("must be a whole number in [1, 100,000]")."""
    if is_int_at_least(value, low) and (high is None or value <= high):
        return None
    return (
        f"must be a whole number in [{low}, {high:,}]"
        if high
        else f"must be a whole number >= {low}"
    )


def number_problem(
    value: Any,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> str | None:
    """None when `value` is a finite real number `> above` (or `>= at_least`) and `<= at_most`,
    else the rule in words ("must be a finite number > 0", "... in (0, 3,600]")."""
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and above is not None:
        ok = value > above
    if ok and at_least is not None:
        ok = value >= at_least
    if ok and at_most is not None:
        ok = value <= at_most
    if ok:
        return None
    if at_most is None:
        if above is not None:
            return f"must be a finite number > {above:g}"
        if at_least is not None:
            return f"must be a finite number >= {at_least:g}"
        return "must be a finite number"
    lower = (
        f"({above:g}"
        if above is not None
        else f"[{at_least:g}"
        if at_least is not None
        else "(-inf"
    )
    return f"must be a finite number in {lower}, {at_most:,g}]"


def seeds_problem(values: Any) -> str | None:
    """None when `values` is a non-empty list of distinct whole numbers `>= 0`, else the rule."""
    if (
        isinstance(values, (list, tuple))
        and values
        and all(is_int_at_least(v, 0) for v in values)
        and len(set(values)) == len(values)
    ):
        return None
    return "must be a non-empty list of distinct whole numbers >= 0 (e.g. seeds 0,1,2)"


# -- config fields -----------------------------------------------------------------------------


def _with_hint(problem: str, hint: str) -> str:
    return f"{problem}; {hint}" if hint else problem


def check_count(config: Any, name: str, low: int, high: int | None = None, hint: str = "") -> None:
    """Raise `config_error` unless `config.<name>` is a whole number in `[low, high]`."""
    problem = count_problem(getattr(config, name), low, high)
    if problem:
        raise config_error(config, name, _with_hint(problem, hint))


def check_number(
    config: Any,
    name: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
    hint: str = "",
) -> None:
    """Raise `config_error` unless `config.<name>` is finite and in range (`number_problem`)."""
    problem = number_problem(getattr(config, name), above=above, at_least=at_least, at_most=at_most)
    if problem:
        raise config_error(config, name, _with_hint(problem, hint))


def check_seed(config: Any, name: str) -> None:
    """A single seed: a whole number `>= 0` (the root of random streams, `gmc_grpo.seeding`)."""
    check_count(config, name, 0, hint="the root of random streams (gmc_grpo.seeding), e.g. 0")


def check_seeds(config: Any, name: str = "seeds") -> None:
    """A list of seeds: non-empty, distinct, each a whole number `>= 0`."""
    problem = seeds_problem(getattr(config, name))
    if problem:
        raise config_error(config, name, problem)


# field -> (lowest, highest, why the highest and the fix, the fix of a value below the lowest)
LIMITED_FIELDS: dict[str, tuple[int, int, str, str]] = {
    "total_steps": (
        1,
        MAX_TOTAL_STEPS,
        "more updates than any run finishes (every update writes a record row); lower it",
        "a run makes at least one update, e.g. 400",
    ),
    "num_workers": (
        1,
        MAX_NUM_WORKERS,
        "each worker holds a group in flight, in memory and in every checkpoint; use fewer "
        "workers, e.g. 64",
        "the worker schedule needs at least one worker, e.g. 64",
    ),
}


def check_limited(config: Any, name: str) -> None:
    """`config.<name>` a whole number within its limits (`LIMITED_FIELDS`): `total_steps` in
    `[1, MAX_TOTAL_STEPS]`, `num_workers` in `[1, MAX_NUM_WORKERS]`. The hint fits the side:
    "lower it" only for a value above the limit."""
    low, high, too_high, too_low = LIMITED_FIELDS[name]
    value = getattr(config, name)
    hint = too_high if is_int_at_least(value, low) else too_low
    check_count(config, name, low, high, hint)


def toy_memory_problem(factors: Sequence[tuple[str, Any]], slots: int) -> str | None:
    """None when `prod(values) * slots * TOY_BYTES_PER_TOKEN_SLOT` bytes fit
    `MAX_TOY_MEMORY_BYTES`, else the rule in words naming every factor.

    `factors`: `(name, value)` of each count multiplied (e.g. `("seeds", 5), ("num_groups", 4),
    ("group_size", 8)`), each a whole number >= 1 (checked before); `slots`: token slots per
    response (`max_length + 1`). The product stops once past the limit, so huge values cost
    nothing (`toy train --group-size 10**4000` is refused at once).
    """
    budget = MAX_TOY_MEMORY_BYTES // TOY_BYTES_PER_TOKEN_SLOT
    total = max(1, slots)
    for _, value in factors:
        total *= int(value)
        if total > budget:
            break
    if total <= budget:
        return None
    named = " x ".join(f"{name} ({echo(value)})" for name, value in factors)
    gib = MAX_TOY_MEMORY_BYTES / 2**30
    return (
        f"{named} responses of {echo(slots)} token slots need more than {gib:.0f} GiB at "
        f"{TOY_BYTES_PER_TOKEN_SLOT} bytes a slot (measured, gmc_grpo.fieldchecks)"
    )


def batch_tokens_problem(counts: Sequence[tuple[str, Any]]) -> str | None:
    """None when the product of `counts` (`(field, value)`: groups, group size, tokens per
    sequence) is at most `MAX_LLM_BATCH_TOKENS`, else the rule in words (the product stops past
    the limit: no huge number is built)."""
    total = 1
    for _, value in counts:
        total *= int(value)
        if total > MAX_LLM_BATCH_TOKENS:
            named = " x ".join(f"{name} ({echo(value)})" for name, value in counts)
            return (
                f"a rollout batch of {named} token slots is more than {MAX_LLM_BATCH_TOKENS:,} "
                "(12 GiB of token ids and log-probs at 12 bytes a slot, gmc_grpo.fieldchecks)"
            )
    return None


# -- command lines -----------------------------------------------------------------------------


def _entries(text: str, flag: str, example: str) -> list[str]:
    """The comma-separated entries of `text`; an empty list or an empty entry is refused."""
    if not text.strip():
        raise ValueError(f"{flag} {text!r}: give at least one value, e.g. {flag} {example}")
    entries = [item.strip() for item in text.split(",")]
    if any(not item for item in entries):
        raise ValueError(
            f"{flag} {text!r}: an entry is empty (two commas, or a comma at an end); give "
            f"comma-separated values, e.g. {flag} {example}"
        )
    return entries


def _parse_list(text: str, flag: str, example: str, convert: Any, what: str) -> list[Any]:
    """Each entry of `text` through `convert` (a `ValueError`, or a non-finite float, refuses
    it as not `what`)."""
    out = []
    for item in _entries(text, flag, example):
        try:
            value = convert(item)
        except ValueError:
            value = None
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError(
                f"{flag} {echo(text)}: {echo(item, 30)} is not {what}; give comma-separated "
                f"values, e.g. {flag} {example}"
            )
        out.append(value)
    return out


def parse_int_list(text: str, flag: str, example: str = "0,1,2") -> list[int]:
    """`"0,1,2"` -> `[0, 1, 2]`; an empty list, an empty entry or a non-integer is refused with
    a `ValueError` naming the flag (the configs check each value's range)."""
    return _parse_list(text, flag, example, int, "a whole number")


def parse_float_list(text: str, flag: str, example: str = "0.1,0.28") -> list[float]:
    """`"0.1,0.28"` -> `[0.1, 0.28]` (entries as `parse_int_list`; NaN and inf are refused)."""
    return _parse_list(text, flag, example, float, "a finite number")


def parse_name_list(text: str, flag: str, example: str = "grpo,tic,gmc") -> list[str]:
    """`"grpo, tic"` -> `["grpo", "tic"]` (entries as `parse_int_list`)."""
    return _entries(text, flag, example)


def parse_whole_number(text: str, flag: str, example: str = "8") -> int:
    """A whole-number flag, parsed here (not by argparse) so that a bad value is one line naming
    the flag (`--num-minibatches 1e10`: write it in digits); at most 18 digits (past every
    limit), so no huge integer is ever built."""
    digits = text.strip().replace("_", "")
    body = digits[1:] if digits[:1] in "+-" else digits
    if not body.isdigit() or not body.isascii():
        raise ValueError(
            f"{flag} {echo(text)}: not a whole number; write it in digits, e.g. {flag} {example}"
        )
    if len(body) > 18:
        raise ValueError(
            f"{flag}: {len(body)} digits, past every limit of this value; e.g. {flag} {example}"
        )
    return int(digits)


LIST_PARSERS = (parse_int_list, parse_float_list, parse_name_list, parse_whole_number)
"""The list parsers: `parser(text, flag)`; a command line keeps such a flag's text as a string for
argparse and parses it itself (`flag_type`, `flag_value`), so that a bad list is one error line
naming the flag."""


def flag_type(parser: Any) -> Any:
    """The argparse `type` of a flag parsed by `parser`: `str` for a list (parsed later by
    `flag_value`), else `parser` itself."""
    return str if parser in LIST_PARSERS else parser


# The example a refusal of a flag's value shows: a value the flag accepts (a group size is at
# least 2, so `--group-sizes` cannot suggest the seeds' "0,1,2").
FLAG_EXAMPLES: dict[str, str] = {
    "--group-sizes": "2,8,32",
    "--delays": "0,4,16",
    "--target-kls": "0.01,0.1",
    "--eps": "0.1,0.28",
    "--seeds": "0,1,2",
    "--methods": "grpo,tic,gmc",
    "--num-minibatches": "400",
    "--num-groups": "4",
    "--group-size": "8",
    "--num-prompts": "8",
    "--max-length": "6",
    "--steps": "400",
    "--delay": "4",
    "--workers": "64",
    "--checkpoint-every": "50",
    "--bound-every": "10",
    "--bound-minibatches": "200",
    "--drift-max-lag": "8",
    "--mdp-seed": "0",
    "--init-seed": "0",
    "--seed": "0",
}


def flag_value(parser: Any, value: Any, flag: str) -> Any:
    """A flag's value as its config field takes it: a deferred parser's result (`LIST_PARSERS`,
    with the flag's example from `FLAG_EXAMPLES`), or `value` as argparse gave it."""
    if parser not in LIST_PARSERS:
        return value
    example = FLAG_EXAMPLES.get(flag)
    return parser(value, flag) if example is None else parser(value, flag, example)


def check_threads(threads: int | None, flag: str = "--threads") -> None:
    """A torch thread count given on the command line: None (torch's default) or a whole number
    in `[1, MAX_THREADS]` (`torch.set_num_threads(0)` raises a RuntimeError)."""
    if threads is None:
        return
    problem = count_problem(threads, 1, MAX_THREADS)
    if problem:
        raise ValueError(
            f"{flag} {threads}: {problem} (torch CPU threads; e.g. {flag} 1, or leave it out for "
            "torch's default)"
        )


def check_positive_numbers(
    values: Sequence[float], flag: str, example: str = "0.28", at_most: float | None = None
) -> None:
    """Every value of a flag's list finite, `> 0` and `<= at_most` (e.g. `theory --eps`)."""
    bad = [v for v in values if number_problem(v, above=0.0, at_most=at_most)]
    if bad:
        rule = number_problem(math.nan, above=0.0, at_most=at_most)
        raise ValueError(
            f"{flag} {' '.join(f'{v:g}' for v in values)}: every value {rule}, got "
            f"{', '.join(f'{v:g}' for v in bad)} (e.g. {flag} {example})"
        )
