"""The paper's LLM figures, from run records only (`metrics.jsonl`, `evals.jsonl`).

One `*_data` function per figure (runs in, `FigureData` out); every figure is drawn by
`figures.common.plot_panels(data, ax=None)` (data in, matplotlib figure out). The tables are in
`figures.llm_tables`.

- Figure 2: MATH500 sampled Pass@1 vs step, fixed delay `D` in {0, 64, 128}, GRPO/TIC/GMC.
- Figure 4: current-policy token entropy (`policy/entropy`) vs step, same runs.
- Figure 5: training reward (`reward/mean`) vs step, GMC vs TIC, `D = 128`, `G` in {4, 8, 32}.
- Figure 6: training reward, A-3PO vs GMC, simulated asynchrony (Qwen3-8B in the paper).

Run selection: a training run's config gives its method, schedule, delay, group size and model
(`figures.discover`; `train_runs`, `choose_model`, `choose_benchmark` here, shared with the
tables). A panel without a run, or a run without the needed records, lists it as "missing" with
the reason; nothing is interpolated. The paper's values (`figures.paper_reference`) appear beside
ours, labelled "paper".
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from evidence.runs_vs_theory import moving_average
from figures import paper_reference as paper
from figures.common import (
    FigureData,
    Panel,
    Reference,
    Series,
    eval_curve,
    metric_curve,
    pick_run,
    pick_seed_runs,
    seed_mean_series,
)
from figures.discover import Run, select
from figures.style import method_label

FIXED = "fixed_delay"
SIMULATED = "length_coupled"


# ------------------------------------------------------------------------------------------
# Selection helpers
# ------------------------------------------------------------------------------------------


def train_runs(runs: Sequence[Run], schedule: str | None) -> list[Run]:
    """The LLM training runs (of `schedule`, when given)."""
    out = [r for r in runs if r.kind == "llm_train"]
    return [r for r in out if schedule is None or r.schedule == schedule]


def choose_model(candidates: Sequence[Run], model: str | None, preferred: str) -> str | None:
    """`model` if given; else `preferred` when a run has it; else the most common model."""
    if model is not None:
        return model
    models = [r.model for r in candidates if r.model is not None]
    if not models:
        return None
    if preferred in models:
        return preferred
    return max(sorted(set(models)), key=models.count)


def choose_benchmark(candidates: Sequence[Run], benchmark: str | None) -> str:
    """`benchmark` if given; else MATH500 when any run evaluated it; else the first one found."""
    if benchmark is not None:
        return benchmark
    found = sorted({b for r in candidates for b in r.benchmarks if b != "macro"})
    if not found or "math500" in found:
        return "math500"
    return found[0]


# ------------------------------------------------------------------------------------------
# Figures 2 and 4: fixed-delay suite
# ------------------------------------------------------------------------------------------


def fixed_delays_present(
    runs: Sequence[Run], *, group_size: int = 8, model: str | None = None
) -> list[int]:
    """The delays of the fixed-delay training runs (of `group_size`, and of `model`, default the
    model the figures choose), sorted: the panels of Figures 2 and 4 and the rows of Table 3."""
    candidates = [r for r in train_runs(runs, FIXED) if r.group_size == group_size]
    model = choose_model(candidates, model, "Qwen3-1.7B")
    return sorted({r.delay for r in candidates if r.model == model and r.delay is not None})


def _fixed_delay_figure(
    runs: Sequence[Run],
    *,
    name: str,
    delays: Sequence[int] | None,
    methods: Sequence[str],
    group_size: int,
    model: str | None,
    curve,
    what: str,
) -> tuple[list[Panel], list[str], str | None]:
    candidates = [r for r in train_runs(runs, FIXED) if r.group_size == group_size]
    model = choose_model(candidates, model, "Qwen3-1.7B")
    if delays is None:
        delays = fixed_delays_present(runs, group_size=group_size, model=model)
    notes: list[str] = []
    panels = []
    for delay in delays:
        panel = Panel(title=f"D = {delay}", key=delay)
        for method in methods:
            cell = f"{name} D={delay} {method}"
            seeds = pick_seed_runs(
                select(candidates, delay=delay, method=method, model=model), notes, cell
            )
            if not seeds:
                panel.missing.append(f"{method_label(method)} (no run)")
                continue
            series = seed_mean_series(method, seeds, [curve(run) for run in seeds])
            if series is None:
                panel.missing.append(f"{method_label(method)} (no {what} in {seeds[0].name})")
                continue
            panel.series.append(series)
        panels.append(panel)
    return panels, notes, model


def figure2_data(
    runs: Sequence[Run],
    *,
    delays: Sequence[int] | None = None,
    methods: Sequence[str] = ("grpo", "tic", "gmc"),
    group_size: int = 8,
    model: str | None = None,
    benchmark: str | None = None,
) -> FigureData:
    """Figure 2: sampled Pass@1 (percent) vs step per fixed delay and method.

    Panels: `delays`, default the delays the records have (`fixed_delays_present`; the paper
    draws D = 0, 64, 128). Pass@1 is each evals row's `pass_at_k["1"]` (else `avg_at_n`) of
    decoding "sampled"; the runs of several seeds of one setting are drawn as their mean with a
    95% band over seeds (`seed_mean_series`). The paper's Table 3 pass@1 at checkpoint 800 is the
    reference, drawn in the panels of the delays it has (MATH500 only).
    """
    candidates = [r for r in train_runs(runs, FIXED) if r.group_size == group_size]
    bench = choose_benchmark(candidates, benchmark)
    panels, notes, model = _fixed_delay_figure(
        runs,
        name="Figure 2",
        delays=delays,
        methods=methods,
        group_size=group_size,
        model=model,
        curve=lambda run: eval_curve(run, bench, "sampled"),
        what=f"sampled {bench} evaluations",
    )
    if bench == "math500":
        for panel in panels:
            for method in methods:
                row = paper.table3_row(panel.key, method)
                if row is not None:
                    panel.references.append(
                        Reference(
                            label="paper, Table 3 (step 800)",
                            method=method,
                            x=800,
                            y=row["pass_at_k"]["1"],
                        )
                    )
    else:
        notes.append(
            f"benchmark is {bench!r}, not MATH500: the paper's values are not comparable and "
            "are not drawn"
        )
    data = FigureData(
        name="figure2",
        title=f"Figure 2: {bench} sampled Pass@1 under fixed delays (model {model or 'none found'}, "
        f"G = {group_size})",
        xlabel="learner step",
        ylabel="Pass@1 (%)",
        panels=panels,
        notes=notes,
        value_range=(0.0, 100.0),
    )
    # the caption names only what is drawn: the diamonds where a panel's delay is one of Table
    # 3's, the band where a curve is a mean of seeds
    parts = []
    if data.has_references:
        parts.append(
            "Open diamonds: the paper's Pass@1 at checkpoint 800 (Table 3), in the panels of "
            "the delays it reports."
        )
    elif bench == "math500":
        parts.append(
            "No paper value is drawn: Table 3 reports D = "
            + ", ".join(str(d) for d in paper.table3_delays())
            + ", and no panel has one of these delays."
        )
    if data.has_bands:
        parts.append("Shaded: 95% interval over seeds (curves that are a mean of seeds).")
    data.caption = " ".join(parts)
    return data


def figure4_data(
    runs: Sequence[Run],
    *,
    delays: Sequence[int] | None = None,
    methods: Sequence[str] = ("grpo", "tic", "gmc"),
    group_size: int = 8,
    model: str | None = None,
    window: int = 9,
) -> FigureData:
    """Figure 4: `policy/entropy` (current policy, mean per token) vs step; smoothed for display.

    Panels and seeds as in `figure2_data`. The paper gives Figure 4 as an image only: there are
    no reference values.
    """
    panels, notes, model = _fixed_delay_figure(
        runs,
        name="Figure 4",
        delays=delays,
        methods=methods,
        group_size=group_size,
        model=model,
        curve=lambda run: metric_curve(run, "policy/entropy"),
        what="policy/entropy",
    )
    for panel in panels:
        for s in panel.series:
            s.smoothed = moving_average(s.values, window)
            if s.lo is not None and s.hi is not None:  # the band of the smoothed mean
                s.lo, s.hi = moving_average(s.lo, window), moving_average(s.hi, window)
    notes.append("the paper gives Figure 4 as an image only: no reference values are drawn")
    data = FigureData(
        name="figure4",
        title=f"Figure 4: current-policy token entropy (model {model or 'none found'}, G = {group_size})",
        xlabel="learner step",
        ylabel="entropy (nats / token)",
        panels=panels,
        notes=notes,
        value_range=(0.0, None),
    )
    data.caption = f"Faint: per-step values; solid: centred moving average over {window} steps." + (
        " Shaded: 95% interval over seeds (smoothed), for curves that are a mean of seeds."
        if data.has_bands
        else ""
    )
    return data


# ------------------------------------------------------------------------------------------
# Figures 5 and 6: training reward
# ------------------------------------------------------------------------------------------


def _reward_series(run: Run, method: str, window: int) -> Series | None:
    steps, values = metric_curve(run, "reward/mean")
    if not steps:
        return None
    return Series(
        method=method,
        run=run.name,
        steps=steps,
        values=values,
        smoothed=moving_average(values, window),
    )


def figure5_data(
    runs: Sequence[Run],
    *,
    group_sizes: Sequence[int] = (4, 8, 32),
    delay: int = 128,
    methods: Sequence[str] = ("tic", "gmc"),
    model: str | None = None,
    window: int = 25,
) -> FigureData:
    """Figure 5: `reward/mean` vs step, GMC vs TIC at fixed delay `delay`, one panel per `G`.

    Reference: the step around which the paper says the curves separate (Appendix B.2.2).
    """
    candidates = [r for r in train_runs(runs, FIXED) if r.delay == delay]
    model = choose_model(candidates, model, "Qwen3-1.7B")
    notes: list[str] = []
    separation = paper.load("figure_notes")["figure5_separation_step"]
    panels = []
    for g in group_sizes:
        panel = Panel(title=f"G = {g}", key=g)
        for method in methods:
            cell = f"Figure 5 G={g} {method}"
            run = pick_run(
                select(candidates, group_size=g, method=method, model=model), notes, cell
            )
            series = None if run is None else _reward_series(run, method, window)
            if series is None:
                why = "no run" if run is None else f"no reward/mean in {run.name}"
                panel.missing.append(f"{method_label(method)} ({why})")
            else:
                panel.series.append(series)
        if str(g) in separation:
            panel.references.append(
                Reference(
                    label=f"paper: curves separate ~ step {separation[str(g)]}",
                    x=separation[str(g)],
                )
            )
        panels.append(panel)
    return FigureData(
        name="figure5",
        title=f"Figure 5: training reward, GMC vs TIC, D = {delay} (model {model or 'none found'})",
        xlabel="learner step",
        ylabel="training reward",
        panels=panels,
        notes=notes,
        caption=f"Faint: per-step reward; solid: moving average over {window} steps."
        + (
            " Dotted: where the paper says the curves begin to separate (Appendix B.2.2)."
            if any(p.references for p in panels)
            else ""
        ),
    )


def figure6_data(
    runs: Sequence[Run],
    *,
    methods: Sequence[str] = ("a3po", "gmc"),
    model: str | None = None,
    window: int = 25,
) -> FigureData:
    """Figure 6: `reward/mean` vs step, A-3PO vs GMC under simulated asynchrony (Qwen3-8B
    preferred). Reference: the paper's A-3PO collapse window (steps 430-440)."""
    candidates = train_runs(runs, SIMULATED)
    model = choose_model(candidates, model, "Qwen3-8B")
    notes: list[str] = []
    panel = Panel(title=f"simulated asynchrony, {model or 'no model found'}", key=model)
    for method in methods:
        run = pick_run(select(candidates, method=method, model=model), notes, f"Figure 6 {method}")
        series = None if run is None else _reward_series(run, method, window)
        if series is None:
            why = "no run" if run is None else f"no reward/mean in {run.name}"
            panel.missing.append(f"{method_label(method)} ({why})")
        else:
            panel.series.append(series)
    lo, hi = paper.load("figure_notes")["figure6_a3po_collapse_steps"]
    panel.references.append(
        Reference(label=f"paper: A-3PO collapse (steps {lo}-{hi}, 8B)", x=lo, x2=hi)
    )
    if model != "Qwen3-8B":
        notes.append(f"model is {model!r}; the paper's Figure 6 is Qwen3-8B")
    return FigureData(
        name="figure6",
        title="Figure 6: training reward, A-3PO vs GMC-GRPO",
        xlabel="learner step",
        ylabel="training reward",
        panels=[panel],
        notes=notes,
        caption=f"Faint: per-step reward; solid: moving average over {window} steps. Grey span: "
        "where the paper's A-3PO reward collapses (Figure 6).",
    )


# ------------------------------------------------------------------------------------------
# The outcome against the measured KL (issue 35): the fixed-delay suite's runs
# ------------------------------------------------------------------------------------------

#: the tracked current/behavior KL (`llm_runs.bound_tracking`), and the learner's estimate where no run
#: has the tracker
KL_KEYS = ("bounds/kl_estimate", "ratio/kl_estimate")
#: a marker per delay, in the order of the delays present
DELAY_MARKERS = ("o", "s", "^", "D", "v", "P")


def _median(values: Sequence[float]) -> float:
    x = sorted(values)
    mid = len(x) // 2
    return x[mid] if len(x) % 2 else (x[mid - 1] + x[mid]) / 2


def outcome_kl_data(
    runs: Sequence[Run],
    *,
    group_size: int = 8,
    model: str | None = None,
    benchmark: str | None = None,
) -> FigureData:
    """Each fixed-delay run's held-out sampled Pass@1 at its last evaluation (%) against the
    median over the run of its measured KL(current || behavior) per response (nats): one
    series per (method, delay), `steps` holding the runs' KL, `values` their Pass@1.

    The KL is the bound tracker's (`bounds/kl_estimate`) when any run has it, else the learner's
    `ratio/kl_estimate`; a `D = 0` run is on-policy (KL exactly 0). Runs without a sampled
    evaluation or a KL measurement are named in the notes.
    """
    candidates = [r for r in train_runs(runs, FIXED) if r.group_size == group_size]
    model = choose_model(candidates, model, "Qwen3-1.7B")
    candidates = [r for r in candidates if r.model == model]
    benchmark = choose_benchmark(candidates, benchmark)
    key = next(
        (k for k in KL_KEYS if any(k in row for r in candidates for row in r.metrics)),
        KL_KEYS[0],
    )
    cells: dict[tuple[str, int], list[tuple[float, float]]] = {}
    notes: list[str] = []
    for run in candidates:
        _, scores = eval_curve(run, benchmark, "sampled")
        _, kl = metric_curve(run, key)
        if not scores or (run.delay and not kl):
            notes.append(f"{run.path.name}: no sampled evaluation or no {key}")
            continue
        point = (0.0 if not run.delay else _median(kl), scores[-1])
        cells.setdefault((str(run.method), int(run.delay or 0)), []).append(point)
    series = []
    for (method, delay), points in sorted(cells.items(), key=lambda c: (c[0][1], c[0][0])):
        points.sort()
        series.append(
            Series(
                method=method,
                run=f"D = {delay}",
                steps=[p[0] for p in points],
                values=[p[1] for p in points],
                seeds=len(points),
            )
        )
    data = FigureData(
        name="outcome_kl",
        title=f"Held-out sampled Pass@1 against the measured KL (model {model or 'none found'})",
        xlabel="KL(current || behavior), nats per response (run median)",
        ylabel=f"{benchmark} sampled Pass@1 at the end (%)",
        panels=[Panel(title="one marker per run", key="runs", series=series)],
        notes=notes,
    )
    data.caption = (
        "One marker per run: its held-out sampled Pass@1 at the last evaluation against the "
        f"median of its measured current/behavior KL per response (`{key}`); colour: method, "
        "marker: delay ($D = 0$ is on-policy, KL 0)."
    )
    return data


def plot_outcome_kl(data: FigureData, ax: Any = None) -> Any:
    """Draw `outcome_kl_data`: a marker per run, a colour per method, a marker shape per delay;
    one legend below the panel (`figures.style.figure_legend`). Returns the figure."""
    from figures.common import panel_axes
    from figures.style import figure_legend, figure_style, method_color

    with figure_style():
        panel = data.panels[0]
        # one panel, wide and tall enough for a legend entry per (method, delay) below it
        fig, axes = panel_axes(1, ax, width=4.8, height=2.6 + 0.22 * len(panel.series) / 2)
        axis = axes[0]
        delays = sorted({s.run for s in panel.series}, key=lambda r: int(r.split("= ")[1]))
        for s in panel.series:
            marker = DELAY_MARKERS[delays.index(s.run) % len(DELAY_MARKERS)]
            axis.plot(
                s.steps,
                s.values,
                ls="none",
                marker=marker,
                ms=5,
                mfc="none",
                mew=1.3,
                color=method_color(s.method),
                label=f"{method_label(s.method)}, {s.run}",
            )
        # about 13 characters of 10-point text per inch: a narrow figure wraps its text
        width = max(30, int(fig.get_figwidth() * 13))
        axis.set_title(panel.title)
        axis.set_xlabel("\n".join(textwrap.wrap(data.xlabel, width)))
        axis.set_ylabel("\n".join(textwrap.wrap(data.ylabel, int(fig.get_figheight() * 13))))
        figure_legend(fig, axes, note="\n".join(data.notes))
        if data.title:
            fig.suptitle("\n".join(textwrap.wrap(data.title, width)))
    return fig
