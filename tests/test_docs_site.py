"""The documentation site builds in strict mode, and strict mode catches what it should.

`test_site_builds_strict` builds the real site (`mkdocs.yml`, every page of `docs/`, the API
reference from the docstrings, the notebooks with their stored outputs) into a temporary folder,
as `make docs` does, and checks what a reader relies on: the pages, a rendered API entry, a
notebook's stored figure, the explorer, and the notebook links that `docs/hooks.py` rewrites.
The planted tests build a two-page site with the same configuration (`INHERIT: mkdocs.yml`: the
same hooks, plugins and validation settings) holding a broken link, a broken anchor and a
cross-reference to a missing name, or an API directive for a missing module: the build must
fail, naming each.
Only the repository's files are read (no `results/`, no network).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

if os.environ.get("CI"):  # CI installs the `docs` extra (make venv): a missing mkdocs is a failure
    import mkdocs  # noqa: F401
else:
    pytest.importorskip(
        "mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'"
    )


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    # the API reference reads this checkout's packages (mkdocstrings' `paths` and sys.path)
    python_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": python_path}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def warnings_of(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]


def test_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    result = mkdocs_build(ROOT / "mkdocs.yml", site)
    assert result.returncode == 0 and not warnings_of(result), result.stderr[-4000:]

    for page in ("index.html", "getting-started/index.html", "measurements/index.html"):
        assert (site / page).is_file(), page
    # the API reference is rendered from the docstrings: an entry with its signature and text
    api = (site / "api/gmc_grpo/index.html").read_text(encoding="utf-8")
    assert 'id="gmc_grpo.estimators.coefficients"' in api
    assert "Detached per-trajectory coefficients" in api
    assert 'id="theory.bounds"' in (site / "api/theory/index.html").read_text(encoding="utf-8")
    # a notebook page holds its stored outputs (a figure as a data URI), not only its code
    notebook = (site / "notebooks/bounds/index.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in notebook
    # docs/notebooks.md links ../notebooks/NAME.ipynb (a code host's path); the site links the page
    notebooks_page = (site / "notebooks/index.html").read_text(encoding="utf-8")
    assert 'href="bounds/"' in notebooks_page
    assert "../notebooks/bounds.ipynb" not in notebooks_page
    # the explorer that needs no kernel, linked from its page
    assert (site / "assets/bounds_explorer.html").is_file()
    assert "bounds_explorer.html" in (site / "explorer/index.html").read_text(encoding="utf-8")
    # the site reads offline: no page or stylesheet fetches a script, stylesheet, font, image or
    # module from elsewhere (links a reader may follow are fine); no mermaid diagram would make
    # the theme's script fetch mermaid
    for page in sorted([*site.rglob("*.html"), *site.rglob("*.css")]):
        text = page.read_text(encoding="utf-8")
        assert external_fetches(text) == [], page
        assert 'class="mermaid"' not in text, page
    # formulas need no network: MathML from the build, no MathJax
    for page in sorted(site.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]*>\s*(window\.)?MathJax", text), page
        assert "mathjax/" not in text.lower() and 'src=""' not in text, page
    for name in ("bounds", "bias_sweeps", "async_toy", "paper_figures"):
        text = (site / f"notebooks/{name}/index.html").read_text(encoding="utf-8")
        assert text.count("<math ") >= 5, name
        prose = re.sub(
            r"<(pre|code|script|style)\b.*?</\1>|<div class=\"clipboard-copy-txt\".*?</div>",
            "",
            text,
            flags=re.S,
        )
        assert not re.search(r"\$\\[A-Za-z]+", prose), name  # no raw TeX left
    _check_math_in_chromium(site / "notebooks/bounds/index.html", tmp_path)
    assert "<math " in notebook
    # a docs page's $...$ (core-library's methods table) is MathML too, one per table cell
    core = (site / "core-library/index.html").read_text(encoding="utf-8")
    assert core.count("<math ") >= 8 and "$c_i" not in core


# what a browser fetches by itself from another host: `src=` / `srcset=` of any tag, `href=` of a
# `<link>` (stylesheet, font preload, icon, preconnect), a module's `import(...)` / `from "..."`,
# CSS's `url(...)` and `@import`
_EXTERNAL_FETCH = re.compile(
    r"""\b(?:src|srcset)\s*=\s*["']?\s*(?:https?:)?//[^\s"'>]+"""
    r"""|<link\b[^>]*\bhref\s*=\s*["']?\s*(?:https?:)?//[^\s"'>]+"""
    r"""|\bimport\s*\(\s*["'`](?:https?:)?//[^"'`]+"""
    r"""|\bfrom\s*["'](?:https?:)?//[^"']+"""
    r"""|\burl\(\s*["']?\s*(?:https?:)?//[^)"']+"""
    r"""|@import\s+(?:url\()?\s*["']?(?:https?:)?//[^\s"');]+""",
    re.I,
)


def external_fetches(text: str) -> list[str]:
    """Every reference in an HTML page or stylesheet `text` that a browser fetches from a
    network address (not a link a reader follows, not a `data:` URL or an XML namespace)."""
    return [m[0] for m in _EXTERNAL_FETCH.finditer(text)]


def test_external_fetches_finds_each_kind_and_spares_links() -> None:
    planted = [
        '<script src="https://cdn.example/x.js"></script>',
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">',
        "<link rel=preconnect href=//fonts.gstatic.com>",
        '<img srcset="https://img.example/a.png 2x">',
        'const m = (await import("https://cdnjs.cloudflare.com/ajax/libs/mermaid/m.mjs")).default;',
        'import x from "https://esm.example/x.js";',
        "@font-face{src:url(https://fonts.gstatic.com/s/roboto.woff2)}",
        '@import url("https://fonts.googleapis.com/css2?family=Roboto");',
    ]
    for line in planted:
        assert len(external_fetches(line)) == 1, line
    spared = (
        '<a href="https://www.mkdocs.org/">MkDocs</a><script src="../assets/x.js"></script>'
        '<link rel="stylesheet" href="assets/main.css"><math xmlns="http://www.w3.org/1998/Math/'
        'MathML"></math>--icon:url("data:image/svg+xml;charset=utf-8,<svg xmlns=\'http://www.w3'
        ".org/2000/svg'></svg>\")"
    )
    assert external_fetches(spared) == []


def test_offline_math_removes_the_mermaid_cdn_script() -> None:
    hooks = _docs_hooks()
    page = (
        '<head><script>keep("mathless")</script><script type="module">\n'
        "document.addEventListener('DOMContentLoaded', async () => {\n"
        '  const mermaid = (await import("https://cdnjs.cloudflare.com/ajax/libs/mermaid/11.10.0/'
        'mermaid.esm.min.mjs")).default;\n});\n</script><script>keep(2)</script></head>'
    )
    out = hooks.offline_math(page)
    assert out == '<head><script>keep("mathless")</script><script>keep(2)</script></head>'
    assert external_fetches(page) and not external_fetches(out)


def _docs_hooks():
    """`docs/hooks.py` as a module (it is not a package's module)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def test_offline_math_converts_text_and_leaves_code_and_money() -> None:
    hooks = _docs_hooks()
    page = (
        '<head><script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/MathJax.js">'
        '</script><script type="text/x-mathjax-config">MathJax.Hub.Config({});</script>'
        '<script src=""> </script></head>'
        "<p>Move $\\epsilon$ for $5 and $a &lt; b$</p><pre>$x$</pre><code>$y$</code>"
        '<p>$$\\frac{1}{2}$$</p><a title="$z$">t</a>'
        '<div class="clipboard-copy-txt" id="c1">print("$\\epsilon$")</div>'
    )
    out = hooks.offline_math(page)
    assert "<script" not in out  # MathJax's three tags gone
    assert out.count("<math ") == 3 and 'display="block"' in out  # epsilon, a < b, 1/2
    assert "for $5 and" in out  # money is not math
    assert "<pre>$x$</pre>" in out and "<code>$y$</code>" in out and 'title="$z$"' in out
    assert 'print("$\\epsilon$")</div>' in out  # a code cell's hidden copy stays code


def code_host_anchors(markdown: str) -> set[str]:
    """The heading anchors a code host gives a Markdown page (also the site's: `mkdocs.yml` uses
    the same slugs, `pymdownx.slugs.slugify(case="lower")`)."""
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    anchors, in_code = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            anchors.add(slug(line.lstrip("#").strip().replace("`", ""), "-"))
    return anchors


def relative_links(markdown: str) -> list[str]:
    """The targets of a page's relative Markdown links and images (code blocks left out)."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)
    return [
        t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t and not t.startswith("#")
    ]


def test_readme_links_resolve_on_a_code_host():
    """README's links are relative paths to files of the repository (mostly `docs/*.md`), and
    every `#anchor` is a heading of its page, as a code host renders them."""
    links = relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert sum(link.startswith("docs/") for link in links) >= 20, links
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.is_file(), link
        if anchor:
            assert anchor in code_host_anchors(target.read_text(encoding="utf-8")), link


def test_code_host_anchors_follow_the_slug_rule():
    page = "# Title\n## Rollout workers: every group (`--schedule workers`)\n```\n# not a heading\n```\n"
    assert code_host_anchors(page) == {"title", "rollout-workers-every-group---schedule-workers"}


def small_site(tmp_path: Path, page: str) -> Path:
    """A two-page site with the repository's configuration; `page` is the second page's text."""
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(ROOT / "docs" / "hooks.py", docs / "hooks.py")
    (docs / "index.md").write_text("# Home\n\n[the page](page.md#a-heading)\n", encoding="utf-8")
    (docs / "page.md").write_text(f"# Page\n\n## A heading\n\n{page}\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: docs\nnav:\n  - index.md\n  - page.md\n",
        encoding="utf-8",
    )
    return config


def test_planted_broken_references_fail_the_build(tmp_path):
    """A broken link, a broken anchor and a cross-reference to a missing name: each is named."""
    plants = {
        "missing.md": "[a page that is not there](missing.md)",
        "no-such-heading": "[a heading that is not there](index.md#no-such-heading)",
        "no_such_name": "[a name that is not there][gmc_grpo.estimators.no_such_name]",
    }
    # a working API entry and working links beside the plants: what fails is the plants
    page = "\n\n".join([*plants.values(), "[home](index.md)", "::: gmc_grpo.advantages.compute"])
    result = mkdocs_build(small_site(tmp_path, page), tmp_path / "site")
    assert result.returncode != 0, result.stderr[-4000:]
    warnings = warnings_of(result)
    assert len(warnings) == len(plants), warnings
    for named in plants:
        assert any(named in line for line in warnings), (named, warnings)
    assert 'id="gmc_grpo.advantages.compute"' in (tmp_path / "site/page/index.html").read_text()


def test_planted_api_directive_for_a_missing_module_fails_the_build(tmp_path):
    result = mkdocs_build(small_site(tmp_path, "::: gmc_grpo.no_such_module"), tmp_path / "site")
    assert result.returncode != 0, result.stderr[-4000:]
    assert any("gmc_grpo.no_such_module" in line for line in warnings_of(result)), result.stderr


# measures every <math> of the page once it has loaded and writes the result into the DOM
_MEASURE = """<script>addEventListener("load", () => {
  const boxes = [...document.querySelectorAll(".md-content math")].map(m => m.getBoundingClientRect());
  const text = document.body.innerText;
  document.body.setAttribute("data-math", JSON.stringify({
    count: boxes.length, drawn: boxes.filter(b => b.width > 0 && b.height > 0).length,
    rawTex: (text.match(/\\$\\\\[A-Za-z]+/g) || []).length}));
});</script>"""


def _check_math_in_chromium(page: Path, tmp_path: Path) -> None:
    """The page in headless Chromium with the network off (every request to an unreachable
    proxy): every MathML formula is laid out with a size, no raw TeX is visible. Skipped (said)
    where no Chromium is installed."""
    import json

    chromium = next(
        (
            shutil.which(n)
            for n in ("chromium", "chromium-browser", "google-chrome")
            if shutil.which(n)
        ),
        None,
    )
    if chromium is None:
        print("headless Chromium not installed: the offline rendering check was not run")
        return
    probe = page.with_name("probe.html")  # same folder: the page's relative assets still load
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _MEASURE + "</body>"))
    done = subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
            f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=5000",
            "--dump-dom", probe.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    found = re.search(r'data-math="([^"]*)"', done.stdout)
    assert found, done.stderr[-2000:]
    measured = json.loads(found[1].replace("&quot;", '"'))
    assert measured["count"] >= 5 and measured["drawn"] == measured["count"], measured
    assert measured["rawTex"] == 0, measured


def test_markdown_math_before_markdown_reads_underscores_and_braces() -> None:
    hooks = _docs_hooks()
    page = (
        "| m | c |\n| --- | --- |\n| `gmc` | $c_i = \\rho_i \\min\\{1, x_i\\}$ |\n\n"
        "Code stays: `$a_b$` and\n\n```bash\necho $HOME_$x$\n```\n"
    )
    out = hooks.markdown_math(page)
    row = out.splitlines()[2]
    assert row.startswith('| `gmc` | <span class="math"><math ') and row.endswith(
        "</math></span> |"
    )
    assert "<msub><mi>c</mi><mi>i</mi></msub>" in row and "&#x0007B;" in row  # c_i, the brace
    assert "`$a_b$`" in out and "echo $HOME_$x$" in out  # code untouched


def test_markdown_math_at_a_line_start_stays_in_its_paragraph_and_list_item() -> None:
    """Markdown takes `<math>` for a block-level tag: a formula that starts a source line must not
    end the paragraph or the list item it continues (found on METHODS.md and theory.md)."""
    import markdown

    hooks = _docs_hooks()
    page = "Intro text (TIC:\n$c_\\epsilon$) ends here.\n\n- item one is\n  $1/(TBG)$\n  (eq. 2).\n- item two\n"
    html_out = markdown.markdown(hooks.markdown_math(page))
    assert html_out.count("<p>") == 1 and html_out.count("<li>") == 2, html_out
    paragraph = html_out.split("</p>")[0]
    assert "<math " in paragraph and "ends here." in paragraph
    first_item = html_out.split("</li>")[0]
    assert "<math " in first_item and "(eq. 2)." in first_item


# a code span that spells a formula in ASCII: a norm `||`, a power `x^2`, `grad J`, or a Greek
# letter's name (`eps`, `eta`, ...) in an expression
_ASCII_FORMULA = re.compile(
    r"\|\||\w\^[\w(-]|\bgrad J\b"
    r"|\b(?:eps|eta|tau|tau4|rho|rho_bar|chi|delta|sigma|theta)\b\s*(?:[-+*/^<>]|<=|>=|=\s)"
    r"|(?:<=|>=)\s*\d|(?<!-)[-+*/]\s*(?:eps|eta|tau|tau4|rho|rho_bar|chi|delta|sigma|theta)\b"
)
# code spans that are code, not formulas: config fields and their bounds, version pins, error
# messages, answer strings the scorer reads, and a heading's (its anchor is linked)
_CODE_NOT_FORMULA = {
    ("METHODS.md", "r_t <= 1 + clip_high"),
    ("METHODS.md", "r_t >= 1 - clip_low"),
    ("bounds.md", "eps*"),
    ("gpu.md", "vllm>=0.18"),
    ("integrations.md", ">=5.16.1"),
    ("integrations.md", ">=0.9.0,<0.10"),
    ("integrations.md", "num_generations >= 2"),
    (
        "records.md",
        "ToyTrainConfig.seeds=[-1]: must be a non-empty list of distinct whole numbers >= 0",
    ),
    ("records.md", "EvalConfig.seed=-1: must be a whole number >= 0; ..."),
    ("records.md", "eps = inf"),
    (
        "records.md",
        "ToyTrainConfig.eps=inf: must be a finite number > 0 (the cap is 1 + eps, ...; for no cap "
        "at all use method 'is')",
    ),
    ("scoring.md", "x^2+2x"),
    ("scoring.md", "x^0.5"),
}


def ascii_formula_spans(markdown: str) -> list[str]:
    """The inline code spans of a Markdown page (outside fenced blocks) that spell a formula in
    ASCII (`_ASCII_FORMULA`)."""
    prose = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", markdown, flags=re.S | re.M)
    spans = [" ".join(s.split()) for s in re.findall(r"(?<!`)`([^`]+)`(?!`)", prose)]
    return [span for span in spans if _ASCII_FORMULA.search(span)]


def test_docs_pages_write_formulas_as_math_not_ascii_code() -> None:
    """Issue 34: the pages write formulas as `$...$` (MathML in the site, math on a code host),
    not as ASCII in code spans; code stays code (the list above says why each one is code)."""
    assert ascii_formula_spans("the bias `||E g - grad J/T||^2` at `eta^2 tau^2 M`") == [
        "||E g - grad J/T||^2",
        "eta^2 tau^2 M",
    ]
    assert ascii_formula_spans("`min(rho, 1+eps)` and `eps <= 1` but `--set eps=0.28`") == [
        "min(rho, 1+eps)",
        "eps <= 1",
    ]  # a command's config field stays code
    found = []
    for page in sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]):
        for span in ascii_formula_spans(page.read_text(encoding="utf-8")):
            if (page.name, span) not in _CODE_NOT_FORMULA:
                found.append(f"{page.name}: `{span}`")
    assert found == [], found
