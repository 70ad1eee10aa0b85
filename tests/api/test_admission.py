"""Admission control over HTTP: past RESEARCH_MAX_QUEUED_SESSIONS waiting, a start is answered 503 with
`Retry-After` and writes nothing; every start of a burst gets an answer (202 or 503), none is dropped."""

from __future__ import annotations

import asyncio
from pathlib import Path

from .conftest import OK_BODY, QUESTION, SlowWiki, offline_settings, serve


async def test_a_burst_past_capacity_gets_202_or_503_with_retry_after_and_nothing_is_dropped(
    tmp_path: Path, slow_wiki: SlowWiki
) -> None:
    with slow_wiki(2.0) as (url, _):
        settings = offline_settings(tmp_path / "data", url, max_concurrent_sessions=1, max_queued_sessions=3)
        async with serve(settings) as api:
            running = await api.start()
            await api.wait_status(running, "running")

            responses = await asyncio.gather(
                *(
                    api.client.post("/api/research/start", json={**OK_BODY, "query": f"{QUESTION} ({i})"})
                    for i in range(10)
                )
            )
            codes = sorted(r.status_code for r in responses)
            assert codes == [202] * 3 + [503] * 7
            for response in responses:
                if response.status_code == 202:
                    assert response.json()["status"] == "queued"
                    continue
                assert response.headers["Retry-After"].isdecimal() and int(response.headers["Retry-After"]) >= 1
                error = response.json()["error"]
                assert error["type"] == "server_busy" and error["retryable"] is True
            listed = (await api.client.get("/api/research", params={"limit": 100})).json()
            assert listed["total"] == 4, "a refused start leaves no session behind"
            accepted = {r.json()["session_id"] for r in responses if r.status_code == 202}
            assert {s["session_id"] for s in listed["sessions"]} == accepted | {running}
