"""`gmc-grpo theory`: table, JSON, plots, and no torch import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from theory.claims import evaluate_claims
from theory.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "CLAIMS OF THE PAPER (counted)" in out and "OUR READINGS AND EXTENSIONS" in out
    # the three tautologies (rows 4, 8, 28) and row 27 (merged into row 2) are not counted; the
    # kinds are named
    assert "paper: 17 verified, 4 reconstructed, 1 holds with a condition, 2 needs runs" in out
    assert (
        "paper, by evidence: 8 search, 8 algebra, 2 exact, 4 derivation; not counted: 3 "
        "tautology, 1 merged" in out
    )
    assert "improvement_factor" in out and "why:" in out
    assert "**" not in out and "$" not in out  # plain text in a terminal
    assert main(["--json", "--eps", "0.28"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["claims"] == evaluate_claims()
    assert payload["constants"][0]["eps"] == 0.28
    paper = [c for c in payload["claims"] if c["section"] == "paper"]
    # every row is listed; the counts leave out the tautologies (3 of the paper's, 1 of ours)
    # and row 27, merged into row 2
    assert len(paper) == 28
    assert (
        sum(payload["summary"].values())
        == 28 - sum(payload["summary_kinds"]["not_counted"].values())
        == 24
    )
    assert payload["needs_runs"] == ["Drift", "Delay regularity"]
    assert sum(payload["summary_ours"].values()) == len(payload["claims"]) - 28 - 1
    first = payload["claims"][0]
    assert first["claim_latex"].startswith(r"\frac{1}{N}") and "T^{2}" in first["derived_latex"]


def test_bad_eps(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("-1", "nan", "inf", "1e+308"):  # 1e308: past theory.cli.MAX_EPS
        assert main(["--eps", "0.28", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert (
            f"--eps 0.28 {bad}: every value must be a finite number in (0, 1e+300], got {bad}"
            in err
        )


def test_out_writes_plots_and_no_torch(tmp_path: Path) -> None:
    """Through the top-level CLI in a fresh interpreter: files written, torch never imported."""
    code = (
        "import sys\n"
        "from pipeline.cli import main\n"
        f"rc = main(['theory', '--json', '--out', {str(tmp_path)!r}])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    names = {Path(p).name for p in payload["files"]}
    for stem in ("denominators", "penalty_ratio", "eps_star", "delay_tolerance", "group_size"):
        assert {f"{stem}.png", f"{stem}.pdf"} <= names
        assert (tmp_path / f"{stem}.png").stat().st_size > 1000
    assert json.loads((tmp_path / "claims.json").read_text())["claims"] == payload["claims"]
    md = (tmp_path / "claims.md").read_text(encoding="utf-8")
    assert md.count("### ") == 2 and "$" in md


def test_plot_functions_use_given_axes() -> None:
    import matplotlib.pyplot as plt

    from theory import curves, plots

    fig, ax = plt.subplots()
    out = plots.plot_denominators(curves.denominator_curves(), ax=ax)
    assert out is fig and len(ax.lines) == 3
    plt.close(fig)
