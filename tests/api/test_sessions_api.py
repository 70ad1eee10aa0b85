"""The session routes end to end over loopback: start → status → report in every format, list
(newest first, paginated), delete, /run, /healthz and /metrics."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from research_tool.bench.wiki_replay import WikiReplay

from .conftest import QUESTION, LiveApi, SlowWiki, offline_settings, serve, sse_events


async def test_start_runs_to_a_cited_report_with_status_fields(api: LiveApi) -> None:
    response = await api.client.post(
        "/api/research/start", json={"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"}
    )
    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"session_id", "status"} and body["status"] == "queued"
    assert response.headers["location"] == f"/api/research/{body['session_id']}/status"

    status = await api.wait_status(body["session_id"], "completed", "failed")
    assert status["status"] == "completed"
    for key in (
        "session_id",
        "status",
        "current_phase",
        "iteration",
        "sources_queried",
        "sources_found",
        "entities_found",
        "facts_extracted",
        "saturation_metrics",
        "stop_reason",
        "pending_questions",
        "created_at",
        "updated_at",
    ):
        assert key in status
    assert status["sources_found"] > 0 and status["iteration"] >= 1

    report = await api.report(body["session_id"])
    assert report["session_id"] == body["session_id"] and report["query"] == QUESTION
    urls = [c["url"] for c in report["citations"]]
    assert urls and len(urls) == len(set(urls))
    assert all(u.startswith("https://en.wikipedia.org/wiki/") for u in urls)

    markdown = await api.client.get(f"/api/research/{body['session_id']}/report", params={"format": "md"})
    assert markdown.status_code == 200 and markdown.headers["content-type"].startswith("text/markdown")
    assert report["answer"].split("[")[0].strip()[:40] in markdown.text
    for fmt, media in (("html", "text/html"), ("bib", "application/x-bibtex")):
        rendered = await api.client.get(f"/api/research/{body['session_id']}/report", params={"format": fmt})
        assert rendered.status_code == 200 and rendered.headers["content-type"].startswith(media), fmt
        assert rendered.text.strip()


async def test_list_is_newest_first_and_paginated_and_delete_removes_everything(api: LiveApi) -> None:
    ids = [await api.start(query=f"{QUESTION} ({i})") for i in range(3)]
    for sid in ids:
        await api.wait_status(sid, "completed")

    page = (await api.client.get("/api/research", params={"limit": 2})).json()
    assert page["total"] == 3 and page["limit"] == 2 and page["offset"] == 0
    assert [s["session_id"] for s in page["sessions"]] == ids[::-1][:2]
    rest = (await api.client.get("/api/research", params={"limit": 2, "offset": 2})).json()
    assert [s["session_id"] for s in rest["sessions"]] == [ids[0]]
    assert rest["sessions"][0]["status"] == "completed" and rest["sessions"][0]["query"].endswith("(0)")

    exports = api.services.settings.data_dir / "exports" / ids[1]
    assert exports.is_dir()
    deleted = await api.client.delete(f"/api/research/{ids[1]}")
    assert deleted.status_code == 204
    assert not exports.exists(), "the .md and .json exports go with the session"
    assert (await api.client.get(f"/api/research/{ids[1]}/status")).status_code == 404
    assert await api.services.events.replay(ids[1]) == []
    snapshot = await api.services.runner.graph.aget_state({"configurable": {"thread_id": ids[1]}})
    assert not snapshot.values
    assert (await api.client.get("/api/research")).json()["total"] == 2
    assert (await api.client.delete(f"/api/research/{ids[1]}")).status_code == 404


async def test_delete_stops_a_running_session(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(2.0) as (url, _):
        async with serve(offline_settings(tmp_path / "data", url)) as api:
            sid = await api.start()
            await api.wait_event(sid, "provider_search")
            assert (await api.client.delete(f"/api/research/{sid}")).status_code == 204
            assert api.services.runner.running_count == 0
            assert (await api.client.get(f"/api/research/{sid}/status")).status_code == 404


async def test_run_returns_the_report_synchronously(api: LiveApi) -> None:
    response = await api.client.post(
        "/run", json={"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"}
    )
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["status"] == "completed" and report["citations"]
    assert report["session_id"] == response.headers["x-session-id"]
    assert (await api.status(report["session_id"]))["status"] == "completed"


async def test_run_past_its_timeout_stops_and_reports_what_it_found(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(1.5) as (url, _):
        async with serve(offline_settings(tmp_path / "data", url, run_timeout_s=1.0)) as api:
            response = await api.client.post(
                "/run",
                json={
                    "query": QUESTION,
                    "providers": ["wikipedia"],
                    "fetch": False,
                    "tier": "deep",
                    "max_execution_time_s": 600,
                },
            )
    assert response.status_code == 200, response.text
    assert response.json()["stop_reason"] == "user_requested"


async def test_healthz_and_metrics(api: LiveApi, wiki: tuple[str, WikiReplay]) -> None:
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    sid = await api.start()
    await api.wait_status(sid, "completed")

    async def scrape() -> tuple[str, dict[str, float]]:
        text = (await api.client.get("/metrics")).text
        return text, {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line and not line.startswith("#")
        }

    # the session's final event reaches the metrics from the event stream, a moment after its status is stored
    deadline = time.monotonic() + 10.0
    text, samples = await scrape()
    while samples["research_session_iterations_count"] < 1.0:
        assert time.monotonic() < deadline, "the session's iterations never reached /metrics"
        await asyncio.sleep(0.05)
        text, samples = await scrape()
    assert samples['research_sessions{status="completed"}'] == 1.0
    assert samples['research_sessions{status="running"}'] == 0.0
    assert samples['research_provider_requests_total{outcome="ok",provider="wikipedia"}'] >= 1
    assert samples['research_provider_latency_seconds_count{provider="wikipedia"}'] >= 1
    assert samples["research_loop_duration_seconds_count"] >= 1
    assert samples["research_session_iterations_count"] == 1.0
    assert samples["research_sessions_max_running_seen"] == 1.0
    assert "research_search_failures_total" in text
    assert "research_event_loop_lag_seconds_count" in samples  # the loop's own delay, sampled while it serves
    assert "research_gc_pause_seconds" in text


async def test_following_a_finished_session_past_its_final_event_ends_at_once(api: LiveApi) -> None:
    sid = await api.start()
    await api.wait_status(sid, "completed")
    last = (await api.services.events.replay(sid))[-1]
    assert last.type == "session_completed"
    followed = [e async for e in api.services.events.follow(sid, after=last.seq)]
    assert followed == []
    response = await api.client.get(f"/api/research/{sid}/events", params={"after": last.seq})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert sse_events(response.text) == []
