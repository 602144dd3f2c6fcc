"""The layering of `docs/DESIGN.md`, enforced: imports only point down, and nothing is circular.

Layers, top to bottom: `pipeline` (the `gmc-grpo` router, the toy figure step, reproduce) >
`figures` > `evidence` (the theory beside the runs) > the tracks (`theory`, `toy_mdps`,
`llm_runs`) > the core (`gmc_grpo`). Every module's
imports are read with `ast`, including the ones inside functions and `TYPE_CHECKING` blocks, and
dotted module names held in strings (the lazy routers' `"llm_runs.cli"`, `"pkg.mod:function"`).
Back edges:

- core -> any track, `evidence`, `figures` or `pipeline`;
- a track -> `evidence`, `figures` or `pipeline` (in particular `theory` never imports the
  evidence layer: a check there takes the runs' findings as an argument);
- `evidence` -> `figures` or `pipeline` (it may import the tracks and the core);
- `figures` -> a track's internals (`toy_mdps`, `llm_runs`; `evidence`, `theory` and the core are
  allowed: figures read record files, draw the evidence layer's verdicts and call the theory).

and any cycle between packages or between the modules of one package. The last tests plant each
kind of back edge in a synthetic tree and check that the checker reports it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from pipeline.notebooks import imported_names

ROOT = Path(__file__).resolve().parents[1]
CORE = "gmc_grpo"
TRACKS = ("theory", "toy_mdps", "llm_runs")
EVIDENCE = "evidence"
PACKAGES = (CORE, *TRACKS, EVIDENCE, "figures", "pipeline")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def find_modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """`{module name: file}` of every module of `packages` below `root`."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(root, path)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of `name` that is a module of the tree."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The tree's modules `module` imports (anywhere in the file), itself excluded."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = imported_names(tree, module, is_package=path.name == "__init__.py")
    out = {_resolve(name, modules) for name in names}
    return {m for m in out if m is not None and m != module}


def import_graph(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, set[str]]:
    modules = find_modules(root, packages)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def back_edges(graph: dict[str, set[str]]) -> list[str]:
    """Every import that points up the layers (module docstring)."""
    bad = []
    for src, targets in graph.items():
        top = src.split(".")[0]
        for dst in sorted(targets):
            other = dst.split(".")[0]
            if top == other:
                continue
            if top == CORE:
                bad.append(f"core -> {other}: {src} imports {dst}")
            elif top in TRACKS and other in (EVIDENCE, "figures", "pipeline"):
                bad.append(f"track -> {other}: {src} imports {dst}")
            elif top == EVIDENCE and other in ("figures", "pipeline"):
                bad.append(f"evidence -> {other}: {src} imports {dst}")
            elif top == "figures" and other in ("toy_mdps", "llm_runs", "pipeline"):
                bad.append(f"figures -> {other}: {src} imports {dst}")
    return bad


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """Import cycles between packages, and between the modules of each package."""
    out = []
    packages: dict[str, set[str]] = {}
    for src, targets in graph.items():
        mine = src.split(".")[0]
        packages.setdefault(mine, set()).update(
            t.split(".")[0] for t in targets if t.split(".")[0] != mine
        )
    out += [f"package cycle: {' <-> '.join(c)}" for c in _cycles(packages)]
    for package in packages:
        inner = {
            m: {t for t in targets if t.split(".")[0] == package}
            for m, targets in graph.items()
            if m.split(".")[0] == package
        }
        out += [f"module cycle in {package}: {' <-> '.join(c)}" for c in _cycles(inner)]
    return out


# ----------------------------------------------------------------------------------------------
# The repository
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_the_checker_sees_the_whole_tree(graph):
    for package in PACKAGES:
        assert package in graph, f"{package} not found under {ROOT}"
    # function-local imports are edges: the router imports every track lazily
    assert {"evidence.theory_runs", "pipeline.llm", "figures.cli", "pipeline.toy"} <= graph[
        "pipeline.cli"
    ]
    assert "llm_runs.cli" in graph["pipeline.llm"]
    assert "gmc_grpo.hooks" in graph["gmc_grpo.methods"]  # inside the hook functions
    assert "figures.toy_bias" in graph["pipeline.toy"]
    # `gmc-grpo theory --runs` reaches the runs from above: the router names the evidence layer
    assert "evidence.theory_runs" in graph["pipeline.cli"]
    assert "theory.cli" in graph["evidence.theory_runs"]
    assert not any(t.startswith("evidence") for t in graph["theory.cli"])


def test_no_back_edges(graph):
    assert back_edges(graph) == []


def test_no_import_cycles(graph):
    assert cycles(graph) == []


# ----------------------------------------------------------------------------------------------
# The checker itself fails when it should
# ----------------------------------------------------------------------------------------------


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


CLEAN = {
    "gmc_grpo/__init__.py": "",
    "gmc_grpo/core.py": "import math\n",
    "toy_mdps/__init__.py": "",
    "toy_mdps/learner.py": "from gmc_grpo.core import math\n",
    "figures/__init__.py": "",
    "figures/plot.py": "from gmc_grpo import core\nimport theory.bounds\nimport evidence.verdicts\n",
    "theory/__init__.py": "",
    "theory/bounds.py": "",
    "evidence/__init__.py": "",
    "evidence/verdicts.py": "import theory.bounds\nimport toy_mdps.learner\nfrom gmc_grpo import core\n",
    "pipeline/__init__.py": "",
    "pipeline/cli.py": "def main():\n    import toy_mdps.learner\n    import figures.plot\n",
    "llm_runs/__init__.py": "",
}


def test_a_clean_tree_passes(tmp_path):
    graph = import_graph(write_tree(tmp_path, CLEAN))
    assert graph["pipeline.cli"] == {"toy_mdps.learner", "figures.plot"}
    assert back_edges(graph) == [] and cycles(graph) == []


@pytest.mark.parametrize(
    ("planted", "expected"),
    [
        # the core reaching into a track, in a function (a lazy import is still an edge)
        ({"gmc_grpo/core.py": "def f():\n    from toy_mdps import learner\n"}, "core -> toy_mdps"),
        # a track drawing figures
        ({"toy_mdps/learner.py": "import figures.plot\n"}, "track -> figures"),
        # a track calling the pipeline through a lazy, string-named import
        (
            {"toy_mdps/learner.py": "import importlib\nM = 'pipeline.cli:main'\n"},
            "track -> pipeline",
        ),
        # figures importing a track's internals
        ({"figures/plot.py": "from toy_mdps.learner import x\n"}, "figures -> toy_mdps"),
        # the theory reading runs through the evidence layer (even lazily)
        ({"theory/bounds.py": "def f():\n    import evidence.verdicts\n"}, "track -> evidence"),
        # a track naming the evidence layer in a string (a lazy router's target)
        ({"toy_mdps/learner.py": "M = 'evidence.verdicts:check'\n"}, "track -> evidence"),
        # the core reaching the evidence layer
        ({"gmc_grpo/core.py": "import evidence\n"}, "core -> evidence"),
        # the evidence layer drawing figures
        ({"evidence/verdicts.py": "import figures.plot\n"}, "evidence -> figures"),
        ({"evidence/verdicts.py": "from pipeline import cli\n"}, "evidence -> pipeline"),
        # a relative import is resolved
        ({"gmc_grpo/core.py": "from ..pipeline import cli\n"}, "core -> pipeline"),
    ],
)
def test_a_planted_back_edge_is_reported(tmp_path, planted, expected):
    graph = import_graph(write_tree(tmp_path, {**CLEAN, **planted}))
    assert any(line.startswith(expected) for line in back_edges(graph)), back_edges(graph)


def test_planted_cycles_are_reported(tmp_path):
    files = {
        **CLEAN,
        "toy_mdps/train.py": "from toy_mdps import analysis\n",
        "toy_mdps/analysis.py": "def f():\n    import toy_mdps.train\n",
    }
    found = cycles(import_graph(write_tree(tmp_path, files)))
    assert found == ["module cycle in toy_mdps: toy_mdps.analysis <-> toy_mdps.train"]
    files = {
        **CLEAN,
        "theory/bounds.py": "import llm_runs\n",
        "llm_runs/__init__.py": "import theory",
    }
    found = cycles(import_graph(write_tree(tmp_path / "b", files)))
    assert found == ["package cycle: llm_runs <-> theory"]
