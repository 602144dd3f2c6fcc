"""The reference data in figures/paper_data equal the paper's Tables 1, 3, 4 and 5.

The tables below are the paper's Markdown rows, copied verbatim (including the rows of Table 3
whose Delay cell is left out: they belong to the delay above them). The test parses them
independently of figures.paper_reference and compares every cell.
"""

from __future__ import annotations

import pytest

from figures import paper_reference as paper

TABLE1 = """
| Method | Avg. Delay | MATH500 | GSM8K | Gaokao | Olympiad | Minerva | AMC23 | Avg. perf. |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| Qwen3-1.7B |  |  |  |  |  |  |  |  |
| GRPO | 158.70 | 48.20 / 31.04 | 72.18 / 47.90 | 39.74 / 26.27 | 14.69 / 6.77 | 16.18 / 8.32 | 22.50 / 9.53 | 35.58 / 21.64 |
| GAC | 160.02 | 47.00 / 31.03 | 72.18 / 47.09 | 40.26 / 25.16 | 15.73 / 6.70 | 15.81 / 8.18 | 20.00 / 11.09 | 35.16 / 21.54 |
| VCPO | 157.87 | 65.20 / 54.55 | 80.21 / 67.76 | 55.06 / 45.06 | 27.60 / 20.49 | 26.47 / 18.31 | 27.50 / 26.72 | 47.01 / 38.82 |
| TIC-GRPO | 159.60 | 62.20 / 53.61 | 82.34 / 67.14 | 53.25 / 43.02 | 27.60 / 19.51 | 26.84 / 17.53 | 32.50 / 26.25 | 47.45 / 37.84 |
| GMC-GRPO | 159.75 | 66.00 / 57.29 | 81.65 / 72.66 | 55.32 / 47.73 | 28.19 / 22.61 | 26.47 / 20.11 | 35.00 / 28.44 | 48.77 / 41.47 |
| Qwen3-4B |  |  |  |  |  |  |  |  |
| GRPO | 137.92 | 57.40 / 43.26 | 74.30 / 51.56 | 48.57 / 34.35 | 22.11 / 9.66 | 18.01 / 11.99 | 35.00 / 17.19 | 42.57 / 28.00 |
| GAC | 138.85 | 58.00 / 42.39 | 77.79 / 55.32 | 50.39 / 33.64 | 21.81 / 10.55 | 16.18 / 12.22 | 35.00 / 18.91 | 43.19 / 28.84 |
| VCPO | 139.50 | 61.00 / 48.39 | 76.88 / 64.30 | 46.75 / 36.30 | 29.38 / 13.61 | 26.84 / 16.98 | 37.50 / 21.88 | 46.39 / 33.58 |
| TIC-GRPO | 138.87 | 76.40 / 68.31 | 90.75 / 81.70 | 65.19 / 55.68 | 42.88 / 33.33 | 36.03 / 27.55 | 57.50 / 43.91 | 61.46 / 51.75 |
| GMC-GRPO | 141.01 | 77.60 / 72.54 | 91.13 / 87.03 | 65.19 / 60.91 | 43.18 / 37.72 | 34.19 / 30.10 | 52.50 / 48.91 | 60.63 / 56.20 |
| Qwen3-8B |  |  |  |  |  |  |  |  |
| GRPO | 140.90 | 61.80 / 49.41 | 88.70 / 72.74 | 55.06 / 38.83 | 27.30 / 16.49 | 21.69 / 16.96 | 25.00 / 22.03 | 46.59 / 36.08 |
| GAC | 141.7 | 61.20 / 48.34 | 88.10 / 72.09 | 54.55 / 39.29 | 26.41 / 16.26 | 22.79 / 15.99 | 27.50 / 21.41 | 46.76 / 35.56 |
| VCPO | 142.7 | 67.40 / 58.88 | 88.93 / 78.79 | 57.40 / 47.50 | 33.38 / 21.88 | 31.25 / 23.09 | 47.50 / 31.56 | 54.31 / 43.62 |
| TIC-GRPO | 141.6 | 79.20 / 75.14 | 92.87 / 87.92 | 68.31 / 61.20 | 45.10 / 38.41 | 40.07 / 34.81 | 60.00 / 50.47 | 64.26 / 57.99 |
| GMC-GRPO | 141.1 | 78.80 / 75.22 | 93.33 / 91.37 | 69.09 / 63.64 | 44.96 / 40.34 | 40.07 / 34.35 | 60.00 / 52.81 | 64.37 / 59.62 |
"""

TABLE3 = """
| Delay | Method | Greedy | pass@1 | pass@2 | pass@4 | pass@8 | pass@16 |
| --- | --- | --- | --- | --- | --- | --- | --- |
| – | Base (no RL) | 44.40 | 25.57 | 37.52 | 50.00 | 61.65 | 72.40 |
| 0 | GMC-GRPO | 66.40 | 62.94 | 72.39 | 79.25 | 84.64 | 89.00 |
| TIC-GRPO | 66.80 | 63.62 | 72.59 | 79.47 | 84.90 | 89.00 |  |
| GRPO | 66.20 | 63.32 | 72.41 | 79.25 | 84.84 | 88.80 |  |
| 32 | GMC-GRPO | 64.80 | 60.84 | 70.47 | 77.85 | 83.89 | 88.60 |
| TIC-GRPO | 66.40 | 61.70 | 71.09 | 78.38 | 84.24 | 88.80 |  |
| GRPO | 56.20 | 45.19 | 58.01 | 69.04 | 77.62 | 83.60 |  |
| 64 | GMC-GRPO | 65.20 | 60.38 | 69.97 | 77.30 | 83.30 | 88.00 |
| TIC-GRPO | 65.40 | 60.29 | 70.21 | 77.42 | 82.92 | 86.80 |  |
| GRPO | 52.00 | 40.91 | 53.93 | 65.43 | 74.47 | 81.20 |  |
| 128 | GMC-GRPO | 68.40 | 59.03 | 69.57 | 77.34 | 83.45 | 88.00 |
| TIC-GRPO | 63.20 | 55.41 | 66.86 | 75.64 | 82.59 | 87.80 |  |
| GRPO | 51.40 | 35.33 | 47.89 | 59.87 | 70.46 | 78.60 |  |
| 256 | GMC-GRPO | 59.60 | 48.33 | 61.64 | 72.02 | 79.85 | 85.40 |
| TIC-GRPO | 56.00 | 46.20 | 59.78 | 71.12 | 80.05 | 86.20 |  |
| GRPO | 47.60 | 32.11 | 44.78 | 57.10 | 68.17 | 77.60 |  |
| 512 | GMC-GRPO | 56.40 | 42.01 | 55.97 | 67.78 | 76.91 | 83.40 |
| TIC-GRPO | 53.80 | 38.17 | 51.07 | 62.59 | 72.47 | 80.60 |  |
| GRPO | 46.80 | 30.23 | 42.73 | 55.03 | 66.16 | 76.00 |  |
"""

TABLE4 = r"""
| Checkpoint | $G$ | GMC-GRPO | TIC-GRPO | $\Delta$ Pass@1 (pp) |
| --- | --- | --- | --- | --- |
| 200 | 4 | 51.40 / 33.70 | 51.60 / 34.81 | $-1.11$ |
| 200 | 8 | 55.40 / 39.23 | 50.20 / 35.44 | $+3.79$ |
| 200 | 32 | 62.80 / 46.51 | 53.60 / 39.41 | $+7.10$ |
| 300 | 4 | 57.00 / 39.02 | 54.80 / 36.05 | $+2.97$ |
| 300 | 8 | 61.40 / 46.34 | 55.20 / 41.01 | $+5.33$ |
| 300 | 32 | 65.40 / 56.34 | 56.00 / 42.10 | $+14.24$ |
| 400 | 4 | 62.60 / 48.52 | 58.60 / 42.29 | $+6.23$ |
| 400 | 8 | 67.00 / 55.90 | 60.00 / 46.76 | $+9.14$ |
| 400 | 32 | 64.00 / 58.55 | 62.80 / 51.41 | $+7.14$ |
| 800 | 4 | 67.00 / 56.17 | 63.00 / 53.91 | $+2.26$ |
| 800 | 8 | 68.40 / 59.03 | 63.20 / 55.41 | $+3.62$ |
| 800 | 32 | 66.00 / 61.18 | 66.00 / 59.80 | $+1.38$ |
"""

TABLE5 = """
| Method | Avg. Delay | MATH500 | GSM8K | Gaokao | Olympiad | Minerva | AMC23 | Avg. perf. |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| Qwen3-1.7B |  |  |  |  |  |  |  |  |
| A-3PO | 160.80 | 67.40 / 61.26 | 81.88 / 76.42 | 53.77 / 51.69 | 30.71 / 25.56 | 28.68 / 24.20 | 32.50 / 32.50 | 49.16 / 45.27 |
| GMC-GRPO | 159.75 | 66.00 / 57.29 | 81.65 / 72.66 | 55.32 / 47.73 | 28.19 / 22.61 | 26.47 / 20.11 | 35.00 / 28.44 | 48.77 / 41.47 |
| Qwen3-4B |  |  |  |  |  |  |  |  |
| A-3PO | 138.34 | 70.80 / 69.16 | 90.14 / 88.55 | 59.48 / 58.38 | 36.80 / 35.16 | 31.62 / 29.78 | 50.00 / 46.88 | 56.47 / 54.65 |
| GMC-GRPO | 141.01 | 77.60 / 72.54 | 91.13 / 87.03 | 65.19 / 60.91 | 43.18 / 37.72 | 34.19 / 30.10 | 52.50 / 48.91 | 60.63 / 56.20 |
| Qwen3-8B |  |  |  |  |  |  |  |  |
| A-3PO | - | Training collapsed |  |  |  |  |  |  |
| GMC-GRPO | 141.1 | 78.80 / 75.22 | 93.33 / 91.37 | 69.09 / 63.64 | 44.96 / 40.34 | 40.07 / 34.35 | 60.00 / 52.81 | 64.37 / 59.62 |
"""

METHODS = {
    "GRPO": "grpo",
    "GAC": "gac",
    "VCPO": "vcpo",
    "TIC-GRPO": "tic",
    "GMC-GRPO": "gmc",
    "A-3PO": "a3po",
    "Base (no RL)": "base",
}


def cells(text: str) -> list[list[str]]:
    rows = []
    for line in text.strip().splitlines():
        parts = [c.strip() for c in line.strip().strip("|").split("|")]
        if parts[0] in ("Method", "Delay", "Checkpoint") or parts[0].startswith("---"):
            continue
        rows.append(parts)
    return rows


def numbers(cell: str) -> tuple[float, float]:
    left, right = (float(x) for x in cell.split("/"))
    return left, right


def simulated(text: str) -> dict[tuple[str, str], list[str]]:
    out, model = {}, ""
    for row in cells(text):
        if row[0].startswith("Qwen3"):
            model = row[0]
        else:
            out[(model, METHODS[row[0]])] = row
    return out


@pytest.mark.parametrize("name,text", [("table1", TABLE1), ("table5", TABLE5)])
def test_simulated_tables_equal_the_paper(name: str, text: str) -> None:
    expected = simulated(text)
    rows = paper.load(name)["rows"]
    assert len(rows) == len(expected)
    cell = paper.table1_cell if name == "table1" else paper.table5_cell
    for (model, method), row in expected.items():
        if row[2] == "Training collapsed":
            assert paper.table5_row(model, method)["collapsed"] is True
            assert all(cell(model, method, b) is None for b in paper.BENCHMARK_ORDER)
            continue
        if name == "table1":
            assert paper.table1_avg_delay(model, method) == float(row[1])
        else:
            assert paper.table5_row(model, method)["avg_delay"] == float(row[1])
        for bench, text_cell in zip([*paper.BENCHMARK_ORDER, "macro"], row[2:9], strict=True):
            assert cell(model, method, bench) == numbers(text_cell), (model, method, bench)


def test_table3_equals_the_paper() -> None:
    delay = None
    expected = []
    for row in cells(TABLE3):
        if row[0] in METHODS:  # the Delay cell is left out: the block's delay
            row = [str(delay), *row[:-1]]
        delay = None if row[0] == "–" else int(row[0])
        expected.append((delay, METHODS[row[1]], [float(x) for x in row[2:8]]))
    assert len(paper.load("table3")["rows"]) == len(expected) == 19
    for delay, method, values in expected:
        got = paper.table3_row(delay, method)
        assert got is not None, (delay, method)
        assert [got["greedy"], *(got["pass_at_k"][k] for k in paper.PASS_AT_K)] == values


def test_table4_equals_the_paper() -> None:
    rows = cells(TABLE4)
    assert len(paper.load("table4")["rows"]) == len(rows) == 12
    for row in rows:
        ck, g = int(row[0]), int(row[1])
        assert paper.table4_cell(ck, g, "gmc") == numbers(row[2])
        assert paper.table4_cell(ck, g, "tic") == numbers(row[3])
        assert paper.table4_delta(ck, g) == float(row[4].strip("$").replace("+", ""))


def test_spot_values_quoted_in_the_text() -> None:
    # §5: "At delay 128, GMC-GRPO achieves 59.03% Pass@1, compared with 55.41% for TIC-GRPO
    # and 35.33% for vanilla GRPO." and the Table 1 means quoted in §5.
    notes = paper.load("figure_notes")["figure2_final_pass1"]
    for method in ("gmc", "tic", "grpo"):
        assert paper.table3_row(128, method)["pass_at_k"]["1"] == notes[method]
    assert [paper.table1_cell(m, "gmc", "macro")[1] for m in paper.PAPER_MODELS] == [
        41.47,
        56.20,
        59.62,
    ]
    assert paper.table1_cell("Qwen3-4B", "tic", "macro") == (61.46, 51.75)


def test_every_file_names_its_table_and_columns() -> None:
    for name in paper.TABLES:
        data = paper.load(name)
        assert data["table"] == f"Table {name[-1]}"
        assert "Table" in data["source"] and data["caption"]
        keys = set().union(*(row.keys() for row in data["rows"]))
        assert keys <= set(data["columns"]), keys - set(data["columns"])
    with pytest.raises(KeyError, match="table1"):
        paper.load("table2")
