"""What the runs measured next to what the theory predicts, one figure per suite.

Suites (`suite=`):
- `"fixed_delay"`: LLM runs with a FIFO delay `D`; `tau4` is the realised mean of `lag^4` over
  every step (the FIFO's fill makes it smaller than `D^4`: 8.1e6 rather than 1.68e7 at `D = 64`,
  `N = 100`); `D^4` only for runs that logged no lag.
- `"length_coupled"`: LLM runs under simulated asynchrony; `tau4` is the empirical fourth moment
  of the realised lags (`staleness/lag` per step, itself a mean over the step's groups).
- `"toy"`: toy-MDP training runs; the KL is exact (`ratio/kl_exact`), `tau4` as above (or `D^4`
  when no lag is logged), and the gap is the exact stationarity measure `||grad J||^2`.

Runs of one setting that differ only in their seed (a suite, `gmc-grpo llm train --seeds`) make one
point: the mean over seeds with a 95% interval over seeds (drawn as error bars).

Per run (steady state: steps `>= D` for a fixed delay, so the initial fill is left out):
the mean removed mass and capped fraction, the mean KL(pi_theta || mu) with a 95% batch-means
interval (10 contiguous blocks, Student t), the removed-mass bound `KL / log(1+2 eps)` (GMC) or
`KL / c_eps` (TIC) from `theory.bounds.removed_mass_bound`, and the step at which the smoothed
entropy stabilises (`stabilisation_step`). The KL is the toy's exact one, else the bound
tracker's (`bounds/kl_estimate`, `llm_runs.bound_tracking`: responses sampled at `theta_n`, the exact
per-token KL summed), else the learner's `ratio/kl_estimate` on the behavior samples. LLM runs
with the bound tracker add the mean drift `||theta_n - theta_{n-tau}||^2` beside its pathwise
bound `tau sum ||step||^2` (steps 3-4 of §4.2: measured, with the smallest `L` of Assumption 1
that step 3 needs, since a transformer's `L` is unknown); every run adds its lag-0
engine/learner mismatch (`mismatch/trajectory_abs_mean`: the mean over trajectories of the summed
log-ratio `|s_i|`, `llm_runs.mismatch`, every `mismatch_every` updates; for runs without it the
per-token `mismatch/logprob_abs_mean`). Per delay: the GMC - TIC gap (final sampled Pass@1 in
pp for LLM runs; the ratio of mean `||grad J||^2` for toy runs), and the theory's tuned delay
terms `(K tau4 / N^4)^(1/5)` (`K` from `theory.constants.gmc_penalty` / `tic_penalty`) and their
ratio `(c_eps / log(1+2 eps))^(2/5)` (`theory.constants.improvement_factor`).

The caption lists each check with its verdict ("agrees", "does not agree", "not measurable"; for
the toy runs' GMC/TIC comparison, which is paired over seeds, also "not significant").

This module reads the runs into points (`bounds_data`) and draws them (`plot_bounds_vs_runs`);
the statistics and the checks are the evidence layer's (`evidence.runs_vs_theory`: `BoundsData`,
`batch_means_interval`, `stabilisation_step`, `seed_point`, `theory_curves`, `gmc_tic_gaps`,
`suite_checks`), the caption's text `evidence.render.suite_caption`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from evidence.runs_vs_theory import (
    SUITES,
    BoundsData,
    batch_means_interval,
    gmc_tic_gaps,
    outside_theorem_setting,
    removed_mass_kind,
    seed_point,
    stabilisation_step,
    suite_checks,
    theory_curves,
)
from figures.common import (
    eval_curve,
    final_eval_step,
    finite,
    llm_run_seed,
    mean,
    metric_curve,
    panel_axes,
    pick_seed_runs,
)
from figures.discover import Run
from figures.style import (
    TAU4_LABEL,
    figure_legend,
    figure_style,
    method_color,
    method_label,
    spans_decades,
)
from gmc_grpo.defaults import PAPER_EPS

TRACKED_KL = "bounds/kl_estimate"
"""the bound tracker's KL (`llm_runs.bound_tracking`: sampled at theta_n, exact per-token KL summed),
preferred to the learner's `ratio/kl_estimate` on the behavior samples where a run has it"""
MISMATCH_KEYS = ("mismatch/trajectory_abs_mean", "mismatch/logprob_abs_mean")
"""the lag-0 engine/learner mismatch, in order of preference: per trajectory `|s_i|`
(`llm_runs.mismatch`, measured every `mismatch_every` updates), else per token (`llm_runs.train`,
logged where the learner's log-probs at the behavior version are known)"""
TAU4_AXIS_LABEL = "tau4^(1/4), realised (a FIFO's fill included: below D)"
"""the paper's comparison under delay (§4.3, Figure 4): GMC against TIC, one pair per setting"""


def _steady(run: Run, suite: str) -> list[dict[str, Any]]:
    fixed = suite == "fixed_delay" or run.schedule == "fixed_delay"
    start = run.delay if (fixed and run.delay) else 0
    return [r for r in run.metrics if r.get("step") is not None and r["step"] >= start]


def _mean_of(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    return mean([float(r[key]) for r in rows if finite(r.get(key))])


def _tau4(run: Run, rows: Sequence[dict[str, Any]], suite: str) -> float | None:
    """The realised `tau4` over every step of the run (the FIFO's fill included: the lag grows
    from 0 to `D` over the first `D` steps), from the logged lags; `D^4` only for a run that
    logged none."""
    rows = [r for r in run.metrics if r.get("step") is not None]
    # per step the mean over the batch's groups of lag^4 when a batch mixes lags (toy worker
    # schedule), else the step's lag to the 4th
    fourth = [
        float(r["staleness/lag4_mean"])
        if finite(r.get("staleness/lag4_mean"))
        else float(r["staleness/lag"]) ** 4
        for r in rows
        if finite(r.get("staleness/lag"))
    ]
    if fourth:
        return sum(fourth) / len(fourth)
    return None if run.delay is None else float(run.delay) ** 4


#: Toy experiment kinds whose runs make the delay curves (`None`: a run outside any experiment).
#: The worker-schedule experiments have their own figures (`figures.toy_workers`), and the eps and
#: GMC/TIC-gap studies run SGD at other step sizes: mixed into one curve, their points would
#: join runs of another recipe.
DELAY_STUDIES = (None, "runs", "delay_sweep", "length_coupled", "group_size")


def _members(
    runs: Sequence[Run], suite: str, group_size: int | None, eps: float | None
) -> tuple[list[Run], float]:
    """The suite's runs at one group size and one eps (`None`: the most common ones, so that the
    group-size and eps studies do not mix with the delay sweep); returns them and the eps."""
    if suite == "toy":
        members = [r for r in runs if r.kind == "toy_train" and r.experiment in DELAY_STUDIES]
    else:
        members = [r for r in runs if r.kind == "llm_train" and r.schedule == suite]
    sizes = [r.group_size for r in members]
    if group_size is None and sizes:
        group_size = max(sorted(set(sizes), key=str), key=sizes.count)
    members = [r for r in members if r.group_size == group_size]
    found = [r.eps for r in members if r.eps is not None]
    if eps is None:
        eps = (
            PAPER_EPS
            if PAPER_EPS in found or not found
            else max(sorted(set(found)), key=found.count)
        )
    return [r for r in members if r.eps is None or r.eps == eps], eps


def _final_pass1(run: Run) -> float | None:
    bench = "math500" if "math500" in run.benchmarks else (run.benchmarks or [None])[0]
    if bench is None:
        return None
    steps, values = eval_curve(run, bench, "sampled")
    last = final_eval_step(run, [bench])
    return values[steps.index(float(last))] if steps and last is not None else None


def _point(run: Run, suite: str, eps: float) -> dict[str, Any]:
    from theory.bounds import removed_mass_bound

    rows = _steady(run, suite)
    exact = suite == "toy" or any(finite(r.get("ratio/kl_exact")) for r in rows)
    tracked = any(finite(r.get(TRACKED_KL)) for r in rows)  # `llm_runs.bound_tracking`
    kl_key = "ratio/kl_exact" if exact else TRACKED_KL if tracked else "ratio/kl_estimate"
    kl_values = [float(r[kl_key]) for r in rows if finite(r.get(kl_key))]
    interval = batch_means_interval(kl_values)
    tau4 = _tau4(run, rows, suite)
    point: dict[str, Any] = {
        "run": run.name,
        "seed": None if suite == "toy" else llm_run_seed(run),
        "method": run.method,
        "schedule": run.schedule,
        "pair": (run.schedule, run.delay, run.model),
        "delay": run.delay,
        "tau4": tau4,
        "x": None if tau4 is None else tau4**0.25,
        "steps": len(run.metrics),
        "outside_setting": outside_theorem_setting(run.config),
        "removed_mass": _mean_of(rows, "ratio/removed_mass"),
        "capped_frac": _mean_of(rows, "ratio/capped_frac"),
        "kl_key": kl_key,
        "kl": interval[0] if interval else (kl_values[0] if kl_values else None),
        "kl_lo": interval[1] if interval else None,
        "kl_hi": interval[2] if interval else None,
        "bound": None,
        "entropy_step": stabilisation_step(*metric_curve(run, "policy/entropy")),
        "final_pass1": _final_pass1(run) if suite != "toy" else None,
        "grad_norm_sq": _mean_of(run.metrics, "policy/grad_norm_sq"),
        "per_seed_convergence": _per_seed_convergence(run) if suite == "toy" else {},
        "drift_sq": _mean_of(rows, "bounds/drift_sq"),
        "drift_path": _mean_of(rows, "bounds/drift_path"),
        "mismatch": next(
            (m for m in (_mean_of(run.metrics, key) for key in MISMATCH_KEYS) if m is not None),
            None,
        ),
        "response_tokens": run.config.get("max_completion_tokens"),
    }
    kind = removed_mass_kind(run.method)  # the method's spec says which bound it obeys
    if kind is not None and point["kl"] is not None:
        point["bound"] = float(removed_mass_bound(max(point["kl"], 0.0), eps, kind))
    return point


def bounds_data(
    runs: Sequence[Run], suite: str, *, eps: float | None = None, group_size: int | None = None
) -> BoundsData:
    """Measured quantities and the theory's predictions for one suite (see module docstring).

    `eps`: the cap (default: the runs' `eps`, else the paper's 0.28). `group_size`: keep
    runs of this `G` only (default: the most common one)."""
    from theory.constants import improvement_factor

    if suite not in SUITES:
        raise ValueError(f"suite must be one of {SUITES}, got {suite!r}")
    members, eps = _members(runs, suite, group_size, eps)
    data = BoundsData(suite=suite, eps=eps)
    cells: dict[tuple[Any, ...], list[Run]] = {}
    for run in members:
        pair = (run.schedule, run.delay, run.model)
        cells.setdefault((str(run.method), str(pair)), []).append(run)
    for key in sorted(cells):
        if suite == "toy":  # toy runs are already seed means (`seed_mean_rows`): the longest
            seeds = [max(cells[key], key=lambda r: (len(r.metrics), r.name))]
        else:  # the seeds of one setting (repeated settings: the one with the most seeds)
            seeds = pick_seed_runs(cells[key], [], f"bounds {key}")
        data.points.append(seed_point([_point(run, suite, eps) for run in seeds]))
    data.points.sort(key=lambda p: (p["x"] if p["x"] is not None else -1.0, str(p["method"])))
    factor = float(improvement_factor(eps))
    data.theory = theory_curves(data.points, eps, factor)
    data.gaps = gmc_tic_gaps(data.points, suite)
    data.gap_label = (
        "GMC / TIC mean ||grad J||^2" if suite == "toy" else "GMC - TIC final Pass@1 (pp)"
    )
    data.checks = suite_checks(data, factor)
    return data


def _per_seed_convergence(run: Run) -> dict[Any, float]:
    """Toy runs: `(1/N) sum ||grad J||^2` of each seed, from the raw rows of this method's slice."""
    cfg = run.config
    by_seed: dict[Any, list[float]] = {}
    for row in run.record.metrics:
        key = (row.get("method", cfg.get("method")), row.get("delay", cfg.get("delay")))
        if (
            "seed" in row
            and key == (run.method, run.delay)
            and finite(row.get("policy/grad_norm_sq"))
        ):
            by_seed.setdefault(row["seed"], []).append(float(row["policy/grad_norm_sq"]))
    return {seed: sum(v) / len(v) for seed, v in by_seed.items() if v}


#: the panels' titles (mathtext); the KL's says whether it is exact (toy) or a sample estimate
PANEL_TITLES: dict[str, str] = {
    "removed_mass": r"removed mass (—) and its bound (- -)",
    "capped_frac": "capped fraction",
    "kl": r"$\mathrm{KL}(\pi_\theta\,\Vert\,\mu)$, 95% int.",
    "drift": r"drift $\Vert\theta_n-\theta_{n-\tau}\Vert^2$ (—), bound (- -)",
    "entropy_step": "entropy stabilisation step",
    "mismatch": "lag-0 engine/learner mismatch (nats)",
    "gap": "",
    "theory": r"theory's delay term $(K\bar\tau_4/N^4)^{1/5}$",
}


def recorded_panels(data: BoundsData) -> list[str]:
    """The panels `plot_bounds_vs_runs` draws for `data`, in order: those whose quantity some run
    recorded (removed mass, capped fraction and KL always, when there are runs; drift, entropy
    step, mismatch where measured; the measured GMC-TIC gap where pairs exist; the theory's
    delay terms where computed). No runs: the removed-mass panel alone, saying so."""
    if not data.points:
        return ["removed_mass"]
    names = ["removed_mass", "capped_frac", "kl"]
    for name, key in (
        ("drift", "drift_sq"),
        ("entropy_step", "entropy_step"),
        ("mismatch", "mismatch"),
    ):
        if any(p.get(key) is not None for p in data.points):
            names.append(name)
    if any(g.get("gap") is not None for g in data.gaps):
        names.append("gap")
    if data.theory:
        names.append("theory")
    return names


def plot_bounds_vs_runs(data: BoundsData, ax: Any = None):
    """One panel per recorded quantity (`recorded_panels`) against the realised
    `tau4^(1/4)`: removed mass with its bound (log scale where they span decades), capped
    fraction, KL with its interval, drift with its pathwise bound, the entropy stabilisation
    step, the lag-0 mismatch, the measured GMC-TIC gap, the theory's delay terms (a panel of its
    own: a measured gap and a bound's term are different quantities), in a compact grid with one
    legend below. The checks and their verdicts are in `data.caption` (and `data.checks`).

    `ax`: as many axes as `recorded_panels(data)` (or None for a new grid). Returns the figure."""
    names = recorded_panels(data)
    with figure_style():
        fig, axes = panel_axes(len(names), ax, max_columns=4, height=2.3)
        by_name = dict(zip(names, axes, strict=True))
        _draw_method_panels(by_name, data)
        if "gap" in by_name:
            _draw_gap_panel(by_name["gap"], data)
        if "theory" in by_name:
            _draw_theory_panel(by_name["theory"], data)
        exact = data.suite == "toy" or all(p.get("kl_key") == "ratio/kl_exact" for p in data.points)
        titles = dict(PANEL_TITLES, gap=_mathtext(data.gap_label))
        titles["kl"] += " (exact)" if exact else " (estimate)"
        for name, axis in by_name.items():
            title = titles[name]  # a mathtext title is not wrapped (it would split a formula)
            axis.set_title(title if "$" in title else "\n".join(textwrap.wrap(title, 40)))
            axis.set_xlabel(TAU4_LABEL)
        if not data.points:
            axes[0].text(
                0.5, 0.5, f"missing: no {data.suite} runs", ha="center", color="#B00020",
                transform=axes[0].transAxes,
            )  # fmt: skip
        figure_legend(fig, axes)
        fig.suptitle(rf"Runs vs theory: {data.suite} suite ($\epsilon$ = {data.eps:g})")
    return fig


def _mathtext(label: str) -> str:
    """A label of the compute side with its ASCII formula as mathtext (drawing only)."""
    return label.replace("||grad J||^2", r"$\Vert\nabla J\Vert^2$")


def _draw_method_panels(axes: dict[str, Any], data: BoundsData) -> None:
    """Per method and schedule against `tau4^(1/4)`, in the panels of `axes` (name -> axes):
    removed mass (with its bound, dashed), capped fraction, KL with its interval, drift (with its
    pathwise bound, dashed), the entropy stabilisation step and the lag-0 mismatch."""
    curves = sorted({(p["method"], p["schedule"]) for p in data.points if p["method"]}, key=str)
    several = len({schedule for _, schedule in curves}) > 1
    spanned: list[float] = []
    for method, schedule in curves:
        pts = [
            p
            for p in data.points
            if (p["method"], p["schedule"]) == (method, schedule) and p["x"] is not None
        ]
        style = {
            "color": method_color(method),
            "label": method_label(method) + (f" ({schedule})" if several else ""),
            "marker": "^" if schedule == "length_coupled" else "o",
            "ms": 4,
        }
        _draw_points(axes["removed_mass"], pts, "removed_mass", style)
        spanned += [p["removed_mass"] for p in pts if p["removed_mass"] is not None]
        for name, key in (("removed_mass", "bound"), ("drift", "drift_path")):
            dashed = [(p["x"], p[key]) for p in pts if p.get(key) is not None]
            if dashed and name in axes:
                axes[name].plot(
                    *zip(*dashed, strict=True), ls="--", color=style["color"], label="_bound"
                )
                if name == "removed_mass":
                    spanned += [v for _, v in dashed]
        _draw_points(axes["capped_frac"], pts, "capped_frac", style)
        kl = [p for p in pts if p["kl"] is not None]
        if kl and "kl" in axes:
            # the interval clipped to the quantity's range (a KL is >= 0; its estimate's
            # interval over a few seeds can reach below)
            lo = [p["kl"] - max(0.0, p["kl_lo"]) if p["kl_lo"] is not None else 0.0 for p in kl]
            hi = [p["kl_hi"] - p["kl"] if p["kl_hi"] is not None else 0.0 for p in kl]
            axes["kl"].errorbar(
                [p["x"] for p in kl],
                [p["kl"] for p in kl],
                yerr=[lo, hi],
                marker=style["marker"],
                ms=4,
                color=style["color"],
                capsize=3,
            )
        for name, key in (
            ("drift", "drift_sq"),
            ("entropy_step", "entropy_step"),
            ("mismatch", "mismatch"),
        ):
            if name in axes:
                _draw_points(axes[name], pts, key, style)
    if spans_decades(spanned):  # a measurement 10-100x below its bound: both readable
        # symmetric log: linear below the smallest positive value, so a run that removed
        # nothing (0 at D = 0) is still drawn
        smallest = min(v for v in spanned if v > 0)
        axes["removed_mass"].set_yscale("symlog", linthresh=smallest)
        axes["removed_mass"].set_ylim(bottom=0.0)


def _draw_points(axis: Any, pts: Sequence[dict[str, Any]], key: str, style: dict[str, Any]) -> None:
    """One method's `key` against `x`, with the 95% interval over seeds as error bars."""
    keep = [(p["x"], p[key]) for p in pts if p[key] is not None]
    if keep:
        axis.plot(*zip(*keep, strict=True), **style)
    else:  # keep the method in the shared legend
        axis.plot([], [], **style)
    bars = [p for p in pts if p.get(f"{key}_lo") is not None and p[key] is not None]
    if bars:
        axis.errorbar(
            [p["x"] for p in bars],
            [p[key] for p in bars],
            yerr=[  # every quantity drawn here is >= 0: its interval is clipped there
                [p[key] - max(0.0, p[f"{key}_lo"]) for p in bars],
                [p[f"{key}_hi"] - p[key] for p in bars],
            ],
            fmt="none",
            color=style["color"],
            capsize=3,
        )


def _draw_gap_panel(axis: Any, data: BoundsData) -> None:
    """The measured GMC-TIC gap per delay, with the line of no difference (a ratio for toy runs,
    a difference in pp for LLM runs; no theory factor: the tuned factor compares two upper
    bounds at different step sizes)."""
    gaps = [(g["x"], g["gap"]) for g in data.gaps if g["gap"] is not None]
    axis.plot(*zip(*gaps, strict=True), marker="s", ms=4, color="k", label="GMC vs TIC, measured")
    axis.axhline(1.0 if data.suite == "toy" else 0.0, color="0.6", lw=0.8)


def _draw_theory_panel(axis: Any, data: BoundsData) -> None:
    """The theory's delay terms of TIC and GMC against `tau4^(1/4)` (dashed, method colours)."""
    xs = [t["x"] for t in data.theory]
    for method in ("tic", "gmc"):
        axis.plot(
            xs,
            [t[f"delay_term_{method}"] for t in data.theory],
            ls="--",
            color=method_color(method),
            label=f"{method_label(method)}, theory's delay term",
        )


def fixed_delay_data(runs: Sequence[Run]) -> BoundsData:
    """`bounds_data` of the fixed-delay suite (the registry's `bounds_fixed_delay`)."""
    return bounds_data(runs, "fixed_delay")


def length_coupled_data(runs: Sequence[Run]) -> BoundsData:
    """`bounds_data` of the simulated (length-coupled) suite (`bounds_length_coupled`)."""
    return bounds_data(runs, "length_coupled")


def toy_data(runs: Sequence[Run]) -> BoundsData:
    """`bounds_data` of the toy training runs (`bounds_toy`)."""
    return bounds_data(runs, "toy")
