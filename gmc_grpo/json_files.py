"""JSON and JSONL files: atomic writes and reads of untrusted text (the records' file layer).

Every record, config and checkpoint manifest is written and read here (`gmc_grpo.records` builds
the run-record format on it):

- `to_json`, `atomic_write_text`, `atomic_write_json`: dataclasses, paths and numpy/torch values
  as JSON, non-finite floats as the tokens `NaN`/`Infinity`/`-Infinity`; a file is written
  through a temp file beside it and an atomic rename, with the mode a plain `open` would give it.
- `loads_json`, `read_json`, `read_json_object`, `read_jsonl`: readers for untrusted files that
  refuse nesting deeper than `MAX_NESTING` (`NestingError`) and name the path, line and reason of
  a damaged file (`RecordFileError`); a byte-order mark (`BOM`) is accepted, a torn last JSONL
  line (a run killed mid-write) is skipped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def jsonable(value: Any) -> Any:
    """Convert dataclasses, paths and numpy/torch scalars and arrays to JSON values.

    Floats stay floats, non-finite ones included (`to_json` writes them as `NaN`/`Infinity`).
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float):
        return float(value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return jsonable(value.item())
    if hasattr(value, "tolist") and callable(value.tolist):
        return jsonable(value.tolist())
    return value


def to_json(value: Any) -> str:
    """One-line JSON text of `value` (see `jsonable`; non-finite floats as `NaN`/`Infinity`)."""
    return json.dumps(jsonable(value), sort_keys=False, allow_nan=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same folder and an atomic rename.

    The file gets the mode a plain `open(path, "w")` would give it: the mode of the file it
    replaces, else `0o666` less the umask (`gmc_grpo.filemodes`; `tempfile.mkstemp` would make
    it 0600, readable by its owner only).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)  # keep the replaced file's mode
        except FileNotFoundError:
            pass
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new file `.<name>.<random>.tmp` beside `path`, opened for writing with mode 0o666 (the
    kernel applies the umask, as for a plain open)."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Atomically write `obj` as indented JSON (non-finite floats as `NaN`/`Infinity`)."""
    atomic_write_text(path, json.dumps(jsonable(obj), indent=2, allow_nan=True) + "\n")


BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark. Readers of JSON and JSONL accept it before the text: RFC 8259
(section 8.1) lets a parser ignore it, it carries no content, and editors on Windows save it
(a config or record edited there would otherwise be refused with json's "Unexpected UTF-8 BOM").
Writers never write one."""


# The deepest nesting of objects and arrays a JSON or TOML file may hold. Configs and records
# nest at most 5 levels; deeper input is refused in one line before anything recurses over it
# (a 100,000-deep `config.json` used to end in a RecursionError traceback).
MAX_NESTING = 64


class NestingError(ValueError):
    """Text past the reader's limits: nested deeper than `MAX_NESTING` levels, or a number with
    more digits than Python converts (4,300)."""


def check_nesting(value: Any, limit: int = MAX_NESTING) -> None:
    """Raise `NestingError` when `value`'s dicts and lists nest deeper than `limit` (an
    iterative walk: no recursion on the input's depth)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise NestingError(f"is nested deeper than {limit} levels of objects and arrays")
        stack.extend((child, depth + 1) for child in children)


def loads_json(text: str | bytes) -> Any:
    """`json.loads` for untrusted files (the one JSON reader of configs and records): nesting
    deeper than `MAX_NESTING` raises `NestingError`, malformed text `json.JSONDecodeError`."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise NestingError(
            f"is nested deeper than {MAX_NESTING} levels of objects and arrays"
        ) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # Python's int-string limit
        raise NestingError("holds a number of more than 4,300 digits") from None
    check_nesting(data)
    return data


class RecordFileError(ValueError):
    """A record file that cannot be read: `path`, `line` (1-based; None for the whole file) and
    `reason`. The message reads `path: line N: reason`."""

    def __init__(self, path: str | Path, line: int | None, reason: str) -> None:
        self.path, self.line, self.reason = Path(path), line, reason
        where = f"{self.path}: line {line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {reason}")


def read_json(path: str | Path) -> Any:
    """Read a JSON file written by `atomic_write_json` (`NaN`/`Infinity` come back as floats).

    A UTF-8 byte-order mark at the start is accepted (`BOM`). A file that does not parse raises
    `RecordFileError` (a `ValueError`) naming the path, the line and the reason.
    """
    path = Path(path)
    try:
        return loads_json(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise RecordFileError(path, None, "not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise RecordFileError(path, err.lineno, f"not valid JSON ({err.msg})") from None
    except NestingError as err:
        raise RecordFileError(path, None, str(err)) from None


def read_json_object(path: str | Path) -> dict[str, Any]:
    """`read_json` of a file that must hold one JSON object (`config.json`, `summary.json`)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise RecordFileError(path, 1, f"not a JSON object (got {type(data).__name__})")
    return data


def read_jsonl(path: str | Path, torn: list[int] | None = None) -> list[dict[str, Any]]:
    """Read a JSONL file; a torn last line (a run killed mid-write) is skipped, others must parse.

    Non-finite floats (`NaN`, `Infinity`) come back as floats; a byte-order mark before the first
    line is accepted (`BOM`). A damaged line raises `RecordFileError` (a `ValueError`) naming the
    path, the line and the reason. `torn`: a list that receives the 1-based number of a torn last
    line that was left out (readers that report it: `gmc-grpo figures`, `RunRecord.torn`).
    """
    path = Path(path)
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = []
    data = path.read_bytes()
    lines = data.removeprefix(BOM).split(b"\n")
    for index, raw in enumerate(lines):
        last = index == len(lines) - 1  # no trailing newline: the write may have been cut off
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            if last:
                if torn is not None:
                    torn.append(index + 1)
                break
            raise RecordFileError(path, index + 1, "not UTF-8 text") from None
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except NestingError as err:
            raise RecordFileError(path, index + 1, str(err)) from None
        except json.JSONDecodeError as err:
            if last:
                if torn is not None:
                    torn.append(index + 1)
                break
            raise RecordFileError(path, index + 1, f"not valid JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise RecordFileError(path, index + 1, f"not a JSON object (got {type(row).__name__})")
        rows.append(row)
    return rows
