"""Issue 22 item 3: where untrusted text enters, control characters leave: provider results (`SourceResult`), model
answers (`parse_structured`), HTML fragments (`plain_text`), fetched pages (`FetchedPage`), local documents."""

from __future__ import annotations

import json
from pathlib import Path

from research_tool.core.untrusted_text import clean_text
from research_tool.engines.llm_schemas import ApplyAnswersAnswer
from research_tool.engines.structured_output import parse_structured
from research_tool.models.entities import SourceResult
from research_tool.providers.fetching.crawler import FetchedPage
from research_tool.providers.local_corpus.formats import read_documents
from research_tool.providers.snippets import plain_text

DIRTY = "a\u0000b\u0007c\td\ne\r\nf\u001bg\u007fh\ud800i"


def test_clean_text_keeps_tab_newline_and_return_and_replaces_lone_surrogates() -> None:
    assert clean_text(DIRTY) == "abc\td\ne\r\nfgh\ufffdi"
    assert clean_text(clean_text(DIRTY)).encode("utf-8")  # idempotent, and encodable
    plain = "nothing to clean here\n"
    assert clean_text(plain) is plain


def test_every_text_field_of_a_source_result_is_cleaned() -> None:
    result = SourceResult(
        url="https://example.org/\u0000x",
        title=DIRTY,
        snippet=DIRTY,
        source_name="tavily",
        full_content=DIRTY,
        authors=["A\u0000 Author"],
        location="f.jsonl#\u00001",
    )
    dumped = json.dumps(result.model_dump(), ensure_ascii=False)
    assert "\u0000" not in dumped and "\u0007" not in dumped
    assert result.url == "https://example.org/x" and result.authors == ["A Author"]
    # the state's dicts are validated again on the way back: nothing changes the second time
    assert SourceResult.model_validate(result.model_dump()) == result


def test_html_fragments_fetched_pages_and_local_documents() -> None:
    assert plain_text("<b>NUL</b>&#0;\u0000 here") == "NUL\ufffd here"
    page = FetchedPage(url="u", final_url="u", title="T\u0000", text=DIRTY, content_type="text/html", backend="httpx")
    assert page.title == "T" and "\u0000" not in page.text
    line = json.dumps({"id": "1\u0000", "title": "t\u0000t", "url": "https://e.org/\u0000", "text": DIRTY})
    (doc,) = read_documents(Path("c.jsonl"), line.encode())
    assert (doc.key, doc.title, doc.url) == ("1", "tt", "https://e.org/")
    assert "\u0000" not in doc.text
    (txt,) = read_documents(Path("n.txt"), "Title\u0000\nBody\u0000 text".encode())
    assert "\u0000" not in txt.title + txt.text


def test_model_answers_lose_control_characters_before_validation() -> None:
    answer = parse_structured('{"refined_query": "subprocess\\u0000 timeouts\\u0007"}', ApplyAnswersAnswer)
    assert answer.refined_query == "subprocess timeouts"
