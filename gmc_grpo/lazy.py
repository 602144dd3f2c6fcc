"""Lazy package attributes (PEP 562): a package lists its public names and the module of each;
the module is imported on first access, so importing the package (e.g. for `--help`) stays
light and does not import torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `package` resolving `name -> table[name].name`."""

    def __getattr__(name: str) -> Any:
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
