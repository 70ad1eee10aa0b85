"""The per-session event log in Postgres (`events`, `event_counters`), pushed live to this process's followers.

An append takes the session's next seq from `event_counters` in the same statement as its INSERT: the
counter row's lock orders appenders of one session across processes, and a failed INSERT rolls the counter
back with it, so seq is gapless and unique however many processes append (e.g. a worker presumed dead).
Followers in this process get this process's appends at once; events appended by other processes reach them
through `notify_local` (the cluster's wake-up), after which they re-read the table: the table is the truth.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from research_tool.core.untrusted_text import clean_text, clean_value
from research_tool.models.entities import utc_now_iso
from research_tool.models.events import FINAL_EVENT_TYPES, Event
from research_tool.runtime.event_fanout import EventFanout, follow_table
from research_tool.runtime.event_log import SessionEvents
from research_tool.runtime.postgres.pool import Pool
from research_tool.runtime.postgres.session_store import iso

APPEND_SQL = """
WITH next AS (
    INSERT INTO event_counters AS c (session_id, last_seq) VALUES (%(sid)s, 1)
    ON CONFLICT (session_id) DO UPDATE SET last_seq = c.last_seq + 1
    RETURNING last_seq
)
INSERT INTO events (session_id, seq, ts, type, phase, message, data)
SELECT %(sid)s, next.last_seq, %(ts)s, %(type)s, %(phase)s, %(message)s, %(data)s FROM next
RETURNING seq
"""

EVENT_COLUMNS = "seq, ts, type, phase, message, data"


def _event(session_id: str, row: DictRow) -> Event:
    return Event(
        seq=int(row["seq"]),
        session_id=session_id,
        ts=iso(row["ts"]) or "",
        type=row["type"],
        phase=row["phase"],
        message=row["message"],
        data=row["data"],
    )


class PostgresEventLog:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._fanout = EventFanout()

    def begin(self, session_id: str) -> None:
        """Nothing to prepare: the counter row is created by the first append."""

    async def append(
        self, session_id: str, type: str, phase: str | None, message: str, data: dict[str, Any] | None = None
    ) -> Event:
        ts = utc_now_iso()
        # JSON-safe as SQLite stores it (default=str), so a replay returns what a live follower got.
        # Postgres refuses NUL in text and JSONB: a message may quote what a source or an exception said.
        message = clean_text(message)
        data = clean_value(data) if data else data
        payload = json.loads(json.dumps(data or {}, default=str))
        params = {"sid": session_id, "ts": ts, "type": type, "phase": phase, "message": message}
        async with self._pool.connection() as conn:
            cur = await conn.execute(APPEND_SQL, {**params, "data": Jsonb(payload)})
            row = await cur.fetchone()
        assert row is not None  # INSERT ... RETURNING of one row
        event = Event(
            seq=int(row["seq"]), session_id=session_id, ts=ts, type=type, phase=phase, message=message, data=data or {}
        )
        self._fanout.publish(event)
        return event

    async def replay(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s",
                (session_id, after, limit),
            )
            return [_event(session_id, r) for r in await cur.fetchall()]

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Event]:
        """Every event with seq > after, exactly once: the stored ones, then live ones, until a final event."""
        return follow_table(self._fanout, self.replay, self._ended_by, session_id, after)

    def notify_local(self, session_id: str) -> None:
        self._fanout.wake(session_id)

    def following(self) -> set[str]:
        """Sessions that have a follower in this process (what a cross-process wake-up needs to reach)."""
        return self._fanout.following()

    async def _ended_by(self, session_id: str, seq: int) -> bool:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT 1 AS found FROM events WHERE session_id = %s AND seq <= %s AND type = ANY(%s) LIMIT 1",
                (session_id, seq, sorted(FINAL_EVENT_TYPES)),
            )
            return await cur.fetchone() is not None

    async def delete(self, session_id: str) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM events WHERE session_id = %s", (session_id,))
            await conn.execute("DELETE FROM event_counters WHERE session_id = %s", (session_id,))

    async def session_ids(self) -> set[str]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT session_id FROM event_counters UNION SELECT DISTINCT session_id FROM events"
            )
            return {str(row["session_id"]) for row in await cur.fetchall()}

    async def last_of_type(self, session_id: str, type: str) -> Event | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = %s AND type = %s ORDER BY seq DESC LIMIT 1",
                (session_id, type),
            )
            row = await cur.fetchone()
        return _event(session_id, row) if row is not None else None

    def sink(self, session_id: str) -> SessionEvents:
        return SessionEvents(self, session_id)
