"""Shared plot style: one fixed colour and label per method, used by every figure.

Colours are the Okabe-Ito palette (colour-blind safe), fixed so a method looks the same in every
figure of the toy and LLM tracks. Labels and the drawing order come from the method registry
(`gmc_grpo.methods`), so a user's registered method is drawn like the paper's.
"""

from __future__ import annotations

from gmc_grpo.methods import get_method, method_names

# Colours of the paper's methods; a method registered by a user gets the palette's sky blue.
METHOD_COLORS: dict[str, str] = {
    "is": "#000000",
    "grpo": "#999999",
    "tic": "#E69F00",
    "gmc": "#0072B2",
    "vcpo": "#009E73",
    "gac": "#CC79A7",
    "a3po": "#D55E00",
}
OTHER_COLOR = "#56B4E9"


def method_color(method: str) -> str:
    """The fixed colour of `method` (a neutral sky blue for methods outside the paper)."""
    return METHOD_COLORS.get(method, OTHER_COLOR)


def method_label(method: str) -> str:
    """The display name of `method` (its registry label; the name itself when unknown)."""
    try:
        return get_method(method).label
    except ValueError:
        return method


def method_order() -> tuple[str, ...]:
    """Every registered method in the order the figures draw them (the registry's order)."""
    return method_names()


def method_rank(method: str) -> int:
    """Position of `method` in `method_order()`; unknown names come last."""
    order = method_order()
    return order.index(method) if method in order else len(order)


def use_agg() -> None:
    """Select the non-interactive Agg backend (call before importing pyplot), unless the
    environment chose a backend: `MPLBACKEND` is set (Jupyter kernels set it to their inline
    backend, so figures drawn from a notebook are shown)."""
    import os

    if os.environ.get("MPLBACKEND"):
        return
    import matplotlib

    matplotlib.use("Agg")
