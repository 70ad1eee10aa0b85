"""Session rows in Postgres (the `sessions` table of migrations/0001_storage.sql).

Same behaviour as the SQLite SessionStore, without its cache: other processes (API nodes, workers) write the
same rows, so every read asks the database.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from research_tool.core.errors import SessionNotFoundError, UserLimitError
from research_tool.core.untrusted_text import clean_value
from research_tool.models.entities import utc_now_iso
from research_tool.models.request import ResearchRequest
from research_tool.models.sessions import (
    ACTIVE_STATUSES,
    FINISHED_STATUSES,
    UNFINISHED_STATUSES,
    SessionRecord,
    check_session_id,
)
from research_tool.runtime.postgres.pool import Pool
from research_tool.runtime.stores import resolve_session_id
from research_tool.runtime.users import UserLimits, day_start, limit_reason

# The first key of the per-user advisory lock a limited start takes (the second: hashtext of the user's name)
USER_LOCK_SPACE = 44

COLUMNS = (
    "id, query, request::text AS request, status, stop_reason, stop_requested, progress, pending_questions,"
    " clarify_answers, awaiting_since, error, trace_context, owner, created_at, updated_at"
)
JSON_COLUMNS = frozenset({"request", "progress", "pending_questions", "clarify_answers", "trace_context"})
BOOL_COLUMNS = frozenset({"stop_requested"})
UPDATABLE = frozenset(
    {"query", "status", "stop_reason", "stop_requested", "progress", "pending_questions", "clarify_answers"}
    | {"awaiting_since", "error", "request", "trace_context"}
)


def iso(value: datetime | str | None) -> str | None:
    """A timestamptz as the ISO 8601 text the records carry (UTC, as utc_now_iso writes it)."""
    if value is None or isinstance(value, str):
        return value
    return value.astimezone(UTC).isoformat()


def session_record(row: DictRow) -> SessionRecord:
    return SessionRecord(
        id=row["id"],
        query=row["query"],
        request=ResearchRequest.model_validate_json(row["request"]),
        status=row["status"],
        stop_reason=row["stop_reason"],
        stop_requested=bool(row["stop_requested"]),
        progress=row["progress"],
        pending_questions=row["pending_questions"],
        clarify_answers=row["clarify_answers"],
        awaiting_since=iso(row["awaiting_since"]),
        error=row["error"],
        trace_context=row["trace_context"],
        owner=row["owner"],
        created_at=iso(row["created_at"]) or "",
        updated_at=iso(row["updated_at"]) or "",
    )


def _encoded(name: str, value: Any) -> Any:
    if name not in UPDATABLE:
        raise ValueError(f"not a session column that can be updated: {name}")
    value = clean_value(value)  # Postgres refuses NUL in text and JSONB: an error message may quote one
    if name in JSON_COLUMNS and value is not None:
        return Jsonb(value)
    if name in BOOL_COLUMNS:
        return bool(value)
    return value


async def _refusal(conn: AsyncConnection[DictRow], owner: str, limits: UserLimits) -> tuple[str, int] | None:
    """`owner`'s unfinished sessions, starts and spent tokens today, against `limits`."""
    cur = await conn.execute(
        "SELECT (SELECT COUNT(*) FROM sessions WHERE owner = %s AND status = ANY(%s)) AS active,"
        " (SELECT COUNT(*) FROM audit WHERE actor = %s AND action = 'start' AND ts >= %s) AS today,"
        " (SELECT COALESCE(SUM(CAST(detail AS bigint)), 0) FROM audit"
        "  WHERE actor = %s AND action = 'tokens' AND ts >= %s) AS spent",
        (owner, list(UNFINISHED_STATUSES), owner, day_start(), owner, day_start()),
    )
    counts = await cur.fetchone()
    assert counts is not None
    return limit_reason(owner, limits, int(counts["active"]), int(counts["today"]), int(counts["spent"]))


class PostgresSessionStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def create(
        self,
        request: ResearchRequest,
        session_id: str | None = None,
        trace_context: dict[str, str] | None = None,
        *,
        owner: str | None = None,
        limits: UserLimits | None = None,
    ) -> SessionRecord:
        """`owner`: the user who starts it (with its `start` audit line). `limits`: that user's, counted and claimed
        in one transaction under a per-user advisory lock, so concurrent starts on any API node cannot overshoot
        (UserLimitError, nothing written, when over)."""
        now = utc_now_iso()
        sid = check_session_id(session_id) if session_id is not None else uuid.uuid4().hex
        trace = Jsonb(trace_context) if trace_context else None
        async with self._pool.connection() as conn, conn.transaction():
            if owner is not None and limits is not None and limits.any:
                await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (USER_LOCK_SPACE, owner))
                refusal = await _refusal(conn, owner, limits)
                if refusal is not None:
                    raise UserLimitError(refusal[0], retry_after_s=refusal[1])
            await conn.execute(
                "INSERT INTO sessions (id, query, request, status, trace_context, owner, created_at, updated_at)"
                " VALUES (%s, %s, %s::jsonb, 'queued', %s, %s, %s, %s)",
                (sid, request.query, request.model_dump_json(), trace, owner, now, now),
            )
            if owner is not None:
                await conn.execute(
                    "INSERT INTO audit (ts, actor, action, target) VALUES (%s, %s, 'start', %s)", (now, owner, sid)
                )
        return SessionRecord.queued(sid, request, trace_context, now, owner)

    async def limit_refusal(self, owner: str, limits: UserLimits) -> tuple[str, int] | None:
        """Whether a start by `owner` would be refused now (reason, Retry-After), writing nothing."""
        async with self._pool.connection() as conn:
            return await _refusal(conn, owner, limits)

    async def get(self, session_id: str) -> SessionRecord:
        async with self._pool.connection() as conn:
            cur = await conn.execute(f"SELECT {COLUMNS} FROM sessions WHERE id = %s", (session_id,))
            row = await cur.fetchone()
        if row is None:
            raise SessionNotFoundError(f"unknown session id: {session_id}")
        return session_record(row)

    async def exists(self, session_id: str) -> bool:
        async with self._pool.connection() as conn:
            cur = await conn.execute("SELECT 1 AS found FROM sessions WHERE id = %s", (session_id,))
            return await cur.fetchone() is not None

    async def resolve(self, id_or_prefix: str) -> str:
        """The full id of the one session whose id is, or starts with, `id_or_prefix` (as `sessions` shows it)."""
        return await resolve_session_id(id_or_prefix, exists=self.exists, ids_starting_with=self._ids_starting_with)

    async def _ids_starting_with(self, prefix: str, limit: int) -> list[str]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT id FROM sessions WHERE left(id, %s) = %s ORDER BY id LIMIT %s", (len(prefix), prefix, limit)
            )
            return [str(row["id"]) for row in await cur.fetchall()]

    async def list_page(
        self, *, limit: int = 20, offset: int = 0, owner: str | None = None
    ) -> tuple[list[SessionRecord], int]:
        """A page of sessions, newest first; `owner`: only that user's."""
        where, params = ("WHERE owner = %s", (owner,)) if owner is not None else ("", ())
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {COLUMNS} FROM sessions {where} ORDER BY created_at DESC, id LIMIT %s OFFSET %s",
                (*params, limit, offset),
            )
            rows = await cur.fetchall()
            cur = await conn.execute(f"SELECT COUNT(*) AS total FROM sessions {where}", params)
            total = await cur.fetchone()
        return [session_record(r) for r in rows], int(total["total"]) if total else 0

    async def active(self) -> list[SessionRecord]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT {COLUMNS} FROM sessions WHERE status = ANY(%s) ORDER BY created_at, id",
                (list(ACTIVE_STATUSES),),
            )
            return [session_record(r) for r in await cur.fetchall()]

    async def update(self, session_id: str, **fields: Any) -> None:
        values = {name: _encoded(name, value) for name, value in fields.items()}
        values["updated_at"] = utc_now_iso()
        assignments = sql.SQL(", ").join(
            sql.SQL("{} = {}").format(sql.Identifier(name), sql.Placeholder()) for name in values
        )
        query = sql.SQL("UPDATE sessions SET {} WHERE id = %s").format(assignments)
        async with self._pool.connection() as conn:
            await conn.execute(query, (*values.values(), session_id))

    async def delete(self, session_id: str) -> None:
        async with self._pool.connection() as conn:
            await conn.execute("DELETE FROM sessions WHERE id = %s", (session_id,))

    async def ids(self, statuses: Sequence[str] | None = None) -> set[str]:
        async with self._pool.connection() as conn:
            if statuses is None:
                cur = await conn.execute("SELECT id FROM sessions")
            else:
                cur = await conn.execute("SELECT id FROM sessions WHERE status = ANY(%s)", (list(statuses),))
            return {str(row["id"]) for row in await cur.fetchall()}

    async def expired(self, cutoff: str) -> list[str]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT id FROM sessions WHERE status = ANY(%s) AND updated_at < %s ORDER BY updated_at",
                (list(FINISHED_STATUSES), cutoff),
            )
            return [str(row["id"]) for row in await cur.fetchall()]

    async def status_counts(self) -> dict[str, int]:
        async with self._pool.connection() as conn:
            cur = await conn.execute("SELECT status, COUNT(*) AS n FROM sessions GROUP BY status")
            return {str(row["status"]): int(row["n"]) for row in await cur.fetchall()}

    async def reclaim_space(self, *, convert: bool = False) -> int:
        """Postgres's autovacuum gives dead rows' space back for reuse; nothing to do here."""
        return 0
