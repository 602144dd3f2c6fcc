"""Shared plot style: one fixed colour and label per method, used by every figure.

Colours are the Okabe-Ito palette (colour-blind safe), fixed so a method looks the same in every
figure of the toy and LLM tracks. Labels and the drawing order come from the method registry
(`gmc_grpo.methods`), so a user's registered method is drawn like the paper's.
"""

from __future__ import annotations

from gmc_grpo.methods import MethodSpec, get_method, method_names

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


def method_spec(method: str | None) -> MethodSpec | None:
    """The registry's spec of `method` (None when it is not registered): what a figure asks
    about a method (its label, its removed-mass bound, whether `eps` caps it)."""
    if method is None:
        return None
    try:
        return get_method(method)
    except ValueError:
        return None


def method_label(method: str) -> str:
    """The display name of `method` (its registry label; the name itself when unknown)."""
    spec = method_spec(method)
    return method if spec is None else spec.label


def removed_mass_kind(method: str | None) -> str | None:
    """Which removed-mass bound of §4.2 (step 2) `method`'s spec claims: "tic" (`KL / c_eps`),
    "gmc" (`KL / log(1+2 eps)`), or None (no bound, or not registered)."""
    spec = method_spec(method)
    return None if spec is None else spec.removed_mass_bound


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
