"""The registry of figures and tables: one `Entry` per item, the one list everything reads.

`gmc-grpo figures` (`figures.cli`: `--only`, `--help`, `write_all`, `INDEX.md`), the figures stage
of `gmc-grpo reproduce` (through `write_all`) and the toy track's figure step
(`pipeline.toy.draw_figures`, through `figures.writers`) all iterate `ENTRIES`. An entry names

- `shows` and `needs`: what it shows and which records it needs (said in `INDEX.md` and when it
  cannot be made);
- `data`: where its numbers come from, a function of the records `reads` names: `"runs"`, every
  run `figures.discover` found (`(runs, **options) -> FigureData | BoundsData | Table`);
  `"sweep"`, one toy sweep (`figures.toy_bias.SweepRecords -> numbers`, None when the sweep lacks
  what it needs); `"experiment"`, one toy training experiment of one of `kinds`
  (`figures.toy_training.ExperimentRecords -> numbers | None`);
- `draw`: how its numbers are drawn (`numbers -> matplotlib Figure`; each plot also takes
  `ax=None`). A table has none: `figures.tables` renders every `Table` as Markdown and LaTeX.
- `output`: `"figure"`, `"table"`, or `"sweep figures"` (the `"sweep"` entries, drawn for each
  toy sweep found).

Functions are named as `"module:function"` and imported when used, so that `--help` and the
registry itself stay light (no matplotlib, no scipy). Adding a figure is one entry: a data
function, a plot function, and a line here (see `docs/figures.md`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Reads = Literal["runs", "sweep", "experiment"]
Output = Literal["figure", "table", "sweep figures"]


@dataclass(frozen=True)
class Entry:
    """One figure or table: what it shows and needs, its data function and its plot function."""

    name: str
    """the item's name (`--only`, file stem)"""
    shows: str
    """what it shows (one line, `INDEX.md`)"""
    needs: str
    """the records it needs (said when it cannot be made)"""
    data: str | Callable[..., Any]
    """`"module:function"` (or the function) giving its numbers from the records `reads` names"""
    draw: str | Callable[..., Any] | None = None
    """`"module:function"` (or the function) drawing those numbers; None for a table"""
    reads: Reads = "runs"
    """the records `data` takes: every run found, one toy sweep, or one toy experiment"""
    output: Output = "figure"
    """what `gmc-grpo figures` writes for it"""
    kinds: tuple[str, ...] = ()
    """experiment entries: the toy experiment kinds (`ExperimentConfig.kind`) it draws"""
    takes_step: bool = False
    """`data` takes the evaluation step (`--step`; Tables 1, 3, 5)"""

    def numbers(self, records: Any, **options: Any) -> Any:
        """The item's numbers from `records` (`options`: `step` where it `takes_step`)."""
        return resolve(self.data)(records, **options)

    def figure(self, numbers: Any) -> Any:
        """The item drawn from its numbers (a matplotlib figure), in the figures' one style
        (`figures.style.figure_style`: fonts, grid, spines)."""
        if self.draw is None:
            raise ValueError(f"{self.name} is a table: render it with figures.tables")
        from figures.style import figure_style

        with figure_style():
            return resolve(self.draw)(numbers)


def resolve(ref: str | Callable[..., Any]) -> Callable[..., Any]:
    """The function a `"module:function"` reference names (a function is returned as is)."""
    if callable(ref):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


_FIXED = "fixed-delay LLM training runs"

ENTRIES: tuple[Entry, ...] = (
    # ---- the paper's figures and tables, from LLM runs (`figures.llm`, `figures.llm_tables`)
    Entry(
        "figure2",
        "sampled Pass@1 vs step per fixed delay in the records (paper: D = 0/64/128), "
        "GRPO/TIC/GMC; seeds as a mean with a 95% band",
        f"{_FIXED} (G = 8) with sampled evaluations",
        "figures.llm:figure2_data",
        "figures.common:plot_panels",
    ),
    Entry(
        "figure4",
        "current-policy token entropy vs step per fixed delay in the records",
        f"{_FIXED} (G = 8) logging policy/entropy",
        "figures.llm:figure4_data",
        "figures.common:plot_panels",
    ),
    Entry(
        "figure5",
        "training reward, GMC vs TIC, D = 128, G = 4/8/32",
        "fixed-delay D = 128 LLM training runs of GMC and TIC",
        "figures.llm:figure5_data",
        "figures.common:plot_panels",
    ),
    Entry(
        "figure6",
        "training reward, A-3PO vs GMC, simulated asynchrony",
        "length-coupled LLM training runs of A-3PO and GMC",
        "figures.llm:figure6_data",
        "figures.common:plot_panels",
    ),
    Entry(
        "table1",
        "six benchmarks greedy / avg@n, macro average, mean lag",
        "length-coupled LLM training runs with evaluations on the six benchmarks",
        "figures.llm_tables:table1_data",
        output="table",
        takes_step=True,
    ),
    Entry(
        "table3",
        "greedy and pass@k per fixed delay in the records (seeds: mean ± 95% half-width)",
        f"{_FIXED} (G = 8) with MATH500 evaluations",
        "figures.llm_tables:table3_data",
        output="table",
        takes_step=True,
    ),
    Entry(
        "table4",
        "MATH500 at checkpoints per group size, D = 128",
        "fixed-delay D = 128 GMC/TIC runs with MATH500 evaluations",
        "figures.llm_tables:table4_data",
        output="table",
    ),
    Entry(
        "table5",
        "A-3PO vs GMC on the six benchmarks",
        "length-coupled A-3PO/GMC runs with evaluations on the six benchmarks",
        "figures.llm_tables:table5_data",
        output="table",
        takes_step=True,
    ),
    # ---- runs vs theory (`figures.bounds_vs_runs`), one per suite
    Entry(
        "bounds_fixed_delay",
        "runs vs theory, fixed-delay suite",
        _FIXED,
        "figures.bounds_vs_runs:fixed_delay_data",
        "figures.bounds_vs_runs:plot_bounds_vs_runs",
    ),
    Entry(
        "outcome_kl",
        "held-out sampled Pass@1 at the end vs the measured current/behavior KL, one marker "
        "per fixed-delay run (colour: method, marker: delay)",
        f"{_FIXED} with sampled evaluations and a KL measurement",
        "figures.llm:outcome_kl_data",
        "figures.llm:plot_outcome_kl",
    ),
    Entry(
        "bounds_length_coupled",
        "runs vs theory, simulated suite",
        "length-coupled LLM training runs",
        "figures.bounds_vs_runs:length_coupled_data",
        "figures.bounds_vs_runs:plot_bounds_vs_runs",
    ),
    Entry(
        "bounds_toy",
        "runs vs theory, toy MDP training",
        "toy training runs (`gmc-grpo toy train`)",
        "figures.bounds_vs_runs:toy_data",
        "figures.bounds_vs_runs:plot_bounds_vs_runs",
    ),
    # ---- the toy sweeps' figures: this item draws the "sweep" entries below for each sweep
    Entry(
        "toy_sweeps",
        "bias / second moment / removed mass of each toy sweep",
        "toy sweep runs",
        "figures.toy_bias:sweeps_found",
        output="sweep figures",
    ),
    # ---- one toy sweep (`figures.toy_bias`): `gmc-grpo toy sweep` and the item above
    Entry(
        "bias_vs_staleness",
        "relative squared bias per method vs the delay (or target KL)",
        "a toy sweep",
        "figures.toy_bias:bias_vs_staleness_data",
        "figures.toy_bias:plot_bias_vs_staleness",
        reads="sweep",
    ),
    Entry(
        "second_moment_vs_staleness",
        "second moment per method vs the delay, with Prop. 1's bound",
        "a toy sweep",
        "figures.toy_bias:second_moment_vs_staleness_data",
        "figures.toy_bias:plot_second_moment_vs_staleness",
        reads="sweep",
    ),
    Entry(
        "bias_vs_group_size",
        "GMC and TIC squared bias vs G (log-log) with the fitted slopes",
        "a toy sweep over two or more group sizes",
        "figures.toy_bias:bias_vs_group_size_data",
        "figures.toy_bias:plot_bias_vs_group_size",
        reads="sweep",
    ),
    Entry(
        "removed_mass_vs_bound",
        "removed mass vs its KL bound, every method whose spec claims one",
        "a toy sweep",
        "figures.toy_bias:removed_mass_vs_bound_data",
        "figures.toy_bias:plot_removed_mass_vs_bound",
        reads="sweep",
    ),
    # ---- one toy training experiment (`figures.toy_training`, `figures.toy_workers`)
    Entry(
        "curves",
        "J and ||grad J||^2 vs step per method, one column per delay",
        "a delay-sweep experiment",
        "figures.toy_training:training_curves_data",
        "figures.toy_training:plot_training_curves",
        reads="experiment",
        kinds=("delay_sweep",),
    ),
    Entry(
        "vs_delay",
        "convergence metric and final J vs D per method",
        "a delay-sweep experiment",
        "figures.toy_training:results_rows",
        "figures.toy_training:plot_vs_delay",
        reads="experiment",
        kinds=("delay_sweep",),
    ),
    Entry(
        "group_size",
        "GMC vs TIC over G: mean J over training and final J",
        "a group-size experiment",
        "figures.toy_training:results_rows",
        "figures.toy_training:plot_group_sizes",
        reads="experiment",
        kinds=("group_size",),
    ),
    Entry(
        "length_coupled",
        "J and the realised lag vs step per method under length-coupled delays",
        "a length-coupled experiment",
        "figures.toy_training:length_coupled_data",
        "figures.toy_training:plot_length_coupled",
        reads="experiment",
        kinds=("length_coupled",),
    ),
    Entry(
        "eps_star",
        "convergence metric vs eps per (N, D) and the fitted eps* law",
        "an eps* experiment with its analysis",
        "figures.toy_training:eps_star_data",
        "figures.toy_training:plot_eps_star",
        reads="experiment",
        kinds=("eps_star",),
    ),
    Entry(
        "mixed_vs_tau4",
        "final J and the convergence metric vs the realised tau4: mixed lags vs uniform delays",
        "a mixed-delay experiment with its analysis",
        "figures.toy_workers:mixed_vs_tau4_data",
        "figures.toy_workers:plot_mixed_vs_tau4",
        reads="experiment",
        kinds=("mixed_delay", "delay_regularity"),
    ),
    Entry(
        "regularity",
        "both sides of the delay-regularity condition vs the lag, and their gap",
        "a delay-regularity experiment with its analysis",
        "figures.toy_workers:regularity_data",
        "figures.toy_workers:plot_regularity_panels",
        reads="experiment",
        kinds=("mixed_delay", "delay_regularity"),
    ),
)


def register_entry(entry: Entry, replace: bool = False) -> Entry:
    """Add `entry` to the registry (a user's own figure or table, from their module); an entry
    of that name is an error unless `replace`. Returns the entry."""
    global ENTRIES
    if (entry.output == "figure") != (entry.draw is not None):
        raise ValueError(
            f"Entry.draw of {entry.name!r}: a figure needs a draw function, a table (or the "
            "sweep figures) takes none"
        )
    others = tuple(e for e in ENTRIES if e.name != entry.name)
    if len(others) < len(ENTRIES) and not replace:
        raise ValueError(f"Entry {entry.name!r} is registered already (pass replace=True)")
    ENTRIES = (*others, entry)
    return entry


def get_entry(name: str) -> Entry | None:
    """The entry named `name` (None when there is none)."""
    return next((entry for entry in ENTRIES if entry.name == name), None)


def entries(reads: Reads) -> list[Entry]:
    """The entries whose data reads `reads`, in registry order."""
    return [entry for entry in ENTRIES if entry.reads == reads]


def item_names() -> list[str]:
    """The items of `gmc-grpo figures` (`--only`): the entries that read the runs found."""
    return [entry.name for entry in entries("runs")]


def folder_figures(reads: Reads, records: Any, kind: str | None = None) -> dict[str, Any]:
    """Every figure of one sweep (`reads="sweep"`) or one experiment of `kind`
    (`reads="experiment"`) whose records it has: `{name: matplotlib figure}` in registry order."""
    figures = {}
    for entry in entries(reads):
        if entry.kinds and kind not in entry.kinds:
            continue
        numbers = entry.numbers(records)
        if numbers is not None:
            figures[entry.name] = entry.figure(numbers)
    return figures
