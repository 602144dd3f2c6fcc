"""The paper's eps is one constant, and the recipes that mean it hold its value (issue 33).

`gmc_grpo.defaults.PAPER_EPS` is the only definition (Appendix B.1: eps_high = 0.28); the JSON
recipes are data and write the number itself, so this test reads every recipe and checks that
each place meaning the paper's eps equals the constant: a toy experiment's `base.eps`, an LLM
recipe's `config.eps` and its `sources.eps` note, and the toy sweep grids' `eps_values` (each
holds the paper's point, which the sweep's analysis takes as its primary one). The `eps` grids
of the eps experiments (`grid.eps`) are sweeps over eps, not the paper's value, and are left out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gmc_grpo import defaults
from gmc_grpo.defaults import PAPER_EPS

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "toy_mdps" / "configs").glob("*.json")) + sorted(
    (ROOT / "llm_runs" / "configs").glob("*.json")
)


def test_the_paper_eps_is_defined_once():
    assert PAPER_EPS == 0.28
    assert not {"PAPER_CAP_EPS", "DEFAULT_EPS"} & set(vars(defaults))
    # no second definition of the constant's number anywhere in the packages' code
    pattern = re.compile(r"^\s*[A-Z_]*EPS[A-Z_]*\s*=\s*0\.28\b", re.MULTILINE)
    packages = ("gmc_grpo", "theory", "toy_mdps", "llm_runs", "figures", "pipeline")
    found = [
        str(path.relative_to(ROOT))
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert found == ["gmc_grpo/defaults.py"]


@pytest.mark.parametrize("path", RECIPES, ids=[p.name for p in RECIPES])
def test_recipes_write_the_paper_eps(path: Path):
    recipe = json.loads(path.read_text(encoding="utf-8"))
    meant: list[float] = []
    for section in ("base", "config"):  # a toy experiment's and an LLM recipe's settings
        if isinstance(recipe.get(section), dict) and "eps" in recipe[section]:
            meant.append(recipe[section]["eps"])
    assert all(value == PAPER_EPS for value in meant), (path.name, meant)
    note = recipe.get("sources", {}).get("eps")
    if note is not None:
        assert note.startswith(f"{PAPER_EPS} "), (path.name, note)
    if "eps_values" in recipe:  # a toy sweep's grid holds the paper's point
        assert PAPER_EPS in recipe["eps_values"], (path.name, recipe["eps_values"])
