"""Every text the evidence layer writes, apart from the statistics it renders.

Each function takes results computed elsewhere (numbers, intervals, verdicts) and returns Markdown
(with `$...$` math) or plain text; none reads a file or computes a statistic:

* the tracked runs' bounds beside their measurements (`evidence.measured`): `bounds_markdown`
  (the report's table), `bounds_text` (`gmc-grpo theory --runs`), `summary_line`;
* Theorems 1-2 at the bound-minimising step (`evidence.bite`): `bite_markdown`, `bite_headline`;
* the explicit bounds' vacuity and Lemma 1 with measured moments (`evidence.vacuity`):
  `vacuity_markdown`;
* where the proof loses (`evidence.slack`): `slack_markdown`;
* GMC against TIC, like with like (`evidence.pairs`): `pairs_markdown`, `pairs_headline`;
* the bounds stage's claims (`evidence.bounds_claims.BoundsClaims`): `bounds_claims_headline`,
  `bounds_claims_markdown`;
* one suite's runs beside the theory (`evidence.runs_vs_theory.BoundsData`): `suite_caption`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evidence.bounds_claims import BoundsClaims
from evidence.measured import ROUNDING, TERM_LATEX, TERMS, RunBounds
from evidence.slack import LATEX, STEPS, log10_or_none
from gmc_grpo.methods import get_method
from gmc_grpo.stats import interval_text

# ---- the tracked runs' bounds (evidence.measured) ------------------------------------------


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


# ---- Theorems 1-2 where they bite (evidence.bite) ------------------------------------------


def _verdict_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no runs"


def bite_headline(summary: dict[str, Any]) -> str:
    """One clause: per theorem, the verdicts of its runs with the paper's constant (`summary`:
    `evidence.bite.bite_summary`)."""
    if not summary["runs"]:
        return "Theorems 1-2 at the bound-minimising step: no runs"
    s = summary["paper"]
    return (
        "Theorems 1-2 at the bound-minimising step (constant 8): Theorem 1 (GMC) "
        f"{_verdict_counts(s['gmc'])}; Theorem 2 (TIC) {_verdict_counts(s['tic'])}"
    )


def bite_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The runs at the bound-minimising step as a Markdown table (module docstring)."""
    if not rows:
        return "No run at the bound-minimising step (`bounds_optimal`).\n"
    lines = [
        "Each run at the step $\\eta^\\star$ that minimises its theorem's explicit bound "
        "(`evidence.bite`; $\\eta/\\eta^\\star$ against the minimiser with the run's own recorded "
        "constants). Measured: $\\frac{1}{N}\\sum_n\\Vert\\nabla J(\\theta_n)\\Vert^2$, mean and "
        "95% t-interval over seeds. Verdict per constant: *vacuous* (bound at or above the "
        "ceiling $TLR^2\\log|\\mathcal{A}|/2$), *refuted* (interval's lower end above the bound), "
        "*holds* (upper end below the bound, bound below the ceiling), *unresolved* (interval "
        "contains the bound). Measured/bound is the tightness, not the verdict.",
        "",
        "| method | D | N | seeds | $\\eta$ | $\\eta/\\eta^\\star$ | ceiling | measured [95%] "
        "| bound (8) | verdict (8) | measured/bound (8) | bound (2, ours) | verdict (2) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | --- |",
    ]
    for r in rows:
        p, o = r["paper"], r["ours"]
        lines.append(
            f"| {r['method'].upper()} | {r['delay']} | {r['N']:,} | {r['seeds']} | {r['eta']:.3g} "
            f"| {r['eta_over_own_best']:.3f} | {r['ceiling']:.3f} "
            f"| {interval_text(r['measured'], '.3g')} | {p['bound']:.3g} | **{p['verdict']}** "
            f"| {p['ratio']:.2g} | {o['bound']:.3g} | **{o['verdict']}** |"
        )
    return "\n".join(lines) + "\n"


# ---- the explicit bounds' vacuity (evidence.vacuity) ----------------------------------------


def vacuity_markdown(
    vac: dict[str, Any], lem: dict[str, Any], smooth: dict[str, Any] | None = None
) -> str:
    """The vacuity of Theorems 1-2 (decades, both constants, small steps apart), Lemma 1 with
    measured moments (a consistency check, with the ceiling and the term shares) and Lemma 1's
    descent step at every step (`smooth`, `evidence.vacuity.smoothness_summary`), as Markdown."""
    if not vac["runs"]:
        return "No tracked run in the theorems' setting.\n"
    lines = [
        "A bound on $\\frac{1}{N}\\sum_n\\Vert\\nabla J(\\theta_n)\\Vert^2$ is vacuous when it "
        "exceeds the a-priori ceiling $\\Vert\\nabla J\\Vert^2 \\le T L R^2\\log|\\mathcal{A}|/2$ "
        "(`theory.bounds.gradient_norm_sq_ceiling`, ours): no run could then have contradicted "
        "it, and its holding is not counted as a passed check. Decades: "
        "$\\log_{10}(\\text{bound}/\\text{measured})$, min / median / max over the runs in the "
        "setting; small steps: $\\eta L_J \\le 1$ (`bounds_bite`, `bounds_optimal`).",
        "",
        "| runs | constant | vacuous | decades | without the delay term: vacuous | decades "
        "| delay term's share of the bound (min) |",
        "| --- | --- | ---: | --- | ---: | --- | ---: |",
    ]
    for part, title in (("all", "all"), ("small_step", "$\\eta\\le 1/L_J$")):
        entry = vac[part]
        if not entry.get("runs"):
            continue
        for const, name in (("paper", "8 (Prop. 1)"), ("ours", "2 (ours)")):
            e = entry[const]
            d, w = e["decades"], e["without_delay_decades"]
            lines.append(
                f"| {title}: {entry['runs']} | {name} | {e['vacuous']} "
                f"| {d['min']:.1f} / {d['median']:.1f} / {d['max']:.1f} "
                f"| {e['without_delay_vacuous']} "
                f"| {w['min']:.1f} / {w['median']:.1f} / {w['max']:.1f} "
                f"| {e['delay_share_min']:.3g} |"
            )
    if lem["runs"]:
        r = lem["ratio"]
        small = lem.get("small_step_ratio")
        lines += [
            "",
            "A consistency check, not a test of the lemma: Lemma 1 with each run's measured "
            "moments (measured $\\frac{1}{N}\\sum_n\\Vert\\nabla J\\Vert^2$ over "
            "$\\frac{2T(J(\\theta_N)-J(\\theta_0))}{\\eta N} + TL_J\\eta\\,\\overline{\\Vert g_n"
            "\\Vert^2} + T^2\\overline{\\Vert b_n\\Vert^2}$; the variance term integrates the same "
            "updates as the progress term, so at small $\\eta$ the ratio is fixed by the "
            "bookkeeping): holds in "
            f"{lem['holds']} of {lem['runs']} runs (paired over seeds), vacuous (right-hand side "
            f"at or above the ceiling) in {lem['vacuous']}"
            + (
                f" ({', '.join(f'`{n}`' for n in lem['vacuous_runs'])})"
                if lem["vacuous_runs"]
                else ""
            )
            + f", violated in {lem['violated']}; measured/right-hand side "
            f"median {r['median']:.2g}, range {r['min']:.2g} to {r['max']:.2g}"
            + (
                f"; at $\\eta\\le 1/L_J$: median {small['median']:.2g} ({small['min']:.2g} to "
                f"{small['max']:.2g})."
                if small
                else "."
            ),
        ]
        if "shares" in lem:
            sh, ms = lem["shares"], lem["moment_steps"]
            lines += [
                "",
                "Each term's share of the right-hand side (min / median / max over the runs): "
                + "; ".join(
                    f"{t} {sh[t]['min']:.2g} / {sh[t]['median']:.2g} / {sh[t]['max']:.2g}"
                    for t in ("optimisation", "variance", "delay")
                )
                + f". The bias moments come from {ms['min']:.0f} to {ms['max']:.0f} recorded "
                f"steps per run (median {ms['median']:.0f}); {lem['every_step']} of "
                f"{lem['runs']} runs record them at every step.",
            ]
    if smooth and smooth["runs"]:
        lines += [
            "",
            "Lemma 1's descent step, tested directly at every step of every tracked run: the "
            "exact remainder $J_{n+1}-J_n-\\langle\\nabla J(\\theta_n),\\theta_{n+1}-\\theta_n"
            "\\rangle \\ge -\\frac{L_J}{2}\\Vert\\theta_{n+1}-\\theta_n\\Vert^2$: "
            f"{smooth['violations']} violations of {smooth['evaluated']} steps "
            f"({smooth['runs']} runs); the largest curvature any step used is "
            f"{smooth['max_curvature_over_L_J']:.2g} of $L_J$.",
        ]
    return "\n".join(lines) + "\n"


# ---- where the proof loses (evidence.slack) -------------------------------------------------


def slack_markdown(slacks: Sequence[dict[str, Any]], summary: dict[str, Any]) -> str:
    """The table in decades (one row per run, `evidence.slack.chain_slack`) and the per-step
    summary (`evidence.slack.slack_summary` of the same runs), Markdown."""
    if not slacks:
        return "No tracked run of GMC or TIC with stale recorded steps: no chain slack.\n"
    head = [LATEX[key] for key, _ in STEPS]

    def cell(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.1f}"

    lines = [
        "Decades lost at each step of the §4.2 chain (`log10` of larger side / smaller side, "
        "means over the stale recorded steps and seeds; `evidence.slack`), the product of steps "
        "1-5, and beside them Proposition 1's $M$ over the measured second moment (inside step "
        "4), the theorem's delay term over the measured $T^2\\overline{\\Vert b_n\\Vert^2}$, "
        "Lemma 1 with measured moments over the measured metric, and the theorem over it. "
        "n/a: no group was capped at those steps (nothing removed, steps 1-2 not measurable), or "
        "(step 1) the squared bias is not resolved from sampling noise. A ratio marked * has a "
        "denominator not resolved from 0 (the measured delay term's 95% interval over seeds "
        "contains 0): an upper end of the slack is not known. Each step's summary names the "
        "number of runs it rests on.",
        "",
        "| run | stale steps | " + " | ".join(head) + " | chain, 1-5 | $M$ / measured "
        "| theorem delay / measured | Lemma 1 (measured moments) | theorem / measured |",
        "| --- | ---: | "
        + " | ".join("---:" for _ in head)
        + " | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in slacks:
        d = s["decades"]
        lines.append(
            f"| {s['run']} | {s['stale_steps']} | "
            + " | ".join(cell(d[k]) for k, _ in STEPS)
            + f" | {cell(log10_or_none(s['chain_total']))} | {cell(d['second_moment'])} "
            f"| {cell(log10_or_none(s['run_delay_ratio']))}"
            f"{'' if s.get('run_delay_resolved', True) else '*'} | {cell(log10_or_none(s['lemma1_slack']))} "
            f"| {cell(log10_or_none(s['theorem_slack']))} |"
        )
    lines += ["", "| step | runs | median decades | range |", "| --- | ---: | ---: | --- |"]
    for key, entry in summary["steps"].items():
        if entry["runs"]:
            lines.append(
                f"| {LATEX[key]} | {entry['runs']} | {entry['median']:.1f} "
                f"| {entry['min']:.1f} to {entry['max']:.1f} |"
            )
    return "\n".join(lines) + "\n"


# ---- GMC against TIC (evidence.pairs) -------------------------------------------------------


def _ci(stat: dict[str, float], digits: int = 3) -> str:
    return f"{stat['mean']:.{digits}g} [{stat['lo']:.{digits}g}, {stat['hi']:.{digits}g}]"


def pairs_markdown(pairs: Sequence[dict[str, Any]], tuned: Sequence[dict[str, Any]]) -> str:
    """Every pair (measured ratio, final J of both, their difference, the bounds' ratio at the
    same eta) and the tuned comparison, Markdown with `$...$` math."""
    if not pairs:
        return "No GMC/TIC pair among the tracked runs.\n"
    lines = [
        "Every GMC/TIC pair of the tracked runs (same folder, delay, schedule, $G$, $B$, "
        "$\\epsilon$, $N$, $\\eta$, seeds; paired over seeds, mean [95% t-interval]). "
        "Measured: GMC over TIC of $\\frac{1}{N}\\sum_n\\Vert\\nabla J(\\theta_n)\\Vert^2$, and "
        "final $J$. Bound: Theorem 1 over Theorem 2 with explicit constants at the same $\\eta$, "
        "each with its own run's constants ($\\log\\mathcal{C}$ in the table), whole bound and "
        "delay term alone (a bound's ratio beside a bound's ratio; the measured ratio beside "
        "the measured one). Role: the declared *primary* pair (`evidence.pairs.PRIMARY_PAIR`), "
        "*secondary* pairs with Holm-adjusted verdicts per claim (in brackets), *identical* "
        "pairs (no group capped) and pairs *outside* the theorems' setting, neither counted.",
        "",
        "| role | folder | lags | $\\epsilon$ | $N$ | $\\eta$ | GMC / TIC, metric | verdict (GMC lower) "
        "| final $J$ GMC | final $J$ TIC | GMC $-$ TIC, final $J$ | verdict (GMC higher) "
        "| bound ratio | delay-term ratio | $\\log\\mathcal{C}$ GMC, TIC |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- | --- | --- | ---: "
        "| ---: | --- |",
    ]
    for p in pairs:
        same = " (identical runs: no group capped)" if p["identical"] else ""
        holm = {
            c: f" (Holm: {p[f'{c}_verdict_holm']})" if f"{c}_verdict_holm" in p else ""
            for c in ("ratio", "final")
        }
        lines.append(
            f"| {p.get('role', '')} | {p['folder']} | {lags(p)} | {p['eps']:g} "
            f"| {p['total_steps']} | {p['eta']:g} "
            f"| {_ci(p['ratio'])} | {p['ratio_verdict']}{holm['ratio']}{same} "
            f"| {_ci(p['final_objective']['gmc'])} "
            f"| {_ci(p['final_objective']['tic'])} | {_ci(p['final_difference'])} "
            f"| {p['final_verdict']}{holm['final']} | {_num(p['bound_ratio'])} | {_num(p['bound_delay_ratio'])} "
            f"| {p['log_C']['gmc']:.2f}, {p['log_C']['tic']:.2f} |"
        )
    if tuned:
        lines += [
            "",
            "Each method tuned over the same grid of $\\eta$: its best $\\eta$ by the measured "
            "mean metric and, apart, by the bound; a best $\\eta$ at the grid's edge is censored "
            "(the optimum may lie outside the grid). The measured tuned ratio is paired over "
            "seeds at the two chosen step sizes (chosen on the same seeds: optimistic for both).",
            "",
            "| folder | lags | $\\epsilon$ | $N$ | grid $\\eta$ | measured: best $\\eta$ GMC, TIC "
            "| measured GMC / TIC | bound: best $\\eta$ GMC, TIC | bound GMC / TIC |",
            "| --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: |",
        ]
        for t in tuned:
            lines.append(
                f"| {t['folder']} | {lags(t)} | {t['eps']:g} | {t['total_steps']} "
                f"| {', '.join(f'{e:g}' for e in t['grid'])} "
                f"| {_best(t, 'measured')} | {_ci(t['measured_ratio'])} "
                f"| {_best(t, 'bound')} | {_num(t['bound_ratio'])} |"
            )
    return "\n".join(lines) + "\n"


def lags(entry: dict[str, Any]) -> str:
    """`D = 64` (fixed delay), `W = 64 workers`, or the schedule's name."""
    if entry.get("schedule") == "workers":
        return f"W = {entry.get('num_workers')} workers"
    if entry.get("schedule") in (None, "fixed_delay"):
        return f"D = {entry['delay']}"
    return str(entry["schedule"])


def _best(t: dict[str, Any], kind: str) -> str:
    parts = []
    for m in ("gmc", "tic"):
        eta = t[m][f"{kind}_eta"]
        parts.append(f"{eta:g}" + (" (censored)" if t[m][f"{kind}_censored"] else ""))
    return ", ".join(parts)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def pairs_headline(pairs: Sequence[dict[str, Any]]) -> str:
    """The declared primary pair's verdict, the other pairs in the theorems' setting
    Holm-adjusted per claim, identical pairs (no group capped) and pairs outside the setting
    said apart (`multiplicity`); pairs without roles (older records): the unadjusted counts."""
    if not pairs:
        return "no GMC/TIC pair"
    if all("role" in p for p in pairs):
        return _pairs_headline_holm(pairs)
    same = sum(p["identical"] for p in pairs)
    lower = sum(p["ratio_verdict"] == "holds" for p in pairs)
    higher = sum(p["ratio_verdict"] == "does not hold" for p in pairs)
    j_up = sum(p["final_verdict"] == "holds" for p in pairs)
    j_down = sum(p["final_verdict"] == "does not hold" for p in pairs)
    return (
        f"GMC vs TIC, {len(pairs)} pairs: gradient metric lower in {lower}, higher in {higher}; "
        f"final J higher in {j_up}, lower in {j_down} (paired 95% intervals)"
        + (f"; {same} identical (no group capped)" if same else "")
    )


def _pairs_headline_holm(pairs: Sequence[dict[str, Any]]) -> str:
    roles = [p["role"] for p in pairs]
    primary = next((p for p in pairs if p["role"] == "primary"), None)
    family = [p for p in pairs if p["role"] == "secondary"]
    parts = []
    if primary is not None:
        parts.append(
            f"GMC vs TIC (Theorems 1-2's setting), primary pair {primary['folder']} "
            f"D = {primary['delay']}, eta = {primary['eta']:g}: gradient metric GMC/TIC "
            f"{_ci(primary['ratio'])} (GMC below TIC: {primary['ratio_verdict']}), final J "
            f"GMC - TIC {_ci(primary['final_difference'])}"
        )
    else:
        parts.append("GMC vs TIC: no declared primary pair among these runs")
    if family:
        count = {
            claim: {
                v: sum(p[f"{claim}_verdict_holm"] == v for p in family)
                for v in ("holds", "does not hold")
            }
            for claim in ("ratio", "final")
        }
        parts.append(
            f"the other {len(family)} pairs in the setting, Holm-adjusted: gradient metric lower "
            f"in {count['ratio']['holds']}, higher in {count['ratio']['does not hold']}; final J "
            f"higher in {count['final']['holds']}, lower in {count['final']['does not hold']}"
        )
    apart = []
    if roles.count("identical"):
        apart.append(f"{roles.count('identical')} identical pairs (no group capped)")
    if roles.count("outside"):
        apart.append(f"{roles.count('outside')} outside the setting")
    if apart:
        parts.append("not counted: " + ", ".join(apart))
    return "; ".join(parts)


# ---- the bounds stage's claims (evidence.bounds_claims) -------------------------------------


def _vacuity_clause(vac: dict[str, Any]) -> str:
    """The explicit theorems' vacuity in one clause of the headline."""
    p = vac["all"]["paper"]
    text = (
        f"explicit Theorems 1-2: vacuous in {p['vacuous']} of {vac['runs']} runs (above "
        f"the a-priori ceiling of the squared gradient norm), {p['decades']['min']:.1f} to "
        f"{p['decades']['max']:.1f} decades above the measurement"
    )
    small = vac["small_step"]
    if small["runs"]:
        sp_ = small["paper"]
        text += (
            f" ({sp_['decades']['min']:.1f} to {sp_['decades']['max']:.1f} at eta <= 1/L_J, "
            f"{small['runs']} runs, vacuous in {sp_['vacuous']})"
        )
    if p["vacuous"]:
        text += "; a vacuous bound is not counted as a check"
    return text


def _slack_clause(summary: dict[str, Any], runs: int) -> str:
    """The chain's slack per step in one clause of the headline."""
    steps = summary["steps"]
    order = ("bias", "removed_mass", "kl", "drift", "pathwise")
    return (
        "chain steps 1-5 lose "
        + " / ".join(
            "n/a" if steps[k]["median"] is None else f"{steps[k]['median']:.1f}" for k in order
        )
        + " decades (medians over "
        + " / ".join(str(steps[k]["runs"]) for k in order)
        + f" runs of {runs}: a step counts only where it is measurable; Prop. 1's M "
        f"alone {steps['second_moment']['median']:.1f})"
    )


def bounds_claims_headline(claims: BoundsClaims) -> str:
    """The bounds stage's headline: one clause per claim, each with its own count (`claims`: an
    `evidence.bounds_claims.BoundsClaims`)."""
    parts = [bite_headline(claims.bite_summary)] if claims.bite else []
    if claims.vacuity["runs"]:
        parts.append(_vacuity_clause(claims.vacuity))
    lem, smooth = claims.lemma1, claims.smoothness
    if lem["runs"]:
        r = lem["ratio"]
        parts.append(
            f"Lemma 1 with measured moments (a consistency check): holds in {lem['holds']} of "
            f"{lem['runs']}, vacuous (right-hand side above the ceiling) in {lem['vacuous']}, "
            f"violated in {lem['violated']}, measured/bound median {r['median']:.2g} "
            f"({r['min']:.2g} to {r['max']:.2g})"
        )
    if smooth["runs"]:
        parts.append(
            f"Lemma 1's descent step at every step: {smooth['violations']} violations of "
            f"{smooth['evaluated']} (largest curvature used "
            f"{smooth['max_curvature_over_L_J']:.2g} of L_J)"
        )
    if claims.slack:
        parts.append(_slack_clause(claims.slack_summary, len(claims.slack)))
    parts.append(pairs_headline(claims.pairs))
    parts.append(
        f"per-step checks that could fail: {claims.refutations} violations of "
        f"{claims.evaluated} (true by construction, not counted: {claims.by_construction} "
        "class-membership and pathwise Cauchy-Schwarz checks)"
    )
    return "; ".join(parts)


def bounds_claims_markdown(claims: BoundsClaims) -> dict[str, str]:
    """The report's four sections of the bounds stage's claims, by name (`bite_markdown`,
    `vacuity_markdown`, `slack_markdown`, `pairs_markdown`)."""
    return {
        "bite_markdown": bite_markdown(claims.bite),
        "vacuity_markdown": vacuity_markdown(claims.vacuity, claims.lemma1, claims.smoothness),
        "slack_markdown": slack_markdown(claims.slack, claims.slack_summary),
        "pairs_markdown": pairs_markdown(claims.pairs, claims.tuned),
    }


# ---- runs vs theory, one suite (evidence.runs_vs_theory) -----------------------------------


def suite_caption(data: Any) -> str:
    """One suite's checks (`data`: an `evidence.runs_vs_theory.BoundsData`) in a paragraph of Markdown,
    formulas as `$...$` LaTeX: the figure's caption."""
    head = {
        "fixed_delay": r"Fixed-delay suite ($\bar\tau_4$ = realised mean of the lags' fourth "
        "power, the FIFO's fill included).",
        "length_coupled": r"Simulated suite ($\bar\tau_4$ = empirical fourth moment of the "
        "lags).",
        "toy": r"Toy MDP training runs (exact KL and exact $\Vert\nabla J\Vert^2$).",
    }[data.suite]
    lines = [head, rf"$\epsilon = {data.eps:g}$."]
    lines += [
        f"{c.get('claim_markdown', c['claim'])}: {c['verdict']} ({c['detail']})."
        for c in data.checks
    ]
    return " ".join(lines)
