"""`gmc-grpo theory --runs DIR`: the claims table's run rows and the bounds beside tracked runs.

`theory.cli` reads no run: the router (`pipeline.cli`) runs `gmc-grpo theory` through `main`
here, which hands it `read_runs`. `read_runs(paths)` collects the evidence under the folders
once (`evidence.run_evidence.collect_evidence`), evaluates every registered theory-vs-runs check
on it (`evidence.registry.run_findings`) and renders the tracked runs' bounds
(`evidence.render`); the command's name, flags and output are those of `gmc-grpo theory`.
"""

from __future__ import annotations

from pathlib import Path

from theory.cli import RunsRead


def read_runs(paths: list[Path]) -> RunsRead:
    """What `--runs` adds to the claims table (`theory.cli.RunsRead`); a folder without a toy
    run the table can read raises `ValueError`."""
    from evidence.registry import run_findings
    from evidence.render import bounds_markdown, bounds_text
    from evidence.run_evidence import collect_evidence

    evidence = collect_evidence(paths)
    if evidence.empty:
        raise ValueError(
            f"--runs: no toy run the claims table can read under "
            f"{', '.join(map(str, paths))}: no run with bound tracking (train with "
            "--bound-every K, e.g. `gmc-grpo toy train --experiment bounds_quick`), no "
            "delay-regularity experiment, no bias sweep"
        )
    tracked = evidence.tracked
    return RunsRead(
        findings=run_findings(evidence),
        counts={
            "tracked_runs": len(evidence.tracked),
            "drift_runs": len(evidence.drift),
            "regularity_runs": len(evidence.regularity),
            "sweep_rows": len(evidence.sweep_rows),
        },
        bounds=[r.as_dict() for r in tracked],
        bounds_markdown=bounds_markdown(tracked) if tracked else "",
        bounds_text=bounds_text(tracked) if tracked else "",
        problems=list(evidence.problems),
    )


def main(argv: list[str] | None = None) -> int:
    """`gmc-grpo theory` with `--runs` read by this layer (`theory.cli.main`)."""
    from theory.cli import main as theory_main

    return theory_main(argv, read_runs=read_runs)
