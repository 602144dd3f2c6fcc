"""The Markdown of the LLM track's results: a suite's tables and its declared comparisons.

The track computes (`llm_runs.suite.SuiteAnalysis`: per-seed values, Student-t intervals, paired
differences and verdicts; `llm_runs.comparisons.declared_comparisons`: the primary and its
Holm-adjusted secondaries) and formats nothing (`tests/test_layering.py`: a track imports no
`pipeline`). These functions render those results; `pipeline.llm` hands `suite_markdown` to
`gmc-grpo llm train --seeds ...` (which then writes `suite_summary.md` beside
`suite_summary.json`), and `pipeline.llm_stage` renders the reproduce stage's report with them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from llm_runs.suite import MEASURES, SuiteAnalysis


def prefix_markdown(analysis: SuiteAnalysis) -> str:
    """One line per pair of delays: how many leading updates the runs of one method and seed
    share exactly, over the suite's runs ("" when no run has two delays)."""
    pairs: dict[tuple[int, int], list[int]] = {}
    for row in analysis.prefixes:
        pairs.setdefault((row["delays"][0], row["delays"][1]), []).append(row["shared_updates"])
    lines = []
    for (d1, d2), counts in sorted(pairs.items()):
        span = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
        lines.append(
            f"- D = {d1} and D = {d2}: the runs of one method and seed have identical records "
            f"for their first {span} updates ({len(counts)} pairs of runs)"
        )
    if not lines:
        return ""
    return (
        "Runs that differ only in the delay share a prefix (both consume the initial policy's "
        "batches until the smaller FIFO is drained), so what happens there is one observation, "
        "not one per delay: every comparison is made within one delay, and no count is pooled "
        "over delays.\n\n" + "\n".join(lines) + "\n"
    )


def _fmt(interval: Mapping[str, float] | None, scale: float = 1.0) -> str:
    if interval is None or interval["n"] == 0:
        return "-"
    mean = interval["mean"] * scale
    if interval["n"] < 2:
        return f"{mean:.3f} (1 seed)"
    half = (interval["hi"] - interval["lo"]) / 2 * scale
    return f"{mean:.3f} ± {half:.3f}"


def suite_markdown(analysis: SuiteAnalysis, machine: str | None = None) -> str:
    """Two Markdown tables: per delay and method the means (± 95% half-width over seeds), then
    the paired differences with their intervals and verdicts."""
    seeds = ", ".join(str(s) for s in analysis.seeds)
    lines = [
        f"Seeds {seeds} ({len(analysis.seeds)}); mean over seeds ± half-width of the 95% "
        "Student-t interval." + (f" Machine: {machine}." if machine else ""),
        "",
        "| delay | method | " + " | ".join(MEASURES) + " |",
        "| ---: | --- | " + " | ".join("---:" for _ in MEASURES) + " |",
    ]
    for delay in analysis.delays:
        for method in analysis.methods:
            cells = [_fmt(analysis.intervals.get((delay, method, m))) for m in MEASURES]
            lines.append(f"| {delay} | {method} | " + " | ".join(cells) + " |")
    if analysis.skipped:
        lines += ["", "Left out (records with gaps, not finished): " + "; ".join(analysis.skipped)]
    lines += [
        "",
        "Paired differences over seeds (95% interval); **holds** only when the interval excludes "
        "zero in the predicted direction.",
        "",
        "| delay | measure | difference | mean | 95% interval | seeds | verdict |",
        "| ---: | --- | --- | ---: | --- | ---: | --- |",
    ]
    for row in analysis.paired:
        interval = f"[{row['lo']:+.3f}, {row['hi']:+.3f}]" if math.isfinite(row["lo"]) else "(none)"
        verdict_text = f"**{row['verdict']}**" if row["verdict"] == "holds" else row["verdict"]
        lines.append(
            f"| {row['delay']} | {row['measure']} | {row['a']} - {row['b']} | "
            f"{row['mean']:+.3f} | {interval} | {row['n']} | {verdict_text} |"
        )
    prefixes = prefix_markdown(analysis)
    if prefixes:
        lines += ["", prefixes.rstrip()]
    return "\n".join(lines) + "\n"


def comparisons_markdown(declared: dict[str, Any]) -> str:
    """The primary row, then the secondaries with raw and Holm-adjusted p-values (Markdown) of a
    `llm_runs.comparisons.declared_comparisons` result."""

    def interval(row: dict[str, Any]) -> str:
        if not math.isfinite(row["lo"]):
            return "(one seed)"
        return f"[{row['lo']:+.3f}, {row['hi']:+.3f}]"

    alpha = declared["alpha"]
    p = declared["primary"]
    lines = [
        f"**Primary** (declared in advance, level {alpha:g}): {p['a']} - {p['b']} {p['measure']} "
        f"at D = {p['delay']}: {p['mean']:+.3f} {interval(p)}, p = {p['p']:.3g}, "
        f"{p['n']} seeds: **{p['verdict']}**.",
        "",
        f"Secondary comparisons ({declared['family_size']}, Holm-adjusted together at {alpha:g}):",
        "",
        "| delay | measure | difference | mean | 95% interval | p | p (Holm) | verdict |",
        "| ---: | --- | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for row in declared["secondary"]:
        lines.append(
            f"| {row['delay']} | {row['measure']} | {row['a']} - {row['b']} | {row['mean']:+.3f} "
            f"| {interval(row)} | {row['p']:.3g} | {row['p_holm']:.3g} | {row['verdict']} |"
        )
    identical = declared.get("identical", [])
    if identical:
        listed = "; ".join(
            f"{r['a']} - {r['b']} {r['measure']} at D = {r['delay']}" for r in identical
        )
        lines += [
            "",
            f"Not counted in the family ({len(identical)}): comparisons between identical runs "
            f"(every seed's value equal, e.g. GMC and TIC at D = 0, where every ratio is 1): {listed}.",
        ]
    return "\n".join(lines) + "\n"
