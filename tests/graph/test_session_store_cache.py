"""SessionStore's write-through cache: a read after a write sees the write, a delete forgets the session, and
the cached record is the one SQLite holds (compared with a fresh read on a second connection)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from research_tool.core.errors import SessionNotFoundError
from research_tool.models.request import ResearchRequest
from research_tool.runtime.session_store import SessionStore
from research_tool.runtime.storage import open_database


@pytest.fixture
async def conn(tmp_path: Path) -> AsyncIterator[aiosqlite.Connection]:
    connection = await open_database(tmp_path / "sessions.db")
    try:
        yield connection
    finally:
        await connection.close()  # also when an assertion failed: aiosqlite's thread would keep pytest alive


async def test_status_read_after_update_returns_new_progress_and_delete_forgets(conn: aiosqlite.Connection) -> None:
    store = SessionStore(conn)
    record = await store.create(ResearchRequest(query="What is SQLite?"))
    assert (await store.get(record.id)).progress == {}

    await store.update(record.id, status="running", progress={"iteration": 1, "current_phase": "search"})
    after = await store.get(record.id)
    assert after.status == "running"
    assert after.progress == {"iteration": 1, "current_phase": "search"}
    await store.update(record.id, progress={"iteration": 2, "current_phase": "analyze"})
    assert (await store.get(record.id)).progress == {"iteration": 2, "current_phase": "analyze"}

    await store.delete(record.id)
    assert not await store.exists(record.id)
    with pytest.raises(SessionNotFoundError):
        await store.get(record.id)


async def test_cached_record_equals_a_fresh_read_from_sqlite(conn: aiosqlite.Connection, tmp_path: Path) -> None:
    store = SessionStore(conn)
    record = await store.create(ResearchRequest(query="Who wrote Dune?", providers=["wikipedia"]))
    await store.update(record.id, stop_requested=1, status="stopping", progress={"sources_found": 3, "t": (1, 2)})
    await store.update(
        record.id,
        status="awaiting_clarification",
        pending_questions=["Which one?"],
        awaiting_since="2026-01-01T00:00:00+00:00",
        clarify_answers=None,
    )
    await store.update(record.id, clarify_answers=[], error="x")
    cached = await store.get(record.id)

    other = await open_database(tmp_path / "sessions.db")
    try:
        fresh = await SessionStore(other).get(record.id)
    finally:
        await other.close()
    assert cached == fresh
    assert cached.stop_requested is True and cached.progress["t"] == [1, 2] and cached.clarify_answers == []


async def test_a_caller_changing_its_copy_does_not_change_the_store(conn: aiosqlite.Connection) -> None:
    store = SessionStore(conn)
    record = await store.create(ResearchRequest(query="What is WAL mode?"))
    await store.update(record.id, progress={"iteration": 1})
    mine = await store.get(record.id)
    mine.progress["iteration"] = 99
    assert (await store.get(record.id)).progress == {"iteration": 1}


async def test_reads_racing_writes_end_with_the_last_write(conn: aiosqlite.Connection) -> None:
    record = await SessionStore(conn).create(ResearchRequest(query="What is a B-tree?"))
    store = SessionStore(conn)  # empty cache: the first reads go to SQLite while the updates run

    async def writes() -> None:
        for i in range(1, 21):
            await store.update(record.id, progress={"iteration": i})

    await asyncio.gather(writes(), *(store.get(record.id) for _ in range(20)))
    assert (await store.get(record.id)).progress == {"iteration": 20}
    await store.delete(record.id)
    await asyncio.gather(store.get(record.id), store.delete(record.id), return_exceptions=True)
    with pytest.raises(SessionNotFoundError):
        await store.get(record.id)


async def test_a_read_issued_after_an_update_started_sees_it(conn: aiosqlite.Connection) -> None:
    """As on the one shared connection, where a SELECT queued behind an UPDATE saw it: a caller that checks
    a record and then updates it is not interleaved with another caller's read of the old record."""
    store = SessionStore(conn)
    record = await store.create(ResearchRequest(query="What is fsync?"))
    writing = asyncio.create_task(store.update(record.id, stop_requested=1, status="stopping"))
    await asyncio.sleep(0)  # the update has been issued, not committed
    assert not writing.done()
    seen = await store.get(record.id)
    assert seen.stop_requested and seen.status == "stopping"
    await writing
