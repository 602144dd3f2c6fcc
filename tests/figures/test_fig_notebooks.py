"""The three notebooks of the figures track run top to bottom (marker `notebook`: a Jupyter kernel each; the
paper-figures notebook trains the tiny CPU recipe for a few steps) and are stored without outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# notebook -> images it shows (one per figure)
NOTEBOOKS = {"bias_sweeps": 2, "async_toy": 2, "paper_figures": 5}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_stored_without_outputs(name: str) -> None:
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)
    source = "".join("".join(c["source"]) for c in code)
    assert "def " not in source  # thin: helpers live in the packages


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for var in ("GMC_SWEEP_DIR", "GMC_TOY_TRAIN_DIR"):
        monkeypatch.delenv(var, raising=False)
    # no GPU runs: the paper-figures notebook falls back to the tiny CPU recipe
    monkeypatch.setenv("GMC_RUNS_DIR", str(tmp_path / "no_runs"))
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    assert os.environ["GMC_RUNS_DIR"]
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == NOTEBOOKS[name]
    # what the notebook shows as text is rendered Markdown whose formulas all convert (the
    # stricter converter of the report: a formula it rejects would not render in Jupyter either)
    from pipeline.report import markdown_to_html

    markdown = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    markdown += ["".join(c.source) for c in nb.cells if c.cell_type == "markdown"]
    for text in markdown:
        markdown_to_html(text, strict=True)
    shown = "\n".join(markdown)
    assert shown.count("$") >= 6 and "||" not in shown and "**2" not in shown
    printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "||" not in printed and "```json" not in shown  # no plain-text dumps
    if name in ("async_toy", "paper_figures"):
        assert "<details><summary>Every run found" in shown  # the run inventory, collapsed
    if name == "bias_sweeps":
        assert "| check (paper's chain) | holds | of |" in shown
