"""The headlines of the theory and toy stages of `gmc-grpo reproduce`: one claim, one count.

A headline names each claim with its own count; deterministic checks (exact KL, removed mass
against its exact bound) are listed by name, never pooled with the Monte Carlo comparisons; a
claim measured several ways is counted once, on its declared measure, with the measures that
contradict it beside; orderings measured outside the theorems' setting (Adam, a schedule,
clipping) say so.
"""

from __future__ import annotations

from typing import Any

from gmc_grpo.stats import interval_text

# the group-size claim (Corollary 2, B.2.2: "GMC establishes a reward advantage over TIC
# progressively earlier as the group size increases") is counted once, on J early in training
GROUP_SIZE_MEASURE = "objective_at_quarter"
GROUP_SIZE_MEASURES = {
    "objective_at_quarter": "J at N/4",
    "mean_objective": "mean J",
    "final_objective": "final J",
}


def training_setting(config: dict[str, Any]) -> list[str]:
    """What puts a toy run's *training* outside the theorems' setting (plain SGD at a constant
    step, no clipping): the optimizer, the step-size schedule, the gradient clip (the methods'
    own differences are the comparisons themselves)."""
    reasons = []
    if config.get("optimizer", "sgd") != "sgd":
        reasons.append(str(config["optimizer"]).capitalize())
    if config.get("lr_schedule", "constant") != "constant":
        reasons.append(f"{config['lr_schedule']} schedule")
    if config.get("grad_clip") is not None:
        reasons.append(f"gradient clipping at {config['grad_clip']:g}")
    return reasons


def _ci(stat: dict[str, float]) -> str:
    return interval_text(stat, ".3g")


def sweep_headline(summary: dict[str, Any]) -> str:
    """The bias sweep's claims (`toy_mdps.sweep.analysis.summarise_sweep`), each with its own
    count: the comparisons paired over seeds first, then the exact chain checks by name."""
    claims = summary["claims"]
    parts = []
    gap = claims.get("gmc_bias_below_tic")
    if gap and gap.get("primary"):
        first, rest = gap["primary"], gap["secondary_holm"]
        parts.append(
            f"GMC's bias below TIC's, primary point (staleness {first['staleness']:g}, eps "
            f"{first['eps']:g}, G = {first['group_size']}): {first['verdict']} "
            f"({_ci(first)}, paired over {gap['num_seeds']} seeds); the other {rest['of']} stale "
            f"points Holm-adjusted: {rest['holds']} hold, {rest['not_significant']} not "
            f"significant, {rest['does_not_hold']} against (unadjusted: {gap['holds']} of "
            f"{gap['of']} hold)"
        )
    elif gap:
        parts.append(
            f"GMC's bias below TIC's at {gap['holds']} of {gap['of']} stale points (paired over "
            f"{gap['num_seeds']} seeds, unadjusted; {gap['not_significant']} not significant, "
            f"{gap['does_not_hold']} against)"
        )
    grpo = claims.get("grpo_exceeds_prop1")
    if grpo:
        seen = "seen" if grpo["exceeds"] else "not seen"
        parts.append(
            f"GRPO above Proposition 1: {seen}, {grpo['exceeds']}/{grpo['of']} (at most "
            f"{grpo['max_ratio_to_bound']:.2g} of it, C up to {grpo['max_C']:.0f})"
        )
    for key, name in (
        ("gmc_bias_shrinks_with_G", "GMC's bias shrinks with G"),
        ("tic_bias_persists_with_G", "TIC's bias persists at the largest G"),
        ("is_unbiased", "IS unbiased (0 in the interval)"),
        ("class_second_moment_below_prop1", "class second moment below Proposition 1"),
    ):
        if key in claims:
            parts.append(f"{name} {claims[key]['holds']}/{claims[key]['of']}")
    exact = [
        (f"{k.split('_')[0].upper()} removed mass <= KL/den", c)
        for k, c in claims.items()
        if k.endswith("_removed_mass_below_kl_bound")
    ]
    if "kl_drift_bound" in claims:
        exact.append(("KL <= (TL/2) x squared drift", claims["kl_drift_bound"]))
    if exact:
        parts.append(
            "exact chain checks: " + ", ".join(f"{n} {c['holds']}/{c['of']}" for n, c in exact)
        )
    return "; ".join(parts)


def toy_train_headline(summaries: dict[str, dict[str, Any]], settings: dict[str, list[str]]) -> str:
    """The toy learners' orderings, each experiment labelled with why it is outside the
    theorems' setting (`settings`: experiment -> reasons, `training_setting`), the
    group-size claim counted once (on `GROUP_SIZE_MEASURE`) with its other measures beside, and
    Corollary 1's eps* (censored cells)."""
    counted, groups = [], []
    for name, summary in summaries.items():
        for o in summary.get("orderings", []):
            if o.get("metric") in GROUP_SIZE_MEASURES and "larger G" in o["claim"]:
                groups.append((name, o))
            elif o.get("metric") != "lag_mean":  # the lag comparison is a sanity check
                counted.append((name, o))
    group = next((o for _, o in groups if o["metric"] == GROUP_SIZE_MEASURE), None)
    if group is not None:
        counted.append((next(n for n, o in groups if o is group), group))
    verdicts = [o["verdict"] for _, o in counted]
    reasons = sorted({r for name, _ in counted for r in settings.get(name, [])})
    where = f" (outside the theorems' setting: {', '.join(reasons)})" if reasons else ""
    text = (
        f"paper orderings on the toy MDPs{where}: {verdicts.count('holds')} of {len(counted)} "
        f"hold, {verdicts.count('not significant')} not significant, "
        f"{verdicts.count('does not hold')} do not hold (paired 95% intervals over seeds)"
    )
    if group is not None:
        others = [
            f"{GROUP_SIZE_MEASURES[o['metric']]} {o['verdict']}: {_ci(o['differences'][0])}"
            for _, o in groups
            if o is not group
        ]
        text += (
            f"; the group-size claim counted once, on {GROUP_SIZE_MEASURES[GROUP_SIZE_MEASURE]}: "
            f"{group['verdict']} ({_ci(group['differences'][0])})"
            + (f"; its other measures: {'; '.join(others)}" if others else "")
        )
    for name, summary in summaries.items():
        fit = summary.get("eps_star")
        if not fit:
            continue
        tests = [t["by_convergence"].get("interior_test") for t in fit["table"]]
        interior = sum(t is not None and t["verdict"] == "holds" for t in tests)
        label = "" if settings.get(name) else " (SGD, constant step: the theorems' setting)"
        if "tau4_exponent" in fit:
            text += (
                f"; eps*{label}: exponents {fit['tau4_exponent']:.2f}, {fit['n_exponent']:.2f} "
                f"(paper 1/7, -3/14), significantly interior in {interior} of {len(tests)} cells"
            )
        else:
            text += (
                f"; eps*{label}: censored in {fit['censored_cells']} of {len(fit['table'])} "
                f"cells (no interior optimum), significantly interior in {interior}"
            )
    return text


def claims_headline(
    by_section: dict[str, dict[str, int]], kinds: dict[str, dict[str, Any]] | None = None
) -> str:
    """ "paper's claims: 19 verified, 5 reconstructed, 1 holds with a condition (ours, apart: 8
    verified, 1 reconstructed)": one count per kind of verdict, no pooled total
    (`theory.claims.summary_by_section`); with `kinds` (`theory.evidence_kinds.kind_counts`)
    the paper's rows by the kind of evidence behind them, tautologies named as not counted."""
    from theory.claims import counts_text

    paper, ours = by_section["paper"], by_section["ours"]
    text = f"paper's claims: {counts_text(paper)}"
    if kinds is not None:
        from theory.evidence_kinds import kinds_text

        text += f" [by evidence: {kinds_text(kinds['paper'])}]"
    if sum(ours.values()):
        text += f" (ours, apart: {counts_text(ours)})"
    return text
