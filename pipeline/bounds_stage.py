"""`gmc-grpo reproduce`'s bounds stage: the theorems' bounds, with constants, beside toy runs.

Runs the shipped bound-tracking experiments (`BOUND_EXPERIMENTS`): `bounds_quick` (TIC and GMC
with plain SGD at a constant step size, the theorems' setting, over a grid of delays and step
sizes, and VCPO with `c = 1 + eps`, tracked but outside it: its ESS factor changes the step size),
`bounds_bite` (the regime the theorems favour: `eta <= 1/L_J`, `N = 1000`, a small and a large
delay), `bounds_optimal` (each point at the step that minimises its theorem's explicit bound,
`N = 1,000` and `10,000`, `D = 2` and `32`: where the bounds fall below the ceiling and a run could
refute them; `bounds_optimal_full` under `gmc-grpo reproduce --full`: 10 seeds and `N = 100,000`)
and `drift_quick` (the drift over a grid of step sizes and lags, for the claims table's
drift row). Then evaluates every tracked toy run it finds (its own and the earlier toy-training
stage's) and reports, each claim with its own count (`evidence.bounds_claims`, written by
`write_bounds_claims`):

- Theorems 1-2 where they bite: every `bounds_optimal` run with the bound (both constants), the
  ceiling, the measurement with its interval and the verdict vacuous / holds / refuted /
  unresolved (`evidence.bite`);
- the explicit Theorems 1-2: vacuous or not, and by how many decades (`evidence.vacuity`);
- Lemma 1 with the measured moments, a consistency check (its variance term integrates the
  same updates as the progress term): measured/bound, the runs whose right-hand side reaches the
  ceiling counted as vacuous, each term's share; and Lemma 1's descent step tested directly at
  every step (the exact smoothness remainder against `-(L_J/2)||dtheta||^2`);
- where the proof loses: the slack of each step of the §4.2 chain, a table in decades and a
  figure (`evidence.slack`, `figures.proof_slack`);
- every GMC/TIC pair, with final J beside the gradient metric, the bounds' ratio at the same
  `eta`, and each method tuned on the same grid (`evidence.pairs`);
- the run table, each term beside its measured counterpart, the per-step checks and every
  refutation (`evidence.render.bounds_markdown`); the Adam runs of the toy-training stage apart, as
  outside the setting.

One bound-tracking figure per run of `FIGURE_EXPERIMENTS` (`figures.bound_tracking`). Writes
`bounds.json`, `bounds.md` and `claims.json` (the numbers behind the headline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gmc_grpo.json_files import atomic_write_json, atomic_write_text
from toy_mdps.jobs import machine_jobs

BOUND_EXPERIMENTS: tuple[str, ...] = (
    "bounds_quick",
    "bounds_bite",
    "bounds_optimal",
    "drift_quick",
)
# `gmc-grpo reproduce --full`: the bound-minimising runs with 10 seeds and N = 100,000 as well
FULL_BOUND_EXPERIMENTS: tuple[str, ...] = (
    "bounds_quick",
    "bounds_bite",
    "bounds_optimal_full",
    "drift_quick",
)
# the experiments whose runs get a bound-tracking figure each (drift_quick's 18 runs get none:
# they feed the drift fit and the tables)
FIGURE_EXPERIMENTS: tuple[str, ...] = ("bounds_quick", "bounds_bite")
TOY_TRAIN_STAGE = "toy_train"  # the folder of `pipeline.reproduce`'s toy-training stage


def draw_bound_figures(results: list[Any], out_dir: Path, runs_root: Path) -> list[Path]:
    """One bound-tracking figure per tracked run under `runs_root`, into `out_dir/figures/`."""
    from figures.bound_tracking import plot_bound_tracking
    from figures.common import save_figure

    written = []
    for result in results:
        if not Path(result.run_dir).resolve().is_relative_to(runs_root.resolve()):
            continue
        fig = plot_bound_tracking(result.series, title=f"{result.name}: bounds vs measured")
        stem = out_dir / "figures" / result.name.replace("/", "__")
        written += [p for p in save_figure(fig, stem) if p.suffix == ".png"]
    return written


def bounds_stage(out_dir: Path, full: bool = False) -> dict[str, Any]:
    """Run the bound-tracking experiments (`FULL_BOUND_EXPERIMENTS` with `full`, else
    `BOUND_EXPERIMENTS`) and write the report section (module docstring)."""
    import torch

    from evidence.measured import all_run_bounds
    from evidence.measured_report import outside_rows
    from evidence.render import bounds_markdown
    from toy_mdps.train.config import ExperimentConfig, shipped_experiment
    from toy_mdps.train.report import experiment_markdown
    from toy_mdps.train.run import run_experiment

    torch.set_num_threads(1)
    out_dir = Path(out_dir)
    sections = []
    experiments = FULL_BOUND_EXPERIMENTS if full else BOUND_EXPERIMENTS
    for name in experiments:
        config = ExperimentConfig.from_file(shipped_experiment(name))
        summary = run_experiment(config, out_dir / config.name, progress=False, jobs=machine_jobs())
        sections.append(
            experiment_markdown(config, summary, prefix=f"{out_dir.name}/{config.name}")
        )
    toy_train = out_dir.parent / TOY_TRAIN_STAGE
    roots = [out_dir] + ([toy_train] if toy_train.is_dir() else [])
    results, problems = all_run_bounds(roots)
    outside = outside_rows([toy_train]) if toy_train.is_dir() else []
    figures = [
        p
        for name in FIGURE_EXPERIMENTS
        for p in draw_bound_figures(results, out_dir, out_dir / name)
    ]
    atomic_write_json(out_dir / "bounds.json", [r.as_dict() for r in results])
    table = bounds_markdown(results, outside)
    atomic_write_text(out_dir / "bounds.md", table)
    claims = write_bounds_claims(results, out_dir)
    lines = [
        "Every toy training run that tracked its bound quantities (`bound_every > 0`): this "
        f"stage's `{', '.join(experiments)}` and the SGD runs of the toy-training stage. "
        "Per-step quantities at the learner's actual state (`toy_mdps.train.bound_measurement`), "
        "bounds evaluated by `evidence.measured` (also `gmc-grpo theory --runs DIR`).",
        "",
        "#### Theorems 1-2 where they bite (the bound-minimising step)",
        "",
        claims["bite_markdown"],
        "#### The explicit bounds: vacuous, and by how much",
        "",
        claims["vacuity_markdown"],
        "#### Where the proof loses (the chain's slack, step by step)",
        "",
        claims["slack_markdown"],
        *(
            [f"![where the proof loses]({out_dir.name}/{claims['slack_figure']})", ""]
            if claims.get("slack_figure")
            else []
        ),
        "#### GMC against TIC, like with like",
        "",
        claims["pairs_markdown"],
        "#### Every tracked run",
        "",
        table,
    ]
    if problems:
        lines += ["Runs that could not be read:", ""] + [f"- {p}" for p in problems] + [""]
    lines += ["#### The experiments of this stage", "", *sections, ""]
    lines += [f"![{p.stem}]({out_dir.name}/figures/{p.name})" for p in figures]
    return {
        "headline": claims["headline"],
        "markdown": "\n".join(lines) + "\n",
        "runs": len(results),
        "refutations": sum(len(r.refutations) for r in results),
    }


def write_bounds_claims(results: list[Any], out_dir: Path) -> dict[str, Any]:
    """The stage's claims (`evidence.bounds_claims`), each with its own count: `claims.json` (the
    numbers behind the headline) and the slack figure into `out_dir`; returns the headline, the
    report's sections (`evidence.render`), the numbers and the figure's path."""
    from evidence.bounds_claims import bounds_claims
    from evidence.render import bounds_claims_headline, bounds_claims_markdown

    claims = bounds_claims(results)
    numbers = claims.as_json()
    out: dict[str, Any] = {
        "headline": bounds_claims_headline(claims),
        **bounds_claims_markdown(claims),
        **numbers,
    }
    atomic_write_json(out_dir / "claims.json", numbers)
    if claims.slack:
        from figures.common import save_figure
        from figures.proof_slack import plot_proof_slack

        written = save_figure(plot_proof_slack(claims.slack), out_dir / "figures" / "proof_slack")
        out["slack_figure"] = next(f"figures/{p.name}" for p in written if p.suffix == ".png")
    return out
