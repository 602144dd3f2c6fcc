"""The report section of one toy training experiment: its results table, verdicts and figures.

`experiment_markdown(config, summary, prefix)` turns an experiment's `summary.json` (the numbers
of `toy_mdps.train.analysis`) into Markdown with `$...$` formulas (`pipeline.report`'s guide);
it computes nothing. Used by `gmc-grpo reproduce`'s toy-training and bounds stages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toy_mdps.train.analysis import (
    CONVERGENCE_LATEX,
    PAPER_N_EXPONENT,
    PAPER_TAU4_EXPONENT,
    fmt,
)
from toy_mdps.train.config import ExperimentConfig


def experiment_markdown(config: ExperimentConfig, summary: dict[str, Any], prefix: str) -> str:
    """The report section of one experiment (tables, verdicts, figure links under `prefix`)."""
    lines = [f"### {config.name} ({config.kind})", ""]
    if config.description:
        lines += [config.description, ""]
    rows = summary["results"]
    seeds = rows[0]["num_seeds"] if rows else 0
    lines += [
        f"{len(rows)} runs, {seeds} seeds each; mean [95% t-interval over seeds].",
        "",
        f"| point | final $J$ | {CONVERGENCE_LATEX} | mean lag |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        final = {
            k: r[f"final_objective{s}"] for k, s in (("mean", ""), ("lo", "_lo"), ("hi", "_hi"))
        }
        conv = {
            k: r[f"convergence_metric{s}"] for k, s in (("mean", ""), ("lo", "_lo"), ("hi", "_hi"))
        }
        lines.append(f"| `{r['point']}` | {fmt(final)} | {fmt(conv, 5)} | {r['lag_mean']:.1f} |")
    if summary.get("orderings"):
        lines += ["", "| claim | verdict | detail |", "| --- | --- | --- |"]
        for o in summary["orderings"]:
            claim = o.get("claim_markdown", o["claim"])
            lines.append(f"| {claim} | {o['verdict']} | {o['detail']} |")
    gaps = summary.get("gap")
    if gaps:
        lines += [
            "",
            "GMC over TIC, paired over seeds (ratio of the convergence metric, 95% interval), "
            "beside the bounds' ratio at the same $\\eta$ (Theorem 1 over Theorem 2, each run's "
            "own constants), the removed-mass bounds' ratio and, for tracked runs, the share of "
            "the bias term "
            "$-\\frac{T}{N}\\sum_n\\langle\\nabla J(\\theta_n), b_n\\rangle$ in each metric "
            "(first-order split, `evidence.measured`):",
            "",
            "| $D$ | $\\epsilon$ | $\\eta$ | GMC / TIC | bounds' ratio, same $\\eta$ "
            "| $c_\\epsilon / \\log(1+2\\epsilon)$ | bias share TIC | bias share GMC "
            "| GMC bias term / TIC's |",
            "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for g in gaps:
            share = g.get("bias_share", {})
            lines.append(
                f"| {g['delay']} | {g['eps']:g} | {g['lr']:g} | {fmt(g['ratio'], 3)} "
                f"| {_num(g.get('bound_ratio_same_eta'))} | {g['theory_denominator_ratio']:.4f} "
                f"| {_pct(share.get('tic'))} | {_pct(share.get('gmc'))} "
                f"| {_num(g.get('bias_term_ratio'))} |"
            )
    fit = summary.get("eps_star")
    if fit:
        lines += [
            "",
            r"| $N$ | $D$ | $\bar\tau_4$ | $\epsilon^\star$ (min. convergence metric) "
            r"| $\epsilon^\star$ (max. final $J$) |",
        ]
        lines += ["| --- | --- | --- | --- | --- |"]
        for t in fit["table"]:
            lines.append(
                f"| {t['total_steps']} | {t['delay']} | {t['tau4']:.3g} "
                f"| {_star_text(t['by_convergence'])} | {_star_text(t['by_final_objective'])} |"
            )
        for name, part in (
            ("minimum convergence metric (the paper's criterion)", fit),
            ("maximum final J", fit["objective_fit"]),
        ):
            lines += ["", _fit_text(name, part, len(fit["table"]))]
    for fig in summary.get("figures", []):
        if fig.endswith(".png"):
            lines += ["", f"![{Path(fig).stem}]({prefix}/{fig})"]
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def _star_text(best: dict[str, Any]) -> str:
    star = f"{best['eps_star']:.3g}"
    if best["censored"] == "above":
        text = rf"$\ge {star}$ (largest $\epsilon$ best)"
    elif best["censored"] == "below":
        text = rf"$\le {star}$ (smallest $\epsilon$ best)"
    else:
        text = star
    test = best.get("interior_test")
    if test:
        diffs = ", ".join(
            rf"$\epsilon = {e:g}$: {fmt(d, 4)}"
            for e, d in zip(test["neighbours"], test["differences"], strict=True)
        )
        text += f"; interior: {test['verdict']} (neighbour - best: {diffs})"
    return text


def _fit_text(name: str, part: dict[str, Any], cells: int) -> str:
    if "tau4_exponent" not in part:
        return (
            rf"$\epsilon^\star$ by {name}: no exponent fit, {part['censored_cells']} of {cells} "
            r"cells have their optimum at an edge of the $\epsilon$ grid (censored), too few "
            "interior optima (at least 4 needed; paper: $a = 1/7$, $b = -3/14$)."
        )
    return (
        rf"$\epsilon^\star$ by {name}: $\log\epsilon^\star = c + a\log\bar\tau_4 + b\log N$ "
        f"gives $a = {part['tau4_exponent']:.3f}$ (se {part['tau4_exponent_se']:.3f}; paper "
        f"$1/7 = {PAPER_TAU4_EXPONENT:.3f}$), $b = {part['n_exponent']:.3f}$ (se "
        f"{part['n_exponent_se']:.3f}; paper $-3/14 = {PAPER_N_EXPONENT:.3f}$), over the "
        f"{part['num_cells']} cells with an interior optimum ({part['censored_cells']} censored "
        "cells left out)."
    )
