"""The LM bias stage of `gmc-grpo reproduce`: each estimator's bias on the tiny Qwen3.

`gmc-grpo llm bias` (`llm_runs.lm_bias`) at two checkpoints of a delayed run: a GMC run of the
Qwen3 stage's recipe at the fixed delay `BIAS_LAG` (trained here with a checkpoint every
`BIAS_LAG` updates, all kept; checkpoints change no record), each checkpoint `theta_n` of
`BIAS_STEPS` against its stale behavior policy `theta_{n - BIAS_LAG}`. IS, TIC, GMC, GRPO and
VCPO's truncation are computed on shared samples, their squared bias against the on-policy
gradient estimated without Monte Carlo bias with jackknife intervals, GMC - TIC paired; the
report says whether the toy sweep's findings (IS unbiased, GMC's bias below TIC's when stale,
GMC's shrinking with `G`) hold on the LM.

Why lag 32 and checkpoints 32 and 64: the recipe's KL pilot (`docs/llm-cpu.md`, GMC at D = 32,
seeds 0-2) measured the current/behavior KL at 0.09-0.41 nats per response while the learner
consumes the initial policy's batches (updates 10-30: checkpoint 32 against theta_0, inside the
paper's local-overlap band of about 0.1-1 nat) and 0.02-0.05 (median) afterwards (checkpoint 64
against theta_32, at the band's lower edge); the stage's primary comparison runs at D = 32.

Sized to a few minutes on the project's 2-core machine (`BIAS_SETTINGS`: two group sizes, the
smallest and the largest of the toy sweep's, 24 blocks of 128 trajectories per method and `G`,
48 on-policy blocks per checkpoint). The same measurement from the command line:

    gmc-grpo llm bias --recipe tiny_additions_sweep --delay 32 --steps 32,64 --lag 32 \
        --group-sizes 4,16 --blocks 24 --target-blocks 48 --out runs/lm_bias

The stage computes (`llm_bias_results`: the measurement, a `BiasStageResults`) and renders apart
(`bias_stage_headline`, `bias_stage_markdown`, and `bias_table_markdown`, which also writes
`gmc-grpo llm bias`'s `bias.md`, handed to the command by `pipeline.llm`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pipeline.llm_stage import LLM_SUITE_RECIPE, machine_description

#: the delay of the measured run (its behavior policies' lag) and the checkpoints measured
BIAS_LAG = 32
BIAS_STEPS: tuple[int, ...] = (32, 64)
#: `llm_runs.lm_bias.BiasSettings` values of the stage
BIAS_SETTINGS: dict[str, Any] = {
    "group_sizes": (4, 16),
    "blocks": 24,
    "target_blocks": 48,
    "trajectories_per_block": 128,
    "seed": 0,
}


def llm_bias_settings() -> tuple[tuple[str, Any], ...]:
    """The stage's settings (a finished stage is reused only when they are unchanged)."""
    return (
        ("recipe", LLM_SUITE_RECIPE),
        ("lag", BIAS_LAG),
        ("steps", list(BIAS_STEPS)),
        ("bias", {k: list(v) if isinstance(v, tuple) else v for k, v in BIAS_SETTINGS.items()}),
    )


@dataclass(frozen=True)
class BiasStageResults:
    """What the LM bias stage measured, ready to render.

    result: `llm_runs.lm_bias.bias_of_run`'s result with the `BiasSettings` used (`"settings"`,
        as a dict): per checkpoint and `G` every method's squared-bias intervals, and the
        findings (`bias.json`).
    recipe: the recipe of the measured run.
    stage_folder: the stage's folder name (the report links `<stage_folder>/run/`).
    machine: `pipeline.llm_stage.machine_description()` at the start of the stage.
    """

    result: dict[str, Any]
    recipe: str
    stage_folder: str
    machine: str


def llm_bias_results(out_dir: Path) -> BiasStageResults:
    """Train the delayed run (skipped when finished), measure the bias at its checkpoints and
    write `bias.json`."""
    import torch

    from gmc_grpo.json_files import atomic_write_json
    from llm_runs.bias_cli import train_for_bias
    from llm_runs.lm_bias import BiasSettings, bias_of_run
    from llm_runs.models import transformers_progress

    out_dir = Path(out_dir)
    machine = machine_description()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the records of the suite's runs are made with one thread too
    settings = BiasSettings(**BIAS_SETTINGS)
    try:
        with transformers_progress(False):
            run_dir = train_for_bias(
                LLM_SUITE_RECIPE, "gmc", out_dir / "run", None, progress=False, delay=BIAS_LAG
            )
            result = bias_of_run(run_dir, settings, steps=BIAS_STEPS, lag=BIAS_LAG, progress=False)
    finally:
        torch.set_num_threads(threads)
    result["settings"] = asdict(settings)
    atomic_write_json(out_dir / "bias.json", result)
    return BiasStageResults(result, LLM_SUITE_RECIPE, out_dir.name, machine)


def llm_bias_stage(out_dir: Path) -> dict[str, Any]:
    """Train the delayed run (skipped when finished), measure the bias at its checkpoints and
    report it: `{"headline", "markdown", "findings", "machine"}`; writes `bias.json` and
    `bias.md`."""
    from gmc_grpo.json_files import atomic_write_text

    results = llm_bias_results(out_dir)
    atomic_write_text(Path(out_dir) / "bias.md", bias_table_markdown(results.result))
    return {
        "headline": bias_stage_headline(results),
        "markdown": bias_stage_markdown(results),
        "findings": results.result["findings"],
        "machine": results.machine,
    }


# ----------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------


def value_interval_text(interval: dict[str, float], spec: str = ".3g") -> str:
    """An estimate `{"value", "lo", "hi"}` as `"value [lo, hi]"`, each number in format `spec`."""
    return f"{interval['value']:{spec}} [{interval['lo']:{spec}}, {interval['hi']:{spec}}]"


def _signed(interval: dict[str, float]) -> str:
    return value_interval_text(interval, "+.3g")


def bias_table_markdown(result: dict[str, Any]) -> str:
    """Tables of a `bias_of_run` result: per checkpoint and `G` each method's squared bias
    (absolute and relative to `||grad J / T||^2`) and removed mass; the findings."""
    text = value_interval_text
    lines = []
    for c in result["checkpoints"]:
        lines += [
            f"Checkpoint {c['step']} against its behavior policy {c['behavior_step']} "
            f"(lag {result['lag']}): KL(current || behavior) {text(c['kl'])} nats per response.",
            "",
            "| G | method | squared bias | relative | removed mass | capped |",
            "| ---: | --- | --- | --- | --- | --- |",
        ]
        for g, stats in c["by_group_size"].items():
            for name, row in stats["methods"].items():
                removed = row.get("removed_mass", {"value": math.nan})
                capped = row.get("capped_frac", {"value": math.nan})
                lines.append(
                    f"| {g} | {name} | {text(row['bias_sq'])} | {text(row['relative_bias_sq'])} | "
                    f"{removed['value']:.3g} | {capped['value']:.3g} |"
                )
            for name, row in stats["paired"].items():
                lines.append(
                    f"| {g} | **{name}** (paired) | {text(row['bias_sq'])} | "
                    f"{text(row['relative_bias_sq'])} | | |"
                )
        lines.append("")
    f = result["findings"]
    lines += [
        f"- IS unbiased (0 inside its interval): {f['is_unbiased']['holds']} of "
        f"{f['is_unbiased']['of']} points.",
        f"- GMC's squared bias below TIC's (paired interval below 0): "
        f"{f['gmc_below_tic']['holds']} of {f['gmc_below_tic']['of']} points "
        f"({f['gmc_below_tic']['reversed']} reversed).",
    ]
    for r in f["shrinks_with_G"]:
        verdict = "shrinks" if r["shrinks"] else "no resolved decrease"
        lines.append(
            f"- {r['method']}, checkpoint {r['step']}: squared bias at G = {r['smallest_G']} "
            f"minus at G = {r['largest_G']}: {text(r)} ({verdict})."
        )
    return "\n".join(lines) + "\n"


def bias_stage_headline(results: BiasStageResults) -> str:
    """One line: how often GMC's bias is below TIC's, IS unbiased, GMC's bias shrinking."""
    findings = results.result["findings"]
    below, unbiased = findings["gmc_below_tic"], findings["is_unbiased"]
    shrink = [r for r in findings["shrinks_with_G"] if r["method"] == "gmc"]
    group_sizes = results.result["settings"]["group_sizes"]
    return (
        f"GMC's squared bias below TIC's (paired interval below 0) at {below['holds']} of "
        f"{below['of']} (checkpoint, G) points ({below['reversed']} reversed); IS unbiased at "
        f"{unbiased['holds']} of {unbiased['of']}; GMC's bias shrinks from G = "
        f"{group_sizes[0]} to {group_sizes[-1]} (resolved) at "
        f"{sum(r['shrinks'] for r in shrink)} of {len(shrink)} checkpoints"
    )


def bias_stage_markdown(results: BiasStageResults) -> str:
    """The stage's section of the report: the question, the tables (`bias_table_markdown`),
    the toy sweep's findings on the LM, the machine."""
    result, settings = results.result, results.result["settings"]
    lag = result["lag"]
    findings = result["findings"]
    below, unbiased = findings["gmc_below_tic"], findings["is_unbiased"]
    shrink = [r for r in findings["shrinks_with_G"] if r["method"] == "gmc"]
    tic_shrink = [r for r in findings["shrinks_with_G"] if r["method"] == "tic"]
    kls = ", ".join(f"{c['step']} (KL {c['kl']['value']:.2f} nats)" for c in result["checkpoints"])
    lines = [
        "The question the toy sweep asks of the token MDPs, asked of the tiny Qwen3 "
        "(`gmc-grpo llm bias`, `llm_runs.lm_bias`): at checkpoints $\\theta_n$ of a delayed "
        f"run (the GMC run of `{results.recipe}` at $D = {lag}$, seed 0, trained here "
        f"into `{results.stage_folder}/run/`), with the stale behavior policy "
        f"$\\mu = \\theta_{{n-{lag}}}$, how far is each estimator's mean from the "
        "on-policy gradient $\\nabla J(\\theta_n)/T$? Every method is computed on the same "
        f"samples drawn from $\\mu$ ({settings['blocks']} blocks of "
        f"{settings['trajectories_per_block']} trajectories per method and $G$), the target from "
        f"{settings['target_blocks']} on-policy blocks; the squared bias is the two-sample "
        "U-statistic (unbiased, the Monte Carlo noise removed) with a 95% jackknife interval, "
        "GMC - TIC paired on the shared samples, every method with the leave-one-out "
        f"advantage. Checkpoints (KL to their behavior policy): {kls}.",
        "",
        bias_table_markdown(result).rstrip(),
        "",
        "**The toy sweep's findings on the LM:**",
        "",
        f"- IS is unbiased (0 inside its interval): {unbiased['holds']} of {unbiased['of']} "
        "points.",
        f"- GMC's squared bias below TIC's when stale (paired interval below 0): "
        f"{below['holds']} of {below['of']} points, {below['reversed']} reversed: "
        + "; ".join(
            f"checkpoint {r['step']}, G = {r['G']}: {_signed(r)} ({r['verdict']})"
            for r in below["points"]
        )
        + ".",
        "- GMC's bias shrinking with $G$ (smallest minus largest $G$, independent samples, "
        "resolved when the interval lies above 0): "
        + "; ".join(
            f"checkpoint {r['step']}: GMC {_signed(r)}"
            + (f", TIC {_signed(t)}" if t is not None else "")
            + (" (shrinks)" if r["shrinks"] else " (no resolved decrease)")
            for r, t in zip(shrink, [*tic_shrink, *[None] * len(shrink)], strict=False)
        )
        + ".",
        "",
        f"One delayed run and one seed: a measurement of this run's checkpoints, not of the "
        f"methods across runs. Machine: {results.machine} at the start of the stage.",
    ]
    return "\n".join(lines) + "\n"
