"""Reading configs: JSON files and dicts into dataclasses, with clear errors (no torch).

Every track's config uses one vocabulary (`docs/DESIGN.md`, "Configs"): the same name for the
same setting in the toy and the LLM configs. Names changed when the vocabulary was unified: a
config that still uses an old name either loads under the new one (`FIELD_ALIASES`: shipped
configs, records and checkpoints written before the rename keep working) or gets an error that
names the new one (`RENAMED_FIELDS`, `RENAMED_VALUES`) instead of a bare "unknown field".
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gmc_grpo.json_files import NestingError, loads_json

# old field name -> the name that replaced it
RENAMED_FIELDS: dict[str, str] = {
    "learning_rate": "lr",
    "num_steps": "total_steps",
    "eps_high": "eps",
    "clip_eps": "clip_low and clip_high (two-sided: set both)",
    "vcpo_truncation": "truncation",
    "warmup_frac": "warmup_ratio",
    "beta1": "betas (a pair)",
    "beta2": "betas (a pair)",
}
# old field name -> the name that replaced it, read as the new name wherever a config is loaded
# from a dict (config files, recipes, `--set`, stored run configs and checkpoints): the LLM
# config's names before the toy and LLM configs shared one vocabulary
FIELD_ALIASES: dict[str, str] = {
    "rollout_prompts": "num_groups",
    "workers": "num_workers",
    # the LLM config's names of settings the toy config names otherwise (`run_seed`, the root
    # of a run's random streams; `bound_every`, the bound tracker)
    "seed": "run_seed",
    "track_bounds_every": "bound_every",
    "track_bounds_samples": "bound_samples",
}
# field -> {old value -> the value that replaced it}
RENAMED_VALUES: dict[str, dict[Any, str]] = {
    "schedule": {"fixed": "fixed_delay"},
    "advantage": {None: "paper"},  # the LLM config's old spelling of "the method's own"
}


def config_error(config: Any, name: str, why: str) -> ValueError:
    """`ValueError("<Class>.<field>=<value>: <why>")` for a config field that fails a check
    (the value cut to a readable length, `echo`)."""
    return ValueError(f"{type(config).__name__}.{name}={echo(getattr(config, name), 80)}: {why}")


def echo(value: Any, limit: int = 60) -> str:
    """`repr(value)` cut to `limit` characters for a message (`'aaaa...' (100000 characters)`);
    a huge integer by its digit count (never converted whole: Python refuses more than 4,300
    digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a {value.bit_length() * 30103 // 100000 + 1}-digit number"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 3]}... ({len(text)} characters)"


def resolve_aliases(cls: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with every old name of `FIELD_ALIASES` that is not a field of dataclass `cls`
    replaced by its new name; when both are given, the one that comes last in `data` wins (a
    `--set rollout_prompts=4` after a recipe's `num_groups`)."""
    names = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        new = FIELD_ALIASES.get(key)
        out[new if new in names and key not in names else key] = value
    return out


def check_choice(config: Any, name: str, choices: Sequence[str]) -> None:
    """Raise `config_error` unless `config.<name>` is one of `choices` (renamed values named)."""
    value = getattr(config, name)
    if value in choices:
        return
    renamed = RENAMED_VALUES.get(name, {}).get(value)
    hint = f" ({value!r} was renamed {renamed!r})" if renamed else ""
    raise config_error(config, name, f"must be one of {tuple(choices)}{hint}")


def check_field_names(cls: Any, keys: Sequence[str], what: str | None = None) -> None:
    """Reject keys that are not fields of dataclass `cls`; a renamed field's error names its
    new name. `_`-prefixed keys (comments) are allowed."""
    names = {f.name for f in dataclasses.fields(cls)}
    names |= {old for old, new in FIELD_ALIASES.items() if new in names}  # loaded as the new name
    owner = what or cls.__name__
    for key in keys:
        if key not in names and key in RENAMED_FIELDS:
            raise ValueError(
                f"{owner}.{key} was renamed {RENAMED_FIELDS[key]} (the toy and LLM configs "
                "share one vocabulary): rename it in your config"
            )
    unknown = sorted(k for k in keys if k not in names and not k.startswith("_"))
    if unknown:
        raise ValueError(f"unknown {owner} fields {unknown}; valid fields: {sorted(names)}")


def _type_name(tp: Any) -> str:
    """`tp` in words, for the errors of `check_field_types` ("a whole number", "a list of
    numbers", "null or a number", ...)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return "any value"
    if tp is type(None):
        return "null"
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args]
        return " or ".join(sorted(names, key=lambda n: n != "null"))
    simple = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    if tp in simple:
        return simple[tp]
    if origin in (list, tuple, Sequence) or tp in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return f"a list of {len(args)} values ({', '.join(_type_name(a) for a in args)})"
        plural = {bool: "booleans", int: "whole numbers", float: "numbers", str: "strings"}
        return f"a list of {plural.get(args[0], 'values') if args else 'values'}"
    if origin in (dict, Mapping) or tp is dict:
        return "an object ({...})"
    return getattr(tp, "__name__", str(tp))


def _matches(value: Any, tp: Any) -> bool:
    """Whether a JSON/TOML value fits annotation `tp` (ints count as floats; bools are not
    numbers; unknown annotations are not checked)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if origin in (list, Sequence) or tp is list:
        return isinstance(value, (list, tuple)) and all(_matches(v, args[0]) for v in value)
    if origin is tuple or tp is tuple:
        if not isinstance(value, (list, tuple)):
            return False
        if not args:
            return True
        if args[-1] is Ellipsis:
            return all(_matches(v, args[0]) for v in value)
        return len(value) == len(args) and all(
            _matches(v, a) for v, a in zip(value, args, strict=True)
        )
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, dict):
            return False
        return not args or all(_matches(v, args[1]) for v in value.values())
    return True


def check_field_types(cls: Any, data: Mapping[str, Any], what: str | None = None) -> None:
    """Reject values of the wrong type before the dataclass sees them: `"<Class>.<field>=<value>:
    must be <type in words> (got <type>)"`. Only fields of `cls` present in `data` are checked."""
    hints = typing.get_type_hints(cls)
    owner = what or cls.__name__
    for key, value in data.items():
        tp = hints.get(key)
        if tp is None or _matches(value, tp):
            continue
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ValueError(
            f"{owner}.{key}={shown}: must be {_type_name(tp)} (got {type(value).__name__}); "
            "fix the value in your config or flag"
        )


def dataclass_from_dict(cls: Any, data: Mapping[str, Any], ignore: Sequence[str] = ()) -> Any:
    """Build dataclass `cls` from `data`, rejecting unknown and renamed keys and values of the
    wrong type (`ignore`d keys and `_`-prefixed comments are skipped)."""
    if not isinstance(data, Mapping):
        raise ValueError(
            f"a {cls.__name__} must be a JSON object of fields, got {type(data).__name__}"
        )
    check_field_names(cls, [k for k in data if k not in ignore])
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in resolve_aliases(cls, data).items() if k in names}
    check_field_types(cls, values)
    return cls(**values)


def read_json_config(
    path: str | Path,
    what: str,
    shipped: Path | None = None,
    pattern: str = "*.json",
    exclude: str | None = None,
) -> dict[str, Any]:
    """Read a JSON config file that holds one object; a missing file names the configs in
    `shipped` matching `pattern` (and not `exclude`). Every failure is a one-line `ValueError`
    (or `FileNotFoundError`) naming the file."""
    path = Path(path)
    if not path.is_file():
        listed = []
        if shipped is not None:
            skip = set(shipped.glob(exclude)) if exclude else set()
            listed = sorted(p.name for p in shipped.glob(pattern) if p not in skip)
        state = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise FileNotFoundError(f"{what} config {path} {state}; shipped configs: {listed}")
    try:
        text = path.read_bytes().decode("utf-8-sig")  # a BOM is accepted (json_files.BOM)
    except UnicodeDecodeError:
        raise ValueError(f"{what} config {path} is not UTF-8 text (is it a JSON file?)") from None
    try:
        data = loads_json(text)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{what} config {path} is not valid JSON: {err.msg} at line {err.lineno}, column "
            f"{err.colno}"
        ) from None
    except NestingError as err:
        raise ValueError(f"{what} config {path} {err}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{what} config {path} must hold a JSON object of fields, got {type(data).__name__}"
        )
    return data
