"""The event log: gapless per-session seq that survives reopening, replay by seq, live follow exactly once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from research_tool.runtime.event_log import EventLog
from research_tool.runtime.storage import open_database


async def test_seq_is_gapless_per_session_and_continues_after_reopen(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conn = await open_database(db)
    log = EventLog(conn)
    for i in range(3):
        await log.append("a", "phase_started", "plan", f"a{i}")
    await log.append("b", "phase_started", "plan", "b0")
    await conn.close()

    conn = await open_database(db)
    log = EventLog(conn)
    event = await log.append("a", "phase_completed", "plan", "after restart")
    assert event.seq == 4
    assert [e.seq for e in await log.replay("a")] == [1, 2, 3, 4]
    assert [e.seq for e in await log.replay("b")] == [1]
    assert [e.message for e in await log.replay("a", after=2)] == ["a2", "after restart"]
    await conn.close()


async def test_follow_replays_then_streams_live_and_ends_on_final_event(tmp_path: Path) -> None:
    conn = await open_database(tmp_path / "s.db")
    log = EventLog(conn)
    for i in range(3):
        await log.append("s", "source_found", "collect", f"stored {i}")
    received: list[int] = []
    replayed = asyncio.Event()

    async def reader() -> None:
        async for event in log.follow("s", after=1):
            received.append(event.seq)
            if event.seq == 3:  # the last stored event: what comes next can only come live
                replayed.set()

    task = asyncio.create_task(reader())
    await asyncio.wait_for(replayed.wait(), timeout=2)
    assert received == [2, 3]
    await log.append("s", "source_found", "collect", "live")
    await log.append("s", "session_completed", "export", "done")
    await asyncio.wait_for(task, timeout=2)
    assert received == [2, 3, 4, 5]
    await conn.close()
