"""Shared plot style: one fixed colour and label per method, used by every figure.

Colours are the Okabe-Ito palette (colour-blind safe), fixed so a method looks the same in every
figure of the toy and LLM tracks.
"""

from __future__ import annotations

METHOD_COLORS: dict[str, str] = {
    "is": "#000000",
    "grpo": "#999999",
    "tic": "#E69F00",
    "gmc": "#0072B2",
    "vcpo": "#009E73",
    "gac": "#CC79A7",
    "a3po": "#D55E00",
}

METHOD_LABELS: dict[str, str] = {
    "is": "IS",
    "grpo": "GRPO",
    "tic": "TIC-GRPO",
    "gmc": "GMC-GRPO",
    "vcpo": "VCPO",
    "gac": "GAC",
    "a3po": "A-3PO",
}

METHOD_ORDER: tuple[str, ...] = ("is", "grpo", "tic", "gmc", "vcpo", "gac", "a3po")


def method_color(method: str) -> str:
    """The fixed colour of `method` (a neutral grey-blue for unknown names)."""
    return METHOD_COLORS.get(method, "#56B4E9")


def method_label(method: str) -> str:
    """The display name of `method`."""
    return METHOD_LABELS.get(method, method)


def use_agg() -> None:
    """Select the non-interactive Agg backend (call before importing pyplot), unless the
    environment chose a backend: `MPLBACKEND` is set (Jupyter kernels set it to their inline
    backend, so figures drawn from a notebook are shown)."""
    import os

    if os.environ.get("MPLBACKEND"):
        return
    import matplotlib

    matplotlib.use("Agg")
