"""Stop reaches the running graph (collecting ends, a report is still written, stop_reason says the
user stopped it; idempotent; 409 once finished), and the runner's limit queues sessions in order."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.support.polling import eventually

from .conftest import QUESTION, LiveApi, SlowWiki, offline_settings, serve

STOP_DEADLINE_S = 10.0  # "within seconds" with a busy machine's slack; a deep session runs for minutes


async def collect_cycles_started(api: LiveApi, session_id: str) -> int:
    events = await api.services.events.replay(session_id)
    return sum(1 for e in events if e.type == "phase_started" and e.phase == "collect")


@pytest.mark.slow
async def test_stop_during_collect_completes_with_a_report_and_the_users_reason(
    tmp_path: Path, slow_wiki: SlowWiki
) -> None:
    with slow_wiki(1.0) as (url, replay):
        async with serve(offline_settings(tmp_path / "data", url)) as api:
            sid = await api.start(tier="deep")

            # the second cycle's searches are in flight: the first cycle found something to report
            async def second_cycle_with_sources() -> bool:
                return await collect_cycles_started(api, sid) >= 2 and bool((await api.status(sid))["sources_found"])

            await eventually(second_cycle_with_sources)

            stopped_at = time.monotonic()
            first, second = await asyncio.gather(
                api.client.post(f"/api/research/{sid}/stop"), api.client.post(f"/api/research/{sid}/stop")
            )
            assert (first.status_code, second.status_code) == (202, 202)
            assert {first.json()["status"], second.json()["status"]} <= {"stopping", "completed"}
            status = await api.wait_status(sid, "completed", within_s=STOP_DEADLINE_S)
            assert time.monotonic() - stopped_at < STOP_DEADLINE_S

            assert status["stop_reason"] == "user_requested"
            report = await api.report(sid)
            assert report["stop_reason"] == "user_requested" and report["status"] == "completed"
            assert report["citations"], "the report is written from what the first cycle found"
            searches_sent = sum("list=search" in r for r in replay.requests)
            assert status["sources_queried"] < searches_sent, "in-flight searches were cancelled, not awaited"
            types = [e.type for e in await api.services.events.replay(sid)]
            assert types.count("stop_requested") == 1 and types[-1] == "session_completed"

            late = await api.client.post(f"/api/research/{sid}/stop")
            assert late.status_code == 409 and late.json()["error"]["type"] == "conflict"


@pytest.mark.slow
async def test_stopping_a_queued_session_twice_is_accepted_and_it_still_reports(
    tmp_path: Path, slow_wiki: SlowWiki
) -> None:
    with slow_wiki(0.5) as (url, _):
        async with serve(offline_settings(tmp_path / "data", url, max_concurrent_sessions=1)) as api:
            running = await api.start()
            queued = await api.start(query=f"{QUESTION} (queued)")
            await api.wait_status(running, "running")
            assert (await api.status(queued))["status"] == "queued"
            for _ in range(2):
                response = await api.client.post(f"/api/research/{queued}/stop")
                assert response.status_code == 202
                assert response.json() == {"session_id": queued, "status": "stopping"}
            await api.wait_status(running, "completed")
            status = await api.wait_status(queued, "completed")
            assert status["stop_reason"] == "user_requested"
            assert (await api.report(queued))["stop_reason"] == "user_requested"
            assert (await api.report(running))["stop_reason"] != "user_requested"


@pytest.mark.slow
async def test_twelve_sessions_with_a_limit_of_three_all_complete_never_more_than_three_running(
    tmp_path: Path, slow_wiki: SlowWiki
) -> None:
    with slow_wiki(0.1) as (url, _):
        async with serve(offline_settings(tmp_path / "data", url, max_concurrent_sessions=3)) as api:
            ids = await asyncio.gather(*(api.start(query=f"{QUESTION} ({i})") for i in range(12)))
            assert len(set(ids)) == 12
            most_active, saw_queued = 0, False
            while True:
                page = (await api.client.get("/api/research", params={"limit": 100})).json()
                statuses = [s["status"] for s in page["sessions"]]
                most_active = max(most_active, sum(s in ("running", "stopping") for s in statuses))
                saw_queued = saw_queued or "queued" in statuses
                assert api.services.runner.running_count <= 3
                if all(s in ("completed", "failed") for s in statuses):
                    break
                await asyncio.sleep(0.02)

            assert statuses == ["completed"] * 12
            assert saw_queued and 1 <= most_active <= 3
            assert api.services.runner.max_running_seen == 3
            metrics = (await api.client.get("/metrics")).text
            assert "research_sessions_max_running_seen 3.0" in metrics
            assert 'research_sessions{status="completed"} 12.0' in metrics
            for sid in ids:
                assert (await api.report(sid))["citations"]
