"""Session leases on Postgres: the session row is the job, `FOR UPDATE SKIP LOCKED` is the queue.

A worker claims an unfinished session that nobody holds (queued, or left by a worker that stopped) or whose
lease ran out (its worker died, `kill -9`), in one statement; it renews the leases of the sessions it runs every
TTL/3, and clears them when a session ends or the worker stops. Every time is the database's clock, so workers
on machines whose clocks disagree still agree on who holds what.

No queue library: a second store of jobs (procrastinate's tables, a Redis list) would have to be kept in step
with the sessions table, and a session whose job and row disagree is worse than a slightly busier table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from psycopg.rows import tuple_row

from research_tool.core.logging import get_logger
from research_tool.models.sessions import ACTIVE_STATUSES

log = get_logger(__name__)

_ACTIVE = list(ACTIVE_STATUSES)

# The oldest unfinished session that nobody holds; a row another worker is claiming right now is skipped,
# not waited for. Under READ COMMITTED a row claimed and committed meanwhile is re-checked against the
# WHERE clause before it is locked, so two workers never both get it.
CLAIM_NEXT = """
UPDATE sessions SET worker_id = %(worker)s, lease_expires_at = now() + make_interval(secs => %(ttl)s)
WHERE id = (
    SELECT id FROM sessions
    WHERE status = ANY(%(active)s) AND (worker_id IS NULL OR lease_expires_at < now())
    ORDER BY created_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING id
"""

CLAIM_ONE = """
UPDATE sessions SET worker_id = %(worker)s, lease_expires_at = now() + make_interval(secs => %(ttl)s)
WHERE id = %(id)s AND status = ANY(%(active)s)
  AND (worker_id IS NULL OR worker_id = %(worker)s OR lease_expires_at < now())
RETURNING id
"""

RENEW = """
UPDATE sessions SET lease_expires_at = now() + make_interval(secs => %(ttl)s)
WHERE id = ANY(%(ids)s) AND worker_id = %(worker)s
RETURNING id, stop_requested::int <> 0, clarify_answers IS NOT NULL
"""

QUEUED = "SELECT count(*) FROM sessions WHERE status = 'queued'"

RELEASE = "UPDATE sessions SET worker_id = NULL, lease_expires_at = NULL WHERE id = %(id)s AND worker_id = %(worker)s"


@dataclass(frozen=True)
class HeldSession:
    """A session whose lease was just renewed, with the control flags its row holds (the safety net for a
    stop or an answer whose notification was lost)."""

    session_id: str
    stop_requested: bool
    has_answers: bool


class SessionLeases:
    """The leases one process (`worker_id`) holds, on the process's connection pool."""

    def __init__(self, pool: Any, worker_id: str, ttl_s: float) -> None:
        self._pool = pool
        self.worker_id = worker_id
        self.ttl_s = ttl_s
        self.held: set[str] = set()

    async def _rows(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        async with self._pool.connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            await cur.execute(sql, params)
            rows: list[tuple[Any, ...]] = await cur.fetchall()
            return rows

    async def claim_next(self) -> str | None:
        """Take the oldest session nobody holds; None when there is none."""
        rows = await self._rows(CLAIM_NEXT, {"worker": self.worker_id, "ttl": self.ttl_s, "active": _ACTIVE})
        if not rows:
            return None
        session_id = str(rows[0][0])
        self.held.add(session_id)
        log.info("session_claimed", session_id=session_id, worker_id=self.worker_id)
        return session_id

    async def claim(self, session_id: str) -> bool:
        """Take this session if nobody (else) holds it; False when another process runs it or it has finished."""
        rows = await self._rows(
            CLAIM_ONE, {"worker": self.worker_id, "ttl": self.ttl_s, "active": _ACTIVE, "id": session_id}
        )
        if rows:
            self.held.add(session_id)
        return bool(rows)

    async def renew(self) -> tuple[list[HeldSession], set[str]]:
        """Extend every lease held; returns the sessions still held and the ones lost (another worker took
        them after this one missed its renewals: it must stop running them)."""
        ids = sorted(self.held)
        if not ids:
            return [], set()
        rows = await self._rows(RENEW, {"worker": self.worker_id, "ttl": self.ttl_s, "ids": ids})
        kept = [HeldSession(str(r[0]), bool(r[1]), bool(r[2])) for r in rows]
        lost = (set(ids) - {h.session_id for h in kept}) & self.held  # not released meanwhile
        self.held -= lost
        return kept, lost

    async def release(self, session_id: str) -> None:
        """Let go of a session: finished, or this process stops (another worker may then resume it at once)."""
        self.held.discard(session_id)
        async with self._pool.connection() as conn:
            await conn.execute(RELEASE, {"id": session_id, "worker": self.worker_id})

    async def queued_count(self) -> int:
        """Sessions in the shared queue: admission (API 503) counts these, whichever node wrote them."""
        rows = await self._rows(QUEUED, {})
        return int(rows[0][0]) if rows else 0

    async def release_all(self, session_ids: Iterable[str] | None = None) -> None:
        for session_id in list(session_ids if session_ids is not None else self.held):
            await self.release(session_id)
