"""`gmc-grpo llm bias`: each estimator's bias on a language model, at checkpoints of a delayed
run against their stale behavior policies (`llm_runs.lm_bias`). Registered in `llm_runs.cli`.

This track writes numbers (`bias.json`); the Markdown report `bias.md` is rendered by the
function the caller hands to `run` (`gmc-grpo llm bias` hands it
`pipeline.llm_bias_stage.bias_table_markdown`, through `pipeline.llm`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gmc_grpo.errors import removed_on_failure

DESCRIPTION = """Measure the bias of IS, TIC, GMC, GRPO and VCPO's truncation (or any registered
method) on a language model. At checkpoints n of a delayed training run, with the behavior
policy of step n - lag, many groups are drawn from the behavior policy and every method's
gradient estimate is computed on the same samples; its squared bias against the on-policy
gradient (estimated from on-policy groups) is estimated without Monte Carlo bias, with a
jackknife interval, and GMC - TIC paired. Writes OUT/bias.json and OUT/bias.md."""

#: a `bias_of_run` result -> its Markdown report (the pipeline's; this track formats no report)
RenderReport = Callable[[dict[str, Any]], str]

EPILOG = """examples:
  gmc-grpo llm bias --recipe tiny_delay --out runs/lm_bias     # train the run, then measure
  gmc-grpo llm bias --run runs/my_delayed_run --steps 48,96 --lag 16 --out runs/lm_bias
  gmc-grpo llm bias --run RUN --group-sizes 4,16 --blocks 48 --methods gmc,tic,is --out OUT

A run to measure needs checkpoints at n and n - lag: train it with
--set checkpoint_every=LAG --set keep_checkpoints=100 (what --recipe does)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from llm_runs.lm_bias import BiasSettings

    d = BiasSettings()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--run", help="a training run folder with checkpoints")
    where.add_argument(
        "--recipe",
        help="train this recipe (one run: --recipe-run) into OUT/run first, with a checkpoint "
        "every `delay` updates, then measure",
    )
    parser.add_argument("--recipe-run", default="gmc", help="the recipe's run to train (gmc)")
    parser.add_argument("--train-steps", type=int, help="updates of the trained run")
    parser.add_argument(
        "--delay",
        type=int,
        help="with --recipe: train at this fixed delay instead of the recipe's (checkpoints "
        "every `delay` updates)",
    )
    parser.add_argument("--out", required=True, help="folder for bias.json and bias.md")
    parser.add_argument("--steps", help="checkpoints n, e.g. 48,96 (default: up to 3 with n - lag)")
    parser.add_argument(
        "--lag", type=int, help="behavior policy n - lag (default: the run's delay)"
    )
    parser.add_argument("--methods", default=",".join(d.methods), help="registered methods")
    parser.add_argument(
        "--group-sizes",
        default=",".join(str(g) for g in d.group_sizes),
        help="group sizes G, e.g. 4,8,16",
    )
    parser.add_argument(
        "--blocks", type=int, default=d.blocks, help="method blocks per (checkpoint, G)"
    )
    parser.add_argument(
        "--target-blocks", type=int, default=d.target_blocks, help="on-policy target blocks"
    )
    parser.add_argument(
        "--trajectories-per-block",
        type=int,
        default=d.trajectories_per_block,
        help="trajectories per block (a multiple of every G)",
    )
    parser.add_argument(
        "--advantage",
        default=d.advantage,
        choices=["loo", "centered", "std", "paper"],
        help="advantage of every method (loo: IS unbiased; paper: each method's own)",
    )
    parser.add_argument(
        "--seed", type=int, default=d.seed, help=f"root seed of the sampled groups ({d.seed})"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def train_for_bias(
    recipe: str,
    run: str,
    out: Path,
    steps: int | None,
    *,
    progress: bool = True,
    delay: int | None = None,
    seed: int | None = None,
    cache_dir: Path | None = None,
) -> Path:
    """Train one run of `recipe` into `out` (skipped when it finished) with a checkpoint every
    `delay` updates (default: the recipe's delay), all kept; return its folder.

    seed: the run's `run_seed` (default: the recipe's); independent runs of one recipe differ
        in it (the warm-up's seed is the recipe's `sft_seed` when it sets one, so such runs
        start from the same initial policy).
    cache_dir: share the initial policy (and the version-0 rollouts) with other runs through
        this cache folder (`llm_runs.cache`: built once, the records unchanged); the cached
        initial policy is then linked into `out/initial_model` (hard links, else a copy), since
        a checkpoint's behavior policy can be step 0. None: the run builds its own.
    """
    from llm_runs.recipes import config_from_values, load_recipe
    from llm_runs.train import train

    if (out / "summary.json").is_file():
        if cache_dir is not None:
            _link_initial_policy(out)
        return out
    try:
        values = load_recipe(recipe, run)
    except ValueError:
        values = load_recipe(recipe)
    if steps is not None:
        values["total_steps"] = steps
    if delay is not None:
        values["delay"] = delay
    if seed is not None:
        values.pop("seed", None)  # `run_seed`'s old name (`gmc_grpo.configs.FIELD_ALIASES`)
        values["run_seed"] = seed
    delay = int(values.get("delay", 0))
    if delay < 1:
        raise ValueError(
            f"recipe {recipe!r} runs at delay {delay}: the bias needs a stale behavior policy "
            "(pass --delay 16, or a recipe with a delay >= 1)"
        )
    values.update(
        out=str(out),
        checkpoint_every=delay,
        keep_checkpoints=int(values["total_steps"]) // delay + 1,
        eval_every=0,
        cache_dir=None if cache_dir is None else str(cache_dir),
        progress=progress,
    )
    train(config_from_values(values), notice=None if progress else lambda _text: None)
    if cache_dir is not None:
        _link_initial_policy(out)
    return out


def _link_initial_policy(run_dir: Path) -> None:
    """Give a run trained with a cache folder its initial policy as `run_dir/initial_model`
    (the cache's entry of `llm_runs.cache.initial_policy_key`, hard-linked file by file, copied
    where links fail), so that `llm_runs.run_policies.policy_dir(run_dir, 0)` finds it."""
    import os
    import shutil

    from llm_runs.cache import initial_policy_key
    from llm_runs.models import resolve_placement
    from llm_runs.run_policies import run_config

    config = run_config(run_dir)
    if config.cache_dir is None or (not config.sft_steps and config.tiny_model is None):
        return  # no cache, or the initial policy is the config's own model folder
    if any((run_dir / name / "config.json").is_file() for name in ("initial_model", "base_model")):
        return
    settings = config.warmup_settings()
    device = resolve_placement(config.placement_settings()).learner_device
    entry = Path(config.cache_dir) / "initial_models" / initial_policy_key(settings, device)
    name = "initial_model" if config.sft_steps else "base_model"
    if not (entry / name / "config.json").is_file():
        raise FileNotFoundError(
            f"{run_dir} was trained with the cache {config.cache_dir}, but its initial policy "
            f"is not there ({entry / name}): train the run again, or without a cache"
        )

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    tmp = run_dir / f".{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(entry / name, tmp, copy_function=link)
    os.replace(tmp, run_dir / name)


def run(args: argparse.Namespace, render_report: RenderReport | None = None) -> int:
    """Measure as `args` says; with `render_report`, also write (and print) `bias.md`."""
    from gmc_grpo.fieldchecks import parse_int_list, parse_name_list
    from llm_runs.lm_bias import BiasSettings

    steps = tuple(parse_int_list(args.steps, "--steps", "48,96")) if args.steps else None
    settings = BiasSettings(
        methods=tuple(parse_name_list(args.methods, "--methods", "gmc,tic,is")),
        group_sizes=tuple(parse_int_list(args.group_sizes, "--group-sizes", "4,16")),
        blocks=args.blocks,
        target_blocks=args.target_blocks,
        trajectories_per_block=args.trajectories_per_block,
        advantage=args.advantage,
        seed=args.seed,
    )
    out = Path(args.out)
    with removed_on_failure(out):  # a refused command leaves no empty --out behind
        return _measure(args, settings, steps, out, render_report)


def _measure(
    args: argparse.Namespace,
    settings: Any,
    steps: tuple[int, ...] | None,
    out: Path,
    render_report: RenderReport | None,
) -> int:
    """Train (or take) the run, measure its bias, write `out/bias.json` and (with
    `render_report`) `out/bias.md`."""
    from llm_runs.lm_bias import bias_of_run

    out.mkdir(parents=True, exist_ok=True)
    if args.run:
        run_dir = Path(args.run)
    else:
        run_dir = train_for_bias(
            args.recipe,
            args.recipe_run,
            out / "run",
            args.train_steps,
            progress=not args.no_progress,
            delay=args.delay,
        )
    result = bias_of_run(
        run_dir, settings, steps=steps, lag=args.lag, progress=not args.no_progress
    )
    from gmc_grpo.json_files import atomic_write_json, atomic_write_text
    from gmc_grpo.run_writer import environment_info

    result["environment"] = environment_info()
    atomic_write_json(out / "bias.json", json.loads(json.dumps(result, default=str)))
    if render_report is None:
        print(f"wrote {out / 'bias.json'}")
        return 0
    text = render_report(result)
    atomic_write_text(out / "bias.md", text)
    print(text)
    print(f"wrote {out / 'bias.json'} and {out / 'bias.md'}")
    return 0
