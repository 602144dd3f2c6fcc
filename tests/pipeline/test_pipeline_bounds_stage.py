"""The bounds stage of `gmc-grpo reproduce` and the theory headline: tracked toy runs in, the
bound-vs-measured table, the bound-tracking figures and the headline out."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
import torch

from evidence.measured import run_bounds
from figures.bound_tracking import plot_bound_tracking
from gmc_grpo.json_files import read_json
from pipeline import bounds_stage
from pipeline.reproduce import STAGES, claims_headline
from toy_mdps.train.config import ToyTrainConfig
from toy_mdps.train.run import train

matplotlib.use("Agg")
torch.set_num_threads(1)

TINY = dict(num_prompts=2, vocab_size=3, max_length=3, num_groups=2, group_size=4)


def _tracked(path: Path, method: str, optimizer: str = "sgd") -> Path:
    cfg = ToyTrainConfig(
        **TINY,
        method=method,
        optimizer=optimizer,
        lr=4.0,
        lr_schedule="constant",
        grad_clip=None,
        delay=2,
        total_steps=6,
        seeds=[0, 1, 2],
        bound_every=2,
        bound_minibatches=50,
        name=f"tiny/{method}_{optimizer}",
    )
    train(cfg, path)
    return path


def test_stage_reads_tracked_runs_and_writes_table_figures_and_headline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounds_stage, "BOUND_EXPERIMENTS", ())  # only the runs written here
    monkeypatch.setattr(bounds_stage, "FIGURE_EXPERIMENTS", ("exp",))
    out = tmp_path / "bounds"
    out.mkdir()
    _tracked(out / "exp" / "gmc", "gmc")
    _tracked(out / "exp" / "tic", "tic")
    _tracked(tmp_path / "toy_train" / "adam", "gmc", optimizer="adam")
    result = bounds_stage.bounds_stage(out)
    assert result["runs"] == 3 and result["refutations"] == 0
    headline = result["headline"]
    assert headline.startswith("explicit Theorems 1-2: vacuous in 2 of 2 runs")
    assert "decades above the measurement" in headline and "not counted as a check" in headline
    assert "|" not in headline  # a cell of the report's stage table
    assert "Lemma 1 with measured moments (a consistency check): holds in " in headline
    assert (
        "Lemma 1's descent step at every step: 0 violations of 54" in headline
    )  # 3 runs x 3 seeds x 6 steps
    assert "chain steps 1-5 lose" in headline
    # no declared primary among these runs; the one pair in the setting is the Holm family
    assert "GMC vs TIC: no declared primary pair among these runs" in headline
    assert "the other 1 pairs in the setting, Holm-adjusted" in headline
    assert "0.331" not in headline
    # tautologies (class membership, pathwise Cauchy-Schwarz) named apart, not counted
    assert "per-step checks that could fail: 0 violations of " in headline
    assert "class-membership and pathwise Cauchy-Schwarz checks)" in headline
    md = result["markdown"]
    assert "Where the proof loses" in md and "figures/proof_slack.png" in md
    assert "| exp | D = 2 |" in md  # the pair: folder, lags
    assert "| tiny/gmc_sgd |" in md and "| tiny/tic_sgd |" in md
    assert "optimizer adam" in md  # the Adam run is listed apart
    assert "$\\frac{1}{N}" in md
    saved = read_json(out / "bounds.json")
    assert [r["in_setting"] for r in saved] == [True, True, False]
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert figures == ["proof_slack.png", "tiny__gmc_sgd.png", "tiny__tic_sgd.png"]
    claims = read_json(out / "claims.json")
    assert {"vacuity", "lemma1", "slack", "pairs", "tuned"} <= set(claims)
    assert "figures/tiny__gmc_sgd.png" in md
    assert any(s.name == "bounds" and s.reads_earlier for s in STAGES)


def test_bound_tracking_figure_uses_given_axes(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    series = run_bounds(_tracked(tmp_path / "run", "gmc")).series
    assert {"theorem", "bias", "second_moment", "drift", "kl"} <= set(series)
    fig = plot_bound_tracking(series, title="t")
    assert len([a for a in fig.axes if a.get_visible()]) == 5
    plt.close(fig)
    fig, axes = plt.subplots(1, 5)
    assert plot_bound_tracking(series, ax=axes) is fig
    assert all(a.get_yscale() == "log" and a.lines for a in axes)
    plt.close(fig)
    with pytest.raises(ValueError, match="no panel"):
        plot_bound_tracking({})


def test_claims_headline_counts_each_kind_apart() -> None:
    """One count per kind of verdict, the paper's and ours apart, and no pooled total."""
    counts = {"verified": 19, "reconstructed": 5, "holds with a condition": 1, "refuted": 0}
    ours = {"verified": 8, "reconstructed": 1, "refuted": 0}
    assert claims_headline({"paper": counts, "ours": ours}) == (
        "paper's claims: 19 verified, 5 reconstructed, 1 holds with a condition "
        "(ours, apart: 8 verified, 1 reconstructed)"
    )
    assert claims_headline({"paper": {"verified": 2, "needs runs": 1}, "ours": {}}) == (
        "paper's claims: 2 verified, 1 needs runs"
    )


def test_stage_designs_name_the_bound_minimising_experiments() -> None:
    """The default design runs `bounds_optimal`, `--full` its full grid (10 seeds, N = 100,000);
    the stage's recorded settings are the lists the runner uses."""
    stage = next(s for s in STAGES if s.name == "bounds")
    assert dict(stage.settings)["experiments"] == list(bounds_stage.BOUND_EXPERIMENTS)
    assert dict(stage.full_settings)["experiments"] == list(bounds_stage.FULL_BOUND_EXPERIMENTS)
    assert "bounds_optimal" in bounds_stage.BOUND_EXPERIMENTS
    assert "bounds_optimal_full" in bounds_stage.FULL_BOUND_EXPERIMENTS
