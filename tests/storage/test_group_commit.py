"""Group commit: starts and events written together reach SQLite in a few transactions, each row exactly
once, each session's events numbered without a gap; a bad row fails only its own writer."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from research_tool.models.request import ResearchRequest
from research_tool.runtime.event_log import EventLog
from research_tool.runtime.group_commit import GroupCommit
from research_tool.runtime.session_store import SessionStore
from research_tool.runtime.storage import open_database

SESSIONS = 200
EVENTS_PER_SESSION = 5


async def test_concurrent_creates_and_appends_are_batched_and_gapless(tmp_path: Path) -> None:
    conn = await open_database(tmp_path / "sessions.db")
    try:
        store, events = SessionStore(conn), EventLog(conn)

        async def start(i: int) -> str:
            record = await store.create(ResearchRequest(query=f"question number {i}"))
            events.begin(record.id)
            for n in range(EVENTS_PER_SESSION):
                await events.append(record.id, "progress", None, f"step {n}")
            return record.id

        ids = await asyncio.gather(*(start(i) for i in range(SESSIONS)))

        assert len(set(ids)) == SESSIONS
        assert store._creates.batches < SESSIONS // 10  # a few transactions, not one per start
        assert events._writes.batches < SESSIONS * EVENTS_PER_SESSION // 10
        async with conn.execute("SELECT COUNT(*) FROM sessions") as cur:
            count = await cur.fetchone()
        assert count is not None and count[0] == SESSIONS
        for sid in ids:
            assert [e.seq for e in await events.replay(sid)] == list(range(1, EVENTS_PER_SESSION + 1))
            assert (await store.get(sid)).status == "queued"
    finally:
        await conn.close()


async def test_a_bad_row_fails_only_its_writer(tmp_path: Path) -> None:
    conn = await open_database(tmp_path / "sessions.db")
    try:
        writes = GroupCommit(
            conn, "INSERT INTO events (session_id, seq, ts, type, phase, message, data) VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        row = ("s", 1, "2026-01-01T00:00:00Z", "progress", None, "one", "{}")
        await writes.write(row)
        results = await asyncio.gather(
            writes.write(("s", 2, *row[2:])),
            writes.write(row),
            writes.write(("s", 3, *row[2:])),
            return_exceptions=True,
        )
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], sqlite3.IntegrityError)  # seq 1 twice
        events = EventLog(conn)
        assert [e.seq for e in await events.replay("s")] == [1, 2, 3]
    finally:
        await conn.close()


async def test_an_append_after_a_failed_write_reads_the_stored_seq(tmp_path: Path) -> None:
    conn = await open_database(tmp_path / "sessions.db")
    try:
        events = EventLog(conn)
        events.begin("s")
        await events.append("s", "progress", None, "one")
        events._next_seq["s"] = 1  # a stale counter: the write of seq 1 again fails
        with pytest.raises(sqlite3.IntegrityError):
            await events.append("s", "progress", None, "again")
        await events.append("s", "progress", None, "two")  # re-reads MAX(seq)
        assert [e.seq for e in await events.replay("s")] == [1, 2]
    finally:
        await conn.close()


async def test_a_batch_beside_an_unfinished_pragma_is_written_once_and_leaves_no_transaction(tmp_path: Path) -> None:
    """Reclaiming space runs `PRAGMA wal_checkpoint` on the same connection and closes its cursor in a second
    trip: a batch committed in between cannot COMMIT. Its rows must still be written exactly once, each
    writer told so, and no transaction may stay open (every later BEGIN would fail)."""
    conn = await open_database(tmp_path / "sessions.db")
    try:
        writes = GroupCommit(
            conn, "INSERT INTO events (session_id, seq, ts, type, phase, message, data) VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        row = ("s", 1, "2026-01-01T00:00:00Z", "progress", None, "one", "{}")
        pragma = await conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # not closed yet: still in progress
        await asyncio.gather(*(writes.write(("s", seq, *row[2:])) for seq in (1, 2, 3)))
        await pragma.close()
        assert not conn.in_transaction
        await writes.write(("s", 4, *row[2:]))
        async with conn.execute("SELECT seq FROM events WHERE session_id = 's' ORDER BY seq") as cur:
            assert [r[0] for r in await cur.fetchall()] == [1, 2, 3, 4]
    finally:
        await conn.close()
