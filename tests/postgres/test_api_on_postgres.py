"""The HTTP API with RESEARCH_DATABASE_URL set: a session started over HTTP completes, its events replay
gapless from after=0 over SSE, /metrics counts it from Postgres, and DELETE removes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.bench.wiki_replay import Page, build_pages, running_wiki
from tests.api.conftest import PAGE_CHARS, offline_settings, serve, sse_events

pytestmark = pytest.mark.slow


async def test_a_session_over_http_on_postgres(pg_url: str, tmp_path: Path) -> None:
    pages = [Page(p.pageid, p.title, p.text[:PAGE_CHARS], p.words) for p in build_pages()]  # as the API tests
    with running_wiki(delay_s=0.0, pages=pages) as (wiki_url, _):
        settings = offline_settings(tmp_path / "data", wiki_url, database_url=pg_url)
        async with serve(settings) as api:
            sid = await api.start()
            status = await api.wait_status(sid, "completed", "failed")
            assert status["status"] == "completed"
            report = await api.report(sid)
            assert report["citations"]
            body = (await api.client.get(f"/api/research/{sid}/events", params={"after": 0})).text
            seqs = [e["seq"] for e in sse_events(body)]
            assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > 10
            metrics = (await api.client.get("/metrics")).text
            assert 'research_sessions{status="completed"} 1.0' in metrics
            assert (await api.client.delete(f"/api/research/{sid}")).status_code in (200, 204)
            assert (await api.client.get(f"/api/research/{sid}/status")).status_code == 404
