"""The report as a user sees it: `REPORT.md` -> `REPORT.html` through mistune and latex2mathml.

The HTML is parsed with `html.parser`: no Markdown or LaTeX left in the text a reader sees, a
`<math>` element for every formula, images that resolve to files, anchored headings and a table
of contents whose links resolve. Where headless Chromium is installed, the page is also opened
in it and a screenshot saved (skipped otherwise).
"""

from __future__ import annotations

import base64
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
import sympy as sp

from gmc_grpo.run_writer import RunWriter
from pipeline import reproduce
from pipeline.report import (
    MathConversionError,
    latex_to_mathml,
    markdown_to_html,
    render_markdown_report,
    slugify,
)

# ------------------------------------------------------------------------------------------------
# LaTeX -> MathML, one construct at a time
# ------------------------------------------------------------------------------------------------

# (LaTeX, a fragment its MathML must contain): each construct sympy's latex() or our hand-written
# claims use
CONSTRUCTS = [
    (r"\frac{D}{\log(1+2\epsilon)}", "<mfrac>"),
    (r"\log{\left(\epsilon + 1 \right)}", "<mi>log</mi>"),
    (r"\left(2 \epsilon + 1\right)", 'stretchy="true"'),
    (r"\epsilon^{2}", "<msup>"),
    (r"\bar\tau_4^{1/7}", "<msubsup>"),
    (r"\operatorname{W}\left(x\right)", "<mo>W</mo>"),
    (r"\sqrt{2}", "<msqrt>"),
    (r"\sqrt[5]{\bar\tau_4}", "<mroot>"),
    (r"\alpha\epsilon\eta\kappa\rho\tau\Theta\Delta", "&#x00398;"),  # Θ
    (r"\mathbb{E}\left[X\right]", "&#x1D53C;"),  # 𝔼
    (r"\|\nabla J\|^2", "&#x02016;"),  # ‖
    (r"\Vert g_n\Vert^2", "&#x02016;"),
    (r"\big\Vert x\big\Vert", "‖</mo>"),  # latex2mathml needs the character after \big
    (r"\Big[x\Big]", 'minsize="1.623em"'),
    (r"\lvert\mathcal{A}\rvert", "&#x1D49C;"),  # 𝒜
    (r"\frac{8}{T}\log\lvert A\rvert", '<mo stretchy="false">&#x0007C;</mo><mi>A</mi>'),
    (r"\arg\min_{\eta,\epsilon}B", "<mo>arg</mo>"),  # \arg becomes \operatorname{arg}
    (r"\overline{\mathbb{E}\Vert g_n\Vert^2}", "<mover"),
    (r"\tfrac{1}{G}\textstyle\sum_i", "<mfrac"),
    (r"\mathbf{1}\{\rho>1+\epsilon\}", "&#x0007B;"),
    (r"\text{bounds depend on }\mathcal{C}", "<mtext>bounds&#x000A0;depend"),
    (r"x^\star \le y \quad \forall G\ge2", "&#x02200;"),  # ∀
]


@pytest.mark.parametrize(("latex", "fragment"), CONSTRUCTS)
def test_each_construct_converts_to_mathml(latex: str, fragment: str) -> None:
    mathml = latex_to_mathml(latex)
    assert mathml.startswith("<math") and 'display="inline"' in mathml
    assert fragment in mathml, mathml
    assert not re.search(r">[^<]*\\[A-Za-z]", mathml)  # no command left as text


def test_display_math_and_errors() -> None:
    assert 'display="block"' in latex_to_mathml(r"x^{2}", display=True)
    with pytest.raises(MathConversionError, match=r"\\notacommand"):
        latex_to_mathml(r"\notacommand x")


def test_sympy_latex_of_our_kinds_of_expressions_converts() -> None:
    from theory import chain

    eps, n, tau4, x = sp.symbols("epsilon N tau4 x", positive=True)
    expressions = [
        eps**2 / 2 - 2 * eps**3 / 3,
        2 ** sp.Rational(3, 5) * tau4 ** sp.Rational(1, 5) / (2 * n ** sp.Rational(4, 5)),
        sp.log(1 + 2 * eps) ** 2,
        sp.LambertW(-sp.exp(-1 / (1 + eps)) / (1 + eps), -1),
        sp.Abs(x - 1),
        sp.Max(eps, 1),
        sp.Piecewise((x, x > 1), (0, True)),
        sp.sqrt(2 * sp.log(x)),
        sp.Min(1, (1 + eps) / x),
    ]
    for expr in expressions:
        mathml = latex_to_mathml(chain.to_latex(expr))
        assert "<math" in mathml and "\\" not in re.sub(r"<[^>]+>", "", mathml)


# a LaTeX construct -> the MathML element it must become (each formula holding it is checked)
STRUCTURES = {
    r"\frac": "<mfrac>",
    r"\sqrt": ("<msqrt>", "<mroot>"),
    r"\sum": "&#x02211;",
    r"\log": "<mi>log</mi>",
    r"\epsilon": "&#x003F5;",
    "^": ("<msup>", "<msubsup>", "<mover"),
}


def test_every_claims_table_formula_converts() -> None:
    """Each row's claim and derived formula (the paper's 28 claims and our readings) converts
    to one `<math>` element that keeps no LaTeX as text, and each construct it holds becomes its
    MathML element (a fraction an `<mfrac>`, a root an `<msqrt>`, ...)."""
    from theory.claims import evaluate_claims

    rows = evaluate_claims()
    assert sum(row["section"] == "paper" for row in rows) == 28
    seen = dict.fromkeys(STRUCTURES, 0)
    for row in rows:
        for key in ("claim_latex", "derived_latex"):
            latex = str(row[key])
            assert latex.strip(), (row["title"], key)
            mathml = latex_to_mathml(latex)
            assert mathml.startswith('<math xmlns="http://www.w3.org/1998/Math/MathML"')
            assert mathml.count("<math") == 1 and mathml.endswith("</math>")
            text = re.sub(r"<[^>]+>", "", mathml)
            assert "\\" not in text and "$" not in text, (row["title"], key, text)
            for construct, elements in STRUCTURES.items():
                if construct in latex:
                    wanted = (elements,) if isinstance(elements, str) else elements
                    assert any(e in mathml for e in wanted), (row["title"], key, construct)
                    seen[construct] += 1
    assert all(seen.values()), seen  # every construct occurs in the table at least once


# ------------------------------------------------------------------------------------------------
# Markdown -> HTML
# ------------------------------------------------------------------------------------------------


class Page(HTMLParser):
    """What a reader sees: text nodes (outside code and formulas), formulas, links, images, ids."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.ids: list[str] = []
        self.links: list[str] = []
        self.images: list[str] = []
        self.headings: list[tuple[str, str | None]] = []
        self.math = 0
        self.math_errors = 0
        self.cells: list[tuple[str, bool]] = []  # (tag, holds a <math>) of every table cell
        self.details = 0
        self.toc_links: list[str] = []
        self._stack: list[str] = []
        self._cell: list[bool] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self._stack.append(tag)
        if values.get("id"):
            self.ids.append(str(values["id"]))
        if tag == "a" and values.get("href"):
            self.links.append(str(values["href"]))
            if "nav" in self._stack:
                self.toc_links.append(str(values["href"]))
        if tag == "img":
            self.images.append(str(values.get("src")))
            self._stack.pop()  # void element
        if re.fullmatch(r"h[1-6]", tag):
            self.headings.append((tag, values.get("id")))
        if tag == "math":
            self.math += 1
            if self._cell:
                self._cell[-1] = True
        if tag in ("td", "th"):
            self._cell.append(False)
        if tag == "details":
            self.details += 1
        if "math-error" in (values.get("class") or ""):
            self.math_errors += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self.cells.append((tag, self._cell.pop()))
        while self._stack:
            if self._stack.pop() == tag:
                break

    def handle_data(self, data: str) -> None:
        if not {"code", "pre", "math", "style", "title"} & set(self._stack):
            self.text.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def visible_text(page: Page) -> str:
    return "".join(page.text)


def assert_reads_clean(page: Page) -> None:
    text = visible_text(page)
    assert "**" not in text and "`" not in text, text
    assert not re.search(r"\w\*\*\w", text)  # Python powers
    assert not re.search(r"\$[^$]+\$", text)  # every formula was converted
    assert not re.search(r"\\[A-Za-z]{2,}", text)  # no LaTeX command as text
    assert page.math_errors == 0


def test_emphasis_code_math_and_tables_render() -> None:
    markdown = (
        "# Title\n\n"
        "Some **bold**, *italic* and `code_with_underscores`; inline $a_1 * b_2 + c_3 * d$ and "
        "$x_{i}^{*} = y_{i}^{*}$ stay formulas; a price of \\$5 stays text; `cost $5 and $6`.\n\n"
        "$$\n\\frac{1}{N}\\sum_n \\Vert\\nabla J(\\theta_n)\\Vert^2\n$$\n\n"
        "| name | value |\n| --- | ---: |\n| $\\|x\\|$ | 2 |\n"
    )
    html = markdown_to_html(markdown)
    page = parse(html)
    assert_reads_clean(page)
    assert "<strong>bold</strong>" in html and "<em>italic</em>" in html
    assert "<code>code_with_underscores</code>" in html and "<code>cost $5 and $6</code>" in html
    assert html.count("<em>") == 1  # underscores and stars inside math are not emphasis
    assert page.math == 4 and html.count('MathML" display="block"') == 1
    assert "a price of $5 stays text" in visible_text(page)
    assert [c for c in page.cells if c[0] == "td"] == [("td", True), ("td", False)]
    assert '<div class="table-scroll"><table>' in html  # wide tables scroll sideways
    assert html.startswith("<!doctype html>") and "<title>Title</title>" in html
    assert "<script" not in html and not re.search(r"(src|href)=\"?https?:", html)  # no network


def test_report_nests_stage_headings_and_makes_table_math_safe() -> None:
    stage = (
        "## Top of the stage\n\n```\n# not a heading (code)\n```\n\n### Below\n\n"
        "| check | bound |\n| --- | --- |\n| norm | $|x| \\le \\|y\\|$ |\n"
    )
    text = render_markdown_report("R", "intro", [("Stage one", stage), ("Stage two", "text\n")])
    assert "\n## Stage one\n" in text and "\n### Top of the stage\n" in text
    assert "\n#### Below\n" in text and "\n# not a heading (code)\n" in text
    assert r"| norm | $\vert x\vert  \le \Vert y\Vert$ |" in text  # pipes would split the cell
    page = parse(markdown_to_html(text))
    assert [h for h, _ in page.headings] == ["h1", "h2", "h3", "h4", "h2"]
    assert page.cells == [("th", False), ("th", False), ("td", False), ("td", True)]


def _png(
    path: Path, width: int = 4, height: int = 3, rgb: tuple[int, int, int] | None = None
) -> Path:
    """A valid PNG of one colour (grey, or `rgb`), written without any imaging library."""
    pixel, colour_type = (b"\x80", 0) if rgb is None else (bytes(rgb), 2)
    raw = b"".join(b"\x00" + pixel * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    return path


def _claims_stage(out_dir: Path) -> dict[str, object]:
    from theory import claims

    rows = (
        claims.evaluate_claims()[:3]
        + [r for r in claims.evaluate_claims() if r["section"] == "ours"][:2]
    )
    _png(out_dir / "bound.png")
    return {
        "headline": r"3 verified; $\epsilon^\star \propto \bar\tau_4^{0.14} N^{-0.21}$",
        "markdown": claims.claims_markdown(rows) + f"\n![a bound]({out_dir.name}/bound.png)\n",
    }


WIDE_COLUMNS = [f"column {i} with a long header" for i in range(14)]


def _tables_stage(out_dir: Path) -> dict[str, object]:
    from figures.discover import discover, inventory_markdown

    runs_root = out_dir / "runs"
    for method, delay in (("gmc", 0), ("tic", 16)):
        config = {"method": method, "delay": delay, "rollout_prompts": 8, "group_size": 8}
        with RunWriter(runs_root / f"{method}_d{delay}", config) as writer:
            for step in range(3):
                writer.log_metrics({"step": step, "reward/mean": 0.1 * step})
            writer.write_summary({"steps": 3})
    wide = [
        "| " + " | ".join(WIDE_COLUMNS) + " |",
        "|" + " --- |" * len(WIDE_COLUMNS),
        "| " + " | ".join(f"{i * 1.2345:.4f} [0.1, 0.2]" for i in range(14)) + " |",
    ]
    markdown = "\n".join(
        [
            r"| check | bound | holds |",
            "| --- | --- | ---: |",
            r"| removed mass | $\le \mathrm{KL}/\log(1+2\epsilon)$ | 32 |",
            r"| second moment | $\le \frac{8}{T}(1+\epsilon)LR^2\log\lvert\mathcal{A}\rvert$ | 96 |",
            "",
            *wide,
            "",
            "## Runs found",
            "",
            inventory_markdown(discover([runs_root]), root=out_dir.parent),
        ]
    )
    return {"headline": "tables", "markdown": markdown}


@pytest.fixture
def small_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(
        reproduce,
        "STAGES",
        (
            reproduce.Stage("claims", "Theory: the claims table", f"{__name__}:_claims_stage"),
            reproduce.Stage("tables", "Tables, wide and long", f"{__name__}:_tables_stage"),
        ),
    )
    assert reproduce.main(["--out", str(tmp_path)]) == 0
    return tmp_path


def test_small_report_reads_as_a_user_sees_it(small_report: Path) -> None:
    markdown = (small_report / "REPORT.md").read_text()
    html = (small_report / "REPORT.html").read_text()
    page = parse(html)
    assert_reads_clean(page)

    # every formula of the Markdown is one <math> element; every formula cell holds one
    spans = re.findall(r"(?<![\\$])\$(?!\$)(?!\s)(?:[^$\\\n]|\\.)+?\$(?!\d)", markdown)
    # headline (summary and section), 5 claims x 2, 2 bounds, table headers
    assert len(spans) == 2 + 2 * 5 + 2 + 2
    assert page.math == len(spans)
    claims_rows = [line for line in markdown.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(claims_rows) == 5
    assert "\n### Runs found\n" in markdown  # the stage's ## nests under the stage's own ##
    math_cells = [line.count("$") // 2 for line in claims_rows]
    assert all(n == 2 for n in math_cells)  # claim and derived formula in every row
    td = [has_math for tag, has_math in page.cells if tag == "td"]
    assert sum(td) >= 5 * 2 + 2  # claims (claim, derived) and the two bounds

    # one screen of summary before the stage sections; each section opens with its headline
    summary = markdown.index("\n## Summary\n")
    assert summary < markdown.index("\n## Theory: the claims table\n")
    assert "2 stages, 2 finished." in markdown
    assert "**Headline.** tables" in markdown

    # images: REPORT.md links the file next to it, REPORT.html holds its bytes
    assert (
        "![a bound](claims/bound.png)" in markdown and (small_report / "claims/bound.png").is_file()
    )
    assert len(page.images) == 1 and page.images[0].startswith("data:image/png;base64,")

    # headings anchored; the table of contents and the stage table link to them
    assert all(anchor for _, anchor in page.headings)
    assert len(set(page.ids)) == len(page.ids)
    internal = [link[1:] for link in page.links if link.startswith("#")]
    assert internal and set(internal) <= set(page.ids)
    assert set(page.toc_links) >= {"#theory-the-claims-table", "#tables-wide-and-long"}
    assert "[Theory: the claims table](#theory-the-claims-table)" in markdown

    # the run inventory: one summary line, then the table collapsed under <details>
    assert page.details == 1 and "2 runs: 2 <code>llm_train</code>." in html
    assert re.search(r"<details><summary>Every run found \(2\)</summary>\s*<div", html)
    assert "`tables/runs/gmc_d0`" in markdown

    # the wide table sits in a horizontally scrolling box
    wide_table = html.index(WIDE_COLUMNS[-1])
    assert html.rfind('<div class="table-scroll">', 0, wide_table) > html.rfind(
        "</div>", 0, wide_table
    )


def test_slugs_match_github_anchors() -> None:
    assert slugify("Theory: constants, rates and the claims table") == (
        "theory-constants-rates-and-the-claims-table"
    )
    assert slugify("Toy token MDPs: (delay, eps*)") == "toy-token-mdps-delay-eps"
    html = markdown_to_html("## Same\n\n## Same\n")
    assert 'id="same"' in html and 'id="same-1"' in html


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _figure_stage(out_dir: Path) -> dict[str, object]:
    _png(out_dir / "figures" / "red.png", 80, 60, (255, 0, 0))
    _png(out_dir / "figures" / "blue.png", 40, 30, (0, 0, 255))
    markdown = (
        f"![red]({out_dir.name}/figures/red.png)\n\n![blue]({out_dir.name}/figures/blue.png)\n"
    )
    return {"headline": "two figures", "markdown": markdown}


@pytest.fixture
def figure_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    stage = reproduce.Stage("figs", "Figures", f"{__name__}:_figure_stage")
    monkeypatch.setattr(reproduce, "STAGES", (stage,))
    assert reproduce.main(["--out", str(tmp_path / "results")]) == 0
    return tmp_path / "results"


def test_the_html_report_is_one_file(figure_report: Path, tmp_path: Path) -> None:
    """REPORT.html copied alone into an empty folder still holds every image; REPORT.md keeps
    its relative links (Markdown readers want the files)."""
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(figure_report / "REPORT.html", alone / "REPORT.html")
    page = parse((alone / "REPORT.html").read_text())
    assert len(page.images) == 2
    for source, name in zip(page.images, ("red", "blue"), strict=True):
        prefix = "data:image/png;base64,"
        assert source.startswith(prefix), source[:80]
        original = (figure_report / "figs" / "figures" / f"{name}.png").read_bytes()
        assert base64.b64decode(source[len(prefix) :]) == original
    assert not [link for link in page.links if not link.startswith(("#", "data:"))]
    markdown = (figure_report / "REPORT.md").read_text()
    assert "![red](figs/figures/red.png)" in markdown and "base64" not in markdown


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed")
def test_the_copied_html_report_shows_its_images_in_chromium(
    figure_report: Path, tmp_path: Path
) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(figure_report / "REPORT.html", alone / "REPORT.html")
    shot = _screenshot(alone / "REPORT.html", tmp_path)
    from PIL import Image

    pixels = list(Image.open(shot).convert("RGB").getdata())
    assert pixels.count((255, 0, 0)) >= 0.9 * 80 * 60  # the red figure is drawn
    assert pixels.count((0, 0, 255)) >= 0.9 * 40 * 30  # and the blue one


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed")
def test_report_opens_in_headless_chromium(small_report: Path, tmp_path: Path) -> None:
    """The page as a browser draws it: a screenshot of REPORT.html (kept in the test's folder)."""
    shot = _screenshot(small_report / "REPORT.html", tmp_path)
    from PIL import Image

    image = Image.open(shot).convert("L")
    assert image.size == (1280, 1600)
    lo, hi = image.getextrema()
    assert hi - lo > 100  # text drawn on the page, not a blank or an error page


def _screenshot(page: Path, tmp_path: Path) -> Path:
    """A headless Chromium screenshot (1280 x 1600) of `page`, next to it."""
    shot = page.with_suffix(".png")
    command = [
        str(_chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,1600",
        f"--screenshot={shot}",
        page.resolve().as_uri(),
    ]
    subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert shot.is_file() and shot.read_bytes().startswith(b"\x89PNG")
    return shot


def test_short_headline_cuts_between_parts_never_inside_a_formula_or_code() -> None:
    from pipeline.report import short_headline

    assert short_headline("3 verified; 1 needs runs") == ("3 verified; 1 needs runs", False)
    # cut at the last "; " within the limit
    assert short_headline("aaaa; bbbb; cccc", limit=11) == ("aaaa; bbbb", True)
    # a "; " inside a formula or a code span is not a cut
    assert short_headline("$a; b$ xx; `c; d` yy; zz", limit=20) == ("$a; b$ xx; `c; d` yy", True)
    # one long part: cut at a space outside the formula, marked
    text, shortened = short_headline("word " * 10 + "$x + y$ tail", limit=52)
    assert shortened and text == "word " * 9 + "word ..."
    formula = "$" + "x " * 49 + "x$"  # no space outside it: left whole
    assert short_headline(formula, limit=10) == (formula, False)


def test_a_claims_row_naming_a_command_shows_it_as_code_not_back_ticks() -> None:
    from theory.claims import claims_markdown

    row = {
        "section": "paper",
        "title": "Drift bound",
        "claim_latex": r"\Vert \Delta \Vert \le \eta \tau M",
        "where": "§4.2",
        "verdict": "needs runs",
        "derived_latex": r"\eta^2 \tau^2 M",
        "reason": "the evidence is a measurement on toy runs; none were given",
        "result": "Needs runs: `gmc-grpo toy sweep --quick --out runs/sweep` (a|b), 3*eps.",
        "how": "a lone ` back-tick",
    }
    html_text = markdown_to_html(claims_markdown([row]))
    page = parse(html_text)
    assert "<code>gmc-grpo toy sweep --quick --out runs/sweep</code>" in html_text
    text = visible_text(page)
    assert text.count("`") == 1  # only the lone one, as written
    assert "(a|b), 3*eps." in text  # plain text read literally
