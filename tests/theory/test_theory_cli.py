"""`gmc-grpo theory`: table, JSON, plots, and no torch import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from theory.claims import NOT_CHECKABLE, REFUTED, VERIFIED, evaluate_claims
from theory.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_claims_rows_and_verdicts() -> None:
    rows = evaluate_claims()
    assert len(rows) >= 15
    for row in rows:
        assert set(row) == {"claim", "where", "derived", "verdict", "how"}
        assert row["verdict"] in {VERIFIED, REFUTED, NOT_CHECKABLE}
    by_claim = {r["claim"]: r["verdict"] for r in rows}
    assert by_claim["c_eps < log(1+2 eps) for every eps > 0"] == VERIFIED
    assert by_claim["eps*_GMC = Theta(tau4^(1/7) N^(-3/14))"] == VERIFIED
    refuted = [r for r in rows if r["verdict"] == REFUTED]
    assert len(refuted) == 1 and "Counterexample" in refuted[0]["derived"]


def test_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "[refuted]" in out and "summary:" in out and "improvement_factor" in out
    assert main(["--json", "--eps", "0.28"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["claims"] == evaluate_claims()
    assert payload["constants"][0]["eps"] == 0.28
    assert sum(payload["summary"].values()) == len(payload["claims"])


def test_bad_eps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--eps", "-1"]) == 2
    assert "must be > 0" in capsys.readouterr().err


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


def test_plot_functions_use_given_axes() -> None:
    import matplotlib.pyplot as plt

    from theory import curves, plots

    fig, ax = plt.subplots()
    out = plots.plot_denominators(curves.denominator_curves(), ax=ax)
    assert out is fig and len(ax.lines) == 3
    plt.close(fig)


def test_claims_markdown_has_one_line_per_claim() -> None:
    from theory.claims import claims_markdown

    rows = evaluate_claims()
    table = claims_markdown(rows).strip().splitlines()
    assert len(table) == len(rows) + 2
    assert table[1] == "|---|---|---|---|---|---|"
    assert all(line.startswith("| ") and line.endswith(" |") for line in table[:1] + table[2:])
    assert "**refuted**" in "\n".join(table)
