"""The bounds explorer as one HTML file that needs no kernel and no network (`gmc-grpo theory
--explorer OUT.html`; `make explorer` writes `docs/assets/bounds_explorer.html`).

What the page holds: the values of `theory.bounds.theorem_terms` on the grid of every slider
(`theory.explorer.SLIDERS`), Corollary 1's `eps*` and the delay tolerance on the `N x tau4` grid,
the denominators and improvement factors on the `eps` grid (all from `theory.explorer.evaluate`'s
functions), and a table of the tuned step size. What its script computes from them:

* each term of Theorems 1-2 and Corollary 2 is a product of one function per input (every
  input enters as a power or a factor such as `log|A| (2 log|A| + 1)`), so the page stores, per
  term and input, the ratio of the term with that input moved along its grid to the term at the
  reference setting, and multiplies them (`factorise` here; a test checks the product equals
  `theorem_terms` at random grid points);
* the best step size of `a/eta + b eta + c eta^4` is `sqrt(a/b) u*(z)` with `z = c a^(3/2) /
  b^(5/2)`: `u*` is tabulated by `theory.numerics.min_over_eta` and refined by Newton's method on
  the derivative in `log eta`; the tuned delay term `min(a/eta + c eta^4)` is `m0 a^(4/5) c^(1/5)`
  with `m0` from `theory.explorer.delay_balanced_value`.

A test runs the page's script in node (when installed) at random grid points and compares every
number with `theory.explorer.evaluate`; another regenerates the page and compares it with the
committed file, whose first line records a digest of the theory sources it was built from.
Plain SVG, no plotting library (nothing to download or inline): about 200 kB.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from gmc_grpo.defaults import PAPER_EPS
from theory import numerics
from theory.bounds import BoundTerms, theorem_terms
from theory.constants import c_eps, gmc_denominator, improvement_factor, tight_gmc_denominator
from theory.curves import corollary1_closed_form, rate_exponent
from theory.explorer import (
    CONSTANT_CHOICES,
    SLIDERS,
    TOLERANCE_EXPONENT,
    ExplorerSettings,
    delay_balanced_value,
    evaluate,
)

TEMPLATE = "explorer_page.html"
# theory modules whose code decides the page's numbers or layout: their digest is in the page
SOURCES = (
    "explorer_page.py",
    TEMPLATE,
    "explorer.py",
    "bounds.py",
    "constants.py",
    "numerics.py",
    "curves.py",
)
DIGITS = 8  # significant digits of the embedded numbers (products of 13 factors stay < 1e-6 off)
# Terms of Theorems 1-2 / Corollary 2 stored per input: (method, which term, extra arguments).
TERMS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "optimisation": ("gmc", "optimisation", {}),
    "variance": ("gmc", "variance", {}),
    "delay_gmc": ("gmc", "delay", {"tight": False}),
    "delay_gmc_tight": ("gmc", "delay", {"tight": True}),
    "delay_tic": ("tic", "delay", {}),
    "delay_cor2": ("gmc", "delay", {"group_size": True}),
}
PRESETS: dict[str, dict[str, float]] = {
    "toy setting (defaults)": {},
    "Qwen3-1.7B, fixed delay D = 512 (App. B.1; L, R, log C illustrative)": {
        "eps": PAPER_EPS,
        "N": 800.0,
        "tau4": 512.0**4,
        "eta": 1e-6,
        "G": 8.0,
        "T": 4096.0,
        "vocab_size": 151936.0,
    },
}
U_STAR_DECADES = (-40.0, 40.0, 0.1)  # log10 z range and step of the tuned-step-size table


def _round(value: float) -> float | None:
    """`value` to `DIGITS` significant digits (JSON keeps the shortest repr); None if not finite."""
    value = float(value)
    return float(f"{value:.{DIGITS}g}") if math.isfinite(value) else None


def _rounded(values: Any) -> list[float | None]:
    return [_round(v) for v in np.asarray(values, dtype=np.float64).ravel()]


def _reference() -> ExplorerSettings:
    """The page's reference setting: the defaults (every one a value of its slider's grid)."""
    return ExplorerSettings()


def term_value(settings: ExplorerSettings, term: str) -> float:
    """One stored term of Theorem 1/2 or Corollary 2 at `settings` (`TERMS`)."""
    method, part, extra = TERMS[term]
    problem = settings.problem()
    if "tight" in extra:
        problem["tight"] = extra["tight"]
    kwargs = {"group_size": settings.G, "delta": settings.delta} if "group_size" in extra else {}
    terms: BoundTerms = theorem_terms(method, eta=settings.eta, **problem, **kwargs)
    return float(getattr(terms, part))


def _inputs() -> dict[str, list[Any]]:
    """Every input of the stored terms and its values: the sliders' grids and the constant."""
    grids: dict[str, list[Any]] = {s.name: [float(v) for v in s.grid()] for s in SLIDERS}
    grids["constant"] = list(CONSTANT_CHOICES)
    return grids


def factorise() -> dict[str, dict[str, Any]]:
    """Per term: its value at the reference setting and, per input, the ratios along the grid.

    `{term: {"ref": value, "factors": {input: [ratio per grid value] or None}}}`; None when the
    term does not depend on the input. The page multiplies `ref` by one ratio per input.
    """
    ref = _reference()
    out: dict[str, dict[str, Any]] = {}
    for term in TERMS:
        base = term_value(ref, term)
        factors: dict[str, list[float | None] | None] = {}
        for name, values in _inputs().items():
            ratios = [term_value(ref.replace(**{name: v}), term) / base for v in values]
            factors[name] = None if all(abs(r - 1.0) < 1e-14 for r in ratios) else _rounded(ratios)
        out[term] = {"ref": _round(base), "factors": factors}
    return out


def _step_size_table() -> dict[str, Any]:
    """`log10 u*(z)` of `min_u 1/u + u + z u^4` on a log grid of `z` (`theory.numerics`)."""
    lo, hi, step = U_STAR_DECADES
    log_z = np.round(np.arange(lo, hi + step / 2, step), 10)
    log_u = [math.log10(numerics.min_over_eta(1.0, 1.0, 10.0**z)[0]) for z in log_z]
    return {"log10_z0": lo, "step": step, "log10_u": _rounded(log_u)}


def _grid_tables() -> dict[str, Any]:
    """Tables over `eps` and over `N x tau4` (flattened row-major, `N` first)."""
    eps = np.array([s.grid() for s in SLIDERS if s.name == "eps"][0])
    n = np.array([s.grid() for s in SLIDERS if s.name == "N"][0])
    tau = np.array([s.grid() for s in SLIDERS if s.name == "tau4"][0])
    nn, tt = np.meshgrid(n, tau, indexing="ij")
    p = np.log(tt) / np.log(nn)
    den_tight = np.asarray(tight_gmc_denominator(eps))
    den_paper = np.asarray(gmc_denominator(eps))
    den_tic = np.asarray(c_eps(eps))
    star = {
        m: [[numerics.corollary1_eps_star(float(a), float(b), m) for b in tau] for a in n]
        for m in ("gmc", "tic")
    }
    return {
        "eps": {
            "den_gmc": [_rounded(den_paper), _rounded(den_tight)],
            "den_tic": _rounded(den_tic),
            "delay_ratio_formula": [
                _rounded((den_tic / den_paper) ** 2),
                _rounded((den_tic / den_tight) ** 2),
            ],
            "improvement_factor": [
                _rounded(improvement_factor(eps)),
                _rounded(improvement_factor(eps, tight=True)),
            ],
        },
        "N": {"tolerance": _rounded(n**TOLERANCE_EXPONENT)},
        "N_tau4": {
            "eps_star_closed": _rounded(corollary1_closed_form(nn, tt)),
            "eps_star_gmc": _rounded(star["gmc"]),
            "eps_star_tic": _rounded(star["tic"]),
            "eps_prescription": _rounded(np.minimum(1.0, tt ** (1 / 7) * nn ** (-3 / 14))),
            "delay_exponent": _rounded(p),
            "rate_exponent": _rounded(rate_exponent(p)),
            "tolerated": _rounded(tt <= nn**TOLERANCE_EXPONENT),
        },
    }


def _rows() -> dict[str, list[dict[str, str]]]:
    """The numbers table's rows (key, label, provenance, group) per `constant|tight` variant."""
    out = {}
    for constant in CONSTANT_CHOICES:
        for tight in (False, True):
            result = evaluate(_reference().replace(constant=constant, tight=tight))
            out[f"{constant}|{int(tight)}"] = [
                {"key": n.key, "label": n.label, "provenance": n.provenance, "group": n.group}
                for n in result.numbers
            ]
    return out


def _index(values: list[Any], value: Any) -> int:
    if isinstance(value, str):
        return values.index(value)
    return int(np.argmin([abs(math.log(v / value)) if v > 0 else abs(v - value) for v in values]))


def explorer_tables() -> dict[str, Any]:
    """Everything the page embeds (module docstring)."""
    inputs = _inputs()
    ref = _reference()
    sliders = [
        {
            "name": s.name,
            "label": s.label,
            "values": _rounded(inputs[s.name]),
            "default": _index(inputs[s.name], getattr(ref, s.name)),
        }
        for s in SLIDERS
    ]
    presets = {
        name: {
            k: _index(inputs[k], getattr(ref.replace(**values), k))
            for k in inputs
            if k != "constant"
        }
        for name, values in PRESETS.items()
    }
    p = np.linspace(0.0, 4.5, 91)
    return {
        "sliders": sliders,
        "constant": list(CONSTANT_CHOICES),
        "terms": factorise(),
        "step_size": _step_size_table(),
        "delay_balanced_m0": _round(delay_balanced_value(BoundTerms(1.0, 1.0, 0.0, 1.0))[1]),
        "tables": _grid_tables(),
        "rate_curve": {"p": _rounded(p), "rate_exponent": _rounded(rate_exponent(p))},
        "rows": _rows(),
        "presets": presets,
    }


def sources_digest() -> str:
    """sha256 over the theory sources the page is built from (`SOURCES`), in order."""
    digest = hashlib.sha256()
    root = resources.files("theory")
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + root.joinpath(name).read_bytes() + b"\0")
    return digest.hexdigest()


def build_page(tables: dict[str, Any] | None = None) -> str:
    """The page's HTML text (template + tables + digest)."""
    tables = explorer_tables() if tables is None else tables
    template = resources.files("theory").joinpath(TEMPLATE).read_text(encoding="utf-8")
    data = json.dumps(tables, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    digest = sources_digest()
    return (
        f"<!-- gmc-grpo bounds explorer; theory sources sha256 {digest} -->\n"
        + template.replace("__EXPLORER_DATA__", data).replace("__DIGEST__", html.escape(digest))
    )


def recorded_digest(path: Path) -> str | None:
    """The sources digest recorded in a written page's first line (None if absent)."""
    first = Path(path).read_text(encoding="utf-8").split("\n", 1)[0]
    marker = "theory sources sha256 "
    return first.split(marker, 1)[1].split()[0] if marker in first else None


def write_explorer_page(path: Path) -> Path:
    """Write the page to `path` (folders created, atomic rename); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(build_page(), encoding="utf-8")
    tmp.replace(path)
    return path
