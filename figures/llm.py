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

from collections.abc import Sequence

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
