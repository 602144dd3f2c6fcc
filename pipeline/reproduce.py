"""`gmc-grpo reproduce`: everything that runs on a CPU, on embedded defaults, then one report.

Stages run in order; each writes into `<out>/<stage>/` and records `stage.json` (status, seconds,
headline). A second run reuses every stage whose `stage.json` says it finished with the same
settings (`--force` reruns). The report `<out>/REPORT.md` lists, per stage, what it checked, its
headline results and the time it took.

Each stage computes apart from formatting: a `*_results` function runs and measures and returns
its results (numbers, intervals, verdicts), `*_markdown` (and `*_headline`) render them, and the
stage function (the `Stage.runner`) joins the two.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gmc_grpo.errors import cut, run_reported
from gmc_grpo.json_files import atomic_write_json, atomic_write_text
from gmc_grpo.plugins import PluginImportError
from gmc_grpo.run_writer import environment_info
from gmc_grpo.runlock import run_lock
from pipeline.headlines import claims_headline
from pipeline.llm_bias_stage import llm_bias_settings
from pipeline.llm_stage import design_seeds, llm_suite_settings
from toy_mdps.jobs import machine_jobs


@dataclass(frozen=True)
class Stage:
    """One step of the main job.

    name: folder name under the output directory.
    title: heading in the report.
    runner: "module:function" taking `(out_dir: Path) -> dict` with at least `"markdown"`
        (the stage's section of the report) and optionally `"headline"` (one line).
    settings: what the stage runs with; a finished stage is reused only with equal settings.
    reads_earlier: the stage reads the earlier stages' outputs, so it reruns whenever one of
        them finished after it did.
    full_settings: the settings of the stage's larger design (`gmc-grpo reproduce --full`),
        whose runner then takes `full=True`; None: the stage has one design.
    figure_runs: the figures stage reads this stage's runs; False for a stage whose runs belong
        to no suite the figures draw (the LM bias stage's delayed GMC runs are not runs of the
        fixed-delay suite: drawn with it, they would add to its D = 32 panel and table row
        runs of another design).
    """

    name: str
    title: str
    runner: str
    settings: tuple[tuple[str, Any], ...] = ()
    reads_earlier: bool = False
    full_settings: tuple[tuple[str, Any], ...] | None = None
    figure_runs: bool = True


@dataclass(frozen=True)
class TheoryResults:
    """What the theory stage computed: the claims table's rows (`theory.claims.evaluate_claims`),
    their counts by section, the plots and the explorer page written, and the stage's folder
    name (the report's links are relative to the report's folder)."""

    rows: list[dict[str, Any]]
    by_section: dict[str, Any]
    plots: list[Path]
    explorer: Path
    stage_folder: str


def theory_results(out_dir: Path) -> TheoryResults:
    """Evaluate the claims table (sympy/mpmath derivations and numeric checks), write
    `claims.json`, the bound plots and the bounds explorer."""
    from theory import claims, plots
    from theory.explorer_page import write_explorer_page

    rows = claims.evaluate_claims()
    atomic_write_json(out_dir / "claims.json", rows)
    written = plots.write_plots(out_dir)
    by_section = claims.summary_by_section(rows)
    explorer = write_explorer_page(out_dir / "bounds_explorer.html")
    return TheoryResults(rows, by_section, list(written), explorer, out_dir.name)


def theory_headline(results: TheoryResults) -> str:
    """One line: the paper's claims and ours, by kind of verdict and of evidence."""
    from theory.evidence_kinds import kind_counts

    return claims_headline(results.by_section, kind_counts(results.rows))


def theory_markdown(results: TheoryResults) -> str:
    """The theory stage's section: the headline, the claims table, the plots, the explorer."""
    from theory import claims

    folder = results.stage_folder
    images = "\n".join(
        f"![{p.stem}]({folder}/{p.name})" for p in results.plots if p.suffix == ".png"
    )
    return (
        f"The claims of §3-§4, re-derived with sympy and checked numerically: "
        f"{theory_headline(results)}.\n\n"
        + claims.claims_markdown(results.rows)
        + "\n"
        + images
        + f"\n\nTo move eps, N, tau4, eta, G, delta and the constants yourself: [the bounds "
        f"explorer]({folder}/{results.explorer.name}) (one HTML file, no kernel or network "
        "needed; the numbers of `theory.explorer`).\n"
    )


def theory_stage(out_dir: Path) -> dict[str, Any]:
    """Claims table (sympy/mpmath derivations and numeric checks) and the bound plots."""
    results = theory_results(out_dir)
    return {
        "headline": theory_headline(results),
        "markdown": theory_markdown(results),
        "verdicts": results.by_section["paper"],
    }


def figures_results(out_dir: Path) -> tuple[Any, list[Stage]]:
    """Every figure and table the earlier stages' run directories allow (`gmc-grpo figures`):
    `(figures.cli.write_all's result, the stages whose folders were not read)`.

    Reads the sibling folders of `out_dir` (the other stages' outputs) except those of the stages
    whose runs belong to no drawn suite (`Stage.figure_runs`), and writes into `out_dir`.
    """
    from figures.cli import write_all

    not_read = [stage for stage in STAGES if not stage.figure_runs]
    exclude = [out_dir, *(out_dir.parent / stage.name for stage in not_read)]
    return write_all([out_dir.parent], out_dir, exclude=exclude, root=out_dir.parent), not_read


def figures_markdown(result: Any, not_read: list[Stage], stage_folder: str) -> str:
    """The figures stage's section: what was drawn from which stages, the figures and tables
    (`result.markdown`, images linked under `stage_folder/`)."""
    skipped_stages = "".join(
        f" Not read: `{stage.name}/` ({stage.title}), whose runs are not part of the suites "
        "drawn here (its own section reports them)."
        for stage in not_read
    )
    return (
        "Figures and tables regenerated from the run records of the stages above "
        '(`gmc-grpo figures`); the paper\'s values sit beside ours, labelled "paper"; items '
        f"without a matching run are listed with the reason.{skipped_stages}\n\n"
        + result.markdown(image_prefix=f"{stage_folder}/")
    )


def figures_stage(out_dir: Path) -> dict[str, Any]:
    """Every figure and table the earlier stages' run directories allow (`figures_results`)."""
    result, not_read = figures_results(out_dir)
    return {
        "headline": f"{len(result.written)} figures/tables made, {len(result.skipped)} not made",
        "markdown": figures_markdown(result, not_read, out_dir.name),
        "written": sorted(result.written),
        "skipped": result.skipped,
    }


def toy_sweep_results(out_dir: Path) -> dict[str, Any]:
    """Run `gmc-grpo toy sweep --quick` into `out_dir/run` (figures included) and return its
    `summary.json` (`toy_mdps.sweep.analysis.summarise_sweep`: slopes and claims)."""
    from pipeline import toy

    run_dir = out_dir / "run"
    jobs = str(machine_jobs())
    code = toy.main(["sweep", "--quick", "--out", str(run_dir), "--no-progress", "--jobs", jobs])
    if code != 0:
        raise RuntimeError(f"gmc-grpo toy sweep --quick exited with {code}")
    return json.loads((run_dir / "summary.json").read_text())


def toy_sweep_markdown(summary: dict[str, Any], stage_folder: str) -> str:
    """The quick sweep's section: its size, the checks of the paper's chain, its figures."""
    from pipeline.toy_report import sweep_claims_markdown

    lines = [
        f"Quick sweep: {summary['num_rows']} grid points (method × delay × $G$ × seed), "
        f"{int(100 * summary['confidence'])}% intervals. Table: `{stage_folder}/run/results.csv`.",
        "",
        sweep_claims_markdown(summary),
    ]
    lines += [
        f"![{Path(p).stem}]({stage_folder}/run/{p})"
        for p in summary.get("figures", [])
        if p.endswith(".png")
    ]
    return "\n".join(lines) + "\n"


def toy_sweep_stage(out_dir: Path) -> dict[str, Any]:
    """`gmc-grpo toy sweep --quick`: bias and second moment of every estimator vs the exact gradient."""
    from pipeline.headlines import sweep_headline

    summary = toy_sweep_results(out_dir)
    return {
        "headline": sweep_headline(summary),
        "markdown": toy_sweep_markdown(summary, out_dir.name),
    }


@dataclass(frozen=True)
class ToyTrainResults:
    """The quick toy training experiments, finished: per experiment its config, `summary.json`
    and the reasons its runs fall outside the theorems' setting (`training_setting`; empty:
    plain SGD at a constant step), and the stage's folder name."""

    configs: dict[str, Any]
    summaries: dict[str, dict[str, Any]]
    settings: dict[str, list[str]]
    stage_folder: str


def toy_train_results(out_dir: Path) -> ToyTrainResults:
    """Run the quick toy training experiments (`gmc-grpo toy train --quick`) and draw their
    figures."""
    import torch

    from pipeline.headlines import training_setting
    from pipeline.toy import draw_figures
    from toy_mdps.train.config import QUICK_EXPERIMENTS, ExperimentConfig, shipped_experiment
    from toy_mdps.train.run import run_experiment

    torch.set_num_threads(1)  # small tensors: one thread is fastest, and robust on shared cores
    out_dir = Path(out_dir)
    configs, summaries, settings = {}, {}, {}
    for name in QUICK_EXPERIMENTS:
        config = ExperimentConfig.from_file(shipped_experiment(name))
        settings[config.name] = training_setting(config.points()[0][1].to_dict())
        experiment_dir = out_dir / config.name
        run_experiment(config, experiment_dir, progress=False, jobs=machine_jobs())
        if config.figures:
            draw_figures("experiment", experiment_dir)
        configs[config.name] = config
        summaries[config.name] = json.loads((experiment_dir / "summary.json").read_text())
    return ToyTrainResults(configs, summaries, settings, out_dir.name)


def toy_train_markdown(results: ToyTrainResults) -> str:
    """The toy training section: which runs are outside the theorems' setting, then each
    experiment's report (`toy_mdps.train.report.experiment_markdown`)."""
    from toy_mdps.train.report import experiment_markdown

    parts = [
        experiment_markdown(
            config, results.summaries[name], prefix=f"{results.stage_folder}/{name}"
        )
        for name, config in results.configs.items()
    ]
    settings = results.settings
    outside = sorted({r for reasons in settings.values() for r in reasons})
    if outside:
        parts.insert(
            0,
            "Runs with "
            + ", ".join(outside)
            + " are outside the theorems' setting (Lemma 1 and Theorems 1-2 analyse plain SGD at "
            "a constant step): their orderings test the paper's experimental claims, not the "
            "theorems. "
            + ", ".join(f"`{n}`" for n, r in settings.items() if not r)
            + " runs plain SGD at a constant step (the theorems' setting).",
        )
    return "\n\n".join(parts)


def toy_train_stage(out_dir: Path) -> dict[str, Any]:
    """The quick toy training experiments (`gmc-grpo toy train --quick`), their figures and a
    report section: `{"headline", "markdown", "experiments": summaries}`."""
    from pipeline.headlines import toy_train_headline

    results = toy_train_results(out_dir)
    return {
        "headline": toy_train_headline(results.summaries, results.settings),
        "markdown": toy_train_markdown(results),
        "experiments": results.summaries,
    }


STAGES: tuple[Stage, ...] = (
    Stage(
        "theory", "Theory: constants, rates and the claims table", "pipeline.reproduce:theory_stage"
    ),
    Stage(
        "toy_sweep",
        "Toy token MDPs: bias and second moment of every estimator (quick sweep)",
        "pipeline.reproduce:toy_sweep_stage",
        (("config", "quick"),),
    ),
    Stage(
        "toy_train",
        "Toy token MDPs: asynchronous learners (delay, group size, length-coupled, eps*)",
        "pipeline.reproduce:toy_train_stage",
        (("experiments", "quick"),),
    ),
    Stage(
        "bounds",
        "Toy token MDPs: the theorems' bounds, with constants, beside the measurements",
        "pipeline.bounds_stage:bounds_stage",
        (("experiments", ["bounds_quick", "bounds_bite", "bounds_optimal", "drift_quick"]),),
        full_settings=(
            ("experiments", ["bounds_quick", "bounds_bite", "bounds_optimal_full", "drift_quick"]),
        ),
        reads_earlier=True,
    ),
    Stage(
        "toy_workers",
        "Toy token MDPs: rollout workers with per-group lags (mixed delays, delay regularity)",
        "pipeline.workers_stage:workers_stage",
        (("experiments", ["mixed_quick", "regularity_quick"]),),
    ),
    Stage(
        "claims",
        "Theory: the claims that need runs, on this report's runs",
        "pipeline.claims_stage:claims_stage",
        reads_earlier=True,
    ),
    Stage(
        "llm_tiny",
        "Qwen3 track on a CPU: GMC - TIC held-out Pass@1 on 2-digit additions, paired over seeds",
        "pipeline.llm_stage:llm_tiny_stage",
        llm_suite_settings(),
        full_settings=llm_suite_settings(full=True),
    ),
    Stage(
        "llm_bias",
        "LM bias: each estimator's bias on the tiny Qwen3 at checkpoints of delayed runs",
        "pipeline.llm_bias_stage:llm_bias_stage",
        llm_bias_settings(),
        figure_runs=False,  # delayed GMC runs (D = 32, 3 seeds), not runs of the fixed-delay suite
    ),
    Stage(
        "figures",
        "Figures and tables from the run records (paper values beside ours)",
        "pipeline.reproduce:figures_stage",
        reads_earlier=True,
    ),
)


def _resolve(runner: str) -> Callable[[Path], dict[str, Any]]:
    module_name, function_name = runner.split(":")
    return getattr(importlib.import_module(module_name), function_name)


def run_stage(
    stage: Stage,
    out: Path,
    force: bool = False,
    inputs_finished_at: float = 0.0,
    full: bool = False,
) -> dict[str, Any]:
    """Run (or reuse) one stage; never raises for a failing stage: the report says it failed.

    A finished stage is reused when its settings are unchanged and, for a stage that reads the
    earlier stages' outputs, when it finished after all of them (`inputs_finished_at`). `full`:
    the larger design of a stage that has one (`Stage.full_settings`).
    """
    stage_dir = out / stage.name
    marker = stage_dir / "stage.json"
    designs = stage.full_settings is not None
    settings = dict(stage.full_settings if full and designs else stage.settings)  # type: ignore[arg-type]
    if marker.exists() and not force:
        previous = json.loads(marker.read_text())
        fresh = not stage.reads_earlier or previous.get("finished_at", 0.0) >= inputs_finished_at
        if previous.get("status") == "ok" and previous.get("settings") == settings and fresh:
            previous["reused"] = True
            return previous
    stage_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        runner = _resolve(stage.runner)
        result = runner(stage_dir, full=full) if designs else runner(stage_dir)
        record = {"status": "ok", **result}
    except PluginImportError:  # bad input of the whole command (GMC_GRPO_METHODS): stop
        raise
    except Exception as error:  # report the failure, keep going with the other stages
        record = {
            "status": "failed",
            "markdown": f"**Stage failed:** `{type(error).__name__}: {error}`\n\n"
            f"```\n{traceback.format_exc(limit=6)}\n```\n",
        }
    record.update(
        name=stage.name,
        title=stage.title,
        settings=settings,
        seconds=time.perf_counter() - start,
        finished_at=time.time(),
    )
    atomic_write_json(marker, record)
    record["reused"] = False
    return record


def write_report(out: Path, records: list[dict[str, Any]]) -> Path:
    """`REPORT.md` (and `REPORT.html`, see `pipeline.report`): stage table with times and links,
    then each stage's section. `REPORT.md` links its images; `REPORT.html` holds them (data
    URIs, `pipeline.report_images`), so it can be copied alone."""
    from pipeline.report import (
        markdown_to_html,
        render_markdown_report,
        short_headline,
        slugify,
    )
    from pipeline.report_images import embed_images

    env = environment_info()
    failed = [rec["title"] for rec in records if rec["status"] != "ok"]
    lines = [
        "## Summary",
        "",
        f"{len(records)} stages, {len(records) - len(failed)} finished"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + f". Package {env['gmc_grpo_version']}, commit `{env['git_commit']}`, "
        f"Python {env['python']}, {env['platform']}. Each stage's whole headline opens its section.",
        "",
        "| stage | status | seconds | headline |",
        "| --- | --- | ---: | --- |",
    ]
    for rec in records:
        status = rec["status"] + (" (reused)" if rec.get("reused") else "")
        anchor = f"#{slugify(rec['title'])}"
        headline, shortened = short_headline(str(rec.get("headline", "")))
        more = f" ([more]({anchor}))" if shortened else ""
        lines.append(
            f"| [{rec['title']}]({anchor}) | {status} | {rec['seconds']:.1f} | {headline}{more} |"
        )
    sections = []
    for rec in records:
        body = rec.get("markdown", "")
        if rec.get("headline"):
            body = f"**Headline.** {rec['headline']}\n\n{body}"
        sections.append((rec["title"], body))
    text = render_markdown_report("gmc-grpo reproduction report", "\n".join(lines), sections)
    report = out / "REPORT.md"
    atomic_write_text(report, text)
    page, missing = embed_images(markdown_to_html(text), out)  # one file: images inlined
    for source in missing:
        print(f"[reproduce] REPORT.html: no image file {source} (left as a link)", flush=True)
    atomic_write_text(out / "REPORT.html", page)
    return report


def build_parser() -> argparse.ArgumentParser:
    """The parser of `gmc-grpo reproduce`."""
    parser = argparse.ArgumentParser(
        prog="gmc-grpo reproduce",
        description="Run every CPU stage on its embedded defaults and write REPORT.md. "
        "Finished stages are reused on a second run.",
        epilog="stages: " + ", ".join(s.name for s in STAGES),
    )
    parser.add_argument("--out", default="results", help="output directory (default: results)")
    parser.add_argument("--only", nargs="+", metavar="STAGE", help="run only these stages")
    parser.add_argument("--force", action="store_true", help="rerun stages that already finished")
    parser.add_argument(
        "--full",
        action="store_true",
        help="run the larger design of the stages that have one (the Qwen3 stage: "
        f"{len(design_seeds(full=True))} seeds instead of {len(design_seeds())})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    known = {s.name for s in STAGES}

    def checked() -> int:
        if args.only and not set(args.only) <= known:  # one line, as every other bad input
            unknown = ", ".join(cut(name, 40) for name in sorted(set(args.only) - known))
            raise ValueError(
                f"--only {unknown}: not a stage; choose from {', '.join(sorted(known))} "
                "(e.g. --only toy_sweep theory)"
            )
        return _reproduce(args)

    return run_reported("gmc-grpo reproduce", checked)


def _reproduce(args: argparse.Namespace) -> int:
    """Run the stages `args` asks for and write the report; returns the exit status."""
    from gmc_grpo.methods import method_names

    method_names()  # every stage uses the registry: a bad GMC_GRPO_METHODS module stops here
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file: choose a folder for the results")
    with run_lock(out):  # one `reproduce` per folder (`gmc_grpo.runlock`)
        return _run_stages(args, out)


def _run_stages(args: argparse.Namespace, out: Path) -> int:
    """Run the stages into `out` (whose lock the caller holds) and write the report."""
    records = []
    for stage in STAGES:
        if args.only and stage.name not in args.only:
            marker = out / stage.name / "stage.json"
            if marker.exists():  # keep the stage's earlier result in the report
                records.append({**json.loads(marker.read_text()), "reused": True})
            continue
        print(f"[reproduce] {stage.name}: {stage.title}", flush=True)
        inputs = max((r.get("finished_at", 0.0) for r in records), default=0.0)
        record = run_stage(stage, out, force=args.force, inputs_finished_at=inputs, full=args.full)
        note = "reused" if record["reused"] else f"{record['seconds']:.1f} s"
        print(f"[reproduce] {stage.name}: {record['status']} ({note})", flush=True)
        records.append(record)
    report = write_report(out, records)
    print(f"[reproduce] report: {report}")
    return 0 if all(r["status"] == "ok" for r in records) else 1
