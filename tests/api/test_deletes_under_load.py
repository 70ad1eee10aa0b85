"""Deletes while sessions run and clients read (issue 22): 30 running sessions, clients listing, streaming and
polling, 10 DELETEs 0.2 s apart used to fail 2 to 18 of the other 20 sessions (a group commit left inside a
transaction, duplicate events on the retry, `database is locked`) and answer 500 (`database table is locked`
from the WAL checkpoint). Now every other session completes and every DELETE answers 204. A real
`research-tool serve` process on 127.0.0.1 over real SQLite; scaled down here (RESEARCH_TEST_DELETE_LOAD=
"30,10" runs the full-size check)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from research_tool.bench.wiki_replay import Page, running_wiki
from tests.support.polling import eventually
from tests.support.servers import first_healthy, serve

from .conftest import OK_BODY, free_socket, sse_events
from .test_crash_resume import QUESTIONS, server_env, statuses

SESSIONS, DELETES = (int(n) for n in os.environ.get("RESEARCH_TEST_DELETE_LOAD", "12,6").split(","))
DELETE_EVERY_S = 0.2


async def keep_reading(client: httpx.AsyncClient, ids: list[str], stop: asyncio.Event) -> None:
    """List, poll and stream (replay from 0) over and over, as a page and scripts would."""
    n = 0
    while not stop.is_set():
        sid = ids[n % len(ids)]
        await asyncio.gather(
            client.get("/api/research", params={"limit": 50}),
            client.get(f"/api/research/{sid}/status"),
            client.get(f"/api/research/{sid}/events", params={"after": 0}),
        )
        n += 1


@pytest.mark.slow
async def test_deletes_during_running_sessions_and_readers_fail_nothing(tmp_path: Path, wiki_pages: list[Page]) -> None:
    with running_wiki(delay_s=0.2, pages=wiki_pages) as (wiki_url, _):
        env = server_env(tmp_path / "data", wiki_url)
        env.update(RESEARCH_MAX_CONCURRENT_SESSIONS=str(SESSIONS), RESEARCH_CPU_WORKERS="0")
        port = free_socket().getsockname()[1]
        log = tmp_path / "server.log"
        with serve(env, tmp_path, port, log=log) as server:
            await first_healthy({port: server})
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60, trust_env=False) as client:
                ids = []
                for n in range(SESSIONS):
                    body = {**OK_BODY, "query": f"{QUESTIONS[n % len(QUESTIONS)]} (variant {n})"}
                    started = await client.post("/api/research/start", json=body)
                    assert started.status_code == 202, started.text
                    ids.append(started.json()["session_id"])

                async def all_running() -> bool:
                    return all(s["status"] == "running" for s in await statuses(client, ids))

                await eventually(all_running)
                stop = asyncio.Event()
                readers = [asyncio.create_task(keep_reading(client, ids, stop)) for _ in range(3)]
                deleted, kept = ids[:DELETES], ids[DELETES:]
                answers = []
                for sid in deleted:
                    answers.append((await client.delete(f"/api/research/{sid}")).status_code)
                    await asyncio.sleep(DELETE_EVERY_S)  # the attack's pace, not a wait for anything

                async def all_finished() -> bool:
                    return all(s["status"] in ("completed", "failed") for s in await statuses(client, kept))

                await eventually(all_finished, within_s=120, every_s=0.2)
                stop.set()
                await asyncio.gather(*readers)
                errors = log.read_text(errors="replace")[-2000:]
                assert answers == [204] * DELETES, errors
                assert [s["status"] for s in await statuses(client, kept)] == ["completed"] * len(kept), errors
                for sid in kept:
                    events = sse_events((await client.get(f"/api/research/{sid}/events", params={"after": 0})).text)
                    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
                for sid in deleted:
                    assert (await client.get(f"/api/research/{sid}/status")).status_code == 404
