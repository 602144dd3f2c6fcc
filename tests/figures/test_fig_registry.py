"""figures.registry and figures.tables: one entry per item, read by `gmc-grpo figures`; adding a
figure is one entry; a table of numbers renders to the Markdown and LaTeX written by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from fig_records import metric_row, write_train_run

from figures import registry
from figures.cli import write_all
from figures.common import FigureData, Panel, Series, metric_curve, plot_panels
from figures.discover import discover
from figures.registry import ENTRIES, Entry, get_entry, item_names, register_entry, resolve
from figures.tables import (
    Column,
    Interval,
    Missing,
    Row,
    Table,
    render_latex,
    render_markdown,
)


def test_every_entry_names_functions_that_exist() -> None:
    assert len({e.name for e in ENTRIES}) == len(ENTRIES)
    for entry in ENTRIES:
        assert entry.shows and entry.needs
        assert callable(resolve(entry.data))
        assert (entry.draw is None) == (entry.output != "figure")
        if entry.draw is not None:
            assert callable(resolve(entry.draw))
        assert entry.reads == "experiment" or not entry.kinds
    assert item_names()[:4] == ["figure2", "figure4", "figure5", "figure6"]
    assert {"table1", "table3", "table4", "table5", "bounds_toy", "toy_sweeps"} <= set(item_names())
    assert "curves" not in item_names()  # an experiment's figure, not a `gmc-grpo figures` item


def lag_data(runs):
    """The docs' example (docs/figures.md, "Adding a figure"): each length-coupled run's lag."""
    panel = Panel(title="realised lag", key=None)
    for run in runs:
        if run.kind == "llm_train" and run.schedule == "length_coupled":
            steps, values = metric_curve(run, "staleness/lag")
            panel.series.append(Series(method=run.method, run=run.name, steps=steps, values=values))
    return FigureData(
        name="lag",
        title="Realised lag",
        xlabel="learner step",
        ylabel="lag",
        panels=[panel],
        caption="staleness/lag of every length-coupled run",
    )


def test_adding_a_figure_is_one_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "ENTRIES", registry.ENTRIES)  # restored after the test
    register_entry(
        Entry("lag", "realised lag per run", "length-coupled LLM runs", lag_data, plot_panels)
    )
    assert "lag" in item_names() and get_entry("lag") is not None
    with pytest.raises(ValueError, match="registered already"):
        register_entry(Entry("lag", "x", "y", lag_data, plot_panels))
    with pytest.raises(ValueError, match="draw"):
        register_entry(Entry("lag2", "x", "y", lag_data))  # a figure without a plot
    write_train_run(tmp_path / "runs", "sim-gmc", method="gmc", schedule="length_coupled")
    result = write_all([tmp_path / "runs"], tmp_path / "out", only=["lag"])
    assert [p.name for p in result.written["lag"]] == ["lag.png", "lag.pdf"]
    index = (tmp_path / "out" / "INDEX.md").read_text()
    assert "### lag: realised lag per run" in index
    assert "staleness/lag of every length-coupled run" in index
    data = lag_data(discover([tmp_path / "runs"]))
    assert data.series(None, "gmc").values == [
        metric_row(s, "gmc", 0)["staleness/lag"] for s in range(40)
    ]


def test_a_table_renders_as_written_by_hand() -> None:
    table = Table(
        name="t",
        title="T: a_b & 100%",
        columns=[
            Column("delay", "Delay", empty="–"),
            Column("value", "Value"),
            Column("pair", "Greedy / avg"),
            Column("delta", "Δ (pp)", signed=True),
        ],
        rows=[
            Row(
                key={"delay": 8},
                source="ours",
                cells={
                    "delay": 8,
                    "value": Interval(mean=44.0, lo=39.0, hi=49.0),
                    "pair": (48.0, None),
                    "delta": 5.0,
                },
            ),
            Row(
                key={"delay": None},
                source="ours",
                found=False,
                cells={"delay": None, "value": Missing("no run"), "pair": Missing(), "delta": None},
            ),
        ],
        notes=["percent"],
    )
    assert render_markdown(table) == (
        "**T: a_b & 100%**\n\n"
        "| Delay | Value | Greedy / avg | Δ (pp) |\n"
        "| --- | --- | --- | --- |\n"
        "| 8 | 44.00 ± 5.00 | 48.00 / missing | +5.00 |\n"
        "| – | missing (no run) | missing | missing |\n\n"
        "- percent\n"
    )
    assert render_latex(table).splitlines()[2:] == [
        r"\caption{T: a\_b \& 100\%}",
        r"\begin{tabular}{llll}",
        r"\hline",
        r"Delay & Value & Greedy / avg & $\Delta$ (pp) \\",
        r"\hline",
        r"8 & 44.00 $\pm$ 5.00 & 48.00 / missing & +5.00 \\",
        r"– & missing (no run) & missing & missing \\",
        r"\hline",
        r"\end{tabular}",
        r"\end{table}",
    ]
    assert table.has_data
    assert table.numbers() == [
        {
            "delay": 8,
            "source": "ours",
            "found": True,
            "value": 44.0,
            "value_lo": 39.0,
            "value_hi": 49.0,
            "pair": (48.0, None),
            "delta": 5.0,
        },
        {
            "delay": None,
            "source": "ours",
            "found": False,
            "value": None,
            "pair": None,
            "delta": None,
        },
    ]
