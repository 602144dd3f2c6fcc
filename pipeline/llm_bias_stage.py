"""The LM bias stage of `gmc-grpo reproduce`: each estimator's bias on the tiny Qwen3, over runs.

`gmc-grpo llm bias` (`llm_runs.lm_bias`) at two checkpoints of each of `BIAS_SEEDS` delayed
runs: GMC runs of the Qwen3 stage's recipe at the fixed delay `BIAS_LAG` that differ only in
their training seed (`run_seed`; all start from the recipe's one base model, built once in the
stage's cache folder `cache/` and linked into each run), trained here with a checkpoint every
`BIAS_LAG` updates, all kept (checkpoints change no record); each checkpoint `theta_n` of
`BIAS_STEPS` against its stale behavior policy `theta_{n - BIAS_LAG}`. IS, TIC, GMC, GRPO and
VCPO's truncation are computed on shared samples, their squared bias against the on-policy
gradient estimated without Monte Carlo bias with jackknife intervals, GMC - TIC paired.

Per run the report says whether the toy sweep's findings (IS unbiased, GMC's bias below TIC's
when stale, GMC's shrinking with `G`) hold at its (checkpoint, `G`) points. Across runs
(`across_run_findings`), at each point, the per-run GMC - TIC paired difference of the
*relative* squared bias (`||b||^2 / ||grad J / T||^2`, comparable between runs whose gradients
differ in size) is averaged with a Student-t interval over the runs, beside the number of runs
whose own paired interval lies below or above 0. One claim, one verdict: "GMC's squared bias
below TIC's" is judged at the declared primary point `BIAS_PRIMARY` on the across-run interval;
the other points are secondary, their paired t tests Holm-adjusted. IS unbiased and GMC
shrinking with `G` are counted per run, not pooled.

Why lag 32, checkpoints 32 and 64, and the primary at checkpoint 32, G = 4 (declared before
the stage's runs, but after a hand measurement of training seeds 0 and 1 in which GMC - TIC was
negative at all 8 points and resolved at 2, checkpoint 32 with G = 4 of seed 1 among them; see
`docs/llm-cpu.md`): the recipe's KL pilot (`docs/llm-cpu.md`, GMC at D = 32, seeds 0-2)
measured the current/behavior KL at 0.09-0.41 nats per response while the learner consumes the
initial policy's batches (updates 10-30: checkpoint 32 against theta_0, inside the paper's
local-overlap band of about 0.1-1 nat) and 0.02-0.05 (median) afterwards (checkpoint 64
against theta_32, at the band's lower edge); the stage's primary comparison runs at D = 32.
Checkpoint 32 is the stalest point in the band, where the methods' weights differ most; G = 4
is the smallest group, where GMC's self-normalisation over `G` samples departs furthest from
IS and TIC's truncation acts on the fewest samples, the sharpest test of "GMC below TIC".

Seeds: run `s` trains with `run_seed = s`; its bias measurement's root seed
(`BiasSettings.seed`) is `bias_seed(s)`, the `numpy.random.SeedSequence` child of spawn key
`(s,)` under the stage's bias root `BIAS_SETTINGS["seed"]`, so the runs' block samples are
independent streams, apart from every stream of the training runs (`gmc_grpo.seeding`).

Sized for the project's 2-core machine (`BIAS_SETTINGS`: two group sizes, the smallest and the
largest of the toy sweep's, 24 blocks of 128 trajectories per method and `G`, 48 on-policy
blocks per checkpoint); the report gives each run's wall time. One run by hand (training seed
1; the stage gives the bias root's child as `--seed`):

    gmc-grpo llm train --recipe tiny_additions_sweep --run gmc --set run_seed=1 \
        --set checkpoint_every=32 --set keep_checkpoints=5 --set eval_every=0 --out runs/bias_s1
    gmc-grpo llm bias --run runs/bias_s1 --steps 32,64 --lag 32 --group-sizes 4,16 \
        --blocks 24 --target-blocks 48 --seed SEED --out runs/lm_bias_s1

The stage computes (`llm_bias_results`: the measurements, a `BiasStageResults`, and
`across_run_findings`) and renders apart (`bias_stage_headline`, `bias_stage_markdown`,
`across_run_markdown`, and `bias_table_markdown`, which also writes `gmc-grpo llm bias`'s
`bias.md`, handed to the command by `pipeline.llm`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gmc_grpo.stats import holm_adjust, interval_sign, interval_text, paired_t_test
from pipeline.llm_stage import LLM_SUITE_RECIPE, machine_description

#: the delay of the measured runs (their behavior policies' lag) and the checkpoints measured
BIAS_LAG = 32
BIAS_STEPS: tuple[int, ...] = (32, 64)
#: training seeds (`run_seed`) of the measured runs, one independent delayed run each
BIAS_SEEDS: tuple[int, ...] = (0, 1, 2)
#: the declared primary (checkpoint, G) of "GMC's squared bias below TIC's" (module docstring)
BIAS_PRIMARY: tuple[int, int] = (32, 4)
#: `llm_runs.lm_bias.BiasSettings` values of the stage; `seed` is the root of every run's
#: bias seed (`bias_seed`)
BIAS_SETTINGS: dict[str, Any] = {
    "group_sizes": (4, 16),
    "blocks": 24,
    "target_blocks": 48,
    "trajectories_per_block": 128,
    "seed": 0,
}
#: the paired measure compared across runs (a `gram_statistics` paired entry's key)
ACROSS_RUN_MEASURE = "relative_bias_sq"


def llm_bias_settings() -> tuple[tuple[str, Any], ...]:
    """The stage's settings (a finished stage is reused only when they are unchanged)."""
    return (
        ("recipe", LLM_SUITE_RECIPE),
        ("lag", BIAS_LAG),
        ("steps", list(BIAS_STEPS)),
        ("seeds", list(BIAS_SEEDS)),
        ("primary", list(BIAS_PRIMARY)),
        ("bias", {k: list(v) if isinstance(v, tuple) else v for k, v in BIAS_SETTINGS.items()}),
    )


def bias_seed(run_seed: int, root: int | None = None) -> int:
    """The bias measurement's root seed of training run `run_seed`: 32 bits of the
    `numpy.random.SeedSequence(root, spawn_key=(run_seed,))` state (`root`: the stage's
    `BIAS_SETTINGS["seed"]`)."""
    import numpy as np

    root = int(BIAS_SETTINGS["seed"]) if root is None else root
    state = np.random.SeedSequence(root, spawn_key=(int(run_seed),)).generate_state(1, np.uint32)
    return int(state[0])


@dataclass(frozen=True)
class BiasStageResults:
    """What the LM bias stage measured, ready to render.

    runs: training seed -> `llm_runs.lm_bias.bias_of_run`'s result of that run with the
        `BiasSettings` used (`"settings"`, as a dict) and the seed (`"run_seed"`): per
        checkpoint and `G` every method's squared-bias intervals, and the run's findings.
    across: `across_run_findings(runs)`.
    recipe: the recipe of the measured runs.
    stage_folder: the stage's folder name (the report links `<stage_folder>/run_s<seed>/`).
    machine: `pipeline.llm_stage.machine_description()` at the start of the stage.
    seconds: training seed -> wall seconds of its training and measurement in this stage (the
        first run's include the warm-up of the shared base model); a run reused from an
        earlier stage (its `bias.json` written with the same settings) has no entry.
    """

    runs: dict[int, dict[str, Any]]
    across: dict[str, Any]
    recipe: str
    stage_folder: str
    machine: str
    seconds: dict[int, float]


def _measure_run(out_dir: Path, seed: int, settings: Any) -> tuple[dict[str, Any], bool]:
    """Train run `seed` (skipped when finished) into `out_dir/run_s<seed>/` and measure its
    bias (reused when `bias.json` there has the same settings); returns the result and
    whether it was reused."""
    from gmc_grpo.json_files import atomic_write_json, read_json
    from llm_runs.bias_cli import train_for_bias
    from llm_runs.lm_bias import bias_of_run

    run_dir = out_dir / f"run_s{seed}"
    wanted = json.loads(json.dumps(asdict(settings)))
    written = run_dir / "bias.json"
    if written.is_file():
        result = read_json(written)
        if result.get("settings") == wanted and result.get("run_seed") == seed:
            return result, True
    train_for_bias(
        LLM_SUITE_RECIPE,
        "gmc",
        run_dir,
        None,
        progress=False,
        delay=BIAS_LAG,
        seed=seed,
        cache_dir=out_dir / "cache",
    )
    result = bias_of_run(run_dir, settings, steps=BIAS_STEPS, lag=BIAS_LAG, progress=False)
    result.update(settings=wanted, run_seed=seed)
    atomic_write_json(written, result)
    return read_json(written), False  # as reread: `G` keys as text, as in a reused result


def llm_bias_results(out_dir: Path) -> BiasStageResults:
    """Train the delayed runs of `BIAS_SEEDS` (each skipped when finished), measure the bias at
    their checkpoints, write `bias.json` (`{"runs": {seed: result}, "across_runs": ...}`)."""
    import torch

    from gmc_grpo.json_files import atomic_write_json
    from llm_runs.lm_bias import BiasSettings
    from llm_runs.models import transformers_progress

    out_dir = Path(out_dir)
    machine = machine_description()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the records of the suite's runs are made with one thread too
    runs: dict[int, dict[str, Any]] = {}
    seconds: dict[int, float] = {}
    try:
        with transformers_progress(False):
            for seed in BIAS_SEEDS:
                settings = BiasSettings(**{**BIAS_SETTINGS, "seed": bias_seed(seed)})
                start = time.perf_counter()
                runs[seed], reused = _measure_run(out_dir, seed, settings)
                if not reused:
                    seconds[seed] = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    across = across_run_findings(runs)
    atomic_write_json(
        out_dir / "bias.json", {"runs": {str(k): v for k, v in runs.items()}, "across_runs": across}
    )
    return BiasStageResults(runs, across, LLM_SUITE_RECIPE, out_dir.name, machine, seconds)


def llm_bias_stage(out_dir: Path) -> dict[str, Any]:
    """Train the delayed runs (each skipped when finished), measure the bias at their
    checkpoints and report it: `{"headline", "markdown", "findings", "machine"}`; writes
    `bias.json` and `bias.md`."""
    from gmc_grpo.json_files import atomic_write_text

    results = llm_bias_results(out_dir)
    atomic_write_text(Path(out_dir) / "bias.md", bias_stage_markdown(results))
    return {
        "headline": bias_stage_headline(results),
        "markdown": bias_stage_markdown(results),
        "findings": results.across,
        "machine": results.machine,
    }


# ----------------------------------------------------------------------------------------------
# Findings across runs
# ----------------------------------------------------------------------------------------------


def _paired_by_point(result: Mapping[str, Any], measure: str) -> dict[tuple[int, int], dict]:
    """(checkpoint, G) -> the run's GMC - TIC paired interval of `measure`."""
    out = {}
    for c in result["checkpoints"]:
        for g, stats in c["by_group_size"].items():
            pair = stats["paired"].get("gmc - tic")
            if pair is not None:
                out[(int(c["step"]), int(g))] = pair[measure]
    return out


def per_run_counts(result: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """One run's findings as counts: `{"is_unbiased": {holds, of}, "gmc_below_tic": {holds,
    reversed, of}, "gmc_shrinks": {holds, of}}` (from its `bias_findings`)."""
    f = result["findings"]
    shrink = [r for r in f["shrinks_with_G"] if r["method"] == "gmc"]
    return {
        "is_unbiased": {"holds": f["is_unbiased"]["holds"], "of": f["is_unbiased"]["of"]},
        "gmc_below_tic": {k: f["gmc_below_tic"][k] for k in ("holds", "reversed", "of")},
        "gmc_shrinks": {"holds": sum(bool(r["shrinks"]) for r in shrink), "of": len(shrink)},
    }


def across_run_findings(
    runs: Mapping[int, Mapping[str, Any]],
    primary: tuple[int, int] | None = None,
    level: float = 0.95,
    measure: str = ACROSS_RUN_MEASURE,
) -> dict[str, Any]:
    """ "GMC's squared bias below TIC's" over independent runs, and each run's findings counted.

    runs: training seed -> a `bias_of_run` result; primary: the declared (checkpoint, `G`)
    (default `BIAS_PRIMARY`). At every (checkpoint, `G`) point measured in
    any run, the runs' GMC - TIC paired differences of `measure` (their point values) get a
    paired t test over the runs present there (`gmc_grpo.stats.paired_t_test`: mean, t
    interval at `level`, p), with the number of runs whose own paired interval lies below 0
    and above 0. The primary point's verdict is its interval's sign ("holds": below 0,
    "reversed": above 0, else "not resolved"); every other point's is its Holm-adjusted p
    (`holm_adjust` over the secondary points) below `1 - level`, signed by the mean.

    Returns `{"measure", "level", "seeds", "primary_point": [checkpoint, G], "primary": point
    | None (None: not measured in any run), "points": [point, ...],
    "per_run": {seed: per_run_counts}}`, each point `{step, G, primary, values: [{seed, value,
    lo, hi}], n, mean, lo, hi, sd, t, p, p_holm, below, above, verdict}` (`p_holm` NaN for the
    primary), points sorted by checkpoint then `G`.
    """
    primary = BIAS_PRIMARY if primary is None else (int(primary[0]), int(primary[1]))
    by_run = {seed: _paired_by_point(result, measure) for seed, result in runs.items()}
    keys = sorted({key for points in by_run.values() for key in points})
    points = []
    for step, g in keys:
        values = [
            {"seed": seed, **{k: points[(step, g)][k] for k in ("value", "lo", "hi")}}
            for seed, points in by_run.items()
            if (step, g) in points
        ]
        test = paired_t_test([v["value"] for v in values], level)
        points.append(
            {
                "step": step,
                "G": g,
                "primary": (step, g) == tuple(primary),
                "values": values,
                **test,
                "below": sum(interval_sign(v) == "below 0" for v in values),
                "above": sum(interval_sign(v) == "above 0" for v in values),
            }
        )
    secondary = [p for p in points if not p["primary"]]
    for point, adjusted in zip(secondary, holm_adjust([p["p"] for p in secondary]), strict=True):
        point["p_holm"] = adjusted
        significant = not math.isnan(adjusted) and adjusted < 1 - level
        point["verdict"] = (
            ("holds" if point["mean"] < 0 else "reversed") if significant else "not resolved"
        )
    head = next((p for p in points if p["primary"]), None)
    if head is not None:
        head["p_holm"] = math.nan
        head["verdict"] = {"below 0": "holds", "above 0": "reversed"}.get(
            interval_sign(head), "not resolved"
        )
    return {
        "measure": measure,
        "level": level,
        "seeds": list(runs),
        "primary_point": list(primary),
        "primary": head,
        "points": points,
        "per_run": {seed: per_run_counts(result) for seed, result in runs.items()},
    }


# ----------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------


def value_interval_text(interval: dict[str, float], spec: str = ".3g") -> str:
    """An estimate `{"value", "lo", "hi"}` as `"value [lo, hi]"`, each number in format `spec`."""
    return f"{interval['value']:{spec}} [{interval['lo']:{spec}}, {interval['hi']:{spec}}]"


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


def _runs_text(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def _counts_text(across: Mapping[str, Any], finding: str) -> str:
    """A finding's per-run counts, e.g. `"4, 3 of 4"` (runs in `across["seeds"]` order)."""
    counts = [across["per_run"][seed][finding] for seed in across["seeds"]]
    ofs = {c["of"] for c in counts}
    holds = ", ".join(str(c["holds"]) for c in counts)
    if len(ofs) == 1:
        return f"{holds} of {ofs.pop()}"
    return ", ".join(f"{c['holds']} of {c['of']}" for c in counts)


def across_run_markdown(across: Mapping[str, Any]) -> str:
    """The across-run table: per (checkpoint, `G`) the GMC - TIC paired difference of the
    relative squared bias, mean over runs with its t interval, the runs whose own interval lies
    below / above 0, the p-value (Holm-adjusted for the secondary points) and the verdict."""
    level = across["level"]
    lines = [
        f"| checkpoint | G | role | GMC - TIC relative squared bias, mean over runs "
        f"[{level:.0%} t] | runs | own interval below 0 | above 0 | p | Holm p | verdict |",
        "| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for p in across["points"]:
        holm = "" if p["primary"] else f"{p['p_holm']:.3g}"
        lines.append(
            f"| {p['step']} | {p['G']} | {'**primary**' if p['primary'] else 'secondary'} | "
            f"{interval_text(p, '+.3g').replace(' seed', ' run')} | {p['n']} | {p['below']} | "
            f"{p['above']} | {p['p']:.3g} | {holm} | {p['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def _primary_text(across: Mapping[str, Any]) -> str:
    """The primary point's claim, interval, run count and verdict in words."""
    step, g = across["primary_point"]
    head = across["primary"]
    if head is None:
        return f"GMC - TIC at the primary point (checkpoint {step}, G = {g}): not measured"
    return (
        f"GMC - TIC relative squared bias at the primary point (checkpoint {head['step']}, "
        f"G = {head['G']}): {interval_text(head, '+.3g').replace(' seed', ' run')} over "
        f"{_runs_text(head['n'])} ({head['verdict']}; own interval below 0 in {head['below']} "
        f"of {head['n']})"
    )


def bias_stage_headline(results: BiasStageResults) -> str:
    """One line: the primary point's GMC - TIC interval over the runs and its verdict, the
    secondary points' Holm verdicts, and per run how often IS is unbiased and GMC's bias
    shrinks with `G`."""
    across = results.across
    secondary = [p for p in across["points"] if not p["primary"]]
    holds = sum(p["verdict"] == "holds" for p in secondary)
    reversed_ = sum(p["verdict"] == "reversed" for p in secondary)
    return (
        f"{_primary_text(across)}; secondary points below 0 (Holm) at {holds} of "
        f"{len(secondary)} ({reversed_} reversed); per run, IS unbiased at "
        f"{_counts_text(across, 'is_unbiased')} points, GMC's bias shrinks with G (resolved) "
        f"at {_counts_text(across, 'gmc_shrinks')} checkpoints"
    )


def bias_stage_markdown(results: BiasStageResults) -> str:
    """The stage's section of the report: the question, each run's tables
    (`bias_table_markdown`), the across-run table (`across_run_markdown`), the verdicts, the
    machine and each run's wall time."""
    across = results.across
    first = results.runs[across["seeds"][0]] if across["seeds"] else {}
    settings, lag = first.get("settings", BIAS_SETTINGS), first.get("lag", BIAS_LAG)
    seeds = ", ".join(str(seed) for seed in across["seeds"])
    step, g = across["primary_point"]
    lines = [
        "The question the toy sweep asks of the token MDPs, asked of the tiny Qwen3 "
        "(`gmc-grpo llm bias`, `llm_runs.lm_bias`): at checkpoints $\\theta_n$ of delayed "
        f"runs (GMC runs of `{results.recipe}` at $D = {lag}$, training seeds {seeds}, one "
        "base model for all, trained here into "
        f"`{results.stage_folder}/run_s<seed>/`), with the stale behavior policy "
        f"$\\mu = \\theta_{{n-{lag}}}$, how far is each estimator's mean from the "
        "on-policy gradient $\\nabla J(\\theta_n)/T$? Every method is computed on the same "
        f"samples drawn from $\\mu$ ({settings['blocks']} blocks of "
        f"{settings['trajectories_per_block']} trajectories per method and $G$), the target from "
        f"{settings['target_blocks']} on-policy blocks; the squared bias is the two-sample "
        "U-statistic (unbiased, the Monte Carlo noise removed) with a 95% jackknife interval, "
        "GMC - TIC paired on the shared samples, every method with the leave-one-out "
        "advantage. Each run's blocks are drawn from its own bias seed (a `SeedSequence` "
        "child of the training seed).",
        "",
    ]
    for seed in across["seeds"]:
        result = results.runs[seed]
        kls = ", ".join(
            f"{c['step']} (KL {c['kl']['value']:.2f} nats)" for c in result["checkpoints"]
        )
        lines += [
            f"**Training seed {seed}** (bias seed {result['settings']['seed']}; checkpoints, KL "
            f"to their behavior policy: {kls}):",
            "",
            bias_table_markdown(result).rstrip(),
            "",
        ]
    lines += [
        f"**Across the runs** (GMC - TIC paired difference of the relative squared bias "
        "$\\Vert b\\Vert^2 / \\Vert \\nabla J / T\\Vert^2$ per run; its mean over the runs "
        "with a Student-t interval; the primary point declared before the stage's runs, after a "
        "hand measurement of training seeds 0 and 1: checkpoint "
        f"{step}, $G = {g}$, the stalest checkpoint and the smallest group; the other points "
        "secondary, Holm-adjusted):",
        "",
        across_run_markdown(across).rstrip(),
        "",
        "**The toy sweep's findings on the LM:**",
        "",
        f"- GMC's squared bias below TIC's when stale: {_primary_text(across)}.",
        "- IS is unbiased (0 inside its interval), per run: "
        f"{_counts_text(across, 'is_unbiased')} points.",
        "- GMC's bias shrinking with $G$ (smallest minus largest $G$ resolved above 0), per "
        f"run: {_counts_text(across, 'gmc_shrinks')} checkpoints.",
        "",
        f"{_runs_text(len(across['seeds']))} of one recipe, delay and bias design; the two "
        "checkpoints of a run are not independent replications, the runs are. Machine: "
        f"{results.machine} at the start of the stage; wall time per run (training and "
        "measurement; the first run's includes the shared warm-up): "
        + ", ".join(
            f"seed {s} " + (f"{results.seconds[s]:.0f} s" if s in results.seconds else "reused")
            for s in across["seeds"]
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"
