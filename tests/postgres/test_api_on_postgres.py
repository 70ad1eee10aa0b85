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


async def test_nul_bytes_are_a_422_on_postgres_too(pg_url: str, tmp_path: Path) -> None:
    """Issue 32 item 6: a NUL in a question, a LangGraph run's input or an answer was a 500 (psycopg.DataError:
    Postgres refuses NUL in text and JSONB) where SQLite stored it. Now both refuse it with 422."""
    pages = [Page(p.pageid, p.title, p.text[:PAGE_CHARS], p.words) for p in build_pages()]
    with running_wiki(delay_s=0.0, pages=pages) as (wiki_url, _):
        async with serve(offline_settings(tmp_path / "data", wiki_url, database_url=pg_url)) as api:
            nul = {"query": "subprocess\u0000 timeout", "providers": ["wikipedia"], "fetch": False}
            assert (await api.client.post("/api/research/start", json=nul)).status_code == 422
            run = {"assistant_id": "research", "input": nul}
            assert (await api.client.post("/runs/wait", json=run)).status_code == 422
            sid = await api.start(query="Python", clarify=True)
            await api.wait_status(sid, "awaiting_clarification")
            answers = {"answers": ["the\u0000 language"]}
            assert (await api.client.post(f"/api/research/{sid}/clarify", json=answers)).status_code == 422
            resume = {"assistant_id": "research", "command": {"resume": "the\u0000 language"}}
            assert (await api.client.post(f"/threads/{sid}/runs", json=resume)).status_code == 422
            assert (await api.client.get("/api/research")).json()["total"] == 1
            assert (
                await api.client.post(f"/api/research/{sid}/clarify", json={"answers": ["a language"]})
            ).status_code == 202
            assert (await api.wait_status(sid, "completed"))["status"] == "completed"


async def test_nul_in_a_checkpoint_or_run_id_is_a_422_on_postgres_too(pg_url: str, tmp_path: Path) -> None:
    """Issue 45 item 7: a NUL in a checkpoint id (`GET /threads/{t}/state/ab%00c`, `POST .../state/checkpoint`)
    reached Postgres and answered 500 (psycopg.DataError); SQLite said 404. Every id is refused at the boundary
    with 422, on every backend; an unknown one is still a 404."""
    pages = [Page(p.pageid, p.title, p.text[:PAGE_CHARS], p.words) for p in build_pages()]
    with running_wiki(delay_s=0.0, pages=pages) as (wiki_url, _):
        async with serve(offline_settings(tmp_path / "data", wiki_url, database_url=pg_url)) as api:
            body = {"input": {"query": "How do I time a subprocess?", "providers": ["wikipedia"], "fetch": False}}
            done = await api.client.post("/runs/wait", json={**body, "on_completion": "keep"})
            assert done.status_code == 200, done.text
            tid = done.headers["content-location"].split("/")[2]
            assert (await api.client.get(f"/threads/{tid}/state/ab%00c")).status_code == 422
            at = {"checkpoint": {"checkpoint_id": "ab\u0000c"}}
            assert (await api.client.post(f"/threads/{tid}/state/checkpoint", json=at)).status_code == 422
            assert (await api.client.get(f"/threads/{tid}/runs/ab%00c")).status_code == 422
            assert (await api.client.get(f"/threads/{tid}/state/abc")).status_code == 404
            unknown = {"checkpoint": {"checkpoint_id": "abc"}}
            assert (await api.client.post(f"/threads/{tid}/state/checkpoint", json=unknown)).status_code == 404
