"""The Qwen3 track's stage of `gmc-grpo reproduce`: the delay trend on the tiny CPU model.

GRPO, TIC-GRPO and GMC-GRPO train the recipe `LLM_SUITE_RECIPE` (a random-init 2-layer Qwen3
after a supervised warm-up on additions, HF engine, full pipeline; `docs/llm-cpu.md` says how its
settings were found) at the fixed delays `LLM_SUITE_DELAYS` (`D = 0` and two positive delays) for
every seed of the design, as one suite (`llm_runs.suite`): the methods of a seed share the
warmed-up initial policy and the FIFO fill (built once, `llm_runs.cache`), the runs are spread
over the machine's cores (at most two processes, one torch thread each). Every run tracks the
quantities of §4.2's chain (`llm_runs.bound_tracking`: drift, its pathwise bound, the current/behavior
KL with its interval), beside the removed mass, capped fraction, entropy and lag-0 mismatch the
learner logs.

**The design.** The number of seeds comes from a power calculation (`llm_runs.comparisons.
design_power`) on the measured seed spread of the declared primary comparison (GMC - TIC final
reward at the largest delay), measured on a pilot suite of this recipe (`PILOT`): `DESIGNS`
holds the default (what fits the stage's budget of about ten minutes on the project's 2-core
machine) and the full design (`gmc-grpo reproduce --full`: the seeds that detect `DETECTABLE`
with power 0.8). Both are reported the same way: the primary comparison with its verdict, the
Holm-adjusted secondaries, the smallest difference the design detects, the bounds' quantities
per delay with the runs-vs-theory checks, and Figures 2 and 4 with the delays side by side.

A user reruns the default suite with

    gmc-grpo llm train --recipe tiny_delay_sweep --seeds 0,1,2,3,4,5 --methods grpo,tic,gmc \
        --delays 0,32,64 --set bound_every=10 --out runs/tiny_sweep
"""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path
from typing import Any

from gmc_grpo.stats import interval_text

#: The suite of the stage.
LLM_SUITE_RECIPE = "tiny_delay_sweep"
LLM_SUITE_METHODS: tuple[str, ...] = ("grpo", "tic", "gmc")
LLM_SUITE_DELAYS: tuple[int, ...] = (0, 32, 64)
#: `LLMTrainConfig` values changed from the recipe (none: the recipe tracks the bounds itself)
LLM_SUITE_OVERRIDES: dict[str, Any] = {}
#: The seeds of each design (`gmc-grpo reproduce` runs "default", `--full` runs "full").
DESIGNS: dict[str, tuple[int, ...]] = {
    "default": tuple(range(6)),
    "full": tuple(range(20)),
}
#: The true primary difference (consumed reward of the last updates) the full design is sized to detect (power 0.8).
DETECTABLE = 0.10
#: The pilot suite whose seed spread sized the designs (docs/llm-cpu.md): the per-seed primary
#: differences GMC - TIC consumed reward of the last updates at the largest delay, and where they were measured.
PILOT: dict[str, Any] = {
    "differences": (0.026, 0.070, -0.175, -0.163, 0.060, -0.281),
    "seeds": (0, 1, 2, 3, 4, 5),
    "machine": "the project's 2-core AMD EPYC, shared with other jobs",
}

COMPARISON_LABELS = {
    ("gmc", "tic"): "GMC - TIC",
    ("gmc", "grpo"): "GMC - GRPO",
    ("tic", "grpo"): "TIC - GRPO",
}
#: The figures of the section (the registry's, drawn from this stage's runs only).
FIGURES: tuple[str, ...] = ("figure2", "figure4", "bounds_fixed_delay")


def design_seeds(full: bool = False) -> tuple[int, ...]:
    """The seeds of the default design, or of the full one."""
    return DESIGNS["full" if full else "default"]


def llm_suite_settings(full: bool = False) -> tuple[tuple[str, Any], ...]:
    """The stage's settings (a finished stage is reused only when they are unchanged)."""
    return (
        ("recipe", LLM_SUITE_RECIPE),
        ("design", "full" if full else "default"),
        ("seeds", list(design_seeds(full))),
        ("methods", list(LLM_SUITE_METHODS)),
        ("delays", list(LLM_SUITE_DELAYS)),
        ("overrides", dict(LLM_SUITE_OVERRIDES)),
    )


def llm_suite_config(out: Path, full: bool = False) -> Any:
    """The stage's `llm_runs.suite.SuiteConfig`, writing into `out`."""
    from llm_runs.recipes import load_recipe
    from llm_runs.suite import SuiteConfig

    base = {**load_recipe(LLM_SUITE_RECIPE, base_only=True), **LLM_SUITE_OVERRIDES}
    return SuiteConfig(
        out=str(out),
        base=base,
        seeds=design_seeds(full),
        methods=LLM_SUITE_METHODS,
        delays=LLM_SUITE_DELAYS,
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
        power = design_power(pilot, detectable=DETECTABLE, seeds=len(DESIGNS[name]))
        if name == "default":
            lines.append(
                f"**The design.** On a pilot suite of this recipe ({len(pilot)} seeds, "
                f"{PILOT['machine']}) the per-seed primary differences had a standard deviation "
                f"of {power['sd']:.3f}. A paired t test at level 0.05 with power 0.8 then needs "
                f"{power['seeds_needed']} seeds to detect a true difference of {DETECTABLE} "
                f"(`llm_runs.comparisons.design_power`)."
            )
        lines.append(
            f"- {name} design ({len(DESIGNS[name])} seeds"
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


def llm_tiny_stage(out_dir: Path, full: bool = False) -> dict[str, Any]:
    """Run (or read back) the stage's suite and report its declared comparisons, the bounds'
    quantities and the figures.

    Returns `{"headline", "markdown", "analysis", "declared", "power", "checks", "machine"}`;
    the markdown writes formulas as `$...$`.
    """
    from figures.discover import discover
    from llm_runs import suite
    from llm_runs.comparisons import comparisons_markdown, declared_comparisons, design_power
    from llm_runs.suite import MEASURES, suite_markdown

    out_dir = Path(out_dir)
    machine_at_start = machine_description()
    config = llm_suite_config(out_dir / "suite", full)
    analysis = suite.run_suite(config)
    seeds = len(analysis.seeds)
    delays = ", ".join(str(d) for d in analysis.delays)
    # one declared primary comparison, the rest Holm-adjusted together (`llm_runs.comparisons`)
    declared = declared_comparisons(analysis)
    primary = declared["primary"]

    def label(row: dict[str, Any]) -> str:
        name = COMPARISON_LABELS.get((row["a"], row["b"]), f"{row['a']} - {row['b']}")
        return name if len(analysis.delays) == 1 else f"{name} (D = {row['delay']})"

    va = analysis.values.get((primary["delay"], primary["a"], primary["measure"]), {})
    vb = analysis.values.get((primary["delay"], primary["b"], primary["measure"]), {})
    differences = [va[s] - vb[s] for s in sorted(va) if s in vb]
    power = None
    if len(differences) >= 2 and primary["sd"] > 0:
        power = design_power(differences, detectable=DETECTABLE)
    grpo = [
        analysis.intervals.get((d, "grpo", "consumed_reward_final"), {}).get("mean")
        for d in analysis.delays
    ]
    runs = discover([out_dir / "suite"])
    quantities, bounds = bounds_table(runs)
    growth = [c for c in bounds.checks if c["claim"].split(" grows")[0] in GROWTH]
    headline = (
        f"{seeds} seeds, D = {delays}: primary {label(primary)} consumed reward "
        f"{_interval(primary)} {primary['verdict']}"
        + (
            "; GRPO consumed reward " + " -> ".join(f"{v:.3f}" for v in grpo if v is not None)
            if all(v is not None for v in grpo)
            else ""
        )
        + "; "
        + "; ".join(f"{c['claim'].split(' (')[0]}: {c['verdict']}" for c in growth)
    )
    figures_md = _figures(out_dir)
    held_out = config.base.get("arithmetic", {}).get("num_eval", "the")
    samples = config.base.get("eval_samples", "the")
    steps = config.base.get("total_steps")
    design = "full" if full else "default"
    lines = [
        f"The tiny CPU recipe `{LLM_SUITE_RECIPE}` (random-init 2-layer Qwen3, supervised warm-up "
        "on additions with answers in `\\boxed{}`, one base model for every seed, then RL with "
        "the full pipeline: HF rollout engine, FIFO staleness schedule, learner, evaluations, "
        f"the bound tracker) for {', '.join(LLM_SUITE_METHODS)} at fixed delays $D = {delays}$ "
        f"({steps} updates) and seeds {', '.join(str(s) for s in analysis.seeds)} (the "
        f"{design} design): {len(analysis.runs)} runs (`gmc-grpo llm train --recipe "
        f"{LLM_SUITE_RECIPE} --seeds {','.join(str(s) for s in analysis.seeds)} --methods "
        f"{','.join(LLM_SUITE_METHODS)} --delays {','.join(str(d) for d in analysis.delays)} "
        "--set bound_every=10`). Not a paper setting: a measurement of what the tiny "
        "model shows, with intervals.",
        "",
        *design_markdown(full),
        "Per seed $s$ and method, the consumed reward $r_s$ (`consumed_reward_final`, formerly "
        "called final reward) is the mean reward of the batches the learner consumed in the last "
        "10% of updates: under a delay $D$ they were generated by the policy $D$ updates older, "
        "so it is not the reward of the current policy (the held-out evaluations measure that). A paired difference over the $n$ seeds, "
        "$d_s = r_s^{A} - r_s^{B}$, is reported as $\\bar d \\pm t_{0.975,\\,n-1}\\, "
        "\\mathrm{sd}(d)/\\sqrt{n}$. Held-out accuracy is measured on the "
        f"{held_out} held-out sums at the last evaluation (greedy, and sampled Pass@1 over "
        f"{samples} samples).",
        "",
        suite_markdown(analysis).rstrip(),
        "",
        "The paired table reads every interval at 95%; the verdicts that count are these: one "
        "comparison declared primary in advance, judged alone, and the rest judged together with "
        "Holm's step-down adjustment (`llm_runs.comparisons`; two-sided paired t tests).",
        "",
        comparisons_markdown(declared).rstrip(),
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
    lines += [
        "**§4.2's quantities along the runs** (steady state, steps $\\ge D$; mean over seeds "
        "with its 95% interval over seeds; `llm_runs.bound_tracking`, `figures.bounds_vs_runs`): the "
        "removed mass and capped fraction the learner logs at every update, the KL between the "
        "current and the behavior policy (the bound tracker's: responses sampled at "
        "$\\theta_n$, the exact per-token KL summed, every 10 updates), the removed-mass bound "
        "$\\mathrm{KL}/\\log(1+2\\epsilon)$ (GMC) or $\\mathrm{KL}/c_\\epsilon$ (TIC), the drift "
        "to the behavior parameters and its ratio to the pathwise bound "
        "$\\tau\\sum_k\\Vert\\theta_{k+1}-\\theta_k\\Vert^2$ (1: the steps of the window "
        "aligned, drift $\\propto\\tau^2$; $1/\\tau$: uncorrelated), and the lag-0 "
        "engine/learner mismatch: the mean over trajectories of "
        "$|\\sum_t (\\log\\mu_{\\mathrm{engine}} - \\log\\pi_{\\mathrm{learner}})|$, nats per "
        "response, measured every 10 updates on a lag-0 batch (`llm_runs.mismatch`).",
        "",
        quantities.rstrip(),
        "",
        "Runs vs theory: " + bounds.caption,
        "",
        figures_md.rstrip(),
        "",
        f"Machine: {machine_at_start} at the start of the stage (the stage's time is in the "
        "table at the top). Floating-point results differ between CPUs, so the sampled rollouts "
        "and every number here differ on another machine; the same machine and seed give the "
        "same records.",
        "",
        f"Run records: `{out_dir.name}/suite/<method>_d<D>_seed<s>/`; the analysis: "
        f"`{out_dir.name}/suite/suite_summary.json`.",
    ]
    return {
        "headline": headline,
        "markdown": "\n".join(lines) + "\n",
        "analysis": analysis.to_json(),
        "declared": declared,
        "power": power,
        "checks": bounds.checks,
        "design": design,
        "machine": machine_at_start,
    }


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
