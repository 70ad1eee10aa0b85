"""Exports keep text from sources inert (issue 10 items 2 and 3).

The markdown is rendered by a real CommonMark renderer (markdown-it-py) and, once, in Chromium; the
BibTeX is read back by a real BibTeX parser (pybtex). Hostile strings go into every field a source or
a model can fill.
"""

from __future__ import annotations

import json
import random
import re

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from research_tool.reporting.export import render_report
from research_tool.reporting.markdown import md_escape

from .test_export import make_citation, make_report

CONTROL_CHARS = "\x00\x1b\x07\x7f\x9b"
CONTROL = "\x00\x1b[31m\x07\x7f\x9b"  # NUL, an ANSI colour sequence, BEL, DEL, CSI
HOSTILE = [
    "\\<img src=x onerror=alert(7)>",
    "![p](http://evil.example/p.png)",
    "[click](javascript:alert(1))",
    "<https://evil.example/autolink>",
    "<script>alert(1)</script>",
    "&lt;b&gt; &#60;i&#62;",
    "`code` and ``double``",
    "*em* _em_ **strong** ~~strike~~",
    "[ref]\n\n[ref]: http://evil.example/def",
    "# heading",
    "> quote",
    "1. ordered",
    "- bullet",
    "===",
    "```\nfenced\n```",
    "    indented code",
    "<!-- comment -->",
    "line\\",
    f"bell{CONTROL}end",
]
CITATION_URLS = {"https://example.org/1", "file:///corpus/notes.md#x"}


def hostile_report() -> object:
    text = " ".join(HOSTILE)
    citations = [
        make_citation(
            1,
            title="Backtick `title` with ` one open " + text,
            authors=[text, "Ada ![x](http://e.x/y.png) Lovelace"],
            location="notes/`evil`.md" + CONTROL,
            doi="10.1/x) [a](javascript:alert(2)",
            year=2020,
        ),
        make_citation(2, title=text, url="file:///corpus/notes.md#x"),
        make_citation(3, title="Durian facts [/bold]", url="javascript:alert(3)"),
    ]
    return make_report(
        citations=citations,
        query="q " + text,
        refined_query="refined " + text,
        stop_reason=text,
        answer="\n".join(HOSTILE) + " [1]\n\n- listed " + text + " [2]",
        findings=[
            {"statement": text + " [1]", "citations": ["[1]"], "confidence": 0.5, "verified": False,
             "contradictions": [text]},
        ],
        gaps=HOSTILE,
        entities=[{"name": text, "type": "<b>type</b>", "mentions": 1, "sources": 1}],
        saturation=[{"iteration": 1, "note": text, "x|y": "a|b"}],
    )  # fmt: skip


def walk(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for token in tokens:
        out.append(token)
        if token.children:
            out += walk(token.children)
    return out


def test_markdown_from_sources_renders_no_html_image_or_foreign_link() -> None:
    text = render_report(hostile_report(), "md")  # type: ignore[arg-type]
    tokens = walk(MarkdownIt("commonmark").parse(text))
    kinds = {t.type for t in tokens}
    assert not kinds & {"html_inline", "html_block", "image", "code_block", "fence", "blockquote_open", "hr"}
    hrefs = {str(t.attrGet("href")) for t in tokens if t.type == "link_open"}
    # only the report's own links: the linkable source urls and the doi resolver
    assert hrefs <= CITATION_URLS | {"https://doi.org/10.1/x%29%20%5Ba%5D%28javascript:alert%282%29"}
    assert "https://example.org/1" in hrefs  # (markdown-it itself refuses to link file: urls)
    html = MarkdownIt("commonmark").render(text)
    assert html.startswith("<h1>q \\&lt;img src=x onerror=alert(7)&gt; ![p](http://evil.example/p.png) [click]")
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[1:] == ["Answer", "Key findings", "Contradictions", "Gaps", "Sources", "Entities",
                            "Saturation", "Metadata"]  # fmt: skip
    assert not [ch for ch in CONTROL_CHARS if ch in text]


def test_markdown_sources_line_survives_a_backtick_title() -> None:
    text = render_report(hostile_report(), "md")  # type: ignore[arg-type]
    html = MarkdownIt("commonmark").render(text)
    sources = html.split("<h2>Sources</h2>", 1)[1].split("<h2>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", sources, flags=re.DOTALL)
    assert len(items) == 3
    first = items[0]
    assert first.startswith("[1] <strong>Backtick `title` with ` one open")
    assert "<code>notes/'evil'.md[31m</code>" in first
    assert first.rstrip().endswith('<a href="https://example.org/1">https://example.org/1</a>')
    assert items[2].startswith("[3] <strong>Durian facts [/bold]</strong>")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\\<img src=x onerror=alert(7)>", "\\<img src=x onerror=alert(7)>"),
        ("![p](http://x/p.png)", "![p](http://x/p.png)"),
        ("&amp; &#60;", "&amp; &#60;"),
        ("snake_case and _emph_", "snake_case and _emph_"),
        ("2. not a list", "2. not a list"),
        ("version 2.0", "version 2.0"),
    ],
)
def test_md_escape_shows_exactly_the_source_text(raw: str, shown: str) -> None:
    html = MarkdownIt("commonmark").render(md_escape(raw))
    inner = re.sub(r"^<p>|</p>\n$", "", html)
    assert MarkdownIt("commonmark").renderInline(md_escape(raw)) == inner
    import html as html_lib

    assert html_lib.unescape(inner) == shown


PIECES = [*"\\`*_[]()<>!&#;:/.-+=~|\"' ab1209x", "http://", "www.", "&amp;", "&#60;", "<!--", "-->", "```", "1."]
INERT_TOKENS = {
    "paragraph_open", "paragraph_close", "inline", "text", "softbreak", "bullet_list_open", "bullet_list_close",
    "list_item_open", "list_item_close", "ordered_list_open", "ordered_list_close", "heading_open",
    "heading_close", "strong_open", "strong_close",
}  # fmt: skip


@pytest.mark.parametrize(("prefix", "suffix"), [("", ""), ("- ", ""), ("1. ", ""), ("# ", ""), ("**", "**")])
def test_random_punctuation_round_trips_as_text(prefix: str, suffix: str) -> None:
    """Wherever an escaped string stands (a paragraph, a list item, a heading, bold), CommonMark shows
    exactly its text and builds no other element from it."""
    rng = random.Random(7)
    renderer = MarkdownIt("commonmark")
    for _ in range(1500):
        raw = re.sub(r"\s+", " ", "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14)))).strip()
        if not raw:
            continue
        for markers in (False, True):
            tokens = walk(renderer.parse(prefix + md_escape(raw, markers=markers) + suffix))
            assert {t.type for t in tokens} <= INERT_TOKENS, raw
            shown = "".join(t.content for t in tokens if t.type == "text")
            assert shown.strip() == raw, (raw, shown)


def test_html_and_json_drop_control_characters() -> None:
    report = hostile_report()
    for fmt in ("html", "json", "bib"):
        text = render_report(report, fmt)  # type: ignore[arg-type]
        assert not [ch for ch in CONTROL_CHARS if ch in text], fmt
    assert json.loads(render_report(report, "json"))["citations"][0]["location"] == "notes/`evil`.md[31m"  # type: ignore[arg-type]


def test_every_bib_parses_with_pybtex() -> None:
    from pybtex.database import parse_string

    titles = ["Sets {a, b", "close } first {", "}}{{", "a {b} c", "\\{ escaped \\} \\", "50% & $x$ #1 _y_ @home"]
    citations = [make_citation(n, title=t, authors=[t, "Plain Author"]) for n, t in enumerate(titles, start=1)]
    bib = render_report(make_report(citations=citations, query="q {"), "bib")
    parsed = parse_string(bib, "bibtex")
    assert len(parsed.entries) == len(titles)
    for entry in parsed.entries.values():
        assert set(entry.fields) >= {"title", "url", "note"}
        assert entry.fields["url"].startswith("https://example.org/")


@pytest.mark.slow
async def test_markdown_rendered_in_chromium_runs_nothing() -> None:
    from research_tool.providers.fetching.browser import browser_unavailable_reason, find_chromium

    reason = browser_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from playwright.async_api import Dialog, async_playwright

    # A typical CommonMark renderer passes raw HTML through (markdown-it's commonmark preset does).
    page_html = MarkdownIt("commonmark").render(render_report(hostile_report(), "md"))  # type: ignore[arg-type]
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=find_chromium(), args=["--no-sandbox"])
        try:
            page = await browser.new_page()
            dialogs: list[str] = []

            async def on_dialog(dialog: Dialog) -> None:
                dialogs.append(dialog.message)
                await dialog.dismiss()

            page.on("dialog", on_dialog)
            await page.route("**/*", lambda route: route.abort())
            await page.set_content(f"<!DOCTYPE html><html><body>{page_html}</body></html>")
            await page.wait_for_load_state("load")
            counts = await page.evaluate(
                "() => ({img: document.images.length, script: document.scripts.length,"
                " handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes]"
                ".some(a => a.name.startsWith('on'))).length})"
            )
        finally:
            await browser.close()
    assert dialogs == []
    assert counts == {"img": 0, "script": 0, "handlers": 0}


def test_adjacent_citation_markers_stay_plain_and_render_as_text() -> None:
    text = md_escape("Both sources agree [1][3][4].", markers=True)
    assert text == "Both sources agree [1][3][4]."
    assert MarkdownIt("commonmark").renderInline(text) == "Both sources agree [1][3][4]."
    # a marker that would open an inline link or a definition is still escaped
    assert (
        md_escape("[2](http://x.test) [5]: http://x.test", markers=True)
        == "\\[2\\](http://x.test) \\[5\\]: http://x.test"
    )
