"""The Qwen3 track's stage of `gmc-grpo reproduce`: the delay trend on the tiny CPU model.

The methods of the design (`DESIGNS`: TIC-GRPO and GMC-GRPO in the default, GRPO too in the
full one) train the recipe `LLM_SUITE_RECIPE` (a random-init 2-layer Qwen3 after a 4,000-step
supervised warm-up on 2-digit additions, one cached base model for every seed, then 150 RL
updates at lr 3e-4 with the full pipeline; `docs/llm-cpu.md` says how the learning rate was
chosen: a pilot that measured the current/behavior KL) at the design's fixed delays (the
default `D = 32`, the full `LLM_SUITE_DELAYS`) for every seed of the design, as one suite
(`llm_runs.suite`): the methods of a seed share the warmed-up initial policy and the FIFO fill
(built once, `llm_runs.cache`), the runs are spread over the machine's cores (at most two
processes, one torch thread each). Every run evaluates its current policy on the 200 held-out
sums every 50 updates and tracks the quantities of §4.2's chain (`llm_runs.bound_tracking`: drift, its
pathwise bound, the current/behavior KL with its interval), beside the removed mass, capped
fraction, entropy and lag-0 mismatch the learner logs.

**The declared comparison** (`PRIMARY`, `PRIMARY_DELAY`): GMC - TIC held-out sampled Pass@1 of
the current policy at the last evaluation, at `D = 32`, judged alone at level 0.05; its area
under the held-out curve at that delay is the first secondary; every other paired comparison
(consumed training reward among them) is secondary, Holm-adjusted together; the collapse rate
and the measured KL are reported per delay and method, not tested.

**The design.** The number of seeds comes from a power calculation (`llm_runs.comparisons.
design_power`) on the per-seed primary differences of a pilot suite of this recipe (`PILOT`):
`DESIGNS` holds the default (what fits the stage's budget of about 15 minutes on the project's
2-core machine) and the full design (`gmc-grpo reproduce --full`: the seeds that detect
`DETECTABLE` with power 0.8). Both are reported the same way.

`llm_tiny_stage` = `compute_llm_tiny` (runs or reads the suite: a `LlmStageResults`) then
`render_llm_tiny` (its Markdown and headline). A user reruns the default suite with

    gmc-grpo llm train --recipe tiny_additions_sweep --seeds 0,1,2,3,4,5 --methods tic,gmc \
        --delays 32 --out runs/tiny_sweep

and the full one with `--seeds 0,1,2,3,4,5,6 --methods grpo,tic,gmc --delays 0,32,64`.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gmc_grpo.stats import interval_text

#: The suite of the stage.
LLM_SUITE_RECIPE = "tiny_additions_sweep"
#: The methods and delays of the full design (the default runs the primary's cells only).
LLM_SUITE_METHODS: tuple[str, ...] = ("grpo", "tic", "gmc")
LLM_SUITE_DELAYS: tuple[int, ...] = (0, 32, 64)
#: `LLMTrainConfig` values changed from the recipe (none: the recipe tracks the bounds itself)
LLM_SUITE_OVERRIDES: dict[str, Any] = {}
#: The declared primary comparison `(a, b, measure)` for `a - b` and its delay: held-out sampled
#: Pass@1 of the current policy at the last evaluation (`llm_runs.suite.MEASURES["sampled"]`).
PRIMARY: tuple[str, str, str] = ("gmc", "tic", "sampled")
PRIMARY_DELAY = 32
#: The first secondary (listed first; Holm-adjusted with the rest): the area under the held-out curve.
FIRST_SECONDARY: tuple[str, str, str] = ("gmc", "tic", "sampled_area")


@dataclass(frozen=True)
class Design:
    """The cells of one design: every (method, delay, seed) of the product is a run."""

    seeds: tuple[int, ...]
    methods: tuple[str, ...]
    delays: tuple[int, ...]


#: The designs (`gmc-grpo reproduce` runs "default", `--full` runs "full"). The default holds
#: the primary comparison's cells only (TIC and GMC at `PRIMARY_DELAY`), with the seeds that fit
#: the stage's budget; the full design adds GRPO, `D = 0` and `D = 64` with the seeds the
#: pilot's spread asks for (`DETECTABLE` with power 0.8).
DESIGNS: dict[str, Design] = {
    "default": Design(seeds=tuple(range(6)), methods=("tic", "gmc"), delays=(32,)),
    "full": Design(seeds=tuple(range(7)), methods=LLM_SUITE_METHODS, delays=LLM_SUITE_DELAYS),
}
#: The true primary difference (held-out sampled Pass@1) the full design is sized to detect
#: (power 0.8): 2 points, between the paper's GMC - TIC at D = 64 and 128 (Table 3: +0.1, +3.6).
DETECTABLE = 0.02
#: The pilot suite whose seed spread sized the designs (docs/llm-cpu.md): the per-seed primary
#: differences GMC - TIC held-out sampled Pass@1 at the end at `PRIMARY_DELAY`, and where they
#: were measured.
PILOT: dict[str, Any] = {
    "differences": (0.0162, 0.0450, 0.0325),
    "seeds": (0, 1, 2),
    "machine": "the project's 2-core AMD EPYC, shared with other jobs",
}

COMPARISON_LABELS = {
    ("gmc", "tic"): "GMC - TIC",
    ("gmc", "grpo"): "GMC - GRPO",
    ("tic", "grpo"): "TIC - GRPO",
}
#: The figures of the section (the registry's, drawn from this stage's runs only).
FIGURES: tuple[str, ...] = ("figure2", "figure4", "bounds_fixed_delay", "outcome_kl")


def design(full: bool = False) -> Design:
    """The default design, or the full one."""
    return DESIGNS["full" if full else "default"]


def design_seeds(full: bool = False) -> tuple[int, ...]:
    """The seeds of the default design, or of the full one."""
    return design(full).seeds


def llm_suite_settings(full: bool = False) -> tuple[tuple[str, Any], ...]:
    """The stage's settings (a finished stage is reused only when they are unchanged)."""
    return (
        ("recipe", LLM_SUITE_RECIPE),
        ("design", "full" if full else "default"),
        ("seeds", list(design(full).seeds)),
        ("methods", list(design(full).methods)),
        ("delays", list(design(full).delays)),
        ("overrides", dict(LLM_SUITE_OVERRIDES)),
        ("primary", [*PRIMARY, PRIMARY_DELAY]),
    )


def llm_suite_config(out: Path, full: bool = False) -> Any:
    """The stage's `llm_runs.suite.SuiteConfig`, writing into `out`."""
    from llm_runs.recipes import load_recipe
    from llm_runs.suite import SuiteConfig

    base = {**load_recipe(LLM_SUITE_RECIPE, base_only=True), **LLM_SUITE_OVERRIDES}
    return SuiteConfig(
        out=str(out),
        base=base,
        seeds=design(full).seeds,
        methods=design(full).methods,
        delays=design(full).delays,
    )


def machine_description() -> str:
    """CPU model, core count and the 1-minute load average (e.g. "AMD EPYC ..., 2 cores,
    load 0.4")."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = f", load {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{model}, {os.cpu_count()} cores{load}"


def _interval(row: dict[str, Any]) -> str:
    return interval_text(row, "+.3f")


def design_markdown(full: bool) -> list[str]:
    """How the designs' seeds follow from the pilot's spread (`PILOT`), in Markdown lines."""
    from llm_runs.comparisons import design_power

    if len(PILOT["differences"]) < 2:
        return []
    lines = []
    pilot = PILOT["differences"]
    for name in ("default", "full"):
        cells = DESIGNS[name]
        power = design_power(pilot, detectable=DETECTABLE, seeds=len(cells.seeds))
        if name == "default":
            lines.append(
                f"**The design.** On a pilot suite of this recipe ({len(pilot)} seeds, GMC and "
                f"TIC at D = {PRIMARY_DELAY}, {PILOT['machine']}) the per-seed primary "
                f"differences had a standard deviation of {power['sd']:.3f}. A paired t test at "
                f"level 0.05 with power 0.8 then needs {power['seeds_needed']} seeds to detect a "
                f"true difference of {DETECTABLE} (`llm_runs.comparisons.design_power`)."
            )
        lines.append(
            f"- {name} design ({len(cells.seeds)} seeds, {', '.join(cells.methods)} at D = "
            f"{', '.join(str(d) for d in cells.delays)}"
            + (
                ", `gmc-grpo reproduce --full`"
                if name == "full"
                else ", what fits the stage's budget"
            )
            + f"): detects differences of {power['minimum_detectable']:.3f} or more with power "
            f"0.8 (power {power['power_of_design']:.2f} at {DETECTABLE})"
            + (" **(this run)**" if (name == "full") == full else "")
            + "."
        )
    return [*lines, ""]


def bounds_table(runs: list[Any]) -> tuple[str, Any]:
    """The runs-vs-theory data of the suite's runs (`figures.bounds_vs_runs`) and a Markdown
    table of §4.2's quantities per delay and method (means over seeds, 95% intervals)."""
    from figures.bounds_vs_runs import bounds_data

    data = bounds_data(runs, "fixed_delay")

    def cell(point: dict[str, Any], key: str, digits: str = ".3g") -> str:
        value = point.get(key)
        if value is None:
            return "-"
        lo, hi = point.get(f"{key}_lo"), point.get(f"{key}_hi")
        if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
            return format(value, digits)
        return f"{value:{digits}} [{lo:{digits}}, {hi:{digits}}]"

    lines = [
        "| D | method | removed mass | capped fraction | KL(current \\|\\| behavior), nats | "
        "bound KL/den | drift $\\Vert\\theta_n-\\theta_{n-\\tau}\\Vert^2$ | drift / pathwise | "
        "lag-0 mismatch |",
        "| ---: | --- | --- | --- | --- | --- | --- | ---: | --- |",
    ]
    for point in sorted(data.points, key=lambda p: (p["delay"], str(p["method"]))):
        ratio = (
            f"{point['drift_sq'] / point['drift_path']:.2f}"
            if point.get("drift_sq") and point.get("drift_path")
            else "-"
        )
        lines.append(
            f"| {point['delay']} | {point['method']} | {cell(point, 'removed_mass')} | "
            f"{cell(point, 'capped_frac')} | {cell(point, 'kl')} | {cell(point, 'bound')} | "
            f"{cell(point, 'drift_sq')} | {ratio} | {cell(point, 'mismatch')} |"
        )
    return "\n".join(lines) + "\n", data


@dataclass
class LlmStageResults:
    """What the stage computed, apart from its text (`render_llm_tiny` writes that)."""

    analysis: Any
    """`llm_runs.suite.SuiteAnalysis` of the suite's runs"""
    declared: dict[str, Any]
    """`llm_runs.comparisons.declared_comparisons`: the primary and the Holm-adjusted rest"""
    power: dict[str, Any] | None
    """`design_power` of this run's per-seed primary differences (None below two seeds)"""
    quantities: str
    """§4.2's quantities per delay and method (`bounds_table`, Markdown)"""
    bounds: Any
    """`figures.bounds_vs_runs.bounds_data` of the runs (its `checks` and `caption`)"""
    figures: str
    """the figures' Markdown (`_figures`)"""
    base: dict[str, Any]
    """the suite's base config (the recipe plus `LLM_SUITE_OVERRIDES`)"""
    full: bool
    machine: str
    out_name: str
    """the stage folder's name (the report's links are relative to its parent)"""
    kl: dict[tuple[int, str], dict[str, float]] = field(default_factory=dict)
    """(delay, method) -> `t_interval` over seeds of the runs' median KL(current || behavior)"""


def compute_llm_tiny(out_dir: Path, full: bool = False) -> LlmStageResults:
    """Run (or read back) the stage's suite and compute its declared comparisons, power,
    measured KL, the bounds' quantities and the figures."""
    from figures.discover import discover
    from llm_runs import suite
    from llm_runs.comparisons import declared_comparisons, design_power
    from pipeline.llm_report import suite_markdown

    out_dir = Path(out_dir)
    machine = machine_description()
    config = llm_suite_config(out_dir / "suite", full)
    analysis = suite.run_suite(config, render=suite_markdown)  # and suite/suite_summary.md
    delay = PRIMARY_DELAY if PRIMARY_DELAY in analysis.delays else max(analysis.delays)
    declared = declared_comparisons(analysis, primary=PRIMARY, primary_delay=delay)
    first = (delay, *FIRST_SECONDARY)
    declared["secondary"].sort(key=lambda r: (r["delay"], r["a"], r["b"], r["measure"]) != first)
    primary = declared["primary"]
    va = analysis.values.get((primary["delay"], primary["a"], primary["measure"]), {})
    vb = analysis.values.get((primary["delay"], primary["b"], primary["measure"]), {})
    differences = [va[s] - vb[s] for s in sorted(va) if s in vb]
    power = None
    if len(differences) >= 2 and primary["sd"] > 0:
        power = design_power(differences, detectable=DETECTABLE)
    quantities, bounds = bounds_table(discover([out_dir / "suite"]))
    kl = {
        (d, m): analysis.intervals[(d, m, "behavior_kl")]
        for d in analysis.delays
        for m in analysis.methods
        if (d, m, "behavior_kl") in analysis.intervals
    }
    return LlmStageResults(
        analysis=analysis,
        declared=declared,
        power=power,
        quantities=quantities,
        bounds=bounds,
        figures=_figures(out_dir),
        base=config.base,
        full=full,
        machine=machine,
        out_name=out_dir.name,
        kl=kl,
    )


def llm_tiny_stage(out_dir: Path, full: bool = False) -> dict[str, Any]:
    """Run (or read back) the stage's suite and report it (`compute_llm_tiny`, then
    `render_llm_tiny`).

    Returns `{"headline", "markdown", "analysis", "declared", "power", "checks", "design",
    "machine", "kl"}`; the markdown writes formulas as `$...$`.
    """
    results = compute_llm_tiny(out_dir, full)
    headline, markdown = render_llm_tiny(results)
    return {
        "headline": headline,
        "markdown": markdown,
        "analysis": results.analysis.to_json(),
        "declared": results.declared,
        "power": results.power,
        "checks": results.bounds.checks,
        "design": "full" if results.full else "default",
        "machine": results.machine,
        "kl": {f"d{d}/{m}": v for (d, m), v in results.kl.items()},
    }


def _label(row: dict[str, Any], analysis: Any) -> str:
    name = COMPARISON_LABELS.get((row["a"], row["b"]), f"{row['a']} - {row['b']}")
    return name if len(analysis.delays) == 1 else f"{name} (D = {row['delay']})"


def _kl_text(results: LlmStageResults) -> str:
    """`D = 32: TIC 0.08, GMC 0.05; ...`: the mean over seeds of the runs' median KL."""
    parts = []
    for d in results.analysis.delays:
        cells = [
            f"{m.upper()} {results.kl[(d, m)]['mean']:.3g}"
            for m in results.analysis.methods
            if (d, m) in results.kl and d > 0
        ]
        if cells:
            parts.append(f"D = {d}: " + ", ".join(cells))
    return "; ".join(parts)


def render_llm_tiny(results: LlmStageResults) -> tuple[str, str]:
    """`(headline, markdown)` of the stage's results."""
    from llm_runs.suite import MEASURES
    from pipeline.llm_report import comparisons_markdown, suite_markdown

    analysis, primary = results.analysis, results.declared["primary"]
    delays = ", ".join(str(d) for d in analysis.delays)
    growth = [c for c in results.bounds.checks if c["claim"].split(" grows")[0] in GROWTH]
    kl = _kl_text(results)
    headline = (
        f"{len(analysis.seeds)} seeds, D = {delays}: primary {_label(primary, analysis)} "
        f"held-out sampled Pass@1 of the current policy {_interval(primary)} "
        f"{primary['verdict']}"
        + (f"; KL(current || behavior) per response, nats: {kl}" if kl else "")
        + "".join(f"; {c['claim'].split(' (')[0]}: {c['verdict']}" for c in growth)
    )
    base, power = results.base, results.power
    seeds = ",".join(str(s) for s in analysis.seeds)
    lines = [
        f"The tiny CPU recipe `{LLM_SUITE_RECIPE}` (random-init 2-layer Qwen3, a "
        f"{base.get('sft_steps', 0):,}-step supervised warm-up on additions with operands up to "
        f"{base.get('arithmetic', {}).get('max_operand')}, one base model for every seed, then "
        f"{base.get('total_steps')} RL updates at lr {base.get('lr'):g} with the full "
        "pipeline) for "
        f"{', '.join(analysis.methods)} at fixed delays $D = {delays}$ and seeds "
        f"{', '.join(str(s) for s in analysis.seeds)} (the "
        f"{'full' if results.full else 'default'} design): {len(analysis.runs)} runs "
        f"(`gmc-grpo llm train --recipe {LLM_SUITE_RECIPE} --seeds {seeds} --methods "
        f"{','.join(analysis.methods)} --delays {','.join(str(d) for d in analysis.delays)}`). "
        "Not a paper setting: a measurement of what the tiny model shows, with intervals.",
        "",
        *design_markdown(results.full),
        "The current policy is evaluated every "
        f"{base.get('eval_every')} updates on the {base.get('arithmetic', {}).get('num_eval')} "
        f"held-out sums (greedy, and sampled Pass@1 over {base.get('eval_samples')} samples); "
        "`sampled` is its last evaluation, `sampled_area` the area under that curve. The "
        "consumed reward (`consumed_reward_final`) is the reward of the batches the learner "
        "consumed in the last 10% of updates: under a delay $D$ the policy $D$ updates older "
        "generated them. `behavior_kl` is the median over a run of the bound tracker's "
        "KL(current || behavior) per response (nats). Paired differences over the $n$ seeds, "
        "$d_s = r_s^{A} - r_s^{B}$, are reported as $\\bar d \\pm t_{0.975,\\,n-1}\\, "
        "\\mathrm{sd}(d)/\\sqrt{n}$.",
        "",
        suite_markdown(analysis).rstrip(),
        "",
        "The verdicts that count: one comparison declared primary in advance and judged alone; "
        "the rest judged together with Holm's step-down adjustment (the first secondary is the "
        "primary's area under the held-out curve; two-sided paired t tests). The collapse rate "
        "(`collapsed`) and the measured KL are reported, not tested.",
        "",
        comparisons_markdown(results.declared).rstrip(),
        "",
        "Measures: " + "; ".join(f"`{k}`: {v}" for k, v in MEASURES.items()) + ".",
        "",
    ]
    if power is not None:
        lines += [
            f"Power of this run: the per-seed primary differences have a standard deviation of "
            f"{power['sd']:.3f} ({power['spread_from_seeds']} seeds); these {power['seeds']} "
            f"seeds detect differences of {power['minimum_detectable']:.3f} or more with power "
            f"0.8, and {power['seeds_needed']} seeds would detect {DETECTABLE}.",
            "",
        ]
    lines += _bounds_lines(results)
    return headline, "\n".join(lines) + "\n"


def _bounds_lines(results: LlmStageResults) -> list[str]:
    """The report's §4.2 quantities, figures, machine and record paths (Markdown lines)."""
    return [
        "**§4.2's quantities along the runs** (steady state, steps $\\ge D$; mean over seeds "
        "with its 95% interval over seeds; `llm_runs.bound_tracking`, `figures.bounds_vs_runs`): the "
        "removed mass and capped fraction the learner logs at every update, the KL between the "
        "current and the behavior policy (the bound tracker's: responses sampled at "
        "$\\theta_n$, the exact per-token KL summed, every 10 updates), the removed-mass bound "
        "$\\mathrm{KL}/\\log(1+2\\epsilon)$ (GMC) or $\\mathrm{KL}/c_\\epsilon$ (TIC), the "
        "drift to the behavior parameters and its ratio to the pathwise bound "
        "$\\tau\\sum_k\\Vert\\theta_{k+1}-\\theta_k\\Vert^2$ (1: the steps of the window "
        "aligned, drift $\\propto\\tau^2$; $1/\\tau$: uncorrelated), and the lag-0 "
        "engine/learner mismatch: the mean over trajectories of "
        "$|\\sum_t (\\log\\mu_{\\mathrm{engine}} - \\log\\pi_{\\mathrm{learner}})|$, nats per "
        "response, measured every 10 updates on a lag-0 batch (`llm_runs.mismatch`).",
        "",
        results.quantities.rstrip(),
        "",
        "Runs vs theory: " + results.bounds.caption,
        "",
        results.figures.rstrip(),
        "",
        f"Machine: {results.machine} at the start of the stage (the stage's time is in the "
        "table at the top). The CPU kernels are pinned (`gmc_grpo.determinism`), so the same "
        "seeds give the same records on another x86-64 CPU with AVX2.",
        "",
        f"Run records: `{results.out_name}/suite/<method>_d<D>_seed<s>/`; the analysis: "
        f"`{results.out_name}/suite/suite_summary.json`.",
    ]


#: the runs-vs-theory checks quoted in the headline (the two that need two delays)
GROWTH = ("removed mass", "capped fraction")


def _figures(out_dir: Path) -> str:
    """Figures 2 and 4 and the runs-vs-theory figure of the stage's runs, into
    `out_dir/figures/` (the registry's items, `figures.cli.write_all`), as Markdown."""
    from figures.cli import write_all

    result = write_all(
        [out_dir / "suite"],
        out_dir / "figures",
        only=list(FIGURES),
        formats=("png",),
        root=out_dir.parent,
    )
    lines = []
    for name in FIGURES:
        for path in result.written.get(name, []):
            if path.suffix == ".png":
                lines.append(f"![{name}]({out_dir.name}/figures/{path.name})")
        if name in result.captions and name != "bounds_fixed_delay":  # its checks: above
            lines += ["", result.captions[name], ""]
        if name in result.skipped:
            lines.append(f"- {name} not made: {result.skipped[name]}")
    return "\n".join(lines) + "\n"
