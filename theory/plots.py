"""Plots of the theory curves. Each `plot_*` takes the arrays of `theory.curves` and an optional
`ax`, and returns the figure; `write_plots(out_dir)` computes everything and writes PNG and PDF.

Without `ax` a figure is built with matplotlib's object API (no pyplot, so no display is needed
and nothing global changes); in a notebook pass `ax` from `plt.subplots()` to show it inline.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from theory import curves as C


def _axes(ax: Axes | None) -> tuple[Figure, Axes]:
    """The given axes and their figure, or a new pyplot-free figure (headless, no global state)."""
    if ax is None:
        fig = Figure(figsize=(5.5, 4.0))
        return fig, fig.add_subplot()
    return ax.get_figure(), ax


def plot_denominators(data: C.Curves, ax: Axes | None = None) -> Figure:
    """`c_eps`, `log(1+2eps)` and the tight GMC constant vs `eps` (log-log)."""
    fig, ax = _axes(ax)
    e = data["eps"]
    ax.loglog(e, data["gmc_denominator"], label=r"$\log(1+2\epsilon)$ (Thm 1, GMC)")
    ax.loglog(e, data["tight_gmc"], "--", label=r"tight GMC $\kappa_\epsilon$ (Lambert W)")
    ax.loglog(e, data["c_eps"], label=r"$c_\epsilon$ (Thm 2, TIC) = tight TIC")
    ax.set_xlabel(r"$\epsilon$")
    ax.set_ylabel("denominator of removed mass <= KL / den")
    ax.set_title("KL denominators")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def plot_penalty_ratio(data: C.Curves, ax: Axes | None = None) -> Figure:
    """Penalty ratio `K_TIC/K_GMC` and the improvement factor `(c/log(1+2eps))^(2/5)` vs `eps`."""
    fig, ax = _axes(ax)
    e = data["eps"]
    ax.loglog(
        e, data["penalty_ratio"], label=r"$K_{TIC}/K_{GMC} = \log^2(1+2\epsilon)/c_\epsilon^2$"
    )
    ax.loglog(e, data["improvement_factor"], label=r"$(c_\epsilon/\log(1+2\epsilon))^{2/5}$")
    ax.loglog(
        e, data["improvement_factor_tight"], "--", label="improvement factor, tight constants"
    )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel(r"$\epsilon$")
    ax.set_title("Delay penalty: TIC vs GMC")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def plot_eps_star(data: C.Curves, ax: Axes | None = None) -> Figure:
    """`eps*` vs `N` for several `tau4`: Corollary 1 (tuned bound) and the joint minimiser."""
    fig, ax = _axes(ax)
    n = data["N"]
    for i, tau in enumerate(data["tau4"]):
        color = f"C{i}"
        ax.loglog(n, data["cor1_closed"][i], color=color, label=rf"Cor. 1, $\tau_4$={tau:g}")
        ax.loglog(n, data["cor1_numeric"][i], "o", color=color, ms=3)
        ax.loglog(
            n,
            data["joint_numeric"][i],
            ":",
            color=color,
            label=rf"joint $(\eta,\epsilon)$, $\tau_4$={tau:g}",
        )
    ax.set_xlabel("N")
    ax.set_ylabel(r"$\epsilon^*$")
    ax.set_title(r"$\epsilon^* \propto \tau_4^{1/7}N^{-3/14}$ (dots: numeric)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def plot_delay_tolerance(data: C.Curves, ax: Axes | None = None) -> Figure:
    """Rate exponent vs `p` for `tau4 = N^p`, with the numeric slopes."""
    fig, ax = _axes(ax)
    ax.plot(data["p"], data["exponent"], label="derived exponent")
    ax.plot(data["p_numeric"], data["slope_numeric"], "o", label="numeric slope (joint min)")
    ax.axvspan(0, 1.5, color="C2", alpha=0.15, label=r"rate $N^{-1/2}$ kept")
    ax.axvspan(1.5, 4, color="C1", alpha=0.15, label=r"$N^{-(4-p)/5}$")
    ax.axvspan(4, data["p"].max(), color="C3", alpha=0.15, label="no guarantee")
    ax.set_xlabel(r"$p$ in $\bar\tau_4 = N^p$")
    ax.set_ylabel("exponent of N in the bound")
    ax.set_title("Delay tolerance (Theorem 1)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    return fig


def plot_group_size(data: C.Curves, ax: Axes | None = None) -> Figure:
    """Corollary 2's delay term vs the group size `G` with the `G^(-2/5)` reference."""
    fig, ax = _axes(ax)
    ax.loglog(data["G"], data["delay_term"], "o", label="numeric (min over eta)")
    ax.loglog(data["G"], data["reference"], "--", label=r"$\propto G^{-2/5}$")
    ax.set_xlabel("G")
    ax.set_ylabel("tuned delay term")
    ax.set_title("Corollary 2: group size")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return fig


PLOTS = {
    "denominators": (C.denominator_curves, plot_denominators),
    "penalty_ratio": (C.penalty_curves, plot_penalty_ratio),
    "eps_star": (C.eps_star_curves, plot_eps_star),
    "delay_tolerance": (C.delay_tolerance_curves, plot_delay_tolerance),
    "group_size": (C.group_size_curves, plot_group_size),
}


def write_plots(out_dir: str | Path) -> list[Path]:
    """Compute every curve and write `<name>.png` and `<name>.pdf` to `out_dir`; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, (compute, plot) in PLOTS.items():
        fig = plot(compute())
        fig.tight_layout()
        for ext in ("png", "pdf"):
            path = out / f"{name}.{ext}"
            fig.savefig(path, dpi=120)
            written.append(path)
    return written
