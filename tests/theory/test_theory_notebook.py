"""`notebooks/bounds.ipynb` runs top to bottom: the claims table as rendered Markdown, the bounds
explorer (its sliders, with a plain-text note where no kernel runs) and its static snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.notebook
def test_bounds_notebook_executes() -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(ROOT / "notebooks" / "bounds.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3  # the explorer's snapshot, the denominators, the rates
    plain = [o["data"].get("text/plain", "") for o in outputs if "data" in o]
    assert any("Bounds explorer (ipywidgets)" in p for p in plain)
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    markdown = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    claims = next(m for m in markdown if "### Claims of the paper" in m)
    assert "$" in claims and "**verified**" in claims  # rendered table with math, not a text dump
    from pipeline.report import markdown_to_html

    html = markdown_to_html(claims, strict=True)  # every formula converts
    assert html.count("<math") == 2 * claims.count("\n| ") - 4  # claim + derived per row
    assert any("text/latex" in o.get("data", {}) for o in outputs)
    snapshot = next(m for m in markdown if "| provenance |" in m)
    assert "improvement factor" in snapshot and "| ours |" in snapshot
    markdown_to_html(snapshot, strict=True)
