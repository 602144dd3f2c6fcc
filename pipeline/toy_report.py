"""The toy track's results as Markdown: the sweep's checks of the paper's chain.

`toy_mdps.sweep.analysis.summarise_sweep` computes the claims (numbers, verdicts, each claim's
wording in plain text and in LaTeX, in the sweep's `summary.json`); `sweep_claims_markdown`
renders them, for the report's toy sweep stage (`pipeline.reproduce`) and the `bias_sweeps`
notebook. Imports nothing of the project, so a notebook that renders with it depends on it alone.
"""

from __future__ import annotations

from typing import Any


def sweep_claims_markdown(summary: dict[str, Any]) -> str:
    """A sweep's checks of the paper's chain (its `summary.json`, `summarise_sweep`) as a
    Markdown table (`$...$` formulas): claim, grid points where it holds (or, for GRPO's excess,
    where the bound is exceeded), of how many."""
    lines = ["| check (paper's chain) | holds | of |", "| --- | ---: | ---: |"]
    for claim in summary["claims"].values():
        holds = claim.get("holds", claim.get("exceeds"))
        lines.append(f"| {claim.get('claim_markdown', claim['claim'])} | {holds} | {claim['of']} |")
    return "\n".join(lines) + "\n"
