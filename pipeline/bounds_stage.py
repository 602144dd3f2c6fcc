"""`gmc-grpo reproduce`'s bounds stage: the theorems' bounds, with constants, beside toy runs.

Runs the shipped bound-tracking experiment(s) (`BOUND_EXPERIMENTS`: TIC and GMC with plain SGD at
a constant step size, the theorems' setting, and VCPO with `c = 1 + eps`, tracked but outside it:
its ESS factor changes the step size), then evaluates every tracked toy run it finds (its own and
the earlier toy-training stage's) with `theory.measured`: the run table (measured
`(1/N) sum ||grad J||^2`, Theorem 1/2's right-hand side, their ratio), each term beside its
measured counterpart, the per-step checks and every refutation; the Adam runs of the toy-training
stage are listed apart, as outside the setting. One bound-tracking figure per run of this stage
(`figures.bound_tracking`), drawn from the saved records. Writes `bounds.json` and `bounds.md`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gmc_grpo.records import atomic_write_json, atomic_write_text
from toy_mdps.jobs import machine_jobs

BOUND_EXPERIMENTS: tuple[str, ...] = ("bounds_quick",)
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


def bounds_stage(out_dir: Path) -> dict[str, Any]:
    """Run the bound-tracking experiments and write the report section (module docstring)."""
    import torch

    from theory.measured import all_run_bounds, bounds_markdown, outside_rows, summary_line
    from toy_mdps.train.config import ExperimentConfig, shipped_experiment
    from toy_mdps.train.report import experiment_markdown
    from toy_mdps.train.run import run_experiment

    torch.set_num_threads(1)
    out_dir = Path(out_dir)
    sections, gaps = [], []
    for name in BOUND_EXPERIMENTS:
        config = ExperimentConfig.from_file(shipped_experiment(name))
        summary = run_experiment(config, out_dir / config.name, progress=False, jobs=machine_jobs())
        sections.append(
            experiment_markdown(config, summary, prefix=f"{out_dir.name}/{config.name}")
        )
        gaps += summary.get("gap", [])
    toy_train = out_dir.parent / TOY_TRAIN_STAGE
    roots = [out_dir] + ([toy_train] if toy_train.is_dir() else [])
    results, problems = all_run_bounds(roots)
    outside = outside_rows([toy_train]) if toy_train.is_dir() else []
    figures = draw_bound_figures(results, out_dir, out_dir)
    atomic_write_json(out_dir / "bounds.json", [r.as_dict() for r in results])
    table = bounds_markdown(results, outside)
    atomic_write_text(out_dir / "bounds.md", table)
    lines = [
        "Every toy training run that tracked its bound quantities (`bound_every > 0`): this "
        f"stage's `{', '.join(BOUND_EXPERIMENTS)}` and the SGD runs of the toy-training stage. "
        "Per-step quantities at the learner's actual state (`toy_mdps.train.bounds`), bounds "
        "evaluated by `theory.measured` (also `gmc-grpo theory --runs DIR`).",
        "",
        table,
    ]
    if problems:
        lines += ["Runs that could not be read:", ""] + [f"- {p}" for p in problems] + [""]
    lines += ["#### The experiments of this stage", "", *sections, ""]
    lines += [f"![{p.stem}]({out_dir.name}/figures/{p.name})" for p in figures]
    headline = summary_line(results)
    shared = [g for g in gaps if g.get("bias_share")]
    if shared:  # the most delay-dominated pair: TIC's bias term the largest share of its metric
        g = max(shared, key=lambda g: g["bias_share"]["tic"])
        r = g["ratio"]
        headline += (
            f"; GMC/TIC where delay dominates (D = {g['delay']}, eta = {g['lr']:g}): "
            f"{r['mean']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}] (theory, tuned eta: "
            f"{g['theory_tuned_factor']:.3f})"
        )
    return {
        "headline": headline,
        "markdown": "\n".join(lines) + "\n",
        "runs": len(results),
        "refutations": sum(len(r.refutations) for r in results),
    }
