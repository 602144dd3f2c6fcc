"""A suite's declared primary comparison, its Holm-adjusted secondaries, and the design's power.

A suite (`llm_runs.suite`) pairs every two methods at every delay on every measure: a dozen tests
or more, some of which "hold" by chance if each is read at 5%. So one comparison is declared
primary in advance and judged on its own at level `alpha`:

    GMC - TIC consumed reward of the last 10% of updates at the suite's largest delay

(the paper's central claim, §4.3 and Figure 2: GMC degrades less than TIC as the delay grows).
Every other paired comparison of the suite is secondary, and the secondaries are judged
together by Holm's step-down procedure (`gmc_grpo.stats.holm_adjust`: the chance of any false
"holds" among them stays at most `alpha`). Each test is the paired t test of the per-seed
differences (`gmc_grpo.stats.paired_test`, two-sided), with its 95% interval.

Verdicts. Under delay (`D > 0`) the paper predicts GMC >= TIC > GRPO (Figure 2, Table 3): a
comparison **holds** when its (adjusted, for a secondary) p-value is below `alpha` and the mean
difference has the predicted sign, is **reversed** when it is below `alpha` with the other
sign, and is **not resolved** otherwise. At `D = 0` the paper reports the three methods as
similar: there a resolved difference reads **differs** and an unresolved one **no difference
resolved** (which is not evidence of equality: see the power).

Power (`design_power`): from the seeds' spread of the primary difference (`sd` of the per-seed
GMC - TIC consumed rewards of the last updates), the number of seeds a paired t test needs to detect a stated
difference with probability `power` (`gmc_grpo.stats.seeds_for_power`), and the smallest
difference the design that ran detects with that probability
(`gmc_grpo.stats.minimum_detectable_difference`). A spread measured on few seeds is itself
uncertain; the report says from how many seeds it came.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gmc_grpo.stats import (
    holm_adjust,
    minimum_detectable_difference,
    paired_t_power,
    paired_test,
    seeds_for_power,
)

#: The declared primary comparison: `(a, b, measure)` for `a - b`, at the largest delay.
PRIMARY: tuple[str, str, str] = ("gmc", "tic", "consumed_reward_final")
ALPHA = 0.05
#: the verdict of a comparison between identical runs (listed, not tested)
IDENTICAL = "identical runs (not counted)"


def _verdict(mean: float, p: float, delay: int, alpha: float) -> str:
    if math.isnan(p):
        return "one seed"
    if delay == 0:
        return "differs" if p < alpha else "no difference resolved"
    if p >= alpha:
        return "not resolved"
    return "holds" if mean > 0 else "reversed"


def declared_comparisons(
    analysis: Any,
    *,
    primary: tuple[str, str, str] = PRIMARY,
    primary_delay: int | None = None,
    measures: Sequence[str] | None = None,
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """The primary comparison and the Holm-adjusted secondaries of a `SuiteAnalysis`.

    primary: `(a, b, measure)` of the primary test; primary_delay: its delay (None: the largest
    delay of the suite). measures: the measures whose comparisons enter the secondary family
    (None: every measure the analysis compared). Every pair of `analysis.paired` is a test;
    a comparison between identical runs (`identical_runs`) is listed apart (`"identical"`, verdict
    `IDENTICAL`) and not counted in the Holm family;
    returns `{"alpha", "primary": row, "secondary": [rows], "identical": [rows], "family_size"}`,
    each row with
    `delay, measure, a, b, mean, lo, hi, n, sd, t, p` (+ `p_holm` for a secondary), `role`,
    `prediction` and `verdict`.
    """
    if not analysis.delays:
        raise ValueError("the suite analysis holds no delay")
    delay0 = max(analysis.delays) if primary_delay is None else primary_delay
    a0, b0, measure0 = primary
    rows, same = [], []  # same[i]: row i compares identical per-seed values
    for pair in analysis.paired:
        if measures is not None and pair["measure"] not in measures:
            if (pair["delay"], pair["a"], pair["b"], pair["measure"]) != (delay0, a0, b0, measure0):
                continue
        va = analysis.values.get((pair["delay"], pair["a"], pair["measure"]), {})
        vb = analysis.values.get((pair["delay"], pair["b"], pair["measure"]), {})
        test = paired_test(va, vb)
        rows.append(
            {
                "delay": pair["delay"],
                "measure": pair["measure"],
                "a": pair["a"],
                "b": pair["b"],
                **test,
                "seeds": sorted(set(va) & set(vb)),
                "prediction": f"{pair['a']} > {pair['b']}"
                if pair["delay"] > 0
                else f"{pair['a']} ~ {pair['b']} (similar at D = 0)",
            }
        )
        same.append(identical_runs(va, vb))
    is_primary = [
        (r["delay"], r["a"], r["b"], r["measure"]) == (delay0, a0, b0, measure0) for r in rows
    ]
    if not any(is_primary):
        raise ValueError(
            f"the suite has no {a0} - {b0} {measure0} comparison at delay {delay0}: run both "
            f"methods at that delay, or declare another primary"
        )
    primary_row = rows[is_primary.index(True)]
    primary_row.update(
        role="primary", verdict=_verdict(primary_row["mean"], primary_row["p"], delay0, alpha)
    )
    others = [(r, s) for r, s, flag in zip(rows, same, is_primary, strict=True) if not flag]
    identical = [r for r, s in others if s]
    for row in identical:
        row.update(role="identical", p_holm=math.nan, verdict=IDENTICAL)
    secondary = [r for r, s in others if not s]
    for row, adjusted in zip(secondary, holm_adjust([r["p"] for r in secondary]), strict=True):
        row.update(role="secondary", p_holm=adjusted)
        row["verdict"] = _verdict(row["mean"], adjusted, row["delay"], alpha)
    return {
        "alpha": alpha,
        "primary": primary_row,
        "secondary": secondary,
        "identical": identical,
        "family_size": sum(not math.isnan(r["p"]) for r in secondary),
    }


def identical_runs(va: dict[Any, float], vb: dict[Any, float]) -> bool:
    """Whether two methods' per-seed values are equal on every shared seed (at least one), as
    when their runs are one computation (GMC and TIC at `D = 0`, where every ratio is 1): every
    paired difference is 0, its p-value 1 whatever happened, so the comparison could not have
    come out otherwise and is not counted in the Holm family."""
    seeds = set(va) & set(vb)
    return bool(seeds) and all(va[s] == vb[s] for s in seeds)


def design_power(
    differences: Sequence[float],
    *,
    detectable: float,
    power: float = 0.8,
    alpha: float = ALPHA,
    seeds: int | None = None,
) -> dict[str, Any]:
    """Seeds needed and the smallest detectable difference, from measured per-seed differences.

    differences: the per-seed primary differences of a suite (their sample sd is the spread);
    detectable: the true difference the design should detect with probability `power`;
    seeds: the design's number of seeds (None: as many as `differences`). Returns `{sd,
    spread_from_seeds, detectable, power, alpha, seeds_needed, seeds, power_of_design,
    minimum_detectable}`.
    """
    x = [float(v) for v in differences if v is not None and math.isfinite(v)]
    if len(x) < 2:
        raise ValueError("the spread of the differences needs at least 2 seeds")
    mean = sum(x) / len(x)
    sd = math.sqrt(sum((v - mean) ** 2 for v in x) / (len(x) - 1))
    n = len(x) if seeds is None else seeds
    return {
        "sd": sd,
        "spread_from_seeds": len(x),
        "detectable": detectable,
        "power": power,
        "alpha": alpha,
        "seeds_needed": seeds_for_power(detectable, sd, power, alpha),
        "seeds": n,
        "power_of_design": paired_t_power(detectable, sd, n, alpha),
        "minimum_detectable": minimum_detectable_difference(sd, n, power, alpha),
    }
