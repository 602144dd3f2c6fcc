"""The `toy_workers` stage of `gmc-grpo reproduce`: rollout workers with per-group lags (issue 17).

Runs the two quick worker-schedule experiments of the toy track (`mixed_quick`,
`regularity_quick`: `toy_mdps/configs/train_*.json`), draws their figures and writes the report
section that answers:

(a) do batches that mix lags behave like uniform-delay batches with the same `tau4`, as the
    bounds (which see the delays only through `tau4`) suggest, or does the spread matter too?
(b) under length-coupled completion (generation time proportional to the response length), does
    the delay-regularity condition of §2.2 hold, and does GMC's advantage over TIC survive?

The numbers come from `toy_mdps.train.workers_analysis` (stored in each experiment's
`summary.json`): `workers_results` runs the experiments, `workers_report` (`mixed_markdown`,
`regularity_markdown`) formats them. `gmc-grpo toy train --experiment mixed_full`
(and `regularity_full`) run the full versions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gmc_grpo.stats import interval_text
from toy_mdps.jobs import machine_jobs

TAU4 = r"$\bar\tau_4 = \frac{1}{NB}\sum_{n}\sum_{b}(\tau_n^{(b)})^4$"
# `\Vert`, not `\|`: a `|` inside a Markdown table cell would end the cell
CONDITION = (
    r"$\mathbb{E}[\Vert\theta_n-\theta_{n-t}\Vert_2^2 \mid \tau_n^{(b)}=t]"
    r" = \mathbb{E}\Vert\theta_n-\theta_{n-t}\Vert_2^2$"
)
DRIFT = r"$D_n(t)=\Vert\theta_n-\theta_{n-t}\Vert_2^2$"
METRIC_NAMES = {
    "final_objective": r"final $J(\theta_N)$",
    "convergence_metric": r"$\frac{1}{N}\sum_n\Vert\nabla J(\theta_n)\Vert^2$",
}
MAX_LAG_ROWS = 15


def _ci(stat: dict[str, float], digits: int = 3) -> str:
    return interval_text(stat, f".{digits}g")


def _method(name: str) -> str:
    from figures.style import method_label

    return method_label(name)


def mixed_markdown(summary: dict[str, Any], prefix: str) -> tuple[str, str]:
    """`(section, headline part)` of a `mixed_delay` experiment's summary."""
    analysis = summary["mixed_delay"]
    seeds = summary["results"][0]["num_seeds"] if summary["results"] else 0
    lines = [
        f"**(a) Mixed-lag batches vs uniform delays with the same {TAU4}.** Theorems 1 and 2 see "
        f"the delays only through $\\bar\\tau_4$. {summary['description']} Mixed: every group "
        "has its own lag (worker schedule); uniform: every group of every batch has lag $D$ "
        "(FIFO). Per seed, the uniform metric at the mixed run's realised $\\bar\\tau_4$ is "
        "interpolated linearly in $\\log\\bar\\tau_4$ between the two bracketing delays; "
        f"differences are paired over the {seeds} seeds (mean [95% t-interval]).",
        "",
        "| method | batches | mean lag | $\\bar\\tau_4$ | within-batch std of lags | "
        + " | ".join(METRIC_NAMES.values())
        + " |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for method, kinds in sorted(analysis["methods"].items()):
        for entry in kinds["mixed"] + sorted(kinds["uniform"], key=lambda e: e["tau4"]["mean"]):
            batches = (
                f"mixed: $W={entry['num_workers']}$, {entry['generation_time']} times"
                if entry["schedule"] == "workers"
                else f"uniform: $D={entry['delay']}$"
            )
            lines.append(
                f"| {_method(method)} | {batches} | {entry['lag_mean']:.1f} | "
                f"{entry['tau4']['mean']:.3g} | {entry['spread_std']['mean']:.2f} | "
                + " | ".join(_ci(entry[k]) for k in METRIC_NAMES)
                + " |"
            )
    lines += ["", "| comparison | metric | difference | verdict |", "| --- | --- | --- | --- |"]
    for c in analysis["comparisons"]:
        if c["kind"] == "same_tau4":
            what = f"{_method(c['method'])}: mixed - uniform at the same $\\bar\\tau_4$"
        else:
            delay = c["uniform"].split("_D")[-1].split("_")[0]
            what = f"{_method(c['method'])}: mixed - uniform $D={delay}$ (same mean lag)"
        lines.append(
            f"| {what} | {METRIC_NAMES[c['metric']]} | {_ci(c['difference'])} | {c['verdict']} |"
        )
    lines += _gap_rows(analysis["gaps"])
    for fig in summary.get("figures", []):
        if fig.endswith(".png"):
            lines += ["", f"![{Path(fig).stem}]({prefix}/{fig})"]
    same_tau4 = [
        c
        for c in analysis["comparisons"]
        if c["kind"] == "same_tau4" and c["metric"] == "final_objective"
    ]
    parts = [
        f"{_method(c['method'])}: {_ci(c['difference'], 2)} ({c['verdict']})" for c in same_tau4
    ]
    headline = "(a) mixed - uniform at equal tau4, final J: " + "; ".join(parts)
    return "\n".join(lines) + "\n", headline


def _gap_rows(gaps: list[dict[str, Any]]) -> list[str]:
    lines = []
    for g in gaps:
        lines.append(
            f"| GMC - TIC, {g['variant']} | {METRIC_NAMES[g['metric']]} | "
            f"{_ci(g['difference'])} | GMC better: {g['verdict']} |"
        )
    return lines


def regularity_markdown(summary: dict[str, Any], prefix: str) -> tuple[str, str]:
    """`(section, headline part)` of a `delay_regularity` experiment's summary."""
    analysis = summary["delay_regularity"]
    seeds = summary["results"][0]["num_seeds"] if summary["results"] else 0
    lines = [
        "**(b) Length-coupled completion and the delay-regularity condition** "
        f"{CONDITION} (§2.2). {summary['description']} With "
        f"{DRIFT}: the left side is the mean of a seed's own "
        "$D_n(t)$ over its groups of lag $t$; the right side the mean, over the same groups, of "
        "the other seeds' $D_n(t)$ at the same step $n$ (the unconditional expectation at $n$, "
        "across independent replicates). Pooled over lags: the per-seed log of the ratio of the "
        f"two sums, t-interval over the {seeds} seeds; the condition holds where the ratio's "
        "interval contains 1. The time-average column replaces the right side by the seed's own "
        "mean of $D_n(t)$ over all steps $n \\ge t$ (it also moves when the lag distribution and "
        "the drift change during training, which the condition allows).",
        "",
        "| method | generation time | mean lag | corr(lag, length) | LHS / RHS, pooled | "
        "condition | LHS / time-average RHS |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    shown = []
    for entry in sorted(analysis["points"].values(), key=lambda e: (e["variant"], e["method"])):
        reg = entry.get("regularity")
        if not reg or "pooled" not in reg:
            continue
        corr = reg["corr_lag_length"]
        timed = reg.get("pooled_time", {}).get("ratio")
        lines.append(
            f"| {_method(entry['method'])} | {entry['generation_time']} | "
            f"{entry['lag_mean']:.1f} | {'n/a' if corr is None else f'{corr:.2f}'} | "
            f"{_ci(reg['pooled']['ratio'])} | {'holds' if reg['pooled']['holds'] else 'does not hold'} | "
            f"{'n/a' if timed is None else _ci(timed)} |"
        )
        shown.append(entry)
    focus = next(
        (e for e in shown if e["generation_time"] == "length_proportional"),
        shown[0] if shown else None,
    )
    if focus is not None:
        per_lag = focus["regularity"]["per_lag"]
        lines += [
            "",
            f"Per lag, {_method(focus['method'])} with {focus['generation_time']} times (lags "
            "with at least 50 groups):",
            "",
            "| lag $t$ | groups | LHS | RHS | LHS - RHS | relative |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        count = len(per_lag["lag"])
        rows = range(count)
        if count > MAX_LAG_ROWS:  # evenly spaced lags, the first and the last included
            rows = sorted(
                {round(i * (count - 1) / (MAX_LAG_ROWS - 1)) for i in range(MAX_LAG_ROWS)}
            )
        for i in rows:
            t = per_lag["lag"][i]
            diff = {
                "mean": per_lag["difference"][i],
                "lo": per_lag["difference_lo"][i],
                "hi": per_lag["difference_hi"][i],
            }
            lines.append(
                f"| {int(t)} | {int(per_lag['groups'][i])} | {per_lag['lhs'][i]:.4g} | "
                f"{per_lag['rhs'][i]:.4g} | {_ci(diff)} | {per_lag['relative'][i]:+.3f} |"
            )
    lines += ["", "| comparison | metric | difference | verdict |", "| --- | --- | --- | --- |"]
    lines += _gap_rows(analysis["gaps"])
    for fig in summary.get("figures", []):
        if fig.endswith(".png"):
            lines += ["", f"![{Path(fig).stem}]({prefix}/{fig})"]
    held = [e for e in shown if e["regularity"]["pooled"]["holds"]]
    gap = next(
        (
            g
            for g in analysis["gaps"]
            if g["metric"] == "final_objective" and g["variant"] == "length_proportional"
        ),
        None,
    )
    headline = f"(b) delay regularity holds in {len(held)}/{len(shown)} runs"
    if focus is not None:
        ratio = focus["regularity"]["pooled"]["ratio"]
        corr = focus["regularity"]["corr_lag_length"]
        headline += (
            f" (length-proportional: ratio {_ci(ratio, 3)}"
            + ("" if corr is None else f", corr(lag, length) {corr:.2f}")
            + ")"
        )
    if gap is not None:
        headline += f"; GMC - TIC final J under length coupling {_ci(gap['difference'], 2)}"
    return "\n".join(lines) + "\n", headline


@dataclass(frozen=True)
class WorkerExperiment:
    """One finished worker experiment: its kind (`"mixed_delay"` or `"delay_regularity"`), its
    `summary.json` (the numbers of `toy_mdps.train.workers_analysis`) and the report's path
    prefix of its folder (`<stage folder>/<experiment>`)."""

    kind: str
    summary: dict[str, Any]
    prefix: str


def workers_results(out_dir: Path) -> list[WorkerExperiment]:
    """Run the quick worker experiments and draw their figures."""
    import torch

    from pipeline.toy import draw_figures
    from toy_mdps.train.config import WORKER_EXPERIMENTS, ExperimentConfig, shipped_experiment
    from toy_mdps.train.run import run_experiment

    torch.set_num_threads(1)  # small tensors: one thread is fastest, and robust on shared cores
    out_dir = Path(out_dir)
    experiments = []
    for name in WORKER_EXPERIMENTS:
        config = ExperimentConfig.from_file(shipped_experiment(name))
        experiment_dir = out_dir / config.name
        run_experiment(config, experiment_dir, progress=False, jobs=machine_jobs())
        draw_figures("experiment", experiment_dir)
        summary = json.loads((experiment_dir / "summary.json").read_text())
        experiments.append(WorkerExperiment(config.kind, summary, f"{out_dir.name}/{config.name}"))
    return experiments


INTRO = (
    "Rollout workers as in §2.2 / Figure 1 (`gmc_grpo.staleness.WorkerSchedule`): $W$ "
    "workers each generate one group from the snapshot current at launch, the learner takes "
    "the $B$ earliest completed groups, so one batch mixes several lags and every group's "
    "ratios use its own snapshot. Toy MDP $K=4$, $T=5$ (`gmc-grpo toy train --experiment "
    "mixed_quick` / `regularity_quick`; `*_full` for $K=8$, $T=6$, $N=400$, 20 seeds).\n"
)


def workers_report(experiments: list[WorkerExperiment]) -> dict[str, str]:
    """`{"headline", "markdown"}` of the finished worker experiments."""
    sections, headlines = [], []
    for experiment in experiments:
        render = mixed_markdown if experiment.kind == "mixed_delay" else regularity_markdown
        section, headline = render(experiment.summary, experiment.prefix)
        sections.append(section)
        headlines.append(headline)
    return {"headline": "; ".join(headlines), "markdown": INTRO + "\n" + "\n".join(sections)}


def workers_stage(out_dir: Path) -> dict[str, Any]:
    """Run the quick worker experiments, draw their figures, return the report section."""
    return workers_report(workers_results(out_dir))


__all__ = [
    "WorkerExperiment",
    "mixed_markdown",
    "regularity_markdown",
    "workers_report",
    "workers_results",
    "workers_stage",
]
