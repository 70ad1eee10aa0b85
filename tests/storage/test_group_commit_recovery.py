"""Group commit and maintenance under contention (issue 22): a batch whose COMMIT fails is rolled back before
its rows are retried one by one, the connection never stays inside a transaction, an event row already
stored is no error, and a WAL checkpoint during a delete never fails the delete."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from research_tool.runtime.event_log import EventLog
from research_tool.runtime.group_commit import GroupCommit
from research_tool.runtime.session_store import SessionStore
from research_tool.runtime.storage import open_database, reclaim_space

INSERT_EVENT = "INSERT INTO events (session_id, seq, ts, type, phase, message, data) VALUES (?, ?, ?, ?, ?, ?, ?)"
TS = "2026-01-01T00:00:00Z"


def event_row(session_id: str, seq: int, message: str = "step") -> tuple[object, ...]:
    return (session_id, seq, TS, "progress", None, message, "{}")


async def stored_seqs(conn: aiosqlite.Connection, session_id: str) -> list[int]:
    async with conn.execute("SELECT seq FROM events WHERE session_id = ? ORDER BY seq", (session_id,)) as cur:
        return [int(r[0]) for r in await cur.fetchall()]


async def test_a_batch_whose_commit_fails_is_rolled_back_and_every_later_batch_still_commits(tmp_path: Path) -> None:
    conn = await open_database(tmp_path / "sessions.db")
    try:
        events = EventLog(conn)
        # A write statement of the same connection still stepping (a pragma whose cursor is not closed yet):
        # SQLite refuses any COMMIT meanwhile ("cannot commit transaction - SQL statements in progress").
        pending = await conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        first = await asyncio.gather(
            *(events.append("s", "progress", None, f"step {n}") for n in range(5)), return_exceptions=True
        )
        await pending.close()
        assert [e if isinstance(e, BaseException) else None for e in first] == [None] * 5
        assert not conn._conn.in_transaction  # type: ignore[attr-defined]
        later = await asyncio.gather(*(events.append("s", "progress", None, f"later {n}") for n in range(5)))
        assert [e.seq for e in later] == list(range(6, 11))
        assert await stored_seqs(conn, "s") == list(range(1, 11))
    finally:
        await conn.close()


async def test_an_event_already_stored_is_no_error_and_a_different_one_with_its_seq_is(tmp_path: Path) -> None:
    conn = await open_database(tmp_path / "sessions.db")
    try:
        writes = EventLog(conn)._writes
        await writes.write(event_row("s", 1))
        same, other = await asyncio.gather(
            writes.write(event_row("s", 1)), writes.write(event_row("s", 1, "not the same")), return_exceptions=True
        )
        assert same is None
        assert isinstance(other, sqlite3.IntegrityError)
        assert await stored_seqs(conn, "s") == [1]
    finally:
        await conn.close()


async def test_a_plain_group_commit_still_reports_a_duplicate(tmp_path: Path) -> None:
    conn = await open_database(tmp_path / "sessions.db")
    try:
        writes = GroupCommit(conn, INSERT_EVENT)  # no same-row check: the statement's own semantics
        await writes.write(event_row("s", 1))
        with pytest.raises(sqlite3.IntegrityError):
            await writes.write(event_row("s", 1))
    finally:
        await conn.close()


async def test_reclaiming_space_while_a_reader_is_mid_query_neither_fails_nor_blocks_writes(tmp_path: Path) -> None:
    conn = await open_database(tmp_path / "sessions.db")
    try:
        store, events = SessionStore(conn), EventLog(conn)
        for n in range(1, 201):
            await events.append("s", "progress", None, f"step {n}")
        reader = await conn.execute("SELECT seq FROM events WHERE session_id = ?", ("s",))  # one row read so far
        try:
            assert await store.reclaim_space() >= 0  # checkpoint deferred, not raised
            await events.append("s", "progress", None, "after the checkpoint")
        finally:
            await reader.close()
        assert (await stored_seqs(conn, "s"))[-1] == 201
        await reclaim_space(conn)  # with nothing reading, the TRUNCATE one runs
        assert not (tmp_path / "sessions.db-wal").exists() or (tmp_path / "sessions.db-wal").stat().st_size == 0
    finally:
        await conn.close()
