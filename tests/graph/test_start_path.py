"""A start writes the session row and its first event without reading anything back: the record it returns
(and caches) is the one SQLite holds, seen through a second connection, and the first event is seq 1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiosqlite
import pytest

from research_tool.models.request import ResearchRequest
from research_tool.runtime.event_log import EventLog
from research_tool.runtime.session_store import SessionStore
from research_tool.runtime.storage import open_database


@pytest.fixture
async def conns(tmp_path: Path) -> AsyncIterator[tuple[aiosqlite.Connection, aiosqlite.Connection]]:
    first = await open_database(tmp_path / "sessions.db")
    second = await open_database(tmp_path / "sessions.db")
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_a_new_session_is_written_once_and_is_what_a_fresh_read_finds(
    conns: tuple[aiosqlite.Connection, aiosqlite.Connection],
) -> None:
    writer, reader = conns
    store, events = SessionStore(writer), EventLog(writer)
    request = ResearchRequest.model_validate({"query": "What is WAL mode?", "tier": "simple", "max_iterations": 1})
    record = await store.create(request)
    events.begin(record.id)
    first = await events.append(record.id, "session_queued", None, "queued")

    fresh = await SessionStore(reader).get(record.id)  # autocommit: visible to another connection at once
    assert fresh == record == await store.get(record.id)
    assert first.seq == 1 and [e.seq for e in await EventLog(reader).replay(record.id)] == [1]
