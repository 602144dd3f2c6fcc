"""The three notebooks of the figures track run top to bottom (marker `notebook`: a Jupyter kernel each; the
paper-figures notebook trains the tiny CPU recipe for a few steps); every notebook of `notebooks/` is
stored with the outputs of the current code (`make notebooks`; `pipeline.notebooks`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# notebook -> images it shows (one per figure)
NOTEBOOKS = {"bias_sweeps": 2, "async_toy": 2, "paper_figures": 5}


STORED = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
PNG_LIMIT = 150_000  # bytes of base64 per stored figure
NOTEBOOK_LIMIT = 400_000  # bytes per stored notebook


@pytest.mark.parametrize("name", STORED)
def test_stored_outputs_are_current(name: str) -> None:
    """Every notebook is stored executed, with the outputs of the current code (`make notebooks`)."""
    from pipeline.notebooks import problems

    path = ROOT / "notebooks" / f"{name}.ipynb"
    assert problems(path) == []
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and any(c["outputs"] for c in code)
    source = "".join("".join(c["source"]) for c in code)
    assert "def " not in source  # thin: helpers live in the packages
    # small outputs: no widget views without state, no oversized figure or notebook
    outputs = [o for c in code for o in c["outputs"]]
    assert not [
        o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    sizes = [len(o["data"]["image/png"]) for o in outputs if "image/png" in o.get("data", {})]
    assert max(sizes, default=0) < PNG_LIMIT and path.stat().st_size < NOTEBOOK_LIMIT


def _fake_repository(root: Path) -> Path:
    """theory/{__init__,a,b}.py (a imports b inside a function), a data file, one notebook."""
    (root / "theory" / "data").mkdir(parents=True)
    (root / "theory" / "__init__.py").write_text("")
    (root / "theory" / "a.py").write_text("def f():\n    from .b import g\n    return g()\n")
    (root / "theory" / "b.py").write_text("def g():\n    return 1\n")
    (root / "theory" / "c.py").write_text("x = 3\n")  # not imported: not an input
    (root / "theory" / "data" / "table.json").write_text("{}")
    (root / "notebooks").mkdir()
    notebook = {
        "cells": [
            {"cell_type": "code", "source": ["from theory.a import f\n", "f()"],
             "outputs": [], "execution_count": 1, "metadata": {}},
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    path = root / "notebooks" / "x.ipynb"
    path.write_text(json.dumps(notebook))
    return path


def test_staleness_is_detected(tmp_path: Path) -> None:
    """The digest changes with a cell, an imported module (also one imported lazily) or a data
    file beside it, and not with a module the notebook cannot reach."""
    from pipeline.notebooks import METADATA_KEY, inputs_digest, problems

    path = _fake_repository(tmp_path)
    nb = json.loads(path.read_text())
    digest, inputs = inputs_digest(nb, tmp_path)
    assert inputs == [
        "theory/__init__.py", "theory/a.py", "theory/b.py", "theory/data/table.json"
    ]  # fmt: skip
    assert "no record" in problems(path, tmp_path)[0]
    nb["metadata"][METADATA_KEY] = {"inputs_sha256": digest, "inputs": inputs}
    path.write_text(json.dumps(nb))
    assert problems(path, tmp_path) == []

    (tmp_path / "theory" / "c.py").write_text("x = 4\n")
    assert problems(path, tmp_path) == []
    for changed in ("b.py", "data/table.json"):
        target = tmp_path / "theory" / changed
        original = target.read_text()
        target.write_text(original + "\n# changed\n")
        assert "changed after it ran" in problems(path, tmp_path)[0], changed
        target.write_text(original)
    assert problems(path, tmp_path) == []
    nb["cells"][0]["source"] = ["from theory.a import f\n", "f() + 1"]
    path.write_text(json.dumps(nb))
    assert "changed after it ran" in problems(path, tmp_path)[0]
    nb["cells"][0]["execution_count"] = None
    path.write_text(json.dumps(nb))
    assert any("top to bottom" in p for p in problems(path, tmp_path))


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
