"""The Qwen3 track's stage of `gmc-grpo reproduce`: the tiny CPU suite over seeds, paired.

GRPO, TIC-GRPO and GMC-GRPO train the tiny recipe under a fixed delay (`tiny_delay`: a random-init
2-layer Qwen3 after a supervised warm-up on additions, HF engine, full pipeline) for every seed of
`LLM_SUITE_SEEDS`, as one suite (`llm_runs.suite`): every method of a seed shares the warmed-up
initial policy and the FIFO fill (built once, `llm_runs.cache`), the runs are spread over the
machine's cores (at most two processes, one torch thread each), and the analysis gives per method
the mean over seeds and per pair of methods the paired difference with its 95% interval. The
report quotes that table only (never a single seed) and says on what machine it ran.

The size of the suite is chosen to keep the stage within about five minutes on the project's
2-core CPU (measured: see the README, "What `make reproduce` does"); `llm_suite_config` builds
it, so a user can rerun the same suite from the command line:

    gmc-grpo llm train --recipe tiny_delay --seeds 0,1,2,3,4,5 --methods grpo,tic,gmc \
        --out runs/tiny_suite
"""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path
from typing import Any

from gmc_grpo.stats import interval_text

#: The suite of the stage (the README's table comes from it).
LLM_SUITE_RECIPE = "tiny_delay"
LLM_SUITE_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
LLM_SUITE_METHODS: tuple[str, ...] = ("grpo", "tic", "gmc")
LLM_SUITE_DELAYS: tuple[int, ...] = (16,)
#: `TrainConfig` values changed from the recipe (none: the recipe as shipped)
LLM_SUITE_OVERRIDES: dict[str, Any] = {}

COMPARISON_LABELS = {("gmc", "tic"): "GMC - TIC", ("gmc", "grpo"): "GMC - GRPO"}
#: The true primary difference (final reward) the power statement is about.
DETECTABLE = 0.05
COMPARISON_LABELS[("tic", "grpo")] = "TIC - GRPO"


def llm_suite_settings() -> tuple[tuple[str, Any], ...]:
    """The stage's settings (a finished stage is reused only when they are unchanged)."""
    return (
        ("recipe", LLM_SUITE_RECIPE),
        ("seeds", list(LLM_SUITE_SEEDS)),
        ("methods", list(LLM_SUITE_METHODS)),
        ("delays", list(LLM_SUITE_DELAYS)),
        ("overrides", dict(LLM_SUITE_OVERRIDES)),
    )


def llm_suite_config(out: Path) -> Any:
    """The stage's `llm_runs.suite.SuiteConfig`, writing into `out`."""
    from llm_runs.recipes import load_recipe
    from llm_runs.suite import SuiteConfig

    base = {**load_recipe(LLM_SUITE_RECIPE, base_only=True), **LLM_SUITE_OVERRIDES}
    return SuiteConfig(
        out=str(out),
        base=base,
        seeds=LLM_SUITE_SEEDS,
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


def llm_tiny_stage(out_dir: Path) -> dict[str, Any]:
    """Run (or read back) the stage's suite and report its paired analysis.

    Returns `{"headline", "markdown", "analysis", "machine"}`; the markdown writes formulas as
    `$...$`.
    """
    from llm_runs import suite
    from llm_runs.comparisons import comparisons_markdown, declared_comparisons, design_power
    from llm_runs.suite import MEASURES, suite_markdown

    out_dir = Path(out_dir)
    machine_at_start = machine_description()
    config = llm_suite_config(out_dir / "suite")
    analysis = suite.run_suite(config)
    seeds = len(analysis.seeds)
    final = [r for r in analysis.paired if r["measure"] == "final_reward"]
    delays = ", ".join(str(d) for d in analysis.delays)
    # one declared primary comparison, the rest Holm-adjusted together (`llm_runs.comparisons`)
    declared = declared_comparisons(analysis)
    primary = declared["primary"]

    def label(row: dict[str, Any]) -> str:
        name = COMPARISON_LABELS.get((row["a"], row["b"]), f"{row['a']} - {row['b']}")
        return name if len(analysis.delays) == 1 else f"{name} (D = {row['delay']})"

    secondary_final = [r for r in declared["secondary"] if r["measure"] == "final_reward"]
    headline = (
        f"{seeds} seeds, D = {delays}, final reward: primary {label(primary)} "
        f"{_interval(primary)} {primary['verdict']}; Holm-adjusted: "
        + "; ".join(f"{label(r)} {_interval(r)} {r['verdict']}" for r in secondary_final)
    )
    va = analysis.values.get((primary["delay"], primary["a"], primary["measure"]), {})
    vb = analysis.values.get((primary["delay"], primary["b"], primary["measure"]), {})
    differences = [va[s] - vb[s] for s in sorted(va) if s in vb]
    power = None
    if len(differences) >= 2 and primary["sd"] > 0:
        power = design_power(differences, detectable=DETECTABLE)
    widths = [r["half_width"] for r in final if math.isfinite(r["half_width"])]
    held_out = config.base.get("arithmetic", {}).get("num_eval", "the")
    samples = config.base.get("eval_samples", "the")
    lines = [
        f"The tiny CPU recipe `{LLM_SUITE_RECIPE}` (random-init 2-layer Qwen3, supervised warm-up "
        "on additions with answers in `\\boxed{}`, then RL with the full pipeline: HF rollout "
        "engine, FIFO staleness schedule, learner, evaluations) for "
        f"{', '.join(LLM_SUITE_METHODS)} at fixed delay $D = {delays}$ and seeds "
        f"{', '.join(str(s) for s in analysis.seeds)}: {len(analysis.runs)} runs "
        "(`gmc-grpo llm train --recipe tiny_delay --seeds "
        f"{','.join(str(s) for s in analysis.seeds)} --methods {','.join(LLM_SUITE_METHODS)}`). "
        "Not a paper setting: a check that the pipeline runs and a measurement of what the tiny "
        "model shows, with intervals.",
        "",
        "Per seed $s$ and method, the final reward $r_s$ is the mean training reward of the last "
        "10% of updates. A paired difference over the $n$ seeds, $d_s = r_s^{A} - r_s^{B}$, is "
        "reported as $\\bar d \\pm t_{0.975,\\,n-1}\\, \\mathrm{sd}(d)/\\sqrt{n}$; a comparison "
        "**holds** only when that interval excludes $0$ on the side the paper predicts "
        "($\\mathrm{GMC} \\ge \\mathrm{TIC} > \\mathrm{GRPO}$ under delay). Held-out accuracy is "
        f"measured on the {held_out} held-out sums at the last evaluation (greedy, and sampled "
        f"Pass@1 over {samples} samples).",
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
    if widths:
        lines.append(
            f"With {seeds} seeds the paired final-reward intervals have half-widths "
            f"{', '.join(f'{w:.3f}' for w in widths)} (reward units, in [0, 1])."
        )
    if power is not None:
        lines.append(
            f"Power: the per-seed primary differences have a standard deviation of "
            f"{power['sd']:.3f} ({power['spread_from_seeds']} seeds); a paired t test at level "
            f"0.05 with power 0.8 needs {power['seeds_needed']} seeds to detect a true difference "
            f"of {DETECTABLE}, and these {power['seeds']} seeds detect differences of "
            f"{power['minimum_detectable']:.3f} or more (`llm_runs.comparisons.design_power`)."
        )
    lines += [
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
        "machine": machine_at_start,
    }
