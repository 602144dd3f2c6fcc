"""Reading configs: JSON files and dicts into dataclasses, with clear errors (no torch).

Every track's config uses one vocabulary (`docs/DESIGN.md`, "Configs"): the same name for the
same setting in the toy and the LLM configs. Names changed when the vocabulary was unified;
a config that still uses an old name gets an error that names the new one (`RENAMED_FIELDS`,
`RENAMED_VALUES`) instead of a bare "unknown field".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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
# field -> {old value -> the value that replaced it}
RENAMED_VALUES: dict[str, dict[Any, str]] = {
    "schedule": {"fixed": "fixed_delay"},
    "advantage": {None: "paper"},  # the LLM config's old spelling of "the method's own"
}


def config_error(config: Any, name: str, why: str) -> ValueError:
    """`ValueError("<Class>.<field>=<value>: <why>")` for a config field that fails a check."""
    return ValueError(f"{type(config).__name__}.{name}={getattr(config, name)!r}: {why}")


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


def dataclass_from_dict(cls: Any, data: Mapping[str, Any], ignore: Sequence[str] = ()) -> Any:
    """Build dataclass `cls` from `data`, rejecting unknown and renamed keys (`ignore`d keys and
    `_`-prefixed comments are skipped)."""
    check_field_names(cls, [k for k in data if k not in ignore])
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def read_json_config(
    path: str | Path, what: str, shipped: Path | None = None, pattern: str = "*.json"
) -> dict[str, Any]:
    """Read a JSON config file; a missing file names the configs in `shipped` matching `pattern`."""
    path = Path(path)
    if not path.exists():
        listed = sorted(p.name for p in shipped.glob(pattern)) if shipped is not None else []
        raise FileNotFoundError(f"{what} config {path} does not exist; shipped configs: {listed}")
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err}") from None
