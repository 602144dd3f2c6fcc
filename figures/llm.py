"""The paper's LLM figures and tables, from run records only (`metrics.jsonl`, `evals.jsonl`).

One `*_data` function per figure or table (runs in, `FigureData` / `Table` out); every figure is
drawn by `figures.common.plot_panels(data, ax=None)` (data in, matplotlib figure out):

- Figure 2: MATH500 sampled Pass@1 vs step, fixed delay `D` in {0, 64, 128}, GRPO/TIC/GMC.
- Figure 4: current-policy token entropy (`policy/entropy`) vs step, same runs.
- Figure 5: training reward (`reward/mean`) vs step, GMC vs TIC, `D = 128`, `G` in {4, 8, 32}.
- Figure 6: training reward, A-3PO vs GMC, simulated asynchrony (Qwen3-8B in the paper).
- Table 1: six benchmarks greedy / avg@n, macro average, mean lag (simulated asynchrony).
- Table 3: MATH500 greedy and pass@k per fixed delay.
- Table 4: MATH500 greedy / Pass@1 of GMC and TIC at checkpoints, per group size.
- Table 5: A-3PO vs GMC on the six benchmarks.

Run selection: a training run's config gives its method, schedule, delay, group size and model
(`figures.discover`). A cell without a run, or a run without the needed evaluation, is shown
as "missing" with the reason; nothing is interpolated. The paper's values
(`figures.paper_reference`) appear beside ours, labelled "paper".

Evaluation step: tables use each run's last evaluated step unless `step` is given (the paper
evaluates checkpoint 800; the step used is printed in every row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from figures import paper_reference as paper
from figures.common import (
    MISSING,
    FigureData,
    Panel,
    Reference,
    Series,
    Table,
    eval_curve,
    eval_row,
    eval_score,
    final_eval_step,
    fmt,
    fmt_pair,
    mean,
    metric_curve,
    moving_average,
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


def _train_runs(runs: Sequence[Run], schedule: str | None) -> list[Run]:
    out = [r for r in runs if r.kind == "llm_train"]
    return [r for r in out if schedule is None or r.schedule == schedule]


def _choose_model(candidates: Sequence[Run], model: str | None, preferred: str) -> str | None:
    """`model` if given; else `preferred` when a run has it; else the most common model."""
    if model is not None:
        return model
    models = [r.model for r in candidates if r.model is not None]
    if not models:
        return None
    if preferred in models:
        return preferred
    return max(sorted(set(models)), key=models.count)


def _choose_benchmark(candidates: Sequence[Run], benchmark: str | None) -> str:
    """`benchmark` if given; else MATH500 when any run evaluated it; else the first one found."""
    if benchmark is not None:
        return benchmark
    found = sorted({b for r in candidates for b in r.benchmarks if b != "macro"})
    if not found or "math500" in found:
        return "math500"
    return found[0]


def _label(value: Any) -> str:
    return "?" if value is None else str(value)


# ------------------------------------------------------------------------------------------
# Figures 2 and 4: fixed-delay suite
# ------------------------------------------------------------------------------------------


def fixed_delays_present(
    runs: Sequence[Run], *, group_size: int = 8, model: str | None = None
) -> list[int]:
    """The delays of the fixed-delay training runs (of `group_size`, and of `model`, default the
    model the figures choose), sorted: the panels of Figures 2 and 4 and the rows of Table 3."""
    candidates = [r for r in _train_runs(runs, FIXED) if r.group_size == group_size]
    model = _choose_model(candidates, model, "Qwen3-1.7B")
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
    candidates = [r for r in _train_runs(runs, FIXED) if r.group_size == group_size]
    model = _choose_model(candidates, model, "Qwen3-1.7B")
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
    candidates = [r for r in _train_runs(runs, FIXED) if r.group_size == group_size]
    bench = _choose_benchmark(candidates, benchmark)
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
    return FigureData(
        name="figure2",
        title=f"Figure 2: {bench} sampled Pass@1 under fixed delays (model {model or 'none found'}, "
        f"G = {group_size})",
        xlabel="learner step",
        ylabel="Pass@1 (%)",
        panels=panels,
        notes=notes,
        caption="Open diamonds: the paper's Pass@1 at checkpoint 800 (Table 3), in the panels of "
        "the delays it reports. Shaded: 95% interval over seeds (curves that are a mean of seeds).",
    )


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
    return FigureData(
        name="figure4",
        title=f"Figure 4: current-policy token entropy (model {model or 'none found'}, G = {group_size})",
        xlabel="learner step",
        ylabel="entropy (nats / token)",
        panels=panels,
        notes=notes,
        caption=f"Faint: per-step values; solid: centred moving average over {window} steps; "
        "shaded: 95% interval over seeds (smoothed), for curves that are a mean of seeds.",
    )


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
    candidates = [r for r in _train_runs(runs, FIXED) if r.delay == delay]
    model = _choose_model(candidates, model, "Qwen3-1.7B")
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
        caption=f"Faint: per-step reward; solid: moving average over {window} steps. Dotted: "
        "where the paper says the curves begin to separate (Appendix B.2.2).",
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
    candidates = _train_runs(runs, SIMULATED)
    model = _choose_model(candidates, model, "Qwen3-8B")
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
# Tables 1 and 5: six benchmarks under simulated asynchrony
# ------------------------------------------------------------------------------------------

_SIX = paper.BENCHMARK_ORDER


def _benchmark_pair(
    run: Run, step: int | None, benchmark: str
) -> tuple[float | None, float | None]:
    """Percent `(greedy, avg@n)` at `step`; the macro from the macro rows or, when absent and
    all six benchmarks are there, their unweighted mean."""
    out: list[float | None] = []
    for decoding in ("greedy", "sampled"):
        row = eval_row(run, step, benchmark, decoding)
        value = None
        if row is not None:
            value = _score(row, decoding)
        elif benchmark == "macro":
            parts = [eval_row(run, step, b, decoding) for b in _SIX]
            if all(p is not None for p in parts):
                value = mean([_score(p, decoding) for p in parts])  # type: ignore[arg-type, misc]
        out.append(value)
    return out[0], out[1]


def _score(row: dict[str, Any], decoding: str) -> float | None:
    key = "accuracy" if decoding == "greedy" else "avg_at_n"
    value = row.get(key)
    return 100.0 * float(value) if isinstance(value, (int, float)) else None


def mean_lag(run: Run) -> float | None:
    """Mean of `staleness/lag` over the run's metrics rows (the tables' "Avg. Delay")."""
    return mean(metric_curve(run, "staleness/lag")[1])


def _simulated_table(
    runs: Sequence[Run],
    *,
    name: str,
    title: str,
    methods: Sequence[str],
    models: Sequence[str] | None,
    step: int | None,
    paper_table: str,
) -> Table:
    candidates = _train_runs(runs, SIMULATED)
    found = sorted({r.model for r in candidates if r.model is not None})
    models = (
        list(models)
        if models is not None
        else list(paper.PAPER_MODELS) + [m for m in found if m not in paper.PAPER_MODELS]
    )
    keys = ["model", "method", "source", "step", "avg_delay", *_SIX, "macro"]
    columns = ["Model", "Method", "Source", "Step", "Avg. Delay"] + [
        paper.BENCHMARK_LABELS[b] for b in [*_SIX, "macro"]
    ]
    rows: list[list[str]] = []
    data: list[dict[str, Any]] = []
    notes: list[str] = []
    for model in models:
        for method in methods:
            run = pick_run(
                select(candidates, model=model, method=method), notes, f"{name} {model} {method}"
            )
            entry: dict[str, Any] = {"model": model, "method": method, "source": "ours"}
            if run is None:
                entry["found"] = False
                rows.append(
                    [model, method_label(method), "ours", "-", MISSING]
                    + ["missing (no run)"]
                    + [MISSING] * 6
                )
            else:
                at = step if step is not None else final_eval_step(run, [*_SIX, "macro"])
                entry.update(found=True, run=run.name, step=at, avg_delay=mean_lag(run))
                cells = [fmt(entry["avg_delay"])]
                for b in [*_SIX, "macro"]:
                    pair = _benchmark_pair(run, at, b) if at is not None else (None, None)
                    entry[b] = pair
                    cells.append(fmt_pair(pair))
                rows.append([model, method_label(method), f"ours ({run.name})", _label(at), *cells])
            data.append(entry)
            row = next(
                (
                    r
                    for r in paper.load(paper_table)["rows"]
                    if r["model"] == model and r["method"] == method
                ),
                None,
            )
            if row is None:
                continue
            pentry: dict[str, Any] = {
                "model": model,
                "method": method,
                "source": "paper",
                "found": True,
            }
            if row.get("collapsed"):
                pentry["collapsed"] = True
                rows.append(
                    [
                        model,
                        method_label(method),
                        _paper_source(paper_table),
                        "800",
                        "-",
                        "Training collapsed",
                    ]
                    + [""] * 6
                )
            else:
                pentry["avg_delay"] = row["avg_delay"]
                cells = [fmt(row["avg_delay"])]
                for b in [*_SIX, "macro"]:
                    pentry[b] = tuple(row[b])
                    cells.append(fmt_pair(tuple(row[b])))
                rows.append(
                    [model, method_label(method), _paper_source(paper_table), "800", *cells]
                )
            data.append(pentry)
    notes.append(
        "Cells are greedy / avg@n in percent (n = 16 for MATH500, Minerva, AMC23; 8 otherwise); "
        "Avg. Delay is the mean of staleness/lag over the run's steps; Step is the evaluated "
        "checkpoint (the paper's: 800)."
    )
    return Table(
        name=name, title=title, keys=keys, columns=columns, rows=rows, data=data, notes=notes
    )


def _paper_source(table: str) -> str:
    return f"paper (Table {table.removeprefix('table')})"


def table1_data(
    runs: Sequence[Run],
    *,
    methods: Sequence[str] = paper.TABLE1_METHODS,
    models: Sequence[str] | None = None,
    step: int | None = None,
) -> Table:
    """Table 1: per model and method, greedy / avg@n on the six benchmarks, their macro average
    and the mean lag, from `length_coupled` training runs; the paper's rows beside ours."""
    return _simulated_table(
        runs,
        name="table1",
        title="Table 1: performance under simulated asynchronous delays (ours and the paper's)",
        methods=methods,
        models=models,
        step=step,
        paper_table="table1",
    )


def table5_data(
    runs: Sequence[Run],
    *,
    methods: Sequence[str] = ("a3po", "gmc"),
    models: Sequence[str] | None = None,
    step: int | None = None,
) -> Table:
    """Table 5: A-3PO vs GMC-GRPO under simulated asynchrony, as Table 1."""
    return _simulated_table(
        runs,
        name="table5",
        title="Table 5: A-3PO vs GMC-GRPO under simulated asynchronous delays (ours and the paper's)",
        methods=methods,
        models=models,
        step=step,
        paper_table="table5",
    )


# ------------------------------------------------------------------------------------------
# Table 3: fixed delays, MATH500 greedy and pass@k
# ------------------------------------------------------------------------------------------


def table3_data(
    runs: Sequence[Run],
    *,
    delays: Sequence[int] | None = None,
    methods: Sequence[str] = paper.TABLE3_METHODS,
    group_size: int = 8,
    model: str | None = None,
    step: int | None = None,
    benchmark: str | None = None,
) -> Table:
    """Table 3: per delay and method, greedy accuracy and pass@{1,2,4,8,16} (percent) on
    `benchmark` (default: MATH500, or the runs' only benchmark, e.g. the CPU demonstration's,
    in which case the paper's MATH500 rows are left out as not comparable); the base model's row
    from an eval run of a plain model (step None).

    Rows: `delays`, default the delays the records have (the paper's rows beside them where the
    paper has that delay). A cell run over several seeds shows the mean over seeds ± the
    half-width of its 95% Student-t interval (`data`: the mean, `<key>_lo` / `<key>_hi` and
    `seeds`)."""
    from gmc_grpo.stats import t_interval

    candidates = [r for r in _train_runs(runs, FIXED) if r.group_size == group_size]
    model = _choose_model(candidates, model, "Qwen3-1.7B")
    benchmark = _choose_benchmark(candidates, benchmark)
    if delays is None:
        delays = fixed_delays_present(runs, group_size=group_size, model=model)
    ks = paper.PASS_AT_K
    keys = ["delay", "method", "source", "step", "greedy", *[f"pass@{k}" for k in ks]]
    columns = ["Delay", "Method", "Source", "Step", "Greedy", *[f"pass@{k}" for k in ks]]
    rows: list[list[str]] = []
    data: list[dict[str, Any]] = []
    notes: list[str] = []

    def scores(run: Run, at: int | None) -> dict[str, float | None]:
        greedy = eval_row(run, at, benchmark, "greedy")
        sampled = eval_row(run, at, benchmark, "sampled")
        out = {"greedy": eval_score(greedy, "greedy") if greedy else None}
        passk = (sampled or {}).get("pass_at_k") or {}
        for k in ks:
            value = passk.get(k)
            out[f"pass@{k}"] = 100.0 * float(value) if isinstance(value, (int, float)) else None
        return out

    def ours(
        seeds: Sequence[Run], delay: int | None, method: str, at: int | None, why: str
    ) -> None:
        entry: dict[str, Any] = {
            "delay": delay,
            "method": method,
            "source": "ours",
            "found": bool(seeds),
        }
        label = "Base (no RL)" if method == "base" else method_label(method)
        dl = "–" if delay is None else str(delay)
        if not seeds:
            rows.append([dl, label, "ours", "-", f"missing ({why})"] + [MISSING] * len(ks))
            data.append(entry)
            return
        per_seed = [scores(run, at) for run in seeds]
        entry.update(run=", ".join(r.name for r in seeds), step=at, seeds=len(seeds))
        cells = []
        for key in ["greedy", *[f"pass@{k}" for k in ks]]:
            values = [v[key] for v in per_seed]
            if len(seeds) == 1 or any(v is None for v in values):
                entry[key] = values[0] if len(seeds) == 1 else None
                cells.append(fmt(entry[key]))
                continue
            interval = t_interval(values)  # type: ignore[arg-type]
            entry.update({key: interval["mean"], f"{key}_lo": interval["lo"]})
            entry[f"{key}_hi"] = interval["hi"]
            cells.append(f"{interval['mean']:.2f} ± {(interval['hi'] - interval['lo']) / 2:.2f}")
        source = (
            f"ours ({seeds[0].name})"
            if len(seeds) == 1
            else f"ours (mean ± 95% CI, {len(seeds)} seeds)"
        )
        rows.append([dl, label, source, "-" if at is None else str(at), *cells])
        data.append(entry)

    def reference(delay: int | None, method: str) -> None:
        row = paper.table3_row(delay, method)
        if row is None or benchmark != "math500":
            return
        entry = {
            "delay": delay,
            "method": method,
            "source": "paper",
            "found": True,
            "greedy": row["greedy"],
        }
        entry.update({f"pass@{k}": row["pass_at_k"][k] for k in ks})
        label = "Base (no RL)" if method == "base" else method_label(method)
        rows.append(
            [
                "–" if delay is None else str(delay),
                label,
                _paper_source("table3"),
                "800" if delay is not None else "-",
                fmt(row["greedy"]),
            ]
            + [fmt(row["pass_at_k"][k]) for k in ks]
        )
        data.append(entry)

    bases = [
        r
        for r in runs
        if r.kind == "llm_eval" and r.train_run is None and eval_row(r, None, benchmark, "sampled")
    ]
    base = pick_run(bases, notes, "Table 3 base model")
    ours([base] if base is not None else [], None, "base", None, "no eval run of a plain model")
    reference(None, "base")
    for delay in delays:
        for method in methods:
            seeds = pick_seed_runs(
                select(candidates, delay=delay, method=method, model=model),
                notes,
                f"Table 3 D={delay} {method}",
            )
            at = step
            if at is None and seeds:
                finals = {final_eval_step(run, [benchmark]) for run in seeds}
                at = min((f for f in finals if f is not None), default=None)
                if len(finals) > 1:
                    notes.append(
                        f"Table 3 D={delay} {method}: the seeds' last evaluations differ "
                        f"({sorted(f for f in finals if f is not None)}); step {at} is used"
                    )
            ours(seeds, delay, method, at, "no run")
            reference(delay, method)
    notes.append(
        f"{benchmark}; percent; pass@k is the unbiased estimator from the sampled outputs "
        f"(model {model or 'none found'}, G = {group_size}); the paper's rows are checkpoint 800."
    )
    if benchmark != "math500":
        notes.append(f"the paper's rows (MATH500) are left out: our benchmark is {benchmark!r}")
    return Table(
        name="table3",
        title=f"Table 3: {benchmark} under fixed behavior-policy delays (ours and the paper's)",
        keys=keys,
        columns=columns,
        rows=rows,
        data=data,
        notes=notes,
    )


# ------------------------------------------------------------------------------------------
# Table 4: group sizes at checkpoints
# ------------------------------------------------------------------------------------------


def table4_data(
    runs: Sequence[Run],
    *,
    checkpoints: Sequence[int] | None = None,
    group_sizes: Sequence[int] = paper.TABLE4_GROUP_SIZES,
    delay: int = 128,
    model: str | None = None,
    benchmark: str | None = None,
) -> Table:
    """Table 4: GMC and TIC greedy / sampled Pass@1 (percent) at each checkpoint and `G`, with
    Delta Pass@1 = GMC - TIC (pp). `checkpoints=None`: the paper's 200, 300, 400, 800 plus every
    step at which our runs were evaluated."""
    candidates = [r for r in _train_runs(runs, FIXED) if r.delay == delay]
    model = _choose_model(candidates, model, "Qwen3-1.7B")
    benchmark = _choose_benchmark(candidates, benchmark)
    notes: list[str] = []
    chosen: dict[tuple[int, str], Run | None] = {}
    for g in group_sizes:
        for method in ("gmc", "tic"):
            chosen[(g, method)] = pick_run(
                select(candidates, group_size=g, method=method, model=model),
                notes,
                f"Table 4 G={g} {method}",
            )
    if checkpoints is None:
        ours_steps = {s for r in chosen.values() if r is not None for s in r.eval_steps}
        paper_steps = set(paper.TABLE4_CHECKPOINTS) if benchmark == "math500" else set()
        checkpoints = sorted(paper_steps | ours_steps)
    keys = ["checkpoint", "group_size", "source", "gmc", "tic", "delta"]
    columns = ["Checkpoint", "G", "Source", "GMC-GRPO", "TIC-GRPO", "Δ Pass@1 (pp)"]
    rows: list[list[str]] = []
    data: list[dict[str, Any]] = []
    for ck in checkpoints:
        for g in group_sizes:
            entry: dict[str, Any] = {"checkpoint": ck, "group_size": g, "source": "ours"}
            pairs = {}
            for method in ("gmc", "tic"):
                run = chosen[(g, method)]
                if run is None:
                    pairs[method] = None
                    continue
                greedy = eval_row(run, ck, benchmark, "greedy")
                sampled = eval_row(run, ck, benchmark, "sampled")
                g_val = eval_score(greedy, "greedy") if greedy else None
                s_val = eval_score(sampled, "sampled") if sampled else None
                pairs[method] = None if g_val is None and s_val is None else (g_val, s_val)
            entry.update(gmc=pairs["gmc"], tic=pairs["tic"])
            both = (
                pairs["gmc"]
                and pairs["tic"]
                and pairs["gmc"][1] is not None
                and pairs["tic"][1] is not None
            )
            entry["delta"] = pairs["gmc"][1] - pairs["tic"][1] if both else None  # type: ignore[index]
            entry["found"] = any(p is not None for p in pairs.values())
            if entry["found"]:
                why = {
                    m: ("missing (no run)" if chosen[(g, m)] is None else MISSING)
                    for m in ("gmc", "tic")
                }
                rows.append(
                    [str(ck), str(g), "ours"]
                    + [fmt_pair(pairs[m]) if pairs[m] else why[m] for m in ("gmc", "tic")]
                    + [MISSING if entry["delta"] is None else f"{entry['delta']:+.2f}"]
                )
            else:
                why = (
                    "no run"
                    if all(chosen[(g, m)] is None for m in ("gmc", "tic"))
                    else "not evaluated"
                )
                rows.append([str(ck), str(g), "ours", f"missing ({why})", MISSING, MISSING])
            data.append(entry)
            gmc_ref = paper.table4_cell(ck, g, "gmc")
            if gmc_ref is not None and benchmark == "math500":
                tic_ref = paper.table4_cell(ck, g, "tic")
                delta = paper.table4_delta(ck, g)
                data.append(
                    {
                        "checkpoint": ck,
                        "group_size": g,
                        "source": "paper",
                        "found": True,
                        "gmc": gmc_ref,
                        "tic": tic_ref,
                        "delta": delta,
                    }
                )
                rows.append(
                    [
                        str(ck),
                        str(g),
                        _paper_source("table4"),
                        fmt_pair(gmc_ref),
                        fmt_pair(tic_ref),
                        f"{delta:+.2f}",
                    ]
                )
    notes.append(
        f"{benchmark}; greedy / sampled Pass@1 (percent); fixed delay {delay}, model {model or 'none found'}."
    )
    return Table(
        name="table4",
        title=f"Table 4: {benchmark} at checkpoints per group size, D = {delay} "
        "(ours and the paper's)",
        keys=keys,
        columns=columns,
        rows=rows,
        data=data,
        notes=notes,
    )
