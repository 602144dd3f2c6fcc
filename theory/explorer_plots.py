"""The bounds explorer's figure: four panels drawn from `theory.explorer.explorer_curves` (plot only).

Pyplot-free (`matplotlib.figure.Figure`), so it draws headless and changes no global state; the
notebook explorer (`theory.explorer_widgets`) renders it to PNG on every slider change.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

GMC, TIC, COR2, SHARED, RATIO = "C0", "C1", "C2", "0.35", "C4"


def _decade(value: float, _position: int) -> str:
    """`1e-3` for a power of ten, else `%g` (plain text: mathtext labels triple the draw time)."""
    power = np.log10(value) if value > 0 else np.nan
    return (
        f"1e{power:.0f}"
        if np.isfinite(power) and abs(power - round(power)) < 1e-9
        else f"{value:g}"
    )


def _small(ax: Any, title: str, xlabel: str, ylabel: str, loc: str) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.minorticks_off()  # minor log ticks are most of the drawing time
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(FuncFormatter(_decade))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=6, loc=loc)  # a fixed place: "best" costs a second per redraw


def plot_explorer(curves: dict[str, Any], fig: Figure | None = None) -> Figure:
    """Terms vs `eta`, GMC/TIC ratios vs `eps`, Corollary 1's `eps*` vs `N`, the delay tolerance.

    `curves` is `theory.explorer.explorer_curves(settings)`; dots and lines mark the setting.
    """
    fig = Figure(figsize=(9.6, 6.4)) if fig is None else fig
    fig.clear()
    axes = fig.subplots(2, 2)
    result = curves["result"]
    s = result.settings

    ax, e = axes[0, 0], curves["eta"]
    ax.loglog(e["eta"], e["total_gmc"], color=GMC, label="bound, GMC (Thm 1)")
    ax.loglog(e["eta"], e["total_tic"], color=TIC, label="bound, TIC (Thm 2)")
    ax.loglog(e["eta"], e["optimisation"], ":", color=SHARED, label="optimisation a/eta")
    ax.loglog(e["eta"], e["variance"], "--", color=SHARED, label="variance b eta")
    ax.loglog(e["eta"], e["delay_gmc"], "--", color=GMC, label="delay, GMC")
    ax.loglog(e["eta"], e["delay_tic"], "--", color=TIC, label="delay, TIC")
    ax.loglog(e["eta"], e["delay_cor2"], ":", color=COR2, label="delay, Cor. 2 (G, delta)")
    ax.plot([s.eta], [result.gmc.total], "o", color=GMC)
    ax.plot([s.eta], [result.tic.total], "o", color=TIC, ms=4)
    ax.axvline(float(result.tuned_gmc.eta), color=GMC, lw=0.8, ls="--")
    ax.axvline(float(result.tuned_tic.eta), color=TIC, lw=0.8, ls="--")
    lowest = float(np.concatenate([e["total_gmc"], e["total_tic"]]).min())
    ax.set_ylim(lowest * 1e-6, lowest * 1e8)  # around the minimum: the delay terms can reach 1e30
    _small(
        ax, "Theorems 1-2: terms vs step size (dashed: best eta)", "eta", "bound", "upper center"
    )

    ax, r = axes[0, 1], curves["eps"]
    ax.loglog(r["eps"], r["delay_ratio"], "--", color=RATIO, label="delay term, equal eta")
    ax.loglog(r["eps"], r["total_ratio"], color=RATIO, label="bound, equal eta")
    ax.loglog(r["eps"], r["tuned_ratio"], color=GMC, label="bound, each at its best eta")
    ax.loglog(r["eps"], r["improvement_factor"], ":", color=COR2, label="(c_eps/log(1+2eps))^(2/5)")
    ax.axvline(s.eps, color="0.5", lw=0.8, ls="--")
    ax.plot([s.eps], [result["improvement_factor"]], "o", color=COR2)
    _small(ax, "GMC / TIC vs eps (line: chosen eps)", "eps", "ratio GMC / TIC", "lower right")

    ax, n = axes[1, 0], curves["N"]
    if s.tau4 > 0:
        ax.loglog(n["N"], n["eps_star_gmc"], color=GMC, label="eps*, GMC (printed shape)")
        ax.loglog(n["N"], n["eps_star_closed"], ":", color=GMC, label="closed form (ours)")
        ax.loglog(n["N"], n["eps_star_tic"], color=TIC, label="eps*, TIC (printed shape)")
        ax.plot([s.N], [result["eps_star_gmc"]], "o", color=GMC)
    ax.axvline(s.N, color="0.5", lw=0.8, ls="--")
    _small(ax, f"Corollary 1: eps* vs N at tau4 = {s.tau4:.3g}", "N", "eps*", "upper right")

    ax, p = axes[1, 1], curves["p"]
    ax.plot(p["p"], p["rate_exponent"], color=GMC, label="rate exponent (remark after Thm 1)")
    ax.axvline(1.5, color="0.5", lw=0.8, ls="--", label="tau4 = N^(3/2)")
    now = float(np.clip(result["delay_exponent"], 0.0, 4.5))
    ax.plot([now], [result["rate_exponent"]], "o", color=COR2 if result["tolerated"] else TIC)
    ax.set_ylim(-0.6, 0.05)
    _small(
        ax,
        "Delay tolerance: bound ~ N^exponent at tau4 = N^p",
        "p = log tau4 / log N",
        "exponent",
        "upper left",
    )
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.08, top=0.95, wspace=0.2, hspace=0.32)
    return fig
