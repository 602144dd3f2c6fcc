"""`gmc-grpo reproduce`: everything that runs on a CPU, on embedded defaults, then one report.

Stages run in order; each writes into `<out>/<stage>/` and records `stage.json` (status, seconds,
headline). A second run reuses every stage whose `stage.json` says it finished with the same
settings (`--force` reruns). The report `<out>/REPORT.md` lists, per stage, what it checked, its
headline results and the time it took.
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

from gmc_grpo.records import atomic_write_json, atomic_write_text, environment_info


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
    """

    name: str
    title: str
    runner: str
    settings: tuple[tuple[str, Any], ...] = ()
    reads_earlier: bool = False


def theory_stage(out_dir: Path) -> dict[str, Any]:
    """Claims table (sympy/mpmath derivations and numeric checks) and the bound plots."""
    from theory import claims, plots

    rows = claims.evaluate_claims()
    atomic_write_json(out_dir / "claims.json", rows)
    written = plots.write_plots(out_dir)
    counts = claims.summary(rows)
    headline = ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
    images = "\n".join(
        f"![{p.stem}]({out_dir.name}/{p.name})" for p in written if p.suffix == ".png"
    )
    markdown = (
        f"{len(rows)} claims of §3-§4 re-derived with sympy and checked numerically: {headline}.\n\n"
        + claims.claims_markdown(rows)
        + "\n"
        + images
        + "\n"
    )
    return {"headline": headline, "markdown": markdown, "verdicts": counts}


def figures_stage(out_dir: Path) -> dict[str, Any]:
    """Every figure and table the earlier stages' run directories allow (`gmc-grpo figures`).

    Reads the sibling folders of `out_dir` (the other stages' outputs) and writes into `out_dir`.
    """
    from figures.cli import write_all

    result = write_all([out_dir.parent], out_dir, exclude=[out_dir])
    headline = f"{len(result.written)} figures/tables made, {len(result.skipped)} not made"
    markdown = (
        "Figures and tables regenerated from the run records of the stages above "
        '(`gmc-grpo figures`); the paper\'s values sit beside ours, labelled "paper"; items '
        "without a matching run are listed with the reason.\n\n"
        + result.markdown(image_prefix=f"{out_dir.name}/")
    )
    return {
        "headline": headline,
        "markdown": markdown,
        "written": sorted(result.written),
        "skipped": result.skipped,
    }


def toy_sweep_stage(out_dir: Path) -> dict[str, Any]:
    """`gmc-grpo toy sweep --quick`: bias and second moment of every estimator vs the exact gradient."""
    from pipeline import toy

    run_dir = out_dir / "run"
    code = toy.main(["sweep", "--quick", "--out", str(run_dir), "--no-progress"])
    if code != 0:
        raise RuntimeError(f"gmc-grpo toy sweep --quick exited with {code}")
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = [
        f"Quick sweep: {summary['num_rows']} grid points (method x delay x G x seed), "
        f"{int(100 * summary['confidence'])}% intervals. Table: `{out_dir.name}/run/results.csv`.",
        "",
        "| check (paper's chain) | holds | of |",
        "| --- | ---: | ---: |",
    ]
    held = total = 0
    for claim in summary["claims"].values():
        holds = claim.get("holds", claim.get("exceeds"))
        lines.append(f"| {claim['claim']} | {holds} | {claim['of']} |")
        if "holds" in claim:
            held, total = held + claim["holds"], total + claim["of"]
    lines.append("")
    lines += [
        f"![{Path(p).stem}]({out_dir.name}/run/{p})"
        for p in summary.get("figures", [])
        if p.endswith(".png")
    ]
    return {
        "headline": f"{held}/{total} grid-point checks of the paper's chain hold",
        "markdown": "\n".join(lines) + "\n",
    }


def toy_train_stage(out_dir: Path) -> dict[str, Any]:
    """The quick toy training experiments (`gmc-grpo toy train --quick`), their figures and a
    report section: `{"headline", "markdown", "experiments": summaries}`."""
    import torch

    from pipeline.toy import draw_figures
    from toy_mdps.train.analysis import experiment_markdown
    from toy_mdps.train.config import QUICK_EXPERIMENTS, ExperimentConfig, shipped_experiment
    from toy_mdps.train.run import run_experiment

    torch.set_num_threads(1)  # small tensors: one thread is fastest, and robust on shared cores
    out_dir = Path(out_dir)
    summaries = {}
    parts = []
    for name in QUICK_EXPERIMENTS:
        config = ExperimentConfig.from_file(shipped_experiment(name))
        experiment_dir = out_dir / config.name
        run_experiment(config, experiment_dir, progress=False)
        if config.figures:
            draw_figures("experiment", experiment_dir)
        summary = json.loads((experiment_dir / "summary.json").read_text())
        summaries[config.name] = summary
        parts.append(experiment_markdown(config, summary, prefix=f"{out_dir.name}/{config.name}"))
    claims = [c for s in summaries.values() for c in s.get("orderings", [])]
    held = sum(c["verdict"].startswith("holds") for c in claims)
    significant = sum(c["verdict"] == "holds" for c in claims)
    headline = f"{held} of {len(claims)} orderings hold on the toy MDPs ({significant} significant)"
    for s in summaries.values():
        fit = s.get("eps_star")
        if not fit:
            continue
        if "tau4_exponent" in fit:
            headline += (
                f"; eps* ~ tau4^{fit['tau4_exponent']:.2f} N^{fit['n_exponent']:.2f} "
                "(paper 1/7, -3/14)"
            )
        else:
            headline += (
                f"; eps*: no interior optimum ({fit['censored_cells']} of "
                f"{len(fit['table'])} cells censored)"
            )
    return {"headline": headline, "markdown": "\n\n".join(parts), "experiments": summaries}


def _reward_windows(rows: list[dict[str, Any]], width: int = 15) -> tuple[float, float]:
    """Mean `reward/mean` of the first and the last `width` updates."""
    rewards = [r["reward/mean"] for r in rows if "reward/mean" in r]
    if not rewards:
        raise RuntimeError("the run logged no reward/mean")
    first, last = rewards[:width], rewards[-width:]
    return sum(first) / len(first), sum(last) / len(last)


# (recipe, run within the recipe): the tiny CPU demonstration, then three methods under D = 16
LLM_TINY_RUNS: tuple[tuple[str, str | None], ...] = (
    ("tiny", None),
    ("tiny_delay", "grpo"),
    ("tiny_delay", "tic"),
    ("tiny_delay", "gmc"),
)


def llm_tiny_stage(out_dir: Path) -> dict[str, Any]:
    """The tiny CPU recipe of the Qwen3 track (random-init tiny Qwen3, arithmetic task, HF engine).

    `gmc-grpo llm train --recipe tiny` (GMC, D = 0), then `--recipe tiny_delay` for GRPO, TIC and
    GMC under a fixed delay of 16 updates. Resumable: a finished run is read back, not rerun.
    """
    from gmc_grpo.records import read_run
    from llm_runs import cli as llm_cli

    lines = [
        "Tiny random-init Qwen3 (2 layers, hidden 128) after a short supervised warm-up on additions "
        "with answers in `\\boxed{}`, then RL with the full pipeline (HF rollout engine, staleness "
        "schedule, learner, checkpoints). Not a paper setting; one seed.",
        "",
        "| recipe | method | delay | reward, first 15 updates | reward, last 15 updates |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    finals = {}
    for recipe, run in LLM_TINY_RUNS:
        name = recipe + (f"_{run}" if run else "")
        run_dir = out_dir / name
        if not (run_dir / "summary.json").exists():
            argv = ["train", "--recipe", recipe, "--out", str(run_dir), "--no-progress"]
            if run:
                argv += ["--run", run]
            code = llm_cli.main(argv)
            if code != 0:
                raise RuntimeError(f"gmc-grpo llm train {' '.join(argv[1:])} exited with {code}")
        record = read_run(run_dir)
        first, last = _reward_windows(record.metrics)
        config = record.config["config"]
        finals[name] = last
        lines.append(
            f"| {recipe} | {config['method']} | {config['delay']} | {first:.3f} | {last:.3f} |"
        )
    lines.append("")
    lines.append(
        f"Run records: `{out_dir.name}/<recipe>[_<method>]/` (metrics.jsonl, evals.jsonl)."
    )
    first, last = _reward_windows(read_run(out_dir / "tiny").metrics)
    return {
        "headline": f"tiny recipe reward {first:.2f} -> {last:.2f}; D = 16: "
        + ", ".join(f"{k.split('_')[-1]} {v:.2f}" for k, v in finals.items() if k != "tiny"),
        "markdown": "\n".join(lines) + "\n",
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
        "toy_workers",
        "Toy token MDPs: rollout workers with per-group lags (mixed delays, delay regularity)",
        "pipeline.workers_stage:workers_stage",
        (("experiments", ["mixed_quick", "regularity_quick"]),),
    ),
    Stage(
        "llm_tiny",
        "Qwen3 track on a CPU: the tiny recipe, and GRPO/TIC/GMC under a delay",
        "pipeline.reproduce:llm_tiny_stage",
        (("runs", [f"{r}:{m}" for r, m in LLM_TINY_RUNS]),),
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
    stage: Stage, out: Path, force: bool = False, inputs_finished_at: float = 0.0
) -> dict[str, Any]:
    """Run (or reuse) one stage; never raises for a failing stage: the report says it failed.

    A finished stage is reused when its settings are unchanged and, for a stage that reads the
    earlier stages' outputs, when it finished after all of them (`inputs_finished_at`).
    """
    stage_dir = out / stage.name
    marker = stage_dir / "stage.json"
    settings = dict(stage.settings)
    if marker.exists() and not force:
        previous = json.loads(marker.read_text())
        fresh = not stage.reads_earlier or previous.get("finished_at", 0.0) >= inputs_finished_at
        if previous.get("status") == "ok" and previous.get("settings") == settings and fresh:
            previous["reused"] = True
            return previous
    stage_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        result = _resolve(stage.runner)(stage_dir)
        record = {"status": "ok", **result}
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
    """`REPORT.md` (and `REPORT.html`): stage table with times, then each stage's section."""
    env = environment_info()
    lines = [
        "# gmc-grpo reproduction report",
        "",
        f"Package {env['gmc_grpo_version']}, commit `{env['git_commit']}`, Python {env['python']}, "
        f"{env['platform']}.",
        "",
        "| stage | status | seconds | headline |",
        "| --- | --- | ---: | --- |",
    ]
    for rec in records:
        status = rec["status"] + (" (reused)" if rec.get("reused") else "")
        lines.append(
            f"| {rec['title']} | {status} | {rec['seconds']:.1f} | {rec.get('headline', '')} |"
        )
    lines.append("")
    for rec in records:
        lines += [f"## {rec['title']}", "", rec.get("markdown", "").rstrip(), ""]
    text = "\n".join(lines) + "\n"
    report = out / "REPORT.md"
    atomic_write_text(report, text)
    atomic_write_text(out / "REPORT.html", _markdown_to_html(text))
    return report


def _markdown_to_html(text: str) -> str:
    """A dependency-free rendering: headings, tables and paragraphs; code kept verbatim."""
    import html

    body: list[str] = []
    in_table = in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            body.append("</pre>" if in_code else "<pre>")
            in_code = not in_code
            continue
        if in_code:
            body.append(html.escape(line))
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if all(set(c) <= set("-: ") for c in cells):
                continue
            if not in_table:
                body.append("<table>")
                in_table = True
            body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
            continue
        if in_table:
            body.append("</table>")
            in_table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
        elif line.startswith("![") and "](" in line:
            src = line[line.index("](") + 2 : line.rindex(")")]
            body.append(f'<p><img src="{html.escape(src)}" style="max-width:900px"></p>')
        elif line.strip():
            body.append(f"<p>{html.escape(line)}</p>")
    if in_table:
        body.append("</table>")
    style = "body{font-family:sans-serif;max-width:1000px;margin:auto}td{border:1px solid #ccc;padding:3px}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{style}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo reproduce",
        description="Run every CPU stage on its embedded defaults and write REPORT.md. "
        "Finished stages are reused on a second run.",
        epilog="stages: " + ", ".join(s.name for s in STAGES),
    )
    parser.add_argument("--out", default="results", help="output directory (default: results)")
    parser.add_argument("--only", nargs="+", metavar="STAGE", help="run only these stages")
    parser.add_argument("--force", action="store_true", help="rerun stages that already finished")
    args = parser.parse_args(argv)
    known = {s.name for s in STAGES}
    if args.only and not set(args.only) <= known:
        parser.error(
            f"--only: unknown stage(s) {sorted(set(args.only) - known)}; choose from {sorted(known)}"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for stage in STAGES:
        if args.only and stage.name not in args.only:
            marker = out / stage.name / "stage.json"
            if marker.exists():  # keep the stage's earlier result in the report
                records.append({**json.loads(marker.read_text()), "reused": True})
            continue
        print(f"[reproduce] {stage.name}: {stage.title}", flush=True)
        inputs = max((r.get("finished_at", 0.0) for r in records), default=0.0)
        record = run_stage(stage, out, force=args.force, inputs_finished_at=inputs)
        note = "reused" if record["reused"] else f"{record['seconds']:.1f} s"
        print(f"[reproduce] {stage.name}: {record['status']} ({note})", flush=True)
        records.append(record)
    report = write_report(out, records)
    print(f"[reproduce] report: {report}")
    return 0 if all(r["status"] == "ok" for r in records) else 1
