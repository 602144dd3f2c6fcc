"""Tables as numbers, and their two renderings (Markdown and LaTeX), in one place.

A table function (`figures.llm_tables.table1_data`, ...) returns a `Table`: its `columns`, its `rows`
(each a `Row`: the cells by column key, where the row comes from, whether our records had it)
and its `notes`. A cell is a number or a label, never a formatted number:

- `float`: a value (percent, lag), shown with the column's `digits` (and a sign when the column
  is `signed`, a difference);
- `Interval`: the mean over seeds with its 95% interval, shown as `mean ± half-width`;
- `tuple` of two floats: a pair such as greedy / avg@n, shown `a / b`;
- `int`: a count or a step, shown as it is; `str`: a label (a method, a source);
- `Missing(reason)` or `None`: no value, shown as "missing (reason)" / the column's `empty`.

`render_markdown(table)` and `render_latex(table)` turn a `Table` into text; `Table.numbers()`
gives the values, one dict per row, for tests and notebooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MISSING = "missing"


@dataclass(frozen=True)
class Interval:
    """A mean over seeds with the ends of its 95% Student-t interval over seeds."""

    mean: float
    lo: float
    hi: float

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2


@dataclass(frozen=True)
class Missing:
    """No value in this cell, and why (None: no reason is shown)."""

    reason: str | None = None


Cell = str | int | float | Interval | tuple[float | None, float | None] | Missing | None


@dataclass(frozen=True)
class Column:
    """One column: its key in `Row.cells`, its heading, and how its numbers are shown."""

    key: str
    label: str
    digits: int = 2
    """decimals of its numbers"""
    signed: bool = False
    """show a sign (`+1.20`): the column holds differences"""
    empty: str = MISSING
    """what a cell without a value (None) shows"""


@dataclass
class Row:
    """One row: its cells by column key, and what it is.

    `key`: the values that identify the row (e.g. `{"delay": 128, "method": "tic"}`), shown in
    its label cells and used to look it up; `source`: "ours" (our records) or "paper" (the paper's
    printed values); `found`: our records had it; `info`: more about it (`run`, `seeds`,
    `collapsed`), not shown as cells.
    """

    key: dict[str, Any]
    source: str
    cells: dict[str, Cell]
    found: bool = True
    info: dict[str, Any] = field(default_factory=dict)

    def number(self, key: str) -> Any:
        """The value of cell `key`: a float, int, pair or label; an interval's mean; None when
        missing."""
        cell = self.cells.get(key)
        if isinstance(cell, Interval):
            return cell.mean
        return None if isinstance(cell, Missing) else cell


@dataclass
class Table:
    """A table of numbers: `rows` under `columns`, captioned `title`, followed by `notes`."""

    name: str
    title: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def has_data(self) -> bool:
        """Some row comes from our records."""
        return any(row.source == "ours" and row.found for row in self.rows)

    @property
    def why_empty(self) -> str:
        """What `gmc-grpo figures` says when the table has none of our rows."""
        return "no matching run was found"

    def numbers(self) -> list[dict[str, Any]]:
        """One dict per row: its `key`, `source`, `found`, `info`, and each value cell (an
        interval as `<key>`, `<key>_lo`, `<key>_hi`; label cells are left out)."""
        out = []
        for row in self.rows:
            entry: dict[str, Any] = {}
            for column in self.columns:
                cell = row.cells.get(column.key)
                if column.key in row.key or isinstance(cell, str):
                    continue
                entry[column.key] = row.number(column.key)
                if isinstance(cell, Interval):
                    entry[f"{column.key}_lo"], entry[f"{column.key}_hi"] = cell.lo, cell.hi
            out.append({**row.key, "source": row.source, "found": row.found, **row.info, **entry})
        return out


# ------------------------------------------------------------------------------------------
# Rendering
# ------------------------------------------------------------------------------------------


def _number(value: float | None, column: Column) -> str:
    if value is None:
        return MISSING
    return f"{value:+.{column.digits}f}" if column.signed else f"{value:.{column.digits}f}"


def format_cell(cell: Cell, column: Column) -> str:
    """The text of one cell (module docstring)."""
    if cell is None:
        return column.empty
    if isinstance(cell, Missing):
        return MISSING if cell.reason is None else f"{MISSING} ({cell.reason})"
    if isinstance(cell, str):
        return cell
    if isinstance(cell, bool):
        raise TypeError(f"column {column.key!r}: a bool is not a table cell")
    if isinstance(cell, int):
        return str(cell)
    if isinstance(cell, Interval):
        return f"{_number(cell.mean, column)} ± {cell.half_width:.{column.digits}f}"
    if isinstance(cell, tuple):
        if all(v is None for v in cell):
            return MISSING
        return " / ".join(_number(v, column) for v in cell)
    return _number(float(cell), column)


def cell_texts(table: Table) -> list[list[str]]:
    """Every row's cells as text, in column order."""
    return [[format_cell(row.cells.get(c.key), c) for c in table.columns] for row in table.rows]


def render_markdown(table: Table) -> str:
    """The table as Markdown: the title in bold, a pipe table, the notes as a list."""
    lines = [f"**{table.title}**", ""]
    lines.append("| " + " | ".join(c.label for c in table.columns) + " |")
    lines.append("| " + " | ".join("---" for _ in table.columns) + " |")
    lines += ["| " + " | ".join(cells) + " |" for cells in cell_texts(table)]
    if table.notes:
        lines.append("")
        lines += [f"- {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def render_latex(table: Table) -> str:
    """The table as a LaTeX `table` float (`tabular`, one left-aligned column per column)."""
    spec = "l" * len(table.columns)
    lines = [
        "\\begin{table}[t]",
        "\\centering",
        f"\\caption{{{latex_escape(table.title)}}}",
        f"\\begin{{tabular}}{{{spec}}}",
        "\\hline",
        " & ".join(latex_escape(c.label) for c in table.columns) + " \\\\",
        "\\hline",
    ]
    lines += [" & ".join(latex_escape(c) for c in cells) + " \\\\" for cells in cell_texts(table)]
    lines += ["\\hline", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL: Mapping[str, str] = {
    "\\": "\\textbackslash{}",
    "&": "\\&",
    "%": "\\%",
    "$": "\\$",
    "#": "\\#",
    "_": "\\_",
    "{": "\\{",
    "}": "\\}",
    "~": "\\textasciitilde{}",
    "^": "\\textasciicircum{}",
    "Δ": "$\\Delta$",
    "±": "$\\pm$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters in a cell (one pass, so escapes are not re-escaped)."""
    return "".join(_LATEX_SPECIAL.get(char, char) for char in str(text))
