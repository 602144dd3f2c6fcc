"""`gmc-grpo llm train`: the trainer's command line (`llm_runs.train` runs it).

Values come from a recipe (`--recipe`, `llm_runs/configs/*.json`; `--run` picks one run of a
suite), then a JSON config file (`--config`), then the flags; `--set FIELD=VALUE` overrides any
`LLMTrainConfig` field. Registered in `llm_runs.cli`; imports torch only when a run starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gmc_grpo.config_reading import read_json_config, resolve_aliases
from gmc_grpo.fieldchecks import echo, parse_int_list, parse_name_list
from gmc_grpo.json_files import NestingError, loads_json
from gmc_grpo.staleness import CONFIG_GENERATION_TIMES
from llm_runs.config import LLMTrainConfig
from llm_runs.engines.factory import ENGINES
from llm_runs.recipes import config_from_values, load_recipe
from llm_runs.suite import RenderSuite, SuiteConfig

DESCRIPTION = """Train a causal LM with GRPO, TIC-GRPO, GMC-GRPO, VCPO, GAC, A-3PO (or a method
registered in gmc_grpo.methods) under a fixed delay, the simulated length-coupled
asynchronous pipeline (Appendix B.1) or rollout workers whose groups carry their own lags
(§2.2, Figure 1). --seeds/--methods/--delays run a suite and its paired analysis. Writes
OUT/config.json, OUT/metrics.jsonl (one row per update), OUT/evals.jsonl, OUT/checkpoints/ and
OUT/summary.json. Values come from a recipe (llm_runs/configs/*.json) and/or a JSON config file;
flags override both."""

# raw: the `\` of the examples are shell line continuations, printed as written
EPILOG = r"""examples:
  gmc-grpo llm train --recipe tiny                       # CPU demonstration, minutes
  gmc-grpo llm train --recipe tiny_delay --run gmc       # tiny model under delay 16
  gmc-grpo llm train --recipe tiny_delay --seeds 0,1,2,3 --methods grpo,tic,gmc \
      --out runs/tiny_suite                              # a suite: one run per (method, seed)
  gmc-grpo llm train --recipe tiny --schedule workers --workers 24 \
      --generation-time length_proportional            # groups with their own lags
  gmc-grpo llm train --recipe fixed_delay_qwen3_1p7b --run gmc_d128 \
      --model models/Qwen3-1.7B-Base --data-dir data/ --out runs/gmc_d128
  gmc-grpo llm train --out runs/gmc_d128 --resume ...    # continue from the newest checkpoint
  gmc-grpo llm train --out runs/gmc_d128 --extend-to 1200 ...  # train a finished run further
  gmc-grpo llm train --recipe tiny --set lr=3e-4 --set total_steps=50
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recipe", help="shipped recipe name or a JSON recipe file")
    parser.add_argument("--run", help="one run of a suite recipe (e.g. gmc_d128)")
    parser.add_argument("--config", help="a JSON file of LLMTrainConfig values (after the recipe)")
    parser.add_argument("--out", help="run directory (default: runs/<recipe>[_<run>])")
    parser.add_argument("--model", help="local model directory of the initial policy")
    parser.add_argument("--data-dir", help="local dataset folder (`gmc-grpo llm data`)")
    parser.add_argument(
        "--method", help="a registered method: grpo, tic, gmc, vcpo, gac, a3po, is, or your own"
    )
    _add_schedule_arguments(parser)
    _add_suite_arguments(parser)
    parser.add_argument("--steps", type=int, help="total optimizer updates")
    parser.add_argument(
        "--seed",
        type=int,
        help="run_seed: the root seed of the data order, the rollouts and the warm-up",
    )
    parser.add_argument("--engine", choices=ENGINES, help="rollout engine")
    _add_resume_arguments(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override any LLMTrainConfig field (VALUE parsed as JSON, else taken as a string)",
    )


def _add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the shared schedule fields (`gmc_grpo.staleness.ScheduleSettings`)."""
    parser.add_argument(
        "--delay",
        type=int,
        help="fixed delay D in learner updates: a rollout batch is first used D updates after "
        "the policy that generated it (with inner_steps > 1 its later minibatches D+1, ...); "
        "a multiple of inner_steps, smaller than the total updates",
    )
    parser.add_argument(
        "--schedule",
        help="staleness schedule: fixed_delay (FIFO of D batches), length_coupled (simulated "
        "pipeline), workers (W rollout workers, one group each; a batch mixes lags) or one "
        "registered by a module named in GMC_GRPO_SCHEDULES (docs/schedules.md)",
    )
    parser.add_argument(
        "--workers", type=int, help="schedule workers: rollout workers W (field num_workers)"
    )
    parser.add_argument(
        "--generation-time",
        choices=CONFIG_GENERATION_TIMES,
        help="schedule workers: how long a group takes (constant; length_proportional: "
        "time-scale x mean response length / length_unit_tokens; exponential)",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        help="schedule workers: the constant duration, the time per unit of L, or the "
        "exponential mean (1.0)",
    )
    parser.add_argument(
        "--update-time", type=float, help="schedule workers: clock time of one update (0)"
    )
    parser.add_argument(
        "--lam",
        type=float,
        help="schedule length_coupled: lambda of tau_ready = tau_launch + lam L (28, B.1)",
    )


def _add_suite_arguments(parser: argparse.ArgumentParser) -> None:
    suite = parser.add_argument_group(
        "suite over seeds and methods (any of these runs one `llm train` per cell into OUT/"
        "<method>_d<D>_seed<s>/, then the paired analysis OUT/suite_summary.{json,md})"
    )
    suite.add_argument("--seeds", help="comma-separated seeds, e.g. 0,1,2")
    suite.add_argument("--methods", help="comma-separated methods, e.g. grpo,tic,gmc")
    suite.add_argument("--delays", help="comma-separated fixed delays, e.g. 0,16")
    suite.add_argument(
        "--processes",
        type=int,
        default=0,
        help="worker processes (default 0: one per core, at most 2; on CUDA one per visible "
        "GPU, each pinned to its GPU, and no more than that); each run uses one thread, so the "
        "records do not depend on this",
    )
    suite.add_argument(
        "--no-share",
        action="store_true",
        help="do not share the initial policy and its rollouts between runs (OUT/cache)",
    )


def _add_resume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print what the run needs (GPU memory per device, host shared memory; the memory "
        "model of llm_runs.memory, docs/gpu.md) and exit without starting; the run checks the "
        "same before it loads anything (llm_runs.preflight)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its newest checkpoint; its config must be the "
        "run's (output, logging, checkpoint and evaluation cadence may change)",
    )
    parser.add_argument(
        "--extend-to",
        type=int,
        metavar="N",
        help="continue the run in --out to N updates in all (N > its total_steps; implies "
        "--resume): the learning rate follows the warm-up + cosine schedule of an N-update run "
        "from the resume step on (not the old one, which is 0 past its end); recorded in the "
        "run's history",
    )
    parser.add_argument(
        "--allow-config-change",
        action="append",
        default=[],
        metavar="FIELD",
        help="with --resume: accept a changed LLMTrainConfig FIELD (repeatable; e.g. "
        "learner_device when moving a run to other hardware); recorded in the run's history",
    )


def is_suite(args: argparse.Namespace) -> bool:
    """Any of `--seeds`, `--methods`, `--delays` asks for a suite (given empty too: `--seeds ""`
    is refused by the list parser, not read as one run)."""
    return any(getattr(args, name, None) is not None for name in ("seeds", "methods", "delays"))


def values_from_args(args: argparse.Namespace, *, suite: bool = False) -> dict[str, Any]:
    """The `LLMTrainConfig` values of the recipe, the config file and the flags."""
    values: dict[str, Any] = {}
    if args.recipe:
        values.update(load_recipe(args.recipe, args.run, base_only=suite))
    elif args.run:
        raise ValueError("--run needs --recipe")
    if args.config:
        data = read_json_config(args.config, "--config (LLMTrainConfig)")
        values.update(data["config"] if isinstance(data.get("config"), dict) else data)
    flags = {
        "out": args.out,
        "model": args.model,
        "data_dir": args.data_dir,
        "method": args.method,
        "delay": args.delay,
        "total_steps": args.steps,
        "run_seed": args.seed,
        "engine": args.engine,
        "schedule": args.schedule,
        "num_workers": args.workers,
        "generation_time": args.generation_time,
        "time_scale": args.time_scale,
        "update_time": args.update_time,
        "lam": args.lam,
    }
    values.update({k: v for k, v in flags.items() if v is not None})
    if args.model is not None:
        values["tiny_model"] = None
    if args.resume or args.extend_to is not None:
        values["resume"] = True
    if args.extend_to is not None:
        values["total_steps"] = args.extend_to
    if args.no_progress:
        values["progress"] = False
    for item in args.set:
        if "=" not in item:
            raise ValueError(f"--set expects FIELD=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        try:
            values[key] = loads_json(raw)
        except json.JSONDecodeError:
            values[key] = raw
        except NestingError as err:
            raise ValueError(f"--set {echo(key, 40)}=...: the value {err}") from None
    if "out" not in values:
        if not args.recipe:
            raise ValueError(
                "give --out (or a --recipe, whose name makes the default run directory)"
            )
        name = Path(args.recipe).stem + (f"_{args.run}" if args.run else "")
        values["out"] = str(Path("runs") / (name + ("_suite" if suite else "")))
    return values


def config_from_args(args: argparse.Namespace) -> LLMTrainConfig:
    return config_from_values(values_from_args(args))


def suite_from_args(args: argparse.Namespace) -> SuiteConfig:
    """The suite of `--seeds`, `--methods`, `--delays` (each defaulting to the config's value)."""
    values = values_from_args(args, suite=True)
    if args.resume:
        raise ValueError("--resume: a suite resumes its unfinished runs by itself; drop --resume")
    if args.extend_to is not None or args.allow_config_change:
        raise ValueError(
            "--extend-to and --allow-config-change change one run: pass that run's folder as "
            "--out without --seeds/--methods/--delays"
        )
    if args.method and args.methods is not None:
        raise ValueError("give --method (one run) or --methods (a suite), not both")
    if args.delay is not None and args.delays is not None:
        raise ValueError("give --delay (one delay) or --delays (a suite), not both")
    given = {name: getattr(args, name) is not None for name in ("seeds", "methods", "delays")}
    seeds = (
        tuple(parse_int_list(args.seeds, "--seeds"))
        if given["seeds"]
        else (int(resolve_aliases(LLMTrainConfig, values).get("run_seed", 0)),)
    )
    methods = (
        tuple(parse_name_list(args.methods, "--methods"))
        if given["methods"]
        else (values.get("method", "gmc"),)
    )
    delays = tuple(parse_int_list(args.delays, "--delays", "0,16")) if given["delays"] else None
    out = values.pop("out")
    return SuiteConfig(
        out=out,
        base=values,
        seeds=seeds,
        methods=methods,
        delays=delays,
        processes=args.processes,
        share=not args.no_share,
    )


def run(args: argparse.Namespace, render_suite: RenderSuite | None = None) -> int:
    """Train one run, or a suite (`--seeds/--methods/--delays`); a suite's analysis is written
    as `suite_summary.json` and, with `render_suite` (the pipeline's, handed in through
    `pipeline.llm`; this track formats no report), also printed and written as
    `suite_summary.md`."""
    if is_suite(args):
        from llm_runs.suite import run_suite

        suite = suite_from_args(args)
        total = len(suite.runs())
        done: list[str] = []

        def report(cell, summary) -> None:
            done.append(cell.out)
            reward = summary.get("reward_last_10pct")
            text = f"{reward:.3f}" if isinstance(reward, (int, float)) else "-"
            print(
                f"[suite {len(done)}/{total}] {cell.out}: consumed reward (last 10% of updates) "
                f"{text}",
                flush=True,
            )

        analysis = run_suite(
            suite, on_run=report if not args.no_progress else None, render=render_suite
        )
        if render_suite is None:
            print(f"suite summary: {Path(suite.out) / 'suite_summary.json'}")
            return 0
        print(render_suite(analysis))
        print(f"suite summary: {Path(suite.out) / 'suite_summary.md'}")
        return 0
    if args.plan:  # what the run needs, without starting it (llm_runs.preflight)
        from llm_runs.preflight import NO_MODEL, plan, plan_text
        from llm_runs.recipe_needs import recipe_names

        values = values_from_args(args)
        if values.get("model") is None and values.get("tiny_model") is None:
            values["model"] = NO_MODEL  # the plan finds the paper model from the names
        config = config_from_values(values)
        print(plan_text(plan(config, names=recipe_names(args.recipe, args.run))))
        return 0
    from gmc_grpo.resume import ResumeRequest
    from llm_runs.preflight import check_before_torch

    request = ResumeRequest(args.extend_to, tuple(args.allow_config_change))
    config = config_from_args(args)
    check_before_torch(config)  # paths, sizes, shared memory: refused before torch loads
    from llm_runs.train import train

    summary = train(config, request=request)
    print(json.dumps(summary, indent=1))
    # stdout stays the summary's JSON; where the run went, on stderr
    print(f"wrote the run (records, summary.json, checkpoints) to {config.out}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gmc-grpo llm train",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
