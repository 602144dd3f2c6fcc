"""The toy verdicts survive other seeds: the quick sweep and the quick training experiments on a
second set of MDP, parameter and sampling seeds give the same verdicts as on the default seeds.

Compared: every ordering of the quick experiments (holds / not significant / does not hold),
whether each eps* cell has a significantly interior optimum, and each sweep claim as holding at
every grid point, at none, or at some (the pointwise claim "GMC's relative bias below TIC's"
holds at 4 of 12 stale points on the default seeds and 5 on the second set: both "partly").

Two orderings are seed-dependent (`SEED_DEPENDENT`): with the hand-mixed seeds of earlier versions
both seed sets agreed on them; with the streams of `gmc_grpo.seeding` (the same seed values) the
convergence ordering at D = 64 is "not significant" on the default seeds (TIC - GRPO 0.0001
[-0.0000, 0.0003]) and "holds" on the second set, and the mean-J gap "holds" on the default seeds
(0.054 [0.039, 0.069]) and is "not significant" on the second set. They are reported as not
established at the quick sizes (docs/toy-learners.md); the test checks that every other verdict agrees and that
these two are the only ones that differ.

Slow (the two quick sweeps and the two quick training sets: about 10 minutes on one core of the
2-core machine). Run with `pytest -m slow tests/toy_mdps/test_toy_seed_robustness.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gmc_grpo.json_files import read_json
from toy_mdps.cli import main
from toy_mdps.train.config import QUICK_EXPERIMENTS

SECOND_SEEDS = ["--mdp-seed", "1", "--init-seed", "1", "--seed", "1"]
# orderings whose verdict differs between the two seed sets (module docstring)
SEED_DEPENDENT = {
    "GMC <= TIC <= GRPO, (1/N) sum ||grad J||^2, D = 64",
    "larger G helps GMC more than TIC (mean J over training, G=4 -> 32)",
}


def sweep_verdicts(summary: dict[str, Any]) -> dict[str, str]:
    """One verdict per sweep claim: `holds` at every point, `holds nowhere`, or `partly`."""
    out = {}
    for name, claim in summary["claims"].items():
        count = claim.get("holds", claim.get("exceeds"))
        of = claim["of"]
        out[name] = "holds" if count == of and of else "holds nowhere" if count == 0 else "partly"
    return out


def train_verdicts(root: Path) -> dict[str, str]:
    """Every ordering's verdict and every eps* cell's interior verdict of the quick experiments."""
    out = {}
    for name in QUICK_EXPERIMENTS:
        summary = read_json(root / name / "summary.json")
        for claim in summary.get("orderings", []):
            out[claim["claim"]] = claim["verdict"]
        for cell in summary.get("eps_star", {}).get("table", []):
            # the claim is "eps* is interior": established or not (an edge optimum is "does not
            # hold" when its neighbour is significantly worse, "not significant" otherwise;
            # neither establishes the claim)
            key = f"eps* interior, N = {cell['total_steps']}, D = {cell['delay']}"
            interior = cell["by_convergence"]["interior_test"]["verdict"] == "holds"
            out[key] = "holds" if interior else "not established"
    return out


@pytest.mark.slow
def test_quick_verdicts_are_the_same_on_a_second_seed_set(tmp_path: Path) -> None:
    runs = {}
    for label, extra in (("default", []), ("second", SECOND_SEEDS)):
        sweep, train = tmp_path / f"sweep_{label}", tmp_path / f"train_{label}"
        common = ["--no-progress", "--no-figures", "--threads", "1"]
        assert main(["sweep", "--quick", "--out", str(sweep), *common, *extra]) == 0
        assert main(["train", "--quick", "--out", str(train), *common, *extra]) == 0
        config = read_json(sweep / "config.json")["config"]
        assert (config["mdp_seed"], config["init_seed"], config["run_seed"]) == (
            (0, 0, 0) if label == "default" else (1, 1, 1)
        )
        runs[label] = (sweep_verdicts(read_json(sweep / "summary.json")), train_verdicts(train))
    assert runs["default"][0] == runs["second"][0]
    default, second = runs["default"][1], runs["second"][1]
    assert default.keys() == second.keys()
    differing = {claim for claim in default if default[claim] != second[claim]}
    assert differing <= SEED_DEPENDENT, differing - SEED_DEPENDENT
