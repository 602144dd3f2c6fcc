"""MkDocs hooks of the documentation site (`mkdocs.yml`, `hooks:`); not part of the site itself.

Two things the stock MkDocs cannot do for this repository:

* **The notebooks live in `notebooks/`, outside `docs/`.** `on_files` adds each
  `notebooks/*.ipynb` to the site as the page `notebooks/<name>.ipynb`, before mkdocs-jupyter
  turns it into HTML (with its stored outputs; the site never executes a notebook).
* **Links that work on a code host and in the site.** A docs page links a notebook as
  `../notebooks/<name>.ipynb`, which a code host resolves from `docs/`; `on_page_markdown`
  rewrites every such link to the notebook's page in the site. Any other link that leaves `docs/`
  is left alone, so a strict build reports it like any other broken link.
* **Formulas without a network.** mkdocs-jupyter's template typesets the notebooks' `$...$`
  with MathJax from a CDN: offline a reader sees raw TeX (in the table of contents too).
  `on_post_page` converts every `$...$` and `$$...$$` of a page's text (never inside `pre`,
  `code`, `script`, `style`) to MathML at build time, with the report's converter
  (`pipeline.report.latex_to_mathml`, latex2mathml), and removes the MathJax scripts: browsers
  render MathML themselves. Wide tables of a notebook page scroll sideways instead of being cut.
* **No other fetch either.** mkdocs-jupyter's template also carries a script that imports
  mermaid (diagrams in notebook outputs) from a CDN; our notebooks draw no mermaid diagram, so
  `on_post_page` removes it (a mermaid diagram would show as its source text). The theme's web
  fonts are off (`mkdocs.yml`, `font: false`): the built site fetches nothing from the network
  (tests/test_docs_site.py checks every page and stylesheet).
"""

from __future__ import annotations

import html
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

    return markdown_math(_LINK.sub(replace, markdown))


# fenced code blocks and inline code spans of a Markdown page: never math
_MARKDOWN_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|(`+)[^`\n].*?\2", re.S | re.M)


def markdown_math(markdown: str) -> str:
    """A docs page's `$...$` / `$$...$$` (outside code) as MathML before Markdown reads it, so
    that its `_`, `*` and `\\{` are not taken for emphasis or escapes (a code host renders the
    same `$...$` source with its own math support). An inline formula is wrapped in
    `<span class="math">`: Markdown takes `<math>` for a block-level tag, and a line that starts
    with one would end the paragraph (or list item) there."""
    out = []
    last = 0
    for block in _MARKDOWN_CODE.finditer(markdown):
        out.append(_math_text(markdown[last : block.start()], unescape=False, in_markdown=True))
        out.append(block[0])
        last = block.end()
    out.append(_math_text(markdown[last:], unescape=False, in_markdown=True))
    return "".join(out)


# blocks whose text is never math: code, preformatted text, scripts, styles, and the hidden
# copy of a notebook cell's source that mkdocs-jupyter keeps for its copy button
_PROTECTED = re.compile(
    r"<(pre|code|script|style|textarea)\b.*?</\1\s*>"
    r"|<div\b[^>]*\bclass=\"[^\"]*\bclipboard-copy-txt\b[^\"]*\"[^>]*>.*?</div\s*>",
    re.S | re.I,
)
_MATHJAX_SCRIPT = re.compile(
    r"<script\b[^>]*(?:mathjax[^>]*>.*?|>\s*(?:MathJax|window\.MathJax)\b.*?)</script\s*>"
    r"|<script src=\"\">\s*</script\s*>",  # the template's MathJax tag without a URL
    re.S | re.I,
)
# mkdocs-jupyter's module script that imports mermaid (and its ELK layouts) from cdnjs
_MERMAID_SCRIPT = re.compile(
    r"<script\b[^>]*>(?:(?!</script)[^m]|m(?!ermaid))*?mermaid(?:(?!</script).)*?</script\s*>",
    re.S | re.I,
)
_TAG = re.compile(r"(<[^>]+>)")
_DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
# `$x$`: no space after the opening or before the closing dollar, no digit after it (as the
# report's Markdown reads it), `\$` is a dollar sign
_INLINE = re.compile(r"(?<![\\$])\$(?!\$)(?!\s)((?:[^$\\\n]|\\.)+?)(?<!\s)\$(?!\d)")
WIDE_TABLES_CSS = (
    "<style>.jupyter-wrapper table{display:block;max-width:100%;overflow-x:auto}"
    "math{font-size:1.05em}</style>"
)


def _math_text(text: str, unescape: bool = True, in_markdown: bool = False) -> str:
    """A text node (HTML: entities decoded first, `unescape`) with its formulas as MathML, on
    one line (a Markdown table row stays one row); a formula latex2mathml rejects stays text.
    `in_markdown`: each inline formula inside a `<span class="math">` (see `markdown_math`)."""
    from pipeline.report import MathConversionError, latex_to_mathml

    def convert(match: re.Match, display: bool) -> str:
        latex = html.unescape(match[1]) if unescape else match[1]
        try:
            mathml = latex_to_mathml(latex.strip(), display=display).replace("\n", "")
        except MathConversionError:
            return match[0]
        return f'<span class="math">{mathml}</span>' if in_markdown and not display else mathml

    text = _DISPLAY.sub(lambda m: convert(m, True), text)
    return _INLINE.sub(lambda m: convert(m, False), text)


def offline_math(page_html: str) -> str:
    """`page_html` with MathJax's and mermaid's CDN scripts removed and every `$...$` /
    `$$...$$` of its text (outside `pre`, `code`, `script`, `style`, `textarea` and tags) as a
    MathML `<math>`."""
    page_html = _MERMAID_SCRIPT.sub("", _MATHJAX_SCRIPT.sub("", page_html))
    out = []
    last = 0
    for block in _PROTECTED.finditer(page_html):
        out.append(_convert_outside_tags(page_html[last : block.start()]))
        out.append(block[0])
        last = block.end()
    out.append(_convert_outside_tags(page_html[last:]))
    return "".join(out)


def _convert_outside_tags(fragment: str) -> str:
    parts = _TAG.split(fragment)
    return "".join(p if i % 2 else _math_text(p) for i, p in enumerate(parts))


def on_post_page(output: str, page, config) -> str:
    converted = offline_math(output)
    if page.file.src_uri.endswith(".ipynb"):
        converted = converted.replace("</head>", WIDE_TABLES_CSS + "</head>", 1)
    return converted
