"""The headlines of the theory and toy stages of `gmc-grpo reproduce`: one claim, one count.

A headline names each claim with its own count; deterministic checks (exact KL, removed mass
against its exact bound) are listed by name, never pooled with the Monte Carlo comparisons; a
claim measured several ways is counted once, on its declared measure, with the measures that
contradict it beside; orderings measured outside the theorems' setting (Adam, a schedule,
clipping) say so.
"""

from __future__ import annotations

from typing import Any

from gmc_grpo.stats import holm_adjust, interval_text, t_quantile

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


# the toy learners' declared primary comparison (issue 31): the paper's headline ordering at the
# largest delay of the delay sweep; every other counted ordering is one Holm family
PRIMARY_ORDERING = ("delay_quick", "GMC >= TIC >= GRPO, final J")
LEVEL = 0.95


def _step_p(d: dict[str, float], level: float = LEVEL) -> tuple[float, float, float]:
    """`(mean, se, df)` of one paired difference from its t-interval `{mean, lo, hi, n}`."""
    n = int(d.get("n", 0) or 0)
    if n < 2 or not all(isinstance(d.get(k), int | float) for k in ("lo", "hi")):
        return float("nan"), float("nan"), float("nan")
    se = (d["hi"] - d["lo"]) / (2.0 * t_quantile(n - 1, level))
    return d["mean"], se, n - 1


def ordering_p_value(ordering: dict[str, Any], tolerance: float | None = None) -> float:
    """The p-value of one ordering from its paired intervals, consistent with its verdict (an
    unadjusted p below `1 - LEVEL` exactly when the verdict is `holds`): a chain of directional
    steps is an intersection-union test, `p = max` over steps of each step's two-sided paired-t
    p-value (1 for a step on the wrong side); an equivalence ("similar", margin `tolerance`) is
    two one-sided tests at half the level, `p = min(1, 2 max(p_low, p_high))`. NaN with fewer
    than two seeds."""
    from scipy.stats import t as student_t

    diffs = ordering.get("differences") or []
    if not diffs:
        return float("nan")
    ps = []
    for d in diffs:
        mean, se, df = _step_p(d)
        if not se == se or df != df:  # NaN
            return float("nan")
        if tolerance is not None:
            if se == 0:
                ps.append(0.0 if abs(mean) < tolerance else 1.0)
                continue
            p_low = float(student_t.sf((mean + tolerance) / se, df))
            p_high = float(student_t.sf((tolerance - mean) / se, df))
            ps.append(min(1.0, 2.0 * max(p_low, p_high)))
            continue
        side = 1.0 if (d["lo"] + d["hi"]) / 2 * _claimed_sign(ordering) > 0 else 0.0
        if not side:
            ps.append(1.0)
        elif se == 0:
            ps.append(0.0)
        else:
            ps.append(float(2 * student_t.sf(abs(mean) / se, df)))
    return max(ps)


def _claimed_sign(ordering: dict[str, Any]) -> float:
    """`-1` for an ordering claimed with `<=` (smaller is better), else `+1`."""
    return -1.0 if "<=" in str(ordering.get("claim", "")) else 1.0


def toy_multiplicity(
    counted: list[tuple[str, dict[str, Any]]], alpha: float = 1.0 - LEVEL
) -> dict[str, Any]:
    """The declared primary ordering (`PRIMARY_ORDERING`) and the others as one Holm family:
    `{primary: (experiment, ordering, p) or None, holds, not_significant, of}` (a Holm-adjusted
    ordering holds when its adjusted p is below `alpha`; equivalence orderings use
    `toy_mdps.train.analysis.SIMILAR_TOL`)."""
    from toy_mdps.train.analysis import SIMILAR_TOL

    def p_of(o: dict[str, Any]) -> float:
        similar = "similar" in str(o.get("claim", ""))
        return ordering_p_value(o, SIMILAR_TOL if similar else None)

    primary = next(
        (
            (n, o)
            for n, o in counted
            if n == PRIMARY_ORDERING[0] and str(o["claim"]).startswith(PRIMARY_ORDERING[1])
        ),
        None,
    )
    rest = [(n, o) for n, o in counted if primary is None or o is not primary[1]]
    adjusted = holm_adjust([p_of(o) for _, o in rest])
    holds = sum(a < alpha for a in adjusted)
    return {
        "primary": None if primary is None else (*primary, p_of(primary[1])),
        "holds": holds,
        "not_significant": len(rest) - holds,
        "of": len(rest),
    }


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
    multi = toy_multiplicity(counted)
    text = f"paper orderings on the toy MDPs{where}: "
    if multi["primary"] is not None:
        name, first, p = multi["primary"]
        text += f"primary ({name}: {first['claim']}) {first['verdict']} (p = {p:.2g}); "
    text += (
        f"the other {multi['of']} Holm-adjusted: {multi['holds']} hold, "
        f"{multi['not_significant']} not (unadjusted: {verdicts.count('holds')} of "
        f"{len(counted)} hold, {verdicts.count('not significant')} not significant, "
        f"{verdicts.count('does not hold')} do not hold; paired 95% intervals over seeds)"
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
