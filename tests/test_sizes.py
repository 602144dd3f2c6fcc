"""Sizes a maintainer can hold in mind, enforced: no Python file of the project's packages is over
`MAX_FILE_LINES` lines and no function (or method) over `MAX_FUNCTION_LINES`.

A function's size is the lines from its `def` (its decorators included) to its last statement,
its docstring and comments included; a nested function counts inside the one that holds it and
is also checked on its own. A failure lists every offender with its size, largest first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the project's packages; `evidence` once it exists
PACKAGES = (
    "gmc_grpo",
    "theory",
    "toy_mdps",
    "llm_runs",
    "figures",
    "pipeline",
    "evidence",
    "bench",
    "examples",
)
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100


def python_files(root: Path = ROOT) -> list[Path]:
    """Every `.py` file under the packages of `PACKAGES` present below `root`."""
    return [
        path
        for package in PACKAGES
        if (root / package).is_dir()
        for path in sorted((root / package).rglob("*.py"))
    ]


def function_sizes(source: str) -> list[tuple[str, int, int]]:
    """`[(qualified name, first line, lines)]` of every function and method of `source`."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                name = f"{prefix}{child.name}"
                out.append((name, first, child.end_lineno - first + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def offenders(
    root: Path = ROOT,
    max_file: int = MAX_FILE_LINES,
    max_function: int = MAX_FUNCTION_LINES,
) -> list[str]:
    """One line per file over `max_file` lines and per function over `max_function`, largest
    first: `"path: N lines"`, `"path:LINE name: N lines"`."""
    found: list[tuple[int, str]] = []
    for path in python_files(root):
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(root).as_posix()
        lines = len(source.splitlines())
        if lines > max_file:
            found.append((lines, f"{rel}: {lines} lines (file, limit {max_file})"))
        for name, first, size in function_sizes(source):
            if size > max_function:
                found.append(
                    (size, f"{rel}:{first} {name}: {size} lines (function, limit {max_function})")
                )
    return [text for _, text in sorted(found, key=lambda pair: -pair[0])]


def test_no_file_or_function_over_its_limit():
    found = offenders()
    print("\n".join(found))
    assert not found, f"{len(found)} over the size limits:\n" + "\n".join(found)


def test_the_checker_sees_the_tree():
    files = {p.relative_to(ROOT).as_posix() for p in python_files()}
    assert "gmc_grpo/stats.py" in files and "pipeline/reproduce.py" in files
    assert "bench/compare_records.py" in files


def test_the_checker_reports_a_long_file_and_a_long_function(tmp_path):
    package = tmp_path / "gmc_grpo"
    package.mkdir()
    body = "".join(f"        x{i} = {i}\n" for i in range(100))
    (package / "long_function.py").write_text(
        "class A:\n    @staticmethod\n    def f():\n"  # the decorator on line 2 counts
        + body
        + "        def inner():\n            return 1\n"  # lines 104-105: f is 104 lines
    )
    (package / "long_file.py").write_text("x = 1\n" * 801)
    (package / "fine.py").write_text("def g():\n    return 1\n")
    found = offenders(tmp_path)
    assert found == [
        "gmc_grpo/long_file.py: 801 lines (file, limit 800)",
        "gmc_grpo/long_function.py:2 A.f: 104 lines (function, limit 100)",
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    return 1\n", [("f", 1, 2)]),
        ("@dec\n@dec2\ndef f():\n    '''doc'''\n    return 1\n", [("f", 1, 5)]),
        (
            "class C:\n    def m(self):\n        def n():\n            pass\n        return n\n",
            [("C.m", 2, 4), ("C.m.n", 3, 2)],
        ),
    ],
)
def test_function_sizes(source, expected):
    assert function_sizes(source) == expected
