"""What a local document's text becomes before any sentence is read from it: a table row is one sentence pairing
each cell with its header, a heading stands alone (never glued to the paragraph after it, never a statement), page
furniture (breadcrumbs, cookie banners) is left out. Small documents written for this test."""

from __future__ import annotations

from pathlib import Path

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.candidates import build_candidates
from research_tool.models.entities import SourceResult
from research_tool.providers.local_corpus.documents import row_sentence
from research_tool.providers.local_corpus.formats import read_documents

PRICES_HTML = """<!DOCTYPE html><html><head><title>Fees | Larkspur Rowing Club</title></head><body>
<div class="cookie-banner">We use cookies to see how visitors use this site. <button>Accept</button></div>
<main>
<nav class="breadcrumb">Home / Join / Fees</nav>
<h1>Membership fees</h1>
<h2>Welfare</h2>
<p>Jo Penrose is the club's welfare officer and can be reached on the number below.</p>
<table>
  <tr><th>Category</th><th>Annual fee</th><th>Monthly direct debit</th></tr>
  <tr><td>Adult (18 and over)</td><td>£180</td><td>£15</td></tr>
  <tr><td>Junior</td><td>£60</td><td></td></tr>
</table>
<p>Fees are due on the first of April each year.</p>
</main></body></html>"""

CLUB_MD = """# Larkspur Rowing Club

The club rows on the Idle from its boathouse at Rushby Lock, and new members are welcome all year.

| Session | Day | Time |
|---|---|---|
| Learn to row | Saturday | 09:00 |
| Masters | Tuesday | 18:30 |

Please bring the following:

Sessions are cancelled when the river is on red boards, which the club posts by 07:00 on the day.
"""


def _statements(path: str, text: str) -> list[str]:
    docs = read_documents(Path(path), text.encode("utf-8"))
    sources = [
        NumberedSource(
            n=1,
            source=SourceResult(
                url=f"file:///{path}", title=docs[0].title, source_name="local", full_content=docs[0].text
            ),
        )
    ]
    return [c.statement for d in build_candidates(sources) for c in d.candidates]


def test_html_table_rows_pair_cells_with_headers() -> None:
    text = read_documents(Path("fees.html"), PRICES_HTML.encode("utf-8"))[0].text
    assert "Adult (18 and over): Annual fee £180; Monthly direct debit £15." in text
    assert "Junior: Annual fee £60." in text  # the empty cell is left out
    assert "£180£15" not in text


def test_html_heading_is_not_glued_and_furniture_is_dropped() -> None:
    statements = _statements("fees.html", PRICES_HTML)
    assert "Jo Penrose is the club's welfare officer and can be reached on the number below." in statements
    assert not any(s.startswith(("Welfare", "Membership fees", "#")) for s in statements)
    text = read_documents(Path("fees.html"), PRICES_HTML.encode("utf-8"))[0].text
    assert "cookies" not in text and "Home / Join" not in text


def test_markdown_table_rows_become_sentences_and_lead_ins_are_not_statements() -> None:
    statements = _statements("club.md", CLUB_MD)
    assert "Learn to row: Day Saturday; Time 09:00." in statements
    assert "Masters: Day Tuesday; Time 18:30." in statements
    assert "Please bring the following:" not in statements
    assert not any("| Session" in s for s in statements)


def test_candidates_carry_their_title_and_the_sentence_before_for_the_reader() -> None:
    docs = read_documents(Path("club.md"), CLUB_MD.encode("utf-8"))
    sources = [
        NumberedSource(
            n=1,
            source=SourceResult(
                url="file:///club.md", title=docs[0].title, source_name="local", full_content=docs[0].text
            ),
        )
    ]
    (doc,) = build_candidates(sources)
    last = doc.candidates[-1]
    assert last.statement.startswith("Sessions are cancelled")
    assert last.reader_context == "Larkspur Rowing Club: Please bring the following:"


def test_row_sentence_without_a_matching_header_joins_its_cells() -> None:
    assert row_sentence(["A", "B"], ["x", "y", "z"]) == "x; y; z."
    assert row_sentence([], ["", " "]) == ""
