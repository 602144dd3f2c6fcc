"""MkDocs hooks of the documentation site (`mkdocs.yml`, `hooks:`); not part of the site itself.

Two things the stock MkDocs cannot do for this repository:

* **The notebooks live in `notebooks/`, outside `docs/`.** `on_files` adds each
  `notebooks/*.ipynb` to the site as the page `notebooks/<name>.ipynb`, before mkdocs-jupyter
  turns it into HTML (with its stored outputs; the site never executes a notebook).
* **Links that work on a code host and in the site.** A docs page links a notebook as
  `../notebooks/<name>.ipynb`, which a code host resolves from `docs/`; `on_page_markdown`
  rewrites every such link to the notebook's page in the site. Any other link that leaves `docs/`
  is left alone, so a strict build reports it like any other broken link.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = "notebooks"
# `](target)` or `](target "title")` of an inline Markdown link or image
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)(?P<rest>(?:\s+\"[^\"]*\")?)\)")


@event_priority(100)  # before mkdocs-jupyter's on_files, which wraps the notebooks it finds
def on_files(files: Files, config) -> Files:
    for path in sorted((ROOT / NOTEBOOK_DIR).glob("*.ipynb")):
        files.append(
            File(
                f"{NOTEBOOK_DIR}/{path.name}",
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def site_target(page_src_uri: str, target: str, docs_dir: Path = ROOT / "docs") -> str | None:
    """The site-relative link for a docs page's link `target` that points at a notebook.

    `page_src_uri` is the page's path inside `docs/` (`"notebooks.md"`, `"api/index.md"`); `target`
    the link as written for a code host (`"../notebooks/bounds.ipynb#anchor"`). Returns `None` for
    every link that does not reach `notebooks/*.ipynb` of the repository.
    """
    if "://" in target or target.startswith(("#", "/", "mailto:")):
        return None
    path, _, anchor = target.partition("#")
    page_dir = (docs_dir / page_src_uri).parent
    resolved = (page_dir / path).resolve()
    notebook_dir = (docs_dir.parent / NOTEBOOK_DIR).resolve()
    if resolved.parent != notebook_dir or resolved.suffix != ".ipynb":
        return None
    in_site = f"{NOTEBOOK_DIR}/{resolved.name}"
    relative = posixpath.relpath(in_site, posixpath.dirname(page_src_uri) or ".")
    return relative + (f"#{anchor}" if anchor else "")


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri.startswith(f"{NOTEBOOK_DIR}/") and page.file.src_uri.endswith(".ipynb"):
        return markdown

    def replace(match: re.Match) -> str:
        new = site_target(page.file.src_uri, match["target"], Path(config["docs_dir"]))
        return match[0] if new is None else f"]({new}{match['rest']})"

    return _LINK.sub(replace, markdown)
