"""Plugin modules named in an environment variable (`GMC_GRPO_METHODS`), imported once.

`import_plugins(variable)` imports every module listed (comma-separated) in the environment
variable `variable`, the first time a registry is consulted; a module registers what it defines
when imported (`gmc_grpo.methods.register_method`). The modules are looked up on `sys.path`
first, then in the current folder, so `GMC_GRPO_METHODS=examples.soft_gmc gmc-grpo ...` works
from the folder that holds `examples/` whether the command was started as the `gmc-grpo` script
(whose `sys.path` does not hold the current folder) or as `python -m pipeline.cli`.

A module that fails to import (not found, a syntax error, an exception while registering) raises
`PluginImportError` naming the variable, the module and the exception, at that first look-up and
at every later one: the registry never answers as if the module had not been named. It is an
`ImportError`, not a `ValueError`, so a config check that turns a `ValueError` of the registry
into "must be a registered method" lets it through; the command lines report it as bad input
(exit status 2, one line: `gmc_grpo.errors`).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading

_DONE: dict[str, PluginImportError | None] = {}
_GUARD = threading.RLock()


class PluginImportError(ImportError):
    """A module named in a plugin variable could not be imported (message: variable, module,
    exception and where it was looked for)."""


def plugin_modules(variable: str) -> list[str]:
    """The module names listed in the environment variable `variable` (empty entries dropped)."""
    return [m.strip() for m in os.environ.get(variable, "").split(",") if m.strip()]


def import_plugins(variable: str) -> None:
    """Import the modules named in `variable` once; a failure is raised now and on every later
    call (`PluginImportError`)."""
    with _GUARD:
        if variable not in _DONE:
            _DONE[variable] = None  # a plugin that consults the registry while importing
            _DONE[variable] = _import_all(variable)
        error = _DONE[variable]
    if error is not None:
        raise error


def _import_all(variable: str) -> PluginImportError | None:
    for module in plugin_modules(variable):
        try:
            _import_from_here(module)
        except Exception as error:  # any failure of the plugin's import is reported as such
            where = f"sys.path and the current folder {os.getcwd()}"
            return PluginImportError(
                f"{variable} names the module {module!r}, which cannot be imported: "
                f"{type(error).__name__}: {error} (looked up on {where}; run from the folder "
                "that holds it, add that folder to PYTHONPATH, or fix the module)",
                name=module,
            )
    return None


def _import_from_here(module: str) -> None:
    """`importlib.import_module(module)`, with the current folder at the end of `sys.path`
    while it runs (an installed package of the same name wins)."""
    here = os.getcwd()
    added = here not in sys.path and "" not in sys.path
    if added:
        sys.path.append(here)
    try:
        importlib.import_module(module)
    finally:
        if added and here in sys.path:
            sys.path.remove(here)


def reset_plugins(variable: str) -> None:
    """Forget that `variable`'s modules were imported (tests change the variable in-process)."""
    with _GUARD:
        _DONE.pop(variable, None)


__all__ = ["PluginImportError", "import_plugins", "plugin_modules", "reset_plugins"]
