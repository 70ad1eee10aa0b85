"""Issue 22 item 3: a NUL byte (or another control character) in what a source says never reaches a store.

A search result whose title, url and text hold `\\u0000` (a real HTTP server standing in for Tavily), and a
local jsonl document with one in its title, url and text: the session completes on SQLite and on Postgres
(which refuses NUL in text and JSONB), and the report holds no control character."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from tests.support.counting_server import counting_server
from tests.support.sessions import run_session

pytestmark = pytest.mark.slow

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
NUL_TEXT = (
    "Use subprocess.run with\u0000 a timeout to run a subprocess and capture its output.\u0001 "
    "The timeout argument\u001b of subprocess.run kills the child process when it expires."
)
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == "postgres":
        pg: Settings = request.getfixturevalue("pg_settings")
        return pg
    return Settings(_env_file=None, data_dir=tmp_path / "data", llm="offline")  # type: ignore[call-arg]


def assert_clean_report(report: dict[str, object] | None) -> None:
    assert report is not None
    assert report["citations"], "the source with the NUL byte was used"
    assert not CONTROL.search(json.dumps(report, ensure_ascii=False))


async def test_a_local_jsonl_document_with_nul_bytes_completes(settings: Settings, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    record = {
        "id": "doc\u00001",
        "title": "subprocess\u0000 timeouts",
        "url": "https://docs.example.org/subprocess\u0000#timeout",
        "text": NUL_TEXT,
    }
    (corpus / "notes.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    request = ResearchRequest(
        query=QUESTION, providers=["local"], corpus_dirs=[str(corpus)], fetch=False, clarify=False, tier="simple"
    )
    result = await run_session(settings, request)
    assert result.record.status == "completed", result.record.error
    assert_clean_report(result.report)


async def test_a_search_result_with_nul_bytes_completes(settings: Settings) -> None:
    body = {
        "results": [
            {
                "url": "https://example.org/subprocess\u0000-timeouts",
                "title": "Subprocess\u0000 timeouts &#0; in Python",
                "content": NUL_TEXT,
                "raw_content": NUL_TEXT,
                "score": 0.9,
                "published_date": "2024-01-01\u0000",
            }
        ]
    }
    with counting_server(200, json.dumps(body).encode()) as (url, counter):
        key = SecretStr("test-key")
        tavily = settings.model_copy(update={"tavily_base_url": url, "tavily_api_key": key, "tavily_rps": 100.0})
        request = ResearchRequest(query=QUESTION, providers=["tavily"], fetch=False, clarify=False, tier="simple")
        result = await run_session(tavily, request)
    assert counter.count >= 1
    assert result.record.status == "completed", result.record.error
    assert_clean_report(result.report)


async def test_a_provider_error_quoting_nul_bytes_is_recorded(settings: Settings, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.md").write_text("# Subprocess timeouts\n\n" + NUL_TEXT.replace("\u0000", ""), encoding="utf-8")
    with counting_server(400, b"bad\x00 request \x07 from the provider") as (url, counter):
        key = SecretStr("test-key")
        both = settings.model_copy(update={"tavily_base_url": url, "tavily_api_key": key, "tavily_rps": 100.0})
        request = ResearchRequest(
            query=QUESTION,
            providers=["tavily", "local"],
            corpus_dirs=[str(corpus)],
            fetch=False,
            clarify=False,
            tier="simple",
        )
        result = await run_session(both, request)
    assert counter.count >= 1
    assert result.record.status == "completed", result.record.error
    failures = list((result.state.get("access_failures") or {}).values())
    assert failures and all(not CONTROL.search(f["message"]) for f in failures)
    assert "bad request" in failures[0]["message"]
