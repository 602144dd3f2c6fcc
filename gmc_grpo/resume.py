"""Resuming a run: the new config must be the run's, unless a change is asked for by name.

A resumed run's records must be those of one config. `check_resume_config` compares the config a
resume was started with against the one that produced the run (the checkpoint's, else the run's
`config.json`) and sorts every differing field:

- a *free* field (each track lists them: output and logging settings, checkpoint and evaluation
  cadence) changes neither the updates nor what a record means: allowed;
- `total_steps` changes the learning-rate schedule: allowed only through `ResumeRequest.extend_to`
  (`--extend-to N`), which the trainers honour by rebuilding the schedule for `N` updates;
- any other field changes the run: refused with one line naming each field with its old and new
  value, unless the request lists it in `allow` (`--allow-config-change FIELD`).

The accepted changes are returned so that the trainer records them in the run's history
(`RunWriter.resume(..., segment=...)`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

EXTENDABLE = "total_steps"


class ResumeConfigError(ValueError):
    """A resume whose config differs from the run's in a field that alters the run."""


@dataclass(frozen=True)
class ResumeRequest:
    """What a resume may change on purpose.

    extend_to: the run's new `total_steps` (`--extend-to N`): more updates, with the learning-rate
        schedule rebuilt for `N` (the updates from the resume step on follow the warm-up + cosine
        schedule of an `N`-update run, not the old one, which is 0 past its horizon).
    allow: fields allowed to differ from the run's config (`--allow-config-change FIELD`).
    """

    extend_to: int | None = None
    allow: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow", tuple(self.allow))
        if self.extend_to is not None and (
            isinstance(self.extend_to, bool) or not isinstance(self.extend_to, int)
        ):
            raise ValueError(f"--extend-to must be a whole number, got {self.extend_to!r}")
        if EXTENDABLE in self.allow:
            raise ValueError(
                "--allow-config-change total_steps: use --extend-to N, which also rebuilds the "
                "learning-rate schedule for N updates"
            )

    @property
    def asked(self) -> bool:
        return self.extend_to is not None or bool(self.allow)

    def as_record(self) -> dict[str, Any]:
        """The request as it is written into the run's history."""
        return {"extend_to": self.extend_to, "allow_config_change": list(self.allow)}


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (tuples equal lists, NaN equals NaN)."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def config_differences(
    old: Mapping[str, Any], new: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
) -> dict[str, tuple[Any, Any]]:
    """`{field: (old value, new value)}` of the fields that differ.

    A field missing from `old` (added by a newer gmc-grpo) counts as its value in `defaults`.
    """
    defaults = defaults or {}
    out = {}
    for key in sorted(set(old) | set(new)):
        before = old.get(key, defaults.get(key))
        after = new.get(key, defaults.get(key))
        if not _same(before, after):
            out[key] = (before, after)
    return out


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def check_resume_config(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    free: Collection[str],
    request: ResumeRequest | None = None,
    where: str,
    defaults: Mapping[str, Any] | None = None,
    fields: Sequence[str] | None = None,
) -> dict[str, tuple[Any, Any]]:
    """Check a resume's config against the run's; return the accepted changes (free ones too).

    Args:
        old: the config that produced the run (checkpoint, else `config.json`).
        new: the config of this resume (with `total_steps = request.extend_to` when extending).
        free: fields that may change without altering the run (the track's documented list).
        request: the changes asked for on purpose.
        where: the run folder (for the messages).
        fields: every field name of the config (checks the names in `request.allow`).
    Raises:
        ResumeConfigError: a change not allowed (one line: each field with old -> new and the
            options), or a request that does not fit the run.
    """
    request = request or ResumeRequest()
    if fields is not None:
        unknown = sorted(set(request.allow) - set(fields))
        if unknown:
            raise ResumeConfigError(
                f"--allow-config-change {', '.join(unknown)}: not a config field; fields: "
                f"{', '.join(sorted(fields))}"
            )
    diffs = config_differences(old, new, defaults)
    if request.extend_to is not None:
        before = old.get(EXTENDABLE)
        if not isinstance(before, int) or request.extend_to <= before:
            raise ResumeConfigError(
                f"--extend-to {request.extend_to}: must be larger than the run's total_steps "
                f"({before}) in {where}"
            )
        if new.get(EXTENDABLE) != request.extend_to:
            raise ResumeConfigError(
                f"--extend-to {request.extend_to} but the config asks for total_steps="
                f"{new.get(EXTENDABLE)}: give one of them"
            )
    refused = {
        key: change
        for key, change in diffs.items()
        if key not in free
        and key not in request.allow
        and not (key == EXTENDABLE and request.extend_to is not None)
    }
    if refused:
        detail = "; ".join(f"{k}: {_show(a)} -> {_show(b)}" for k, (a, b) in refused.items())
        options = []
        others = [k for k in refused if k != EXTENDABLE]
        if EXTENDABLE in refused:
            options.append("--extend-to N to train a finished or running run to N updates")
        if others:
            flags = " ".join(f"--allow-config-change {k}" for k in others)
            options.append(f"{flags} to change {'it' if len(others) == 1 else 'them'} on purpose")
        raise ResumeConfigError(
            f"cannot resume {where}: the config differs from the run's in fields that change "
            f"the run ({detail}), so its records would mix two configs. Resume with the run's "
            "values (drop the flags that changed them), start a new run with another --out, or "
            f"pass {' or '.join(options)} (recorded in the run's history)"
        )
    return diffs
