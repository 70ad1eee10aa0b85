"""Append-only, per-session event log in SQLite, pushed live to in-process subscribers.

`seq` starts at 1 for each session and grows by one with no gap; it continues from the stored
maximum after a restart, so a number is never reused. Readers replay by seq and then follow live.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiosqlite

from research_tool.core.logging import get_logger
from research_tool.models.entities import utc_now_iso
from research_tool.models.events import FINAL_EVENT_TYPES, Event
from research_tool.runtime.event_fanout import EventFanout, follow_table
from research_tool.runtime.group_commit import GroupCommit
from research_tool.runtime.stores import EventLogProtocol

log = get_logger(__name__)


class EventLog:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()
        self._next_seq: dict[str, int] = {}
        self._fanout = EventFanout()
        # Idempotent by (session_id, seq): the same event stored already is no error, a different one is.
        self._writes = GroupCommit(
            conn,
            "INSERT INTO events (session_id, seq, ts, type, phase, message, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
            same_row_sql="SELECT 1 FROM events WHERE session_id = ? AND seq = ? AND ts = ? AND type = ?"
            " AND phase IS ? AND message = ? AND data = ?",
        )

    def begin(self, session_id: str) -> None:
        """`session_id` is new and has no event yet: its first append needs no look-up of the last seq."""
        self._next_seq.setdefault(session_id, 1)

    async def append(
        self, session_id: str, type: str, phase: str | None, message: str, data: dict[str, Any] | None = None
    ) -> Event:
        seq = self._next_seq.get(session_id)
        if seq is None:
            seq = await self._stored_next_seq(session_id)
        event = Event(
            seq=seq,
            session_id=session_id,
            ts=utc_now_iso(),
            type=type,
            phase=phase,
            message=message,
            data=data or {},
        )
        # The seq is taken before the write: appends of other sessions (and of this one) batch with it.
        if event.is_final:
            self._next_seq.pop(session_id, None)  # nothing more is expected: read MAX(seq) if something comes
        else:
            self._next_seq[session_id] = seq + 1
        try:
            await self._writes.write(
                (session_id, seq, event.ts, type, phase, message, json.dumps(event.data, default=str))
            )  # durable once written (one transaction per batch)
        except BaseException:
            # Not written (or not known to be): the next append reads the stored maximum, so no seq is skipped.
            self._next_seq.pop(session_id, None)
            raise
        self._fanout.publish(event)
        return event

    async def _stored_next_seq(self, session_id: str) -> int:
        async with self._lock:
            seq = self._next_seq.get(session_id)
            if seq is None:
                await self._writes.settled()  # a row still on its way would not be counted yet
                async with self._conn.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (session_id,)
                ) as cur:
                    row = await cur.fetchone()
                seq = int(row[0]) + 1 if row else 1
            return seq

    async def replay(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        sql = "SELECT seq, ts, type, phase, message, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq"
        params: tuple[Any, ...] = (session_id, after)
        if limit is not None:
            sql += " LIMIT ?"
            params += (limit,)
        async with self._conn.execute(sql, params) as cur:
            rows = await cur.fetchall()
        return [
            Event(seq=r[0], session_id=session_id, ts=r[1], type=r[2], phase=r[3], message=r[4], data=json.loads(r[5]))
            for r in rows
        ]

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Event]:
        """Every event with seq > after, exactly once: the stored ones, then live ones, until a final event."""
        return follow_table(self._fanout, self.replay, self._ended_by, session_id, after)

    def notify_local(self, session_id: str) -> None:
        self._fanout.wake(session_id)

    async def _ended_by(self, session_id: str, seq: int) -> bool:
        marks = ",".join("?" for _ in FINAL_EVENT_TYPES)
        async with self._conn.execute(
            f"SELECT 1 FROM events WHERE session_id = ? AND seq <= ? AND type IN ({marks}) LIMIT 1",
            (session_id, seq, *sorted(FINAL_EVENT_TYPES)),
        ) as cur:
            return await cur.fetchone() is not None

    async def delete(self, session_id: str) -> None:
        async with self._lock:
            await self._conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
            await self._conn.commit()
            self._next_seq.pop(session_id, None)

    async def session_ids(self) -> set[str]:
        async with self._conn.execute("SELECT DISTINCT session_id FROM events") as cur:
            return {str(row[0]) for row in await cur.fetchall()}

    async def last_of_type(self, session_id: str, type: str) -> Event | None:
        async with self._conn.execute(
            "SELECT seq, ts, type, phase, message, data FROM events WHERE session_id = ? AND type = ?"
            " ORDER BY seq DESC LIMIT 1",
            (session_id, type),
        ) as cur:
            r = await cur.fetchone()
        if r is None:
            return None
        return Event(
            seq=r[0], session_id=session_id, ts=r[1], type=r[2], phase=r[3], message=r[4], data=json.loads(r[5])
        )

    def sink(self, session_id: str) -> SessionEvents:
        return SessionEvents(self, session_id)


class SessionEvents:
    """The EventSink the graph nodes write to, bound to one session."""

    def __init__(self, log_: EventLogProtocol, session_id: str) -> None:
        self._log = log_
        self._session_id = session_id

    async def emit(self, type: str, phase: str | None, message: str, data: dict[str, Any] | None = None) -> None:
        await self._log.append(self._session_id, type, phase, message, data)
