"""A registry of frozen specs by name, with user modules named in an environment variable.

The method registry (`gmc_grpo.methods`) and the schedule registry (`gmc_grpo.staleness`) are
both one `Registry`: the paper's specs first (they cannot be removed), then a user's
(`register`), and for the command line the modules named in an environment variable
(comma-separated, imported on the first look-up by `gmc_grpo.plugins`; each registers its
specs when imported; one that fails to import is reported as such).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar

from gmc_grpo.plugins import import_plugins


class Named(Protocol):
    @property
    def name(self) -> str: ...


S = TypeVar("S", bound=Named)


class Registry(Generic[S]):
    """Specs by `spec.name`.

    Args:
        kind: what a spec is, in messages ("method", "schedule").
        builtins: the paper's specs, in display order.
        plugins_env: the environment variable that names the user modules.
        check: raises `ValueError` naming the field when a spec cannot run.
        register_hint: how to add one, in the unknown-name message.
    """

    def __init__(
        self,
        kind: str,
        builtins: Iterable[S],
        plugins_env: str,
        check: Callable[[S], None],
        register_hint: str,
    ) -> None:
        self.kind = kind
        self.builtins = tuple(builtins)
        self.plugins_env = plugins_env
        self.check = check
        self.register_hint = register_hint
        self._specs: dict[str, S] = {spec.name: spec for spec in self.builtins}

    def register(self, spec: S, *, replace: bool = False) -> S:
        """Add `spec` (`replace=True` overwrites one of the same name, else a taken name is an
        error)."""
        name = spec.name
        if not name or not name.replace("_", "").isalnum():
            raise ValueError(
                f"{type(spec).__name__}.name={name!r}: use letters, digits and underscores"
            )
        self.check(spec)
        if name in self._specs and not replace:
            raise ValueError(
                f"a {self.kind} named {name!r} is already registered; pass replace=True to "
                "change it"
            )
        self._specs[name] = spec
        return spec

    def unregister(self, name: str) -> None:
        """Remove a user's spec (the paper's cannot be removed)."""
        if any(spec.name == name for spec in self.builtins):
            raise ValueError(
                f"{name!r} is one of the paper's {self.kind}s and cannot be unregistered"
            )
        self._specs.pop(name, None)

    def load_plugins(self) -> None:
        """Import the modules named in the environment variable, once; one that fails raises
        `gmc_grpo.plugins.PluginImportError` (module and exception) now and at every later
        look-up, so a registry never answers as if the module had not been named."""
        import_plugins(self.plugins_env)

    def names(self) -> tuple[str, ...]:
        """Every registered name, the paper's first."""
        self.load_plugins()
        return tuple(self._specs)

    def get(self, name: str) -> S:
        """The spec of `name`; an unknown name raises `ValueError` listing the registered ones."""
        self.load_plugins()
        if name not in self._specs:
            raise ValueError(
                f"unknown {self.kind} {name!r}; registered: {', '.join(self._specs)} "
                f"({self.register_hint})"
            )
        return self._specs[name]
