"""The reproduction report: `REPORT.md` (GitHub renders it) and a self-contained `REPORT.html`
(`gmc-grpo reproduce` inlines its images with `pipeline.report_images.embed_images`).

`render_markdown_report(title, intro, sections)` assembles the Markdown of `REPORT.md`;
`markdown_to_html(text)` turns any such Markdown into one HTML page: Markdown by `mistune` (a
maintained CommonMark renderer, with its table, math and strikethrough plugins), every `$...$` and
`$$...$$` formula into MathML by `latex2mathml`, headings with ids and a table of contents, wide
tables that scroll sideways, and a small stylesheet in the page. Browsers render MathML natively:
the page needs no script, no network and no server (open it from the file system).

Guide for stage authors (a stage returns `{"markdown": ..., "headline": ...}`)
----------------------------------------------------------------------------

* **Formulas** are LaTeX between single dollars, inline: `$\\frac{D}{\\log(1+2\\epsilon)}$`,
  `$\\epsilon^\\star \\propto \\bar\\tau_4^{1/7} N^{-3/14}$`; a displayed equation is
  `$$...$$` on lines of its own. Derived expressions come from `theory.chain.to_latex(expr)`
  (`sympy.latex`), never from `str(expr)` (`x**2` is not a formula). Write the opening `$`
  before a non-space and the closing `$` after one (`$x$`, not `$ x $`), and no digit right
  after the closing `$`. Underscores and stars inside `$...$` are safe: the Markdown pass never
  reads them as emphasis. Norms: `\\Vert x\\Vert` (or `\\|x\\|`), absolute values `\\lvert x\\rvert`;
  a `|` inside a table's formula is rewritten to `\\vert` so that it does not split the cell.
  A dollar sign meant as money is `\\$`.
* **Tables** are pipe tables: a header row, a `| --- | ---: |` row (`---:` right-aligns
  numbers), one row per line. A `|` in a text cell is `\\|`. Wide tables scroll sideways in the
  HTML; keep cells short and put long explanations below the table.
* **Images**: `![alt text](<stage>/<file>.png)`, the path relative to the report's folder (the
  stage's folder name first: a stage writes into `out_dir`, so `f"{out_dir.name}/{name}.png"`).
* **Headings**: `###` and below inside a stage (the report gives each stage a `##`; a stage
  whose top heading is `#` or `##` is shifted down so it nests under it). ATX headings (`#`)
  only. Every heading gets an id and the table of contents lists levels 2 and 3.
* **Code and names**: file names, commands and identifiers in back-ticks (`` `results.csv` ``);
  text in angle brackets outside back-ticks is read as HTML.
* **Plain text from elsewhere** (a check's evidence, an error message, sympy's `str`) may hold
  `*`, `_`, `$`, `|` or back-ticks: escape them with a backslash (as `theory.claims` does for its
  evidence), or `3*eps + 2*eps` turns into emphasis.
* **Long lists** (run inventories): summarise in a line or a small table, then put the full
  list in `<details><summary>...</summary>`, a blank line, the Markdown, a blank line,
  `</details>` (GitHub and the HTML page both render it collapsed).
"""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import mistune
from latex2mathml.converter import convert as _latex2mathml
from mistune.toc import add_toc_hook, render_toc_ul

__all__ = [
    "REPORT_CSS",
    "MathConversionError",
    "latex_to_mathml",
    "markdown_to_html",
    "render_markdown_report",
    "short_headline",
    "slugify",
]

# ------------------------------------------------------------------------------------------------
# LaTeX -> MathML
# ------------------------------------------------------------------------------------------------


class MathConversionError(ValueError):
    """A formula `latex2mathml` could not convert (it names the LaTeX and the command)."""


# latex2mathml sizes only one-character delimiters after \big, \Big, ...: give it the character.
_SIZED_DELIMITER = re.compile(r"\\((?:[bB]ig|[bB]igg)[lrm]?)\s*(\\[A-Za-z]+|\\[{}|])")
_DELIMITER_CHARACTERS = {
    r"\Vert": "‖",
    r"\|": "‖",
    r"\lVert": "‖",
    r"\rVert": "‖",
    r"\vert": "|",
    r"\lvert": "|",
    r"\rvert": "|",
    r"\mid": "|",
    r"\langle": "⟨",
    r"\rangle": "⟩",
    r"\lfloor": "⌊",
    r"\rfloor": "⌋",
    r"\lceil": "⌈",
    r"\rceil": "⌉",
}
# operator names latex2mathml leaves as unknown commands
_OPERATOR_NAMES = re.compile(r"\\(arg)(?![A-Za-z])")
# a text node of the MathML that still holds a backslash command: the conversion failed there
_LEFT_COMMAND = re.compile(r">[^<]*?(\\[A-Za-z]+|\\[^A-Za-z\s])[^<]*<")


def _prepare_latex(latex: str) -> str:
    """The LaTeX, rewritten where latex2mathml needs it (the formula's meaning is unchanged)."""

    def sized(match: re.Match[str]) -> str:
        size, delimiter = match.groups()
        if delimiter in _DELIMITER_CHARACTERS:
            return f"\\{size}{_DELIMITER_CHARACTERS[delimiter]}"
        return delimiter  # e.g. \big\{: keep the delimiter, drop the size

    text = _SIZED_DELIMITER.sub(sized, latex)
    return _OPERATOR_NAMES.sub(r"\\operatorname{\1}", text)


def latex_to_mathml(latex: str, display: bool = False) -> str:
    """One `<math>` element (MathML) for a LaTeX formula (without `$`).

    `display=True` gives a displayed (block) equation. Raises `MathConversionError` when the
    converter fails or leaves a command it does not know in the output.
    """
    try:
        mathml = _latex2mathml(_prepare_latex(latex), display="block" if display else "inline")
    except Exception as error:  # latex2mathml raises its own exception types, and IndexError
        raise MathConversionError(
            f"latex2mathml could not convert ${latex}$: {type(error).__name__}: {error}"
        ) from error
    # a bare | (\vert, \lvert, \rvert) is not stretchy in LaTeX; browsers would stretch the
    # closing one to the height of the whole formula
    mathml = mathml.replace("<mo>&#x0007C;</mo>", '<mo stretchy="false">&#x0007C;</mo>')
    left = _LEFT_COMMAND.search(mathml)
    if left:
        raise MathConversionError(
            f"latex2mathml does not know {left.group(1)} in ${latex}$; write it another way "
            "(see pipeline.report's guide)"
        )
    return mathml


# ------------------------------------------------------------------------------------------------
# Markdown -> HTML
# ------------------------------------------------------------------------------------------------


def slugify(text: str) -> str:
    """A heading's id as GitHub makes it: lower case, punctuation dropped, spaces to `-`
    (so `[...](#id)` links work in `REPORT.md` on GitHub and in `REPORT.html` alike)."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _heading_ids() -> Any:
    """`heading_id(token, index)` for mistune's toc hook: GitHub's slugs, `-1`, `-2` on repeats."""
    seen: dict[str, int] = {}

    def heading_id(token: dict[str, Any], index: int) -> str:
        slug = slugify(token["text"]) or f"section-{index + 1}"
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        return slug if count == 0 else f"{slug}-{count}"

    return heading_id


class _ReportRenderer(mistune.HTMLRenderer):
    """mistune's HTML renderer with MathML formulas, scrolling tables and anchored headings."""

    def __init__(self) -> None:
        super().__init__(escape=False)  # raw HTML passes (<details> of the run inventories)
        self.math_errors: list[str] = []

    def _math(self, latex: str, display: bool) -> str:
        try:
            return latex_to_mathml(latex, display=display)
        except MathConversionError as error:
            self.math_errors.append(str(error))
            return f'<code class="math-error" title="not converted">${html.escape(latex)}$</code>'

    def inline_math(self, text: str) -> str:
        return f'<span class="math">{self._math(text, display=False)}</span>'

    def block_math(self, text: str) -> str:
        return self._math(text, display=True)

    def table(self, text: str) -> str:
        return f'<div class="table-scroll"><table>\n{text}</table></div>\n'

    def heading(self, text: str, level: int, **attrs: Any) -> str:
        anchor = attrs.get("id")
        if not anchor:
            return super().heading(text, level, **attrs)
        link = f'<a class="anchor" href="#{anchor}" aria-label="link to this section">#</a>'
        return f'<h{level} id="{anchor}">{text} {link}</h{level}>\n'

    def image(self, text: str, url: str, title: str | None = None) -> str:
        return super().image(text, url, title).replace("<img ", '<img loading="lazy" ', 1)


REPORT_CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --head: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
.page { display: grid; grid-template-columns: minmax(0, 1fr); max-width: 1500px; margin: 0 auto; }
main { min-width: 0; padding: 1.5rem 2rem 4rem; }
nav.toc { padding: 1rem 2rem 0; font-size: 0.9rem; }
nav.toc .toc-title { font-size: 0.8rem; font-weight: 600; text-transform: uppercase; letter-spacing: 0.05em;
  color: var(--muted); margin: 0 0 0.4rem; border: 0; }
nav.toc ul { list-style: none; padding-left: 0.9rem; margin: 0.2rem 0; }
nav.toc > ul { padding-left: 0; }
nav.toc a { color: var(--fg); text-decoration: none; }
nav.toc a:hover { color: var(--accent); text-decoration: underline; }
@media (min-width: 1100px) {
  .page { grid-template-columns: 17rem minmax(0, 1fr); }
  nav.toc { position: sticky; top: 0; align-self: start; max-height: 100vh; overflow-y: auto;
    padding: 1.5rem 1rem 2rem 1.5rem; border-right: 1px solid var(--line); }
}
h1, h2, h3, h4, h5, h6 { line-height: 1.25; margin: 1.6em 0 0.6em; }
h1 { font-size: 1.9rem; margin-top: 0.4em; }
h2 { font-size: 1.45rem; padding-bottom: 0.25em; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.2rem; }
h4 { font-size: 1.05rem; }
a.anchor { visibility: hidden; margin-left: 0.3em; color: var(--muted); text-decoration: none;
  font-weight: normal; }
h1:hover a.anchor, h2:hover a.anchor, h3:hover a.anchor, h4:hover a.anchor,
h5:hover a.anchor, h6:hover a.anchor { visibility: visible; }
a { color: var(--accent); }
p, ul, ol { margin: 0.6em 0; }
code { font: 0.88em/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono",
  monospace; background: #eff1f3; padding: 0.1em 0.3em; border-radius: 4px; }
pre { background: var(--head); border: 1px solid var(--line); border-radius: 6px; padding: 0.8em;
  overflow-x: auto; }
pre code { background: none; padding: 0; }
.table-scroll { overflow-x: auto; margin: 0.8em 0 1.2em; max-width: 100%; }
table { border-collapse: collapse; font-size: 0.92rem; }
th, td { border: 1px solid var(--line); padding: 0.35em 0.6em; vertical-align: top;
  text-align: left; }
th { background: var(--head); font-weight: 600; }
tbody tr:nth-child(even) { background: #fbfcfd; }
td { overflow-wrap: break-word; }
td code { white-space: normal; overflow-wrap: break-word; }
/* a long formula scrolls inside its cell, so that every column of the table stays in view:
   two formula columns share what the page leaves beside the narrow columns */
td .math { display: inline-block; max-width: min(40rem, calc((100vw - 21rem) / 2));
  overflow-x: auto; overflow-y: hidden; vertical-align: middle; padding: 0.1em 0;
  scrollbar-width: thin; }
@media (min-width: 1100px) {
  td .math { max-width: min(40rem, calc((100vw - 38rem) / 2)); }
}
img { display: block; max-width: 100%; height: auto; margin: 0.8em 0; }
math { font-family: "STIX Two Math", "Latin Modern Math", "Cambria Math",
  "DejaVu Math TeX Gyre", math; font-size: 1.05em; }
math[display="block"] { margin: 0.6em 0; overflow-x: auto; }
.math-error { color: #b42318; }
details { margin: 0.6em 0; border: 1px solid var(--line); border-radius: 6px;
  padding: 0.4em 0.8em; }
summary { cursor: pointer; font-weight: 600; }
details[open] > summary { margin-bottom: 0.4em; }
details table { font-size: 0.85rem; }
""".strip()


def _toc_html(items: Iterable[tuple[int, str, str]], levels: tuple[int, int] = (2, 3)) -> str:
    low, high = levels
    shown = [item for item in items if low <= item[0] <= high]
    if not shown:
        return ""
    return (
        '<nav class="toc" aria-label="Contents"><div class="toc-title">Contents</div>\n'
        + render_toc_ul(shown)
        + "</nav>\n"
    )


def markdown_to_html(text: str, title: str | None = None, strict: bool = False) -> str:
    """A self-contained HTML page (stylesheet inside, MathML formulas, table of contents).

    text: Markdown with `$...$` / `$$...$$` LaTeX (see the guide above).
    title: the page title (default: the text of the first `#` heading).
    strict: raise `MathConversionError` when a formula does not convert; otherwise the formula is
        shown as its LaTeX source (in red) and a warning names it.
    """
    renderer = _ReportRenderer()
    markdown = mistune.create_markdown(
        renderer=renderer, plugins=["table", "math", "strikethrough"]
    )
    add_toc_hook(markdown, min_level=1, max_level=6, heading_id=_heading_ids())
    body, state = markdown.parse(text)
    if renderer.math_errors:
        if strict:
            raise MathConversionError("; ".join(renderer.math_errors))
        for error in renderer.math_errors:
            warnings.warn(error, stacklevel=2)
    items = state.env.get("toc_items", [])
    if title is None:
        title = next((name for level, _, name in items if level == 1), "Report")
    return (
        "<!doctype html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title, quote=False)}</title>\n"
        f"<style>\n{REPORT_CSS}\n</style>\n</head>\n<body>\n"
        f'<div class="page">\n{_toc_html(items)}<main>\n{body}</main>\n</div>\n'
        "</body>\n</html>\n"
    )


# ------------------------------------------------------------------------------------------------
# Assembling REPORT.md
# ------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})(?=\s|$)")
_TABLE_ROW = re.compile(r"^ {0,3}\|")
_INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)(?!\s)((?:[^$\\\n]|\\.)+?)\$(?!\d)")


def _outside_fences(lines: Sequence[str]) -> Iterable[tuple[int, str]]:
    """`(index, line)` of the lines outside fenced code blocks."""
    fence = ""
    for index, line in enumerate(lines):
        match = _FENCE.match(line)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = ""
            continue
        if match:
            fence = match.group(1)
            continue
        yield index, line


def _nest_headings(markdown: str, top: int = 3) -> str:
    """Shift a section's ATX headings down so that its highest one is at level `top`."""
    lines = markdown.splitlines()
    levels = {
        i: len(m.group(1)) for i, line in _outside_fences(lines) if (m := _HEADING.match(line))
    }
    if not levels:
        return markdown
    shift = max(0, top - min(levels.values()))
    for i, level in levels.items():
        lines[i] = "#" * min(6, level + shift) + lines[i][level:]
    return "\n".join(lines)


def _table_safe_math(markdown: str) -> str:
    """Inside `$...$` of a table row, `\\|` -> `\\Vert`, `|` -> `\\vert`: a pipe would split the
    cell (in GitHub's renderer and in mistune's)."""

    def safe(match: re.Match[str]) -> str:
        tex = match.group(1).replace(r"\|", r"\Vert ").replace("|", r"\vert ")
        return f"${tex.rstrip()}$"

    lines = markdown.splitlines()
    for i, line in _outside_fences(lines):
        if _TABLE_ROW.match(line):
            lines[i] = _INLINE_MATH.sub(safe, line)
    return "\n".join(lines)


def _outside_spans(text: str, index: int) -> bool:
    """Whether `text[index]` lies outside every `$...$` formula and back-tick code span."""
    before = text[:index]
    return before.count("$") % 2 == 0 and before.count("`") % 2 == 0


def short_headline(headline: str, limit: int = 140) -> tuple[str, bool]:
    """`(text, shortened)`: a stage's headline cut to about `limit` characters for the report's
    summary, at a `; ` between its parts (else at a space), never inside a formula or a code span;
    `shortened` says whether anything was left out (the section gives the whole headline)."""
    text = " ".join(headline.split())
    if len(text) <= limit:
        return text, False
    cuts = [m.start() for m in re.finditer("; ", text) if _outside_spans(text, m.start())]
    fitting = [c for c in cuts if c <= limit]
    if fitting:
        return text[: fitting[-1]], True
    if cuts and cuts[0] <= 2 * limit:
        return text[: cuts[0]], True
    spaces = [m.start() for m in re.finditer(" ", text) if _outside_spans(text, m.start())]
    fitting = [c for c in spaces if c <= limit]
    if not fitting:
        return text, False
    return text[: fitting[-1]].rstrip(",;:") + " ...", True


def render_markdown_report(title: str, intro: str, sections: Sequence[tuple[str, str]]) -> str:
    """The text of a Markdown report: `# title`, `intro`, then one `## heading` per section with
    its Markdown (headings nested below the section's, pipes in table formulas made safe)."""
    parts = [f"# {title}", "", intro.strip(), ""]
    for heading, markdown in sections:
        parts += [f"## {heading}", "", _nest_headings(markdown.strip()), ""]
    return _table_safe_math("\n".join(parts)) + "\n"
