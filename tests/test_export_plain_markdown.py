"""The markdown a reader gets in a pipe reads as written (issue 24, item 3): a signature's `*args`, a name in
backticks and the report's own `_..._` notes carry no backslash, and the answer's emphasis and code spans are
emphasis and code in md and html alike, while every other character from a source stays inert."""

from __future__ import annotations

import random
import re

import pytest
from markdown_it import MarkdownIt

from research_tool.reporting.document import Code, Emph, Link, Strong, Text, inline_markup
from research_tool.reporting.export import render_report
from research_tool.reporting.markdown import md_escape

from .test_export import make_report
from .test_export_inert import INERT_TOKENS, PIECES, walk

ANSWER = (
    "_The sources found do not answer this question. The closest statements they make:_\n\n"
    "runner.start(*args, timeout=None, **kwargs) [1].\n"
    "If `keep_going` is true, every step runs; see *step_list* [2]."
)


def answer_section(markdown: str) -> str:
    return markdown.split("## Answer", 1)[1].split("## ", 1)[0]


def test_piped_markdown_has_no_escapes_a_reader_sees() -> None:
    answer = answer_section(render_report(make_report(answer=ANSWER), "md"))
    assert "runner.start(*args, timeout=None, **kwargs) [1]." in answer
    assert "`keep_going`" in answer and "\\`" not in answer
    assert "\\_" not in answer and "\\*" not in answer
    html = MarkdownIt("commonmark").render(answer)
    assert "<em>The sources found do not answer this question. The closest statements they make:</em>" in html
    assert "<code>keep_going</code>" in html and "<em>step_list</em>" in html
    assert "runner.start(*args, timeout=None, **kwargs)" in html  # no emphasis made of the signature


def test_html_export_shows_the_answers_emphasis_and_code() -> None:
    html = render_report(make_report(answer=ANSWER), "html")
    assert "<em>The sources found do not answer this question." in html
    assert "<code>keep_going</code>" in html
    assert "runner.start(*args, timeout=None, **kwargs)" in html


def test_inline_markup_makes_only_emphasis_code_and_text() -> None:
    hostile = "[x](javascript:alert(1)) <img src=x onerror=alert(2)> ![i](http://e.x/i.png) &amp; `c` *e* **s**"
    nodes = inline_markup(hostile)

    def kinds(items: tuple[object, ...]) -> set[type]:
        found: set[type] = set()
        for node in items:
            found.add(type(node))
            if isinstance(node, Emph | Strong):
                found |= kinds(node.children)
        return found

    assert kinds(nodes) <= {Text, Code, Emph, Strong}
    assert Link not in kinds(nodes)
    rendered = render_report(make_report(answer=hostile), "html")
    assert "<img" not in rendered and 'href="javascript' not in rendered
    assert "<code>c</code> <em>e</em> <strong>s</strong>" in rendered


@pytest.mark.parametrize("prefix", ["", "- ", "1. ", "# "])
def test_prose_escaping_round_trips_random_punctuation_as_text(prefix: str) -> None:
    """Text left over by inline_markup, escaped only where a run could close emphasis, still shows exactly its
    characters wherever a line stands and builds nothing."""
    rng = random.Random(24)
    renderer = MarkdownIt("commonmark")
    for _ in range(1500):
        raw = re.sub(r"\s+", " ", "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 14)))).strip()
        if not raw:
            continue
        tokens = walk(renderer.parse(prefix + md_escape(raw, markers=True, prose=True)))
        assert {t.type for t in tokens} <= INERT_TOKENS - {"strong_open", "strong_close"}, raw
        assert "".join(t.content for t in tokens if t.type == "text").strip() == raw, raw


def test_prose_escaping_keeps_signatures_and_snake_case_readable() -> None:
    assert md_escape("f(*args, **kwargs)", prose=True) == "f(*args, **kwargs)"
    assert md_escape("capture_output and _private", prose=True) == "capture_output and _private"
    assert md_escape("ends here* and_", prose=True) == "ends here\\* and\\_"
