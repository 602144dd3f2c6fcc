"""`make notebooks`: execute every notebook of `notebooks/` and store it with its outputs.

Each notebook is run top to bottom in a fresh kernel (nbclient) from the repository root, with the
variables that point it at other runs (`GMC_SWEEP_DIR`, `GMC_TOY_TRAIN_DIR`, `GMC_RUNS_DIR`) unset
or pointed at nothing (`ENVIRONMENT`), so the outputs come from the small runs the notebooks make
themselves. The
stored notebook records, in `metadata["gmc_grpo"]`, what its outputs came from:

* `inputs`: the repository files its code can reach: the modules its code cells import, followed
  through every import of those modules (`import_closure`), and the data files beside them
  (shipped configs, templates);
* `inputs_sha256`: a digest of those files and of the code cells' sources;
* the versions of Python and of the libraries that draw (informational, not hashed).

`python -m pipeline.notebooks --check` (and a test) recomputes the digest: a notebook whose code or
whose inputs changed after it was executed is stale. Outputs are kept small: widget views whose
state is not stored are replaced by their plain-text fallback, figures are drawn at `FIGURE_DPI`, per-cell
timings are not recorded.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
PACKAGES = ("gmc_grpo", "theory", "toy_mdps", "llm_runs", "evidence", "figures", "pipeline")
DATA_SUFFIXES = (".json", ".toml", ".csv", ".jsonl", ".yaml", ".html")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
METADATA_KEY = "gmc_grpo"
# While executing: the variables that point a notebook at existing runs are unset (GMC_RUNS_DIR
# names a folder that is absent), so the stored outputs come from the runs the notebooks make
# themselves; progress bars (transformers, huggingface_hub) are off: a stored one is a frozen 0%.
ENVIRONMENT = {
    "GMC_SWEEP_DIR": None,
    "GMC_TOY_TRAIN_DIR": None,
    "GMC_RUNS_DIR": "notebooks/.no_runs",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}
FIGURE_DPI = 72  # inline figures at 72 dpi (matplotlib's default 100 doubles the stored PNGs)
LIBRARIES = ("numpy", "scipy", "sympy", "matplotlib", "torch", "ipywidgets", "nbclient")


def notebooks(names: Iterable[str] | None = None, root: Path = ROOT) -> list[Path]:
    """The notebooks of `root/notebooks` (all, or those named without `.ipynb`)."""
    found = sorted((root / "notebooks").glob("*.ipynb"))
    if not names:
        return found
    wanted = set(names)
    unknown = wanted - {p.stem for p in found}
    if unknown:
        raise ValueError(
            f"no notebook named {', '.join(sorted(unknown))}; known: {', '.join(p.stem for p in found)}"
        )
    return [p for p in found if p.stem in wanted]


def _modules(root: Path) -> dict[str, Path]:
    """`{dotted name: file}` of every module of the repository's packages."""
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


DOTTED = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+(:\w+)?$")  # "llm_runs.cli", "pkg.mod:fn"


def imported_names(tree: ast.AST, module: str = "", is_package: bool = False) -> set[str]:
    """Dotted names a module's AST imports, anywhere in the file (also inside functions and
    `TYPE_CHECKING` blocks), relative imports resolved against `module`, and module names held
    in strings (the lazy routers' `"llm_runs.cli"`, `"pkg.mod:function"`). `from a import b`
    gives `a` and `a.b` (a submodule, or a name in `a`). Shared with `tests/test_layering.py`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if DOTTED.match(node.value):
                names.add(node.value.split(":")[0])
    return names


def _resolve(name: str, modules: dict[str, Path]) -> list[str]:
    """The module `name` means and the packages above it (their `__init__` runs on import)."""
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules]


def import_closure(sources: Iterable[str], root: Path = ROOT) -> list[Path]:
    """Every repository module the given code (cell sources) imports, transitively."""
    modules = _modules(root)
    todo: list[str] = []
    for source in sources:
        for name in imported_names(ast.parse(source)):
            todo += _resolve(name, modules)
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = modules[module]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name in imported_names(tree, module, path.name == "__init__.py"):
            todo += [m for m in _resolve(name, modules) if m not in seen]
    return sorted({modules[m] for m in seen})


def _data_files(directory: Path) -> list[Path]:
    """Data files in `directory` and in its sub-folders that are not packages (shipped configs)."""
    out = [p for p in directory.iterdir() if p.is_file() and p.suffix in DATA_SUFFIXES]
    for sub in directory.iterdir():
        if sub.is_dir() and not (sub / "__init__.py").exists() and sub.name != "__pycache__":
            out += [p for p in sub.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES]
    return out


def code_sources(notebook: dict[str, Any]) -> list[str]:
    """The code cells' sources of a notebook (nbformat JSON)."""
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in notebook["cells"]
        if c["cell_type"] == "code"
    ]


def notebook_inputs(notebook: dict[str, Any], root: Path = ROOT) -> list[Path]:
    """The repository files a notebook's outputs depend on (module docstring)."""
    code = import_closure(code_sources(notebook), root)
    data: set[Path] = set()
    for directory in {p.parent for p in code}:
        data.update(_data_files(directory))
    return sorted(set(code) | data)


def inputs_digest(notebook: dict[str, Any], root: Path = ROOT) -> tuple[str, list[str]]:
    """`(sha256, relative paths)` of a notebook's code cells and input files."""
    digest = hashlib.sha256()
    for source in code_sources(notebook):
        digest.update(b"cell\0" + source.encode() + b"\0")
    paths = notebook_inputs(notebook, root)
    for path in paths:
        rel = path.relative_to(root).as_posix()
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest(), [p.relative_to(root).as_posix() for p in paths]


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def drop_dead_widget_views(notebook: Any) -> int:
    """Replace widget views (whose state is not stored) by their plain-text fallback."""
    dropped = 0
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                dropped += 1
    return dropped


def execute(path: Path, root: Path = ROOT, timeout: int = 900) -> dict[str, Any]:
    """Run one notebook top to bottom and write it back with its outputs and input record."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    saved = {k: os.environ.get(k) for k in (*ENVIRONMENT, "MATPLOTLIBRC")}
    rc_dir = tempfile.TemporaryDirectory()
    (Path(rc_dir.name) / "matplotlibrc").write_text(f"figure.dpi: {FIGURE_DPI}\n")
    try:
        os.environ["MATPLOTLIBRC"] = rc_dir.name
        for key, value in ENVIRONMENT.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = str(root / value) if "/" in value else value
        start = time.perf_counter()
        client = nbclient.NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(root)}},
            record_timing=False,
            store_widget_state=False,
        )
        client.execute()
        seconds = time.perf_counter() - start
    finally:
        rc_dir.cleanup()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    drop_dead_widget_views(notebook)
    digest, inputs = inputs_digest(notebook, root)
    notebook.metadata.pop("widgets", None)
    notebook.metadata[METADATA_KEY] = {
        "inputs_sha256": digest,
        "inputs": inputs,
        "executed_with": _versions(),
        "command": "make notebooks",
    }
    nbformat.write(notebook, path)
    return {"notebook": path.name, "seconds": round(seconds, 1), "bytes": path.stat().st_size}


def problems(path: Path, root: Path = ROOT) -> list[str]:
    """Why a stored notebook's outputs are not those of the current code (empty: current)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    record = notebook.get("metadata", {}).get(METADATA_KEY)
    name = path.name
    if not record:
        return [f"{name}: no record of its inputs (run `make notebooks`)"]
    out = []
    digest, inputs = inputs_digest(notebook, root)
    if record.get("inputs_sha256") != digest:
        changed = sorted(set(inputs) ^ set(record.get("inputs", [])))
        detail = f" (inputs added or removed: {', '.join(changed)})" if changed else ""
        out.append(
            f"{name}: its code or input files changed after it ran{detail}; run `make notebooks`"
        )
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    counts = [c.get("execution_count") for c in code]
    if counts != list(range(1, len(code) + 1)):
        out.append(f"{name}: cells not executed once, top to bottom (execution counts {counts})")
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        out.append(f"{name}: {len(errors)} stored error output(s)")
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m pipeline.notebooks [--check] [NAME ...]`."""
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.notebooks",
        description="Execute the notebooks of notebooks/ and store their outputs with a digest "
        "of the inputs they came from (`make notebooks`); --check only reports stale ones.",
    )
    parser.add_argument("names", nargs="*", help="notebook names without .ipynb (default: all)")
    parser.add_argument("--check", action="store_true", help="report stale notebooks, run none")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    args = parser.parse_args(argv)
    try:
        paths = notebooks(args.names)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.check:
        found = [p for path in paths for p in problems(path)]
        for problem in found:
            print(problem)
        print(f"{len(paths) - len({p.split(':')[0] for p in found})} of {len(paths)} current")
        return 1 if found else 0
    for path in paths:
        print(f"executing {path.name} ...", flush=True)
        info = execute(path, timeout=args.timeout)
        print(f"  {info['seconds']} s, {info['bytes'] / 1024:.0f} KiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
