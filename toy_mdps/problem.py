"""The learning problem a toy config describes: the token MDP and the policy class.

Shared by the sweep's and the training's configs (`toy_mdps.sweep.config`,
`toy_mdps.train.config`), which inherit the MDP fields of `ProblemFields`: the fields, their
checks and the MDP they build live here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gmc_grpo.config_reading import config_error, read_json_config
from gmc_grpo.fieldchecks import check_number, check_seed, count_problem, echo, toy_memory_problem
from gmc_grpo.seeding import stream_seed
from toy_mdps.response_space import (
    MAX_RESPONSES,
    POLICY_NAMES,
    REWARD_KINDS,
    num_responses_up_to,
)

if TYPE_CHECKING:
    from toy_mdps.mdp import TokenMDP

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


@dataclass(kw_only=True)
class ProblemFields:
    """The token MDP and policy class of a toy config (`toy_mdps.mdp.TokenMDP`,
    `toy_mdps.policies`); `SweepConfig` and the toy `ToyTrainConfig` inherit these fields."""

    num_prompts: int = 8
    """`K`, uniform prompts"""
    vocab_size: int = 4
    """`V` including EOS"""
    max_length: int = 6
    """`T`, maximum response length and the `T` of the `1/(T B G)` normalisation"""
    reward: str = "pattern"
    """`"pattern"` (sparse target-substring reward) or `"length"` (`R L / T`)"""
    reward_scale: float = 1.0
    """`R`, the largest reward"""
    pattern_length: int = 2
    """length of each prompt's target pattern"""
    mdp_seed: int = 0
    """seed of the target patterns (stream `toy_mdp` of `gmc_grpo.seeding`)"""
    policy: str = "tabular"
    """`"tabular"` softmax or `"loglinear"` (shared features)"""
    init_scale: float = 1.0
    """standard deviation of the random initial parameters `theta_0`"""


def check_problem_fields(config: Any) -> None:
    """Check the MDP, policy and group fields of a toy config (errors name field and value)."""
    for name in ("num_prompts", "max_length", "pattern_length", "num_groups"):
        if int(getattr(config, name)) < 1:
            raise config_error(config, name, "must be >= 1")
    if config.vocab_size < 2:
        raise config_error(config, "vocab_size", "must be >= 2 (one token is EOS)")
    for name in ("num_prompts", "vocab_size", "max_length"):
        problem = count_problem(getattr(config, name), 1)
        if problem:
            raise config_error(config, name, problem)
    responses = num_responses_up_to(
        config.num_prompts, config.vocab_size, config.max_length, MAX_RESPONSES
    )
    if responses > MAX_RESPONSES:  # the MDP's tables enumerate every response of every prompt
        name = "max_length" if config.max_length > 6 else "vocab_size"
        raise config_error(
            config,
            name,
            f"num_prompts {echo(config.num_prompts)} x the responses of vocab_size "
            f"{echo(config.vocab_size)} up to max_length {echo(config.max_length)} tokens are "
            f"more than the {MAX_RESPONSES:,} the exact tables enumerate; use a smaller "
            f"{name}, e.g. {6 if name == 'max_length' else 4}",
        )
    if config.pattern_length > config.max_length:
        raise config_error(config, "pattern_length", f"must be <= max_length={config.max_length}")
    if config.reward not in REWARD_KINDS:
        raise config_error(config, "reward", f"must be one of {REWARD_KINDS}")
    check_number(config, "reward_scale", above=0.0)
    if config.policy not in POLICY_NAMES:
        raise config_error(config, "policy", f"must be one of {POLICY_NAMES}")
    check_number(config, "init_scale", at_least=0.0)
    check_seed(config, "mdp_seed")


# the flag of each toy size field, for the messages of `check_sample_memory`
SIZE_FLAGS = {
    "seeds": "--seeds",
    "num_groups": "--num-groups",
    "group_size": "--group-size",
    "group_sizes": "--group-sizes",
    "num_minibatches": "--num-minibatches",
    "bound_minibatches": "--bound-minibatches",
    "max_length": "--max-length",
}


def check_sample_memory(config: Any, counts: list[tuple[str, Any]]) -> None:
    """Refuse a toy config whose sampled responses would need more than
    `gmc_grpo.fieldchecks.MAX_TOY_MEMORY_BYTES` (`toy_memory_problem`): `counts` are the
    `(field, value)` multiplied (a list field enters as its largest entry), each response has
    `max_length + 1` token slots. The message names the largest count's field and its flag
    (`SIZE_FLAGS`)."""
    problem = toy_memory_problem(counts, int(config.max_length) + 1)
    if problem:
        name = max(counts, key=lambda item: int(item[1]))[0]
        field = name.split(" ")[0]
        flag = SIZE_FLAGS.get(field, field)
        raise config_error(config, field, f"{problem}; use a smaller {field} ({flag})")


def make_mdp(config: Any) -> TokenMDP:
    """The `TokenMDP` of a toy config; its patterns come from stream `toy_mdp` of `mdp_seed`
    (`gmc_grpo.seeding`); imports torch (`toy_mdps.mdp`), the config's checks do not."""
    from toy_mdps.mdp import TokenMDP

    return TokenMDP(
        num_prompts=config.num_prompts,
        vocab_size=config.vocab_size,
        max_length=config.max_length,
        reward=config.reward,
        reward_scale=config.reward_scale,
        pattern_length=config.pattern_length,
        seed=stream_seed(config.mdp_seed, "toy_mdp"),
    )


# what each kind of toy config file is run with (`kind` of `read_toy_config`)
CONFIG_COMMANDS = {
    "sweep": "gmc-grpo toy sweep --config FILE",
    "experiment": "gmc-grpo toy train --config FILE",
    "run": "ToyTrainConfig.from_file (a single run; on the command line, flags)",
}
# shipped file names of each kind (sweeps: every other `*.json`)
_SHIPPED_EXPERIMENTS = "train_*.json"


def config_kind(data: dict[str, Any]) -> str:
    """`"experiment"` (an `ExperimentConfig`: `base`/`grid`/`zip`, or a `kind` naming an
    analysis), `"run"` (bare `ToyTrainConfig` fields such as `method`) or `"sweep"`."""
    kind = data.get("kind")
    if kind == "sweep":
        return "sweep"
    if kind is not None or {"base", "grid", "zip"} & set(data):
        return "experiment"
    if {"method", "delay", "total_steps", "schedule"} & set(data):
        return "run"
    return "sweep"


def read_toy_config(path: str | Path, what: str) -> dict[str, Any]:
    """A toy config file of kind `what` (`"sweep"`, `"experiment"` or `"run"`), as a dict.

    A missing file names the shipped configs of that kind (`toy_mdps/configs/`); a file of the
    other kind names the command that runs it; a bare `ToyTrainConfig` (single-run fields) says to
    put them under an experiment's `base`.
    """
    experiment = what != "sweep"
    data = read_json_config(
        path,
        what,
        CONFIG_DIR,
        _SHIPPED_EXPERIMENTS if experiment else "*.json",
        exclude=None if experiment else _SHIPPED_EXPERIMENTS,
    )
    kind = config_kind(data)
    if kind == what:
        return data
    if kind == "run" and what == "experiment":
        raise ValueError(
            f"{path} holds the fields of one toy training run; an experiment config puts them "
            'under "base" (with "grid"/"zip" lists), or pass them as flags '
            "(gmc-grpo toy train --method gmc --delay 8 ...)"
        )
    raise ValueError(
        f"{path} is a toy {kind} config, not a toy {what} config: run it with {CONFIG_COMMANDS[kind]}"
    )
