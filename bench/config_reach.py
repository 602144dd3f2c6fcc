"""How far a trainer's config object travels: the modules it is handed to, read from the source.

    python bench/config_reach.py                # the LLM and the toy trainer, one line each
    python bench/config_reach.py --json         # the same, with every module entry listed

Run it from the repository root (or with `--root`); it imports nothing of the project, it parses
the files with `ast`, so it measures any checkout (e.g. an older commit's worktree).

**Definition.** The walk starts in one function (`llm_runs/train.py:train`, parameter `config`;
`toy_mdps/train/run.py:train`, parameter `config`) and follows *the config object itself*:

- Inside a function, the config is held by the tracked parameter, by a local name assigned from
  a held expression (`config = self.config`), and by an attribute of `self` assigned from one
  (`self.config = config`: every method of that class then holds it as `self.config`).
- A call hands the config on when one of its arguments (positional, keyword, or a starred
  `*`/`**` one) is a held expression itself; `config.seed` or `settings_of(config)` are values
  read from it, not the config, and end the walk there. The callee is resolved statically: a
  function or class of the same module, a name imported from a project module (`from a.b
  import f`, also inside functions), `module.f` for an imported project module, `self.f` for a
  method of the current class, `Class.f` for a method of a class. A class called is entered
  through its `__init__`; the methods of a class whose `self` holds the config are walked
  too, once each, in the class's module. Calls that cannot be resolved this way (calls on other
  objects, registry look-ups) are not followed.
- Each function is walked once per tracked parameter; a later call to it still counts as an
  entry into its module.

**Counted.** `modules`: the project modules (`.py` files under the root) the config reaches,
the start's included. `entries`: the calls that hand the config from one module to another.
`returns`: the times the walk comes back into a module it had already been in and left, either
by such a call (`models.py` entered a second time) or by the callee returning to its caller's
module: every cross-module hand-off is left again, so `returns >= entries`, and `returns -
entries` counts the hand-offs into modules seen before. Settings objects built from the config
(slices) are not the config and are not followed: they are what this measurement is for.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

# the two trainers measured by default: (name, module path, function, parameter)
TRAINERS = (
    ("llm", "llm_runs/train.py", "train", "config"),
    ("toy", "toy_mdps/train/run.py", "train", "config"),
)


@dataclass
class ModuleIndex:
    """One parsed module: its top-level functions and classes and the names it imports."""

    path: str
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imported: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """local name -> (module path, the object's name in it; None: the module itself)"""


class Project:
    """The `.py` files under `root`, parsed on demand, with their import tables."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[str, ModuleIndex | None] = {}

    def module_path(self, dotted: str) -> str | None:
        """`a.b.c` -> `a/b/c.py` or `a/b/c/__init__.py` when that file is in the project."""
        base = self.root / Path(*dotted.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return str(candidate.relative_to(self.root))
        return None

    def index(self, path: str) -> ModuleIndex | None:
        """The parsed module at `path` (relative to the root), or None outside the project."""
        if path not in self.cache:
            self.cache[path] = self._parse(path)
        return self.cache[path]

    def _parse(self, path: str) -> ModuleIndex | None:
        file = self.root / path
        if not file.is_file():
            return None
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=path)
        index = ModuleIndex(path)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                index.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                index.classes[node.name] = node
        package = path.rsplit("/", 1)[0].replace("/", ".") if "/" in path else ""
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:  # relative import: from the file's package
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([p for p in parts if p] + ([source] if source else []))
                for alias in node.names:
                    sub = self.module_path(f"{source}.{alias.name}")
                    if sub is not None:  # `from pkg import module`
                        index.imported[alias.asname or alias.name] = (sub, None)
                        continue
                    owner = self.module_path(source)
                    if owner is not None:
                        index.imported[alias.asname or alias.name] = (owner, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    target = self.module_path(alias.name)
                    if target is not None and alias.asname:
                        index.imported[alias.asname] = (target, None)
        return index

    def resolve_name(self, path: str, name: str) -> tuple[str, str] | None:
        """`(module path, top-level name)` that `name` means in module `path`, following
        re-exports (`from x import f` in a package `__init__`)."""
        for _ in range(8):
            index = self.index(path)
            if index is None:
                return None
            if name in index.functions or name in index.classes:
                return path, name
            if name not in index.imported:
                return None
            path, original = index.imported[name]
            if original is None:
                return None
            name = original
        return None


@dataclass
class Walk:
    """The state of one walk: the sequence of modules the config is in, and what was walked."""

    project: Project
    trace: list[tuple[str, str]] = field(default_factory=list)
    """(event, module): "enter" for a cross-module hand-off, "return" for coming back"""
    seen_modules: list[str] = field(default_factory=list)
    walked: set[tuple[str, str, str]] = field(default_factory=set)
    walked_classes: set[tuple[str, str, str]] = field(default_factory=set)

    def visit(self, module: str) -> None:
        if module not in self.seen_modules:
            self.seen_modules.append(module)

    def call(self, caller: str, callee: str, body: callable) -> None:  # type: ignore[valid-type]
        """Hand the config from module `caller` to `callee`, walk there, come back."""
        if callee != caller:
            self.trace.append(("enter", callee))
        self.visit(callee)
        body()
        if callee != caller:
            self.trace.append(("return", caller))


def _held(node: ast.AST, names: set[str], attrs: set[str]) -> bool:
    """Whether expression `node` is the config itself (a held name or `self.<held attribute>`)."""
    if isinstance(node, ast.Starred):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id in names
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr in attrs
    )


def _parameter_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = function.args
    return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]


def _bound_parameter(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    call: ast.Call,
    position: int | None,
    keyword: str | None,
    *,
    method: bool,
) -> str | None:
    """The parameter of `function` that argument `position` (or `keyword`) of `call` binds."""
    names = _parameter_names(function)
    if keyword is not None:
        return keyword if keyword in names else None
    positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if method and positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    if position is not None and position < len(positional):
        return positional[position]
    return None


def _callee(
    walk: Walk, module: str, owner: str | None, func: ast.AST
) -> tuple[str, str | None, ast.FunctionDef | ast.AsyncFunctionDef | None, bool]:
    """`(module, class or None, function node or None, is a method)` of a call target."""
    project = walk.project
    if isinstance(func, ast.Name):
        found = project.resolve_name(module, func.id)
        if found is None:
            return module, None, None, False
        path, name = found
        index = project.index(path)
        assert index is not None
        if name in index.functions:
            return path, None, index.functions[name], False
        return path, name, _method(index.classes[name], "__init__"), True
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        base = func.value.id
        index = project.index(module)
        assert index is not None
        if base in ("self", "cls") and owner is not None:
            return module, owner, _method(index.classes[owner], func.attr), True
        if base in index.imported and index.imported[base][1] is None:
            target = index.imported[base][0]
            found = project.resolve_name(target, func.attr)
            if found is not None:
                return _callee(walk, target, None, ast.Name(id=func.attr))
            return target, None, None, False
        found = project.resolve_name(module, base)
        if found is not None:
            path, name = found
            cls_index = project.index(path)
            if cls_index is not None and name in cls_index.classes:
                return path, name, _method(cls_index.classes[name], func.attr), True
    return module, None, None, False


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def walk_function(
    walk: Walk,
    module: str,
    owner: str | None,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    names: set[str],
    attrs: set[str],
) -> set[str]:
    """Walk one function in which `names` (locals) and `self.<attrs>` hold the config; returns
    the attributes of `self` it assigns the config to."""
    names = set(names)
    stored: set[str] = set()
    for node in ast.walk(function):  # aliases first: `config = self.config` anywhere
        if isinstance(node, ast.Assign) and _held(node.value, names, attrs):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                elif isinstance(target, ast.Attribute) and _held(
                    ast.Attribute(value=target.value, attr=target.attr), set(), {target.attr}
                ):
                    stored.add(target.attr)
    held_attrs = attrs | stored
    calls = sorted(
        (n for n in ast.walk(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for call in calls:
        handed = [(i, None) for i, a in enumerate(call.args) if _held(a, names, held_attrs)] + [
            (None, k.arg) for k in call.keywords if _held(k.value, names, held_attrs)
        ]
        if not handed:
            continue
        target, cls, callee, is_method = _callee(walk, module, owner, call.func)
        if callee is None and cls is None:
            continue
        for position, keyword in handed:
            if callee is None:  # a class without its own __init__: entered, nothing to walk
                walk.call(module, target, lambda: None)
                continue
            parameter = (
                "**"
                if keyword is None and position is None
                else _bound_parameter(callee, call, position, keyword, method=is_method)
            )
            if parameter is None:
                continue
            walk.call(
                module,
                target,
                lambda t=target, c=cls, f=callee, p=parameter: _enter(walk, t, c, f, p),
            )
    return stored


def _enter(
    walk: Walk,
    module: str,
    cls: str | None,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    parameter: str,
) -> None:
    """Walk `function` with `parameter` holding the config (once per function and parameter);
    a class whose `self` then holds it has its other methods walked too."""
    key = (module, f"{cls}.{function.name}" if cls else function.name, parameter)
    if key in walk.walked:
        return
    walk.walked.add(key)
    stored = walk_function(walk, module, cls, function, {parameter}, set())
    if cls is None or not stored:
        return
    index = walk.project.index(module)
    assert index is not None
    for node in index.classes[cls].body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        method_key = (module, cls, node.name)
        if node is function or method_key in walk.walked_classes:
            continue
        walk.walked_classes.add(method_key)
        walk_function(walk, module, cls, node, set(), stored)


def config_reach(root: Path, module: str, function: str, parameter: str) -> dict[str, object]:
    """The reach of `parameter` of `module:function` (see the module docstring): `modules`,
    `entries`, `returns`, and `trace` (every hand-off and return, in walk order)."""
    project = Project(root)
    index = project.index(module)
    if index is None or function not in index.functions:
        raise ValueError(f"{root}/{module} has no function {function!r}")
    walk = Walk(project)
    walk.visit(module)
    _enter(walk, module, None, index.functions[function], parameter)
    seen: set[str] = {module}
    left: set[str] = set()
    returns = 0
    current = module
    for _event, target in walk.trace:
        left.add(current)
        if target in left and target in seen:
            returns += 1
        seen.add(target)
        current = target
    entries = sum(1 for event, _ in walk.trace if event == "enter")
    return {
        "modules": len(walk.seen_modules),
        "entries": entries,
        "returns": returns,
        "module_list": walk.seen_modules,
        "trace": [f"{event} {target}" for event, target in walk.trace],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".", help="repository root to measure (default: .)")
    parser.add_argument("--json", action="store_true", help="print every hand-off as JSON")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    results = {
        name: config_reach(root, module, function, parameter)
        for name, module, function, parameter in TRAINERS
    }
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()
        return 0
    for name, result in results.items():
        print(
            f"{name}: config reaches {result['modules']} modules, {result['entries']} "
            f"cross-module hand-offs, {result['returns']} returns to modules already left"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
