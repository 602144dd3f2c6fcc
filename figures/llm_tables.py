"""The paper's LLM tables, from run records only (`metrics.jsonl`, `evals.jsonl`).

One `*_data` function per table (runs in, a `figures.tables.Table` of numbers out; rendered by
`figures.tables.render_markdown` / `render_latex`):

- Table 1: six benchmarks greedy / avg@n, macro average, mean lag (simulated asynchrony).
- Table 3: MATH500 greedy and pass@k per fixed delay.
- Table 4: MATH500 greedy / Pass@1 of GMC and TIC at checkpoints, per group size.
- Table 5: A-3PO vs GMC on the six benchmarks.

Run selection as for the figures (`figures.llm`): a cell without a run, or a run without the
needed evaluation, is a `Missing` cell with the reason; nothing is interpolated. The paper's rows
(`figures.paper_reference`) follow ours, labelled "paper".

Evaluation step: Tables 1, 3 and 5 use each run's last evaluated step unless `step` is given (the
paper evaluates checkpoint 800; the step used is in every row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from figures import paper_reference as paper
from figures.common import (
    eval_row,
    eval_score,
    final_eval_step,
    mean,
    metric_curve,
    pick_run,
    pick_seed_runs,
)
from figures.discover import Run, select
from figures.llm import (
    FIXED,
    SIMULATED,
    choose_benchmark,
    choose_model,
    fixed_delays_present,
    train_runs,
)
from figures.style import method_label
from figures.tables import Cell, Column, Interval, Missing, Row, Table

# ------------------------------------------------------------------------------------------
# Tables 1 and 5: six benchmarks under simulated asynchrony
# ------------------------------------------------------------------------------------------

_SIX = paper.BENCHMARK_ORDER
_SIX_AND_MACRO = (*_SIX, "macro")
PAPER_CHECKPOINT = 800
"""the checkpoint the paper's tables report (Appendix B.2)"""


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


def _paper_source(table: str) -> str:
    return f"paper (Table {table.removeprefix('table')})"


def _simulated_columns() -> list[Column]:
    return [
        Column("model", "Model"),
        Column("method", "Method"),
        Column("source", "Source"),
        Column("step", "Step", empty="?"),
        Column("avg_delay", "Avg. Delay"),
        *[Column(b, paper.BENCHMARK_LABELS[b]) for b in _SIX_AND_MACRO],
    ]


def _simulated_ours(run: Run | None, model: str, method: str, step: int | None) -> Row:
    """Our row of Table 1 / 5: the run's pairs at `step` (default: its last evaluated step)."""
    key = {"model": model, "method": method}
    label = {"model": model, "method": method_label(method)}
    if run is None:
        cells: dict[str, Cell] = {**label, "source": "ours", "step": "-", "avg_delay": None}
        cells.update({b: Missing() for b in _SIX_AND_MACRO})
        cells[_SIX[0]] = Missing("no run")
        return Row(key=key, source="ours", found=False, cells=cells)
    at = step if step is not None else final_eval_step(run, list(_SIX_AND_MACRO))
    cells = {**label, "source": f"ours ({run.name})", "step": at, "avg_delay": mean_lag(run)}
    for b in _SIX_AND_MACRO:
        cells[b] = _benchmark_pair(run, at, b) if at is not None else (None, None)
    return Row(key=key, source="ours", cells=cells, info={"run": run.name})


def _simulated_paper(paper_table: str, model: str, method: str) -> Row | None:
    """The paper's row of Table 1 / 5 (None when it has none; a collapse is one text cell)."""
    row = next(
        (
            r
            for r in paper.load(paper_table)["rows"]
            if r["model"] == model and r["method"] == method
        ),
        None,
    )
    if row is None:
        return None
    key = {"model": model, "method": method}
    cells: dict[str, Cell] = {
        "model": model,
        "method": method_label(method),
        "source": _paper_source(paper_table),
        "step": PAPER_CHECKPOINT,
    }
    if row.get("collapsed"):
        cells.update({"avg_delay": "-", **{b: "" for b in _SIX_AND_MACRO}})
        cells[_SIX[0]] = "Training collapsed"
        return Row(key=key, source="paper", cells=cells, info={"collapsed": True})
    cells["avg_delay"] = float(row["avg_delay"])
    cells.update({b: tuple(row[b]) for b in _SIX_AND_MACRO})
    return Row(key=key, source="paper", cells=cells)


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
    """Tables 1 and 5: per model and method our row (from `length_coupled` training runs), then
    the paper's."""
    candidates = train_runs(runs, SIMULATED)
    found = sorted({r.model for r in candidates if r.model is not None})
    if models is None:
        models = list(paper.PAPER_MODELS) + [m for m in found if m not in paper.PAPER_MODELS]
    table = Table(name=name, title=title, columns=_simulated_columns())
    for model in models:
        for method in methods:
            cell = f"{name} {model} {method}"
            run = pick_run(select(candidates, model=model, method=method), table.notes, cell)
            table.rows.append(_simulated_ours(run, model, method, step))
            reference = _simulated_paper(paper_table, model, method)
            if reference is not None:
                table.rows.append(reference)
    table.notes.append(
        "Cells are greedy / avg@n in percent (n = 16 for MATH500, Minerva, AMC23; 8 otherwise); "
        "Avg. Delay is the mean of staleness/lag over the run's steps; Step is the evaluated "
        "checkpoint (the paper's: 800)."
    )
    return table


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

_PASS_KEYS = tuple(f"pass@{k}" for k in paper.PASS_AT_K)
_TABLE3_VALUES = ("greedy", *_PASS_KEYS)


def _table3_columns() -> list[Column]:
    return [
        Column("delay", "Delay", empty="–"),
        Column("method", "Method"),
        Column("source", "Source"),
        Column("step", "Step", empty="-"),
        Column("greedy", "Greedy"),
        *[Column(key, key) for key in _PASS_KEYS],
    ]


def _method_text(method: str) -> str:
    return "Base (no RL)" if method == "base" else method_label(method)


def _pass_at_k_scores(run: Run, at: int | None, benchmark: str) -> dict[str, float | None]:
    """Percent greedy accuracy and pass@k of one run at step `at`."""
    greedy = eval_row(run, at, benchmark, "greedy")
    sampled = eval_row(run, at, benchmark, "sampled")
    out = {"greedy": eval_score(greedy, "greedy") if greedy else None}
    passk = (sampled or {}).get("pass_at_k") or {}
    for k, key in zip(paper.PASS_AT_K, _PASS_KEYS, strict=True):
        value = passk.get(k)
        out[key] = 100.0 * float(value) if isinstance(value, (int, float)) else None
    return out


def seed_cell(values: Sequence[float | None]) -> float | Interval | None:
    """One cell from the values of the seeds of one setting: the value of a single seed, the
    mean with its 95% Student-t interval over two or more seeds, None when a seed lacks it."""
    from gmc_grpo.stats import t_interval

    if len(values) == 1:
        return values[0]
    if any(v is None for v in values):
        return None
    interval = t_interval(values)  # type: ignore[arg-type]
    return Interval(interval["mean"], interval["lo"], interval["hi"])


def _table3_ours(
    seeds: Sequence[Run], delay: int | None, method: str, at: int | None, why: str, benchmark: str
) -> Row:
    """Our row of Table 3: one cell per value, over the seeds of one setting."""
    key = {"delay": delay, "method": method}
    cells: dict[str, Cell] = {"delay": delay, "method": _method_text(method), "source": "ours"}
    if not seeds:
        cells.update({"step": None, **{k: Missing() for k in _TABLE3_VALUES}})
        cells["greedy"] = Missing(why)
        return Row(key=key, source="ours", found=False, cells=cells)
    per_seed = [_pass_at_k_scores(run, at, benchmark) for run in seeds]
    cells["step"] = at
    cells.update({k: seed_cell([scores[k] for scores in per_seed]) for k in _TABLE3_VALUES})
    cells["source"] = (
        f"ours ({seeds[0].name})"
        if len(seeds) == 1
        else f"ours (mean ± 95% CI, {len(seeds)} seeds)"
    )
    info = {"run": ", ".join(r.name for r in seeds), "seeds": len(seeds)}
    return Row(key=key, source="ours", cells=cells, info=info)


def _table3_paper(delay: int | None, method: str) -> Row | None:
    row = paper.table3_row(delay, method)
    if row is None:
        return None
    cells: dict[str, Cell] = {
        "delay": delay,
        "method": _method_text(method),
        "source": _paper_source("table3"),
        "step": PAPER_CHECKPOINT if delay is not None else None,
        "greedy": float(row["greedy"]),
    }
    passk = zip(paper.PASS_AT_K, _PASS_KEYS, strict=True)
    cells.update({key: float(row["pass_at_k"][k]) for k, key in passk})
    return Row(key={"delay": delay, "method": method}, source="paper", cells=cells)


def _table3_step(
    seeds: Sequence[Run], step: int | None, benchmark: str, notes: list[str], cell: str
) -> int | None:
    """The step of a Table 3 row: `step`, else the seeds' common last evaluation (the earliest
    of their last ones, noted when they differ)."""
    if step is not None or not seeds:
        return step
    finals = {final_eval_step(run, [benchmark]) for run in seeds}
    at = min((f for f in finals if f is not None), default=None)
    if len(finals) > 1:
        notes.append(
            f"{cell}: the seeds' last evaluations differ "
            f"({sorted(f for f in finals if f is not None)}); step {at} is used"
        )
    return at


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
    paper has that delay). A cell run over several seeds is the mean over seeds with its 95%
    Student-t interval (an `Interval`, shown as mean ± half-width)."""
    candidates = [r for r in train_runs(runs, FIXED) if r.group_size == group_size]
    model = choose_model(candidates, model, "Qwen3-1.7B")
    benchmark = choose_benchmark(candidates, benchmark)
    if delays is None:
        delays = fixed_delays_present(runs, group_size=group_size, model=model)
    table = Table(
        name="table3",
        title=f"Table 3: {benchmark} under fixed behavior-policy delays (ours and the paper's)",
        columns=_table3_columns(),
    )
    comparable = benchmark == "math500"  # the paper's rows are MATH500

    def add(seeds: Sequence[Run], delay: int | None, method: str, at: int | None, why: str):
        table.rows.append(_table3_ours(seeds, delay, method, at, why, benchmark))
        reference = _table3_paper(delay, method) if comparable else None
        if reference is not None:
            table.rows.append(reference)

    bases = [
        r
        for r in runs
        if r.kind == "llm_eval" and r.train_run is None and eval_row(r, None, benchmark, "sampled")
    ]
    base = pick_run(bases, table.notes, "Table 3 base model")
    add([base] if base is not None else [], None, "base", None, "no eval run of a plain model")
    for delay in delays:
        for method in methods:
            cell = f"Table 3 D={delay} {method}"
            matching = select(candidates, delay=delay, method=method, model=model)
            seeds = pick_seed_runs(matching, table.notes, cell)
            add(
                seeds,
                delay,
                method,
                _table3_step(seeds, step, benchmark, table.notes, cell),
                "no run",
            )
    table.notes.append(
        f"{benchmark}; percent; pass@k is the unbiased estimator from the sampled outputs "
        f"(model {model or 'none found'}, G = {group_size}); the paper's rows are checkpoint 800."
    )
    if not comparable:
        table.notes.append(
            f"the paper's rows (MATH500) are left out: our benchmark is {benchmark!r}"
        )
    return table


# ------------------------------------------------------------------------------------------
# Table 4: group sizes at checkpoints
# ------------------------------------------------------------------------------------------

_TABLE4_METHODS = ("gmc", "tic")  # the paper's Table 4 compares these two


def _table4_columns() -> list[Column]:
    return [
        Column("checkpoint", "Checkpoint"),
        Column("group_size", "G"),
        Column("source", "Source"),
        Column("gmc", "GMC-GRPO"),
        Column("tic", "TIC-GRPO"),
        Column("delta", "Δ Pass@1 (pp)", signed=True),
    ]


def _table4_pair(
    run: Run, checkpoint: int, benchmark: str
) -> tuple[float | None, float | None] | None:
    """Percent `(greedy, sampled Pass@1)` of a run at `checkpoint` (None when neither exists)."""
    greedy = eval_row(run, checkpoint, benchmark, "greedy")
    sampled = eval_row(run, checkpoint, benchmark, "sampled")
    g_val = eval_score(greedy, "greedy") if greedy else None
    s_val = eval_score(sampled, "sampled") if sampled else None
    return None if g_val is None and s_val is None else (g_val, s_val)


def _table4_ours(
    checkpoint: int, group_size: int, chosen: dict[str, Run | None], benchmark: str
) -> Row:
    """Our row of Table 4 at one checkpoint and `G`: GMC's and TIC's pairs and the difference of
    their sampled Pass@1."""
    key = {"checkpoint": checkpoint, "group_size": group_size}
    pairs = {
        m: None if run is None else _table4_pair(run, checkpoint, benchmark)
        for m, run in chosen.items()
    }
    gmc, tic = pairs["gmc"], pairs["tic"]
    delta = gmc[1] - tic[1] if gmc and tic and gmc[1] is not None and tic[1] is not None else None
    cells: dict[str, Cell] = {"checkpoint": checkpoint, "group_size": group_size, "source": "ours"}
    found = any(p is not None for p in pairs.values())
    if found:
        for m, pair in pairs.items():
            cells[m] = pair if pair else Missing("no run" if chosen[m] is None else None)
    else:
        no_run = all(run is None for run in chosen.values())
        cells.update(gmc=Missing("no run" if no_run else "not evaluated"), tic=Missing())
    cells["delta"] = delta
    return Row(key=key, source="ours", found=found, cells=cells)


def _table4_paper(checkpoint: int, group_size: int) -> Row | None:
    gmc_ref = paper.table4_cell(checkpoint, group_size, "gmc")
    if gmc_ref is None:
        return None
    cells: dict[str, Cell] = {
        "checkpoint": checkpoint,
        "group_size": group_size,
        "source": _paper_source("table4"),
        "gmc": gmc_ref,
        "tic": paper.table4_cell(checkpoint, group_size, "tic"),
        "delta": paper.table4_delta(checkpoint, group_size),
    }
    key = {"checkpoint": checkpoint, "group_size": group_size}
    return Row(key=key, source="paper", cells=cells)


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
    candidates = [r for r in train_runs(runs, FIXED) if r.delay == delay]
    model = choose_model(candidates, model, "Qwen3-1.7B")
    benchmark = choose_benchmark(candidates, benchmark)
    table = Table(
        name="table4",
        title=f"Table 4: {benchmark} at checkpoints per group size, D = {delay} "
        "(ours and the paper's)",
        columns=_table4_columns(),
    )
    chosen = {
        g: {
            m: pick_run(
                select(candidates, group_size=g, method=m, model=model),
                table.notes,
                f"Table 4 G={g} {m}",
            )
            for m in _TABLE4_METHODS
        }
        for g in group_sizes
    }
    comparable = benchmark == "math500"  # the paper's rows are MATH500
    if checkpoints is None:
        ours = {
            s for by in chosen.values() for r in by.values() if r is not None for s in r.eval_steps
        }
        checkpoints = sorted((set(paper.TABLE4_CHECKPOINTS) if comparable else set()) | ours)
    for checkpoint in checkpoints:
        for g in group_sizes:
            table.rows.append(_table4_ours(checkpoint, g, chosen[g], benchmark))
            reference = _table4_paper(checkpoint, g) if comparable else None
            if reference is not None:
                table.rows.append(reference)
    table.notes.append(
        f"{benchmark}; greedy / sampled Pass@1 (percent); fixed delay {delay}, model "
        f"{model or 'none found'}."
    )
    return table
