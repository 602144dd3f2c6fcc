"""What each paper recipe run needs per GPU and in `/dev/shm` (the table of `docs/gpu.md`).

`python -m llm_runs.recipe_needs` prints it: for every run of the paper recipes
(`PAPER_RECIPES`), the least need per device from `llm_runs.preflight.plan` (the memory model of
`llm_runs.memory`, not a measurement) and the smallest GPU class whose nominal memory holds it.
`recipe_names` gives `plan` the names a recipe run's paper model is read from
(`gmc-grpo llm train --plan`). Apart from `llm_runs.preflight` because it reads the recipes,
which import the config, which asks the preflight for its check names.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm_runs.memory import GIB
from llm_runs.preflight import NO_MODEL, RunPlan, plan

#: the shipped recipes of the paper's GPU runs (Appendix B.1)
PAPER_RECIPES: tuple[str, ...] = ("fixed_delay_qwen3_1p7b", "group_size", "simulated_async")
#: the GPU classes the needs are compared with and their nominal memory, bytes: the datasheets'
#: 80 GB (H100, A100 80GB) and 141 GB (H200), read as GiB (our reading: HBM stacks come in
#: powers of two; not checked on a card here). A card's usable memory is somewhat less (the
#: CUDA context, other processes): the preflight's free-memory check sees that, this table not
CARD_CLASSES: tuple[tuple[str, float], ...] = (
    ("80 GB (H100, A100 80GB)", 80 * GIB),
    ("141 GB (H200)", 141 * GIB),
)


def recipe_names(recipe: str | None, run: str | None) -> tuple[str, ...]:
    """The names `model_of` reads a paper model from: the run's, the recipe's, and the recipe's
    description (e.g. group_size's "on Qwen3-1.7B-Base")."""
    if not recipe:
        return (run or "",)
    from gmc_grpo.config_reading import read_json_config
    from llm_runs.recipes import recipe_path

    description = read_json_config(recipe_path(recipe), "recipe").get("description", "")
    return (run or "", recipe, str(description))


def recipe_plans(recipes: Sequence[str] = PAPER_RECIPES) -> list[tuple[str, list[str], RunPlan]]:
    """`(recipe, run names, plan)` for every run of `recipes`, runs with the same needs joined."""
    from gmc_grpo.config_reading import read_json_config
    from llm_runs.recipes import config_from_values, load_recipe, recipe_path

    out: list[tuple[str, list[str], RunPlan]] = []
    for recipe in recipes:
        runs = read_json_config(recipe_path(recipe), "recipe").get("runs", {})
        described = recipe_names(recipe, None)[1:]
        seen: dict[tuple, int] = {}
        for run in runs:
            values = {**load_recipe(recipe, run), "model": NO_MODEL, "out": f"runs/{run}"}
            run_plan = plan(config_from_values(values), names=(run, *described))
            key = (
                run_plan.model,
                run_plan.layout,
                run_plan.family,
                run_plan.needs,
                run_plan.shm_bytes,
            )
            if key in seen:
                out[seen[key]][1].append(run)
            else:
                seen[key] = len(out)
                out.append((recipe, [run], run_plan))
    return out


def smallest_card(run_plan: RunPlan) -> str:
    """The smallest GPU class (`CARD_CLASSES`) whose nominal memory holds every device's need."""
    need = max((n.need_bytes for n in run_plan.needs), default=0.0)
    for name, capacity in CARD_CLASSES:
        if need <= capacity:
            return name
    return f"none: above {CARD_CLASSES[-1][0]}"


def needs_table(rows: list[tuple[str, list[str], RunPlan]]) -> str:
    """`recipe_plans` as the Markdown table of docs/gpu.md."""
    lines = [
        "| recipe | runs | model | layout | cuda:0 | cuda:1 | /dev/shm | smallest GPU class |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for recipe, runs, run_plan in rows:
        needs = [f"{n.need_bytes / GIB:.1f}" for n in run_plan.needs] + ["-", "-"]
        shm = f"{run_plan.shm_bytes / GIB:.1f}" if run_plan.shm_bytes else "-"
        model = run_plan.model.split(" (")[0]
        lines.append(
            f"| {recipe} | {', '.join(runs)} | {model} | {run_plan.layout} | {needs[0]} "
            f"| {needs[1]} | {shm} | {smallest_card(run_plan)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m llm_runs.recipe_needs",
        description="The least each paper recipe run needs per GPU and in /dev/shm (GiB; the "
        "memory model of llm_runs.memory, not a measurement): the table of docs/gpu.md.",
    )
    parser.parse_args(argv)
    print(needs_table(recipe_plans()))


if __name__ == "__main__":
    main()
