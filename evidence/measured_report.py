"""Tables of the bounds beside the toy runs' measurements (`evidence.measured` computes them):
the Markdown section of the report (`bounds_markdown`), the plain text of
`gmc-grpo theory --runs` (`bounds_text`), the one-line summary, and the untracked runs of class
methods outside the theorems' setting (`outside_rows`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gmc_grpo.methods import get_method
from gmc_grpo.records import read_json
from evidence.measured import ROUNDING, TERM_LATEX, TERMS, RunBounds
from toy_mdps.train.run_records import find_runs, is_tracked_run, setting


def _g(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def _stat(stat: dict[str, float], digits: int = 3) -> str:
    return f"{_g(stat['mean'], digits)} [{_g(stat['lo'], digits)}, {_g(stat['hi'], digits)}]"


def summary_line(results: Sequence[RunBounds]) -> str:
    """One line: runs in the setting, the largest measured/bound, refutations."""
    inside = [r for r in results if r.in_setting]
    refs = sum(len(r.refutations) for r in results)
    if not inside:
        return f"{len(results)} tracked runs, none in the theorems' setting; {refs} refutations"
    ratios = [r.terms["total"]["paper"]["ratio"] for r in inside if "paper" in r.terms["total"]]
    worst = max(ratios) if ratios else math.nan
    apart = sorted({get_method(r.method).label for r in results if not r.in_setting})
    outside = f"{len(results) - len(inside)} tracked run{'s' if len(results) - len(inside) != 1 else ''} outside"
    return (
        f"{len(inside)} runs in the theorems' setting: measured/bound at most {worst:.2g} "
        f"(Theorems 1-2 with explicit constants); {outside}"
        + (f" ({', '.join(apart)})" if apart else "")
        + f"; {refs} refutations"
    )


def bounds_markdown(results: Sequence[RunBounds], outside: Sequence[dict[str, Any]] = ()) -> str:
    """Markdown (with `$...$` math): the run table, the per-term table, the per-step checks,
    refutations, and the runs outside the setting (`outside`: rows of `outside_rows`)."""
    inside = [r for r in results if r.in_setting and "paper" in r.terms.get("total", {})]
    lines = [
        r"Runs of TIC and GMC with plain SGD at a constant step size (the setting of Lemma 1 and "
        r"Theorems 1-2). Measured: $\frac{1}{N}\sum_n\Vert\nabla J(\theta_n)\Vert^2$, mean "
        r"[95% t-interval over seeds]. Bound: Theorem 1 (GMC) or 2 (TIC) with explicit "
        r"constants, at the run's $T, |\mathcal{A}|, R, \mathcal{C}, L, \eta, N, \epsilon$ and "
        r"realised $\bar\tau_4$; $\kappa = 8$ is Proposition 1's constant, $\kappa = 2$ ours. "
        r"Ratio = measured / bound (the fraction of the bound used).",
        "",
        "| run | $\\eta$ | $N$ | $\\bar\\tau_4$ | $\\log\\mathcal{C}$ | measured | bound "
        "($\\kappa=8$) | ratio | bound ($\\kappa=2$) | ratio | refutations |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in inside:
        t, c = r.terms["total"], r.constants
        lines.append(
            f"| {r.name} | {_g(c['eta'])} | {c['N']} | {_g(c['tau4'])} | {_g(c['log_C'])} "
            f"| {_stat(t['measured'])} | {_g(t['paper']['bound'])} | {_g(t['paper']['ratio'])} "
            f"| {_g(t['ours']['bound'])} | {_g(t['ours']['ratio'])} | {len(r.refutations)} |"
        )
    if inside:
        lines += [
            "",
            "Each term of the bound ($\\kappa = 8$) beside its measured counterpart (Lemma 1's "
            "right-hand side with the run's measured moments):",
            "",
            "| run | term | measured | bound | ratio |",
            "| --- | --- | --- | ---: | ---: |",
        ]
        for r in inside:
            for term in TERMS[1:]:
                e = r.terms[term]
                lines.append(
                    f"| {r.name} | {term}: {TERM_LATEX[term]} | {_stat(e['measured'])} "
                    f"| {_g(e['paper']['bound'])} | {_g(e['paper']['ratio'])} |"
                )
        held = sum(r.lemma1["holds"] and not r.lemma1.get("vacuous") for r in inside)
        vacuous = sum(bool(r.lemma1.get("vacuous")) for r in inside)
        lines += [
            "",
            f"Lemma 1 with measured moments, a consistency check (measured total below "
            f"$\\frac{{2T(J(\\theta_N)-J(\\theta_0))}}{{\\eta N}} + T L_J \\eta\\,\\overline{{\\Vert "
            f"g_n\\Vert^2}} + T^2\\overline{{\\Vert b_n\\Vert^2}}$, paired over seeds): holds in "
            f"{held} of {len(inside)} runs, vacuous (right-hand side at or above the ceiling) in "
            f"{vacuous}.",
        ]
    lines += [
        "",
        "Per-step checks (every tracked run): Monte Carlo measurements count as violations only "
        "when the lower end of their 95% interval is above the bound, and the largest ratio is "
        "that lower end over the bound; exact quantities are compared as they are.",
        "",
    ]
    lines += ["| check | evaluated | violations | largest ratio |", "| --- | ---: | ---: | ---: |"]
    merged: dict[str, dict[str, Any]] = {}
    for r in results:
        for name, entry in r.checks.items():
            m = merged.setdefault(name, {"evaluated": 0, "violations": 0, "max_ratio": 0.0})
            m["evaluated"] += entry["evaluated"]
            m["violations"] += entry["violations"]
            m["max_ratio"] = max(m["max_ratio"], entry["max_ratio"])
    for name, m in merged.items():
        lines.append(f"| {name} | {m['evaluated']} | {m['violations']} | {_g(m['max_ratio'])} |")
    refs = [ref for r in results for ref in r.refutations]
    lines += ["", f"Refutations (a bound below a measurement): {len(refs)}."]
    for ref in refs[:20]:
        lines.append(
            f"- {ref['run']}, {ref['check']}, step {ref['step']}, seed {ref['seed']}: measured "
            f"{_g(ref['measured'], 4)} > bound {_g(ref['bound'], 4)}"
        )
    if len(refs) > 20:
        lines.append(f"- ... and {len(refs) - 20} more (bounds.json)")
    apart = [r for r in results if not r.in_setting]
    if apart or outside:
        lines += [
            "",
            "Outside the theorems' setting (reported apart; their per-step checks are above):",
            "",
            "| run | measured $\\frac{1}{N}\\sum_n\\Vert\\nabla J\\Vert^2$ | why outside |",
            "| --- | --- | --- |",
        ]
        for r in apart:
            why = "; ".join(r.setting)
            mass = r.class_check.get("max_group_mass")
            if mass is not None:
                eps = r.class_check["class_eps"]
                inside = "in" if mass <= 1 + eps + ROUNDING else "outside"
                why += (
                    f"; {inside} the class: largest group mass {mass:.4g} vs 1 + eps = {1 + eps:g}"
                )
            lines.append(f"| {r.name} | {_stat(r.terms['total']['measured'])} | {why} |")
        for row in outside:
            lines.append(f"| {row['name']} | {_stat(row['measured'])} | {row['why']} |")
    return "\n".join(lines) + "\n"


def outside_rows(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Untracked toy runs of class methods outside the setting (e.g. Adam): name, measured
    convergence metric (from `summary.json`), why outside."""
    rows = []
    for run_dir in find_runs(paths, tracked=False):
        if is_tracked_run(run_dir):
            continue
        config = read_json(run_dir / "config.json")["config"]
        spec = get_method(config["method"])
        if spec.class_cap is None:
            continue
        why = setting(config) or ["no bound tracking (bound_every = 0)"]
        stat = read_json(run_dir / "summary.json").get("mean", {}).get("convergence_metric")
        if stat is None:
            continue
        rows.append(
            {"name": config.get("name", run_dir.name), "measured": stat, "why": "; ".join(why)}
        )
    return rows


def bounds_text(results: Sequence[RunBounds]) -> str:
    """Plain-text table for `gmc-grpo theory --runs`."""
    lines = [
        "Bounds beside toy-run measurements (Theorems 1-2 with explicit constants; kappa = 8 is "
        "Proposition 1's constant, 2 ours)",
        "=" * 100,
        f"{'run':40s} {'measured':>11s} {'bound k=8':>11s} {'ratio':>9s} {'bound k=2':>11s} "
        f"{'ratio':>9s} {'refut.':>6s}",
    ]
    for r in results:
        t = r.terms.get("total", {})
        if r.in_setting and "paper" in t:
            lines.append(
                f"{r.name[:40]:40s} {t['measured']['mean']:11.3g} {t['paper']['bound']:11.3g} "
                f"{t['paper']['ratio']:9.2g} {t['ours']['bound']:11.3g} {t['ours']['ratio']:9.2g} "
                f"{len(r.refutations):6d}"
            )
        else:
            lines.append(
                f"{r.name[:40]:40s} {t['measured']['mean']:11.3g}  outside: {'; '.join(r.setting)}"
            )
    for r in results:
        if r.in_setting and "paper" in r.terms.get("total", {}):
            lines.append(
                f"  {r.name}: "
                + ", ".join(
                    f"{term} {r.terms[term]['measured']['mean']:.3g} / {r.terms[term]['paper']['bound']:.3g}"
                    for term in TERMS[1:]
                )
            )
    refs = [ref for r in results for ref in r.refutations]
    lines.append(f"refutations: {len(refs)}")
    for ref in refs[:20]:
        lines.append(
            f"  {ref['run']}, {ref['check']}, step {ref['step']}, seed {ref['seed']}: "
            f"measured {ref['measured']:.4g} > bound {ref['bound']:.4g}"
        )
    lines.append(summary_line(results))
    return "\n".join(lines)
