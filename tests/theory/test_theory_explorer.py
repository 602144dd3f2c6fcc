"""The bounds explorer: hand-worked values, the widgets' callbacks driven headless, the static page.

Hand-worked values (mpmath, 30 digits, from the formulas written out, not from the code) at the
default setting: eps = 0.28, T = 8, |A| = 16, R = 1, C = 64, L = 0.5, eta = 1e-3, N = 1e4,
tau4 = 16, G = 8, delta = 0.5, Proposition 1's kappa = 8.
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from theory.constants import c_eps
from theory.explorer import SLIDERS, ExplorerSettings, evaluate, numbers_markdown
from theory.explorer_page import (
    CONSTANT_CHOICES,
    TERMS,
    factorise,
    recorded_digest,
    sources_digest,
    term_value,
)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "assets" / "bounds_explorer.html"

# eps = 0.28: c_eps = log(1.28) - 0.28/1.28, log(1+2eps) = log(1.56)
C_EPS = 0.0281100779315257978846
LOG_1_2EPS = 0.444685821261445678247
DELAY_RATIO = 0.00399592689952298740790  # (c_eps / log(1+2eps))^2
IMPROVEMENT = 0.331377873702353216553  # (c_eps / log(1+2eps))^(2/5)
# the terms: 2 T gap/(eta N); kappa T L^2 R^3 log|A| (2 log|A|+1)(1+eps) eta;
# kappa T^3 L^5 R^6 log^2 C log|A| (1+eps)^3 eta^4 tau4 / den^2
OPTIMISATION = 1.6
VARIANCE = 0.371652304232903205417
DELAY_GMC = 1.04157889630745145534e-06
DELAY_TIC = 2.60660147819968785743e-04
DELAY_COR2 = 2.30900687805709723822e-08  # den = 2 eps G / (1+delta) = 2.986666...
EPS_STAR_CLOSED = 0.144425631505639788553  # ((4/5)(tau4/4)^(1/5) N^(-3/10))^(5/7)
EPS_PRESCRIPTION = 0.206478236942000338301  # tau4^(1/7) N^(-3/14)


def test_hand_values_at_the_default_setting() -> None:
    r = evaluate()
    assert r["den_tic"] == pytest.approx(C_EPS, rel=1e-13)
    assert r["den_gmc"] == pytest.approx(LOG_1_2EPS, rel=1e-13)
    assert r["optimisation"] == pytest.approx(OPTIMISATION, rel=1e-13)
    assert r["variance"] == pytest.approx(VARIANCE, rel=1e-12)
    assert r["delay_gmc"] == pytest.approx(DELAY_GMC, rel=1e-12)
    assert r["delay_tic"] == pytest.approx(DELAY_TIC, rel=1e-12)
    assert r["delay_cor2"] == pytest.approx(DELAY_COR2, rel=1e-12)
    assert r["delay_ratio"] == pytest.approx(DELAY_RATIO, rel=1e-12)
    assert r["delay_ratio_formula"] == pytest.approx(DELAY_RATIO, rel=1e-12)
    assert r["improvement_factor"] == pytest.approx(IMPROVEMENT, rel=1e-12)
    # the tuned delay terms are minimised numerically (Brent): their ratio is the factor
    assert r["tuned_delay_ratio"] == pytest.approx(IMPROVEMENT, rel=1e-8)
    assert r["eps_star_closed"] == pytest.approx(EPS_STAR_CLOSED, rel=1e-12)
    assert r["eps_prescription"] == pytest.approx(EPS_PRESCRIPTION, rel=1e-12)
    assert r["tolerance"] == pytest.approx(1e6) and r["tolerated"] == 1.0
    assert r["delay_exponent"] == pytest.approx(math.log(16) / math.log(1e4))
    assert r["rate_exponent"] == -0.5
    # totals and the best step sizes are consistent with the terms
    assert r["total_gmc"] == pytest.approx(OPTIMISATION + VARIANCE + DELAY_GMC, rel=1e-12)
    assert r["tuned_total_gmc"] <= r["total_gmc"] and r["tuned_total_tic"] <= r["total_tic"]
    assert 0 < r["tuned_ratio"] < 1 and r["tuned_ratio"] > r["improvement_factor"]


def test_provenance_labels() -> None:
    r = evaluate()
    provenance = {n.key: n.provenance for n in r.numbers}
    assert provenance["improvement_factor"] == "paper, our c_eps"
    assert provenance["delay_gmc"] == provenance["den_tic"] == "ours"  # explicit constants, c_eps
    assert provenance["eps_prescription"] == "paper, unit constants"
    assert provenance["variance"] == "paper"  # Lemma 1 x Proposition 1's printed 8
    assert {
        n.provenance
        for n in evaluate(ExplorerSettings(constant="ours")).numbers
        if n.key == "variance"
    } == {"ours"}
    table = numbers_markdown(r)
    assert table.count("\n") == len(r.numbers) + 1 and "| ours |" in table


def test_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"ExplorerSettings\.eps"):
        ExplorerSettings(eps=0.0)
    with pytest.raises(ValueError, match=r"ExplorerSettings\.constant"):
        ExplorerSettings(constant="8")
    with pytest.raises(ValueError, match=r"ExplorerSettings\.N"):
        ExplorerSettings(N=1.0)


@pytest.mark.parametrize("eps", [0.01, 0.28, 1.0, 5.0])
def test_delay_ratio_and_factor_follow_the_formulas(eps: float) -> None:
    other = dict(T=512.0, vocab_size=1000.0, R=2.0, log_C=10.0, L=3.0, eta=1e-5, tau4=1e8, N=1e5)
    r = evaluate(ExplorerSettings(eps=eps, **other))
    ratio = float(c_eps(eps)) / math.log1p(2 * eps)
    assert r["delay_ratio"] == pytest.approx(ratio**2, rel=1e-12)
    assert r["improvement_factor"] == pytest.approx(ratio**0.4, rel=1e-12)
    assert r["tuned_delay_ratio"] == pytest.approx(ratio**0.4, rel=1e-8)


def test_widget_callbacks_headless() -> None:
    pytest.importorskip("ipywidgets")
    from theory.explorer_widgets import BoundsExplorer

    explorer = BoundsExplorer()
    controls, before = explorer.controls, explorer.result
    image = explorer.image.value
    assert image[:8] == b"\x89PNG\r\n\x1a\n" and "delay term" in explorer.numbers.value

    controls["eps"].value = 0.05  # the delay-term ratio moves as (c_eps/log(1+2eps))^2
    r = explorer.result
    assert explorer.settings.eps == 0.05 and explorer.image.value != image
    ratio = float(c_eps(0.05)) / math.log1p(0.1)
    assert r["delay_ratio"] == pytest.approx(ratio**2, rel=1e-12)
    assert r["improvement_factor"] == pytest.approx(ratio**0.4, rel=1e-12)
    assert r["tuned_delay_ratio"] == pytest.approx(ratio**0.4, rel=1e-8)
    assert r["optimisation"] == pytest.approx(before["optimisation"], rel=1e-14)

    eta = explorer.settings.eta  # eta x 2: optimisation / 2, variance x 2, delay x 16
    controls["eta"].value = 2 * eta
    s = explorer.result
    assert s["optimisation"] == pytest.approx(r["optimisation"] / 2, rel=1e-12)
    assert s["variance"] == pytest.approx(2 * r["variance"], rel=1e-12)
    assert s["delay_gmc"] == pytest.approx(16 * r["delay_gmc"], rel=1e-12)
    assert s["delay_ratio"] == pytest.approx(r["delay_ratio"], rel=1e-12)

    controls["tau4"].value = 16.0 * 2**7  # eps* ~ tau4^(1/7) N^(-3/14): tau4 x 128 -> eps* x 2
    t = explorer.result
    assert t["eps_star_closed"] == pytest.approx(2 * s["eps_star_closed"], rel=1e-12)
    assert t["eps_prescription"] == pytest.approx(2 * s["eps_prescription"], rel=1e-12)
    assert t["delay_gmc"] == pytest.approx(128 * s["delay_gmc"], rel=1e-12)

    controls["G"].value = 16.0  # Corollary 2: delay ~ (1+delta)^2 / G^2
    controls["delta"].value = 1.0
    u = explorer.result
    assert u["delay_cor2"] == pytest.approx(t["delay_cor2"] * (2.0 / 1.5) ** 2 / 4, rel=1e-12)
    assert u["delay_gmc"] == pytest.approx(t["delay_gmc"], rel=1e-14)  # Theorem 1 has no G

    controls["constant"].value = "ours"  # Proposition 1's 2 instead of 8
    v = explorer.result
    assert v["variance"] == pytest.approx(u["variance"] / 4, rel=1e-12)
    assert v["delay_tic"] == pytest.approx(u["delay_tic"] / 4, rel=1e-12)
    assert v["delay_ratio"] == pytest.approx(u["delay_ratio"], rel=1e-12)

    explorer.set(eps=-1.0)  # shown, not raised; the settings stay
    assert "ExplorerSettings.eps" in explorer.status.value and explorer.settings.eps == 0.05


def test_eps_star_scaling_of_the_numeric_minimiser() -> None:
    """Corollary 1: the numeric eps* of the printed tuned bound tends to tau4^(1/7) N^(-3/14)."""
    base = evaluate(ExplorerSettings(N=1e12, tau4=10.0))
    up_tau = evaluate(ExplorerSettings(N=1e12, tau4=10.0 * 2**7))
    up_n = evaluate(ExplorerSettings(N=1e12 * 2 ** (14 / 3), tau4=10.0))
    assert up_tau["eps_star_gmc"] / base["eps_star_gmc"] == pytest.approx(2.0, rel=0.02)
    assert base["eps_star_gmc"] / up_n["eps_star_gmc"] == pytest.approx(2.0, rel=0.02)
    assert base["eps_star_gmc"] / base["eps_star_closed"] == pytest.approx(1.0, rel=0.02)


def test_delay_tolerance() -> None:
    n = 1e8
    inside = evaluate(ExplorerSettings(N=n, tau4=n**1.5 / 2))
    outside = evaluate(ExplorerSettings(N=n, tau4=n**2.5))
    assert inside["tolerated"] == 1.0 and inside["rate_exponent"] == -0.5
    assert outside["tolerated"] == 0.0
    assert outside["rate_exponent"] == pytest.approx(-(4 - 2.5) / 5)


def test_stored_terms_factorise_exactly() -> None:
    """Each term is a product of one factor per input: the page's product equals theorem_terms."""
    tables = factorise()
    grids = {s.name: [float(v) for v in s.grid()] for s in SLIDERS}
    grids["constant"] = list(CONSTANT_CHOICES)
    rng = random.Random(0)
    for _ in range(40):
        pick = {k: rng.randrange(len(v)) for k, v in grids.items()}
        settings = ExplorerSettings(**{k: grids[k][i] for k, i in pick.items()})
        for term in TERMS:
            stored = tables[term]
            product = stored["ref"] * math.prod(
                f[pick[name]] for name, f in stored["factors"].items() if f is not None
            )
            assert product == pytest.approx(term_value(settings, term), rel=2e-7), term
    assert tables["optimisation"]["factors"]["eps"] is None  # no spurious dependence
    assert tables["delay_cor2"]["factors"]["G"] is not None
    assert tables["delay_gmc"]["factors"]["G"] is None


def _page_parts(text: str) -> tuple[dict, str]:
    data = re.search(
        r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S
    )
    model = re.search(r'<script id="explorer-model">(.*?)</script>', text, re.S)
    assert data and model
    return json.loads(data.group(1).replace("<\\/", "</")), model.group(1)


def test_committed_page_is_built_from_the_current_sources() -> None:
    assert PAGE.exists(), "docs/assets/bounds_explorer.html is missing: run `make explorer`"
    assert recorded_digest(PAGE) == sources_digest(), (
        "the explorer page was built from other theory sources: run `make explorer`"
    )
    assert "https://" not in PAGE.read_text(encoding="utf-8").split("<script", 1)[1]  # no CDN


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_page_script_shows_the_numbers_of_theory() -> None:
    """The committed page's script (run in node) against theory.explorer.evaluate."""
    data, model = _page_parts(PAGE.read_text(encoding="utf-8"))
    grids = {s["name"]: s["values"] for s in data["sliders"]}
    rng = random.Random(1)
    states = [
        {
            "idx": {k: rng.randrange(len(v)) for k, v in grids.items()},
            "constant": rng.randrange(2),
            "tight": rng.randrange(2),
        }
        for _ in range(12)
    ]
    states.append(
        {"idx": {s["name"]: s["default"] for s in data["sliders"]}, "constant": 0, "tight": 0}
    )
    script = (
        model
        + "\nconst input = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        + "\nconsole.log(JSON.stringify(input.states.map((s) => numbersAt(input.data, s))));"
        + "\ncurvesAt(input.data, input.states[0]);"
    )
    done = subprocess.run(
        ["node", "-e", script],
        input=json.dumps({"data": data, "states": states}),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown = json.loads(done.stdout)
    ours = {s.name: [float(v) for v in s.grid()] for s in SLIDERS}
    for state, numbers in zip(states, shown, strict=True):
        settings = ExplorerSettings(
            **{k: ours[k][i] for k, i in state["idx"].items()},
            constant=CONSTANT_CHOICES[state["constant"]],
            tight=bool(state["tight"]),
        )
        for key, value in evaluate(settings).as_dict().items():
            # Brent's best eta (theory) vs Newton's (page): agree to ~1e-7
            rel = 1e-6 if key.startswith("eta_") else 3e-7
            assert numbers[key] == pytest.approx(value, rel=rel, abs=1e-300), key
    assert np.isclose(shown[-1]["improvement_factor"], IMPROVEMENT, rtol=1e-7)


@pytest.mark.slow  # ~5 s of Brent searches (eps* on the N x tau4 grid); the digest test is fast
def test_cli_regenerates_the_committed_page(tmp_path: Path) -> None:
    from theory.cli import main

    out = tmp_path / "explorer.html"
    assert main(["--explorer", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8"), (
        "regenerating the explorer page changed it: run `make explorer` and commit the page"
    )
