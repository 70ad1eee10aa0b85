"""What LangGraph's server protocol keeps beside a research session: a thread's metadata (a thread may exist
before its first run) and the runs made on it. A thread's id IS its session's id: the session (row, events,
checkpoints) stays the one truth; this only adds the protocol's own records, in sessions.db (SQLite) or, on
Postgres, in a small langgraph.db of the data dir (not shared between the processes of a cluster).

A run's status here is what was last written; while the run is the thread's current one, the API derives
the live status from the session's (api/langgraph/service.py) and writes it once it is final. When a later run
replaces the thread's session, the earlier run's final values are kept in its `output` column.

A run is written with everything it needs to start (`request`: the research request its body, the assistant's
config and, for a regenerate, the thread's earlier question made), before anything of the thread is changed.
A run that replaces the thread's session is written `pending` with `starting` set first; only then is the
earlier session deleted and the new one created. A process killed anywhere in between leaves the old session
(the run then starts at the next start) or the new one (the run is then marked running): never neither.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from research_tool.core.json_shape import json_depth
from research_tool.core.logging import get_logger
from research_tool.models.entities import utc_now_iso
from research_tool.runtime.storage import open_database

log = get_logger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS lg_threads (
    thread_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    started INTEGER NOT NULL DEFAULT 0,
    owner TEXT
);
CREATE TABLE IF NOT EXISTS lg_runs (
    run_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    assistant_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    multitask_strategy TEXT NOT NULL,
    kwargs TEXT NOT NULL DEFAULT '{}',
    start_seq INTEGER NOT NULL DEFAULT 0,
    cancel_reason TEXT,
    output TEXT,
    request TEXT,
    starting INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS lg_runs_thread ON lg_runs (thread_id, created_at);
"""
FINAL_RUN_STATUSES = frozenset({"success", "error", "interrupted", "timeout"})
# A stored JSON column nesting deeper than this (a row written before the API refused such bodies) is read
# as {}: one bad row must not break every read of the table (issue 32: /threads/search answered 500).
MAX_STORED_DEPTH = 64


@dataclass
class ThreadRow:
    thread_id: str
    created_at: str
    updated_at: str
    metadata: dict[str, Any] = field(default_factory=dict)
    started: bool = False  # a run has created its session: once the session is gone, the thread is too
    owner: str | None = None  # the user who created it (issue 44); None: the local single user


@dataclass
class RunRow:
    run_id: str
    thread_id: str
    assistant_id: str
    status: str  # pending | running | success | error | interrupted | timeout
    created_at: str
    updated_at: str
    metadata: dict[str, Any]
    multitask_strategy: str
    kwargs: dict[str, Any]
    start_seq: int  # the session's last event seq when the run started: its events come after it
    cancel_reason: str | None = None
    # The run's final values, kept when a later run replaced its session (its events and checkpoints are gone).
    output: dict[str, Any] | None = None
    # The research request the run starts (ResearchRequest as JSON); None on rows from before the column.
    request: dict[str, Any] | None = None
    # Written before the run replaces the thread's session: a restart finishes the replacement.
    starting: bool = False

    @property
    def final(self) -> bool:
        return self.status in FINAL_RUN_STATUSES


def _json_object(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict) or json_depth(value, MAX_STORED_DEPTH) > MAX_STORED_DEPTH:
        log.warning("langgraph_row_unreadable", where=where)
        return {}
    return value


def _thread(row: aiosqlite.Row) -> ThreadRow:
    return ThreadRow(
        thread_id=row["thread_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        metadata=_json_object(row["metadata"], f"thread {row['thread_id']} metadata"),
        started=bool(row["started"]),
        owner=row["owner"],
    )


def _run(row: aiosqlite.Row) -> RunRow:
    return RunRow(
        run_id=row["run_id"],
        thread_id=row["thread_id"],
        assistant_id=row["assistant_id"],
        status=row["status"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        metadata=_json_object(row["metadata"], f"run {row['run_id']} metadata"),
        multitask_strategy=row["multitask_strategy"],
        kwargs=_json_object(row["kwargs"], f"run {row['run_id']} kwargs"),
        start_seq=int(row["start_seq"]),
        cancel_reason=row["cancel_reason"],
        output=None if row["output"] is None else _json_object(row["output"], f"run {row['run_id']} output"),
        request=None if row["request"] is None else _json_object(row["request"], f"run {row['run_id']} request"),
        starting=bool(row["starting"]),
    )


class ThreadRuns:
    """The lg_threads and lg_runs tables on one autocommit SQLite connection."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def create_tables(self) -> None:
        await self._conn.executescript(SCHEMA)
        async with self._conn.execute("PRAGMA table_info(lg_runs)") as cur:
            columns = {str(r[1]) for r in await cur.fetchall()}
        for column, kind in (("output", "TEXT"), ("request", "TEXT"), ("starting", "INTEGER NOT NULL DEFAULT 0")):
            if column not in columns:  # a data dir from before the column
                await self._conn.execute(f"ALTER TABLE lg_runs ADD COLUMN {column} {kind}")
        async with self._conn.execute("PRAGMA table_info(lg_threads)") as cur:
            if "owner" not in {str(r[1]) for r in await cur.fetchall()}:
                await self._conn.execute("ALTER TABLE lg_threads ADD COLUMN owner TEXT")

    # --- threads --------------------------------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRow | None:
        async with self._conn.execute("SELECT * FROM lg_threads WHERE thread_id = ?", (thread_id,)) as cur:
            row = await cur.fetchone()
        return None if row is None else _thread(row)

    async def put_thread(
        self, thread_id: str, metadata: dict[str, Any], *, started: bool = False, owner: str | None = None
    ) -> ThreadRow:
        """Write the thread; `owner` is set when the row is new (a thread's owner never changes)."""
        now = utc_now_iso()
        await self._conn.execute(
            "INSERT INTO lg_threads (thread_id, created_at, updated_at, metadata, started, owner)"
            " VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (thread_id) DO UPDATE SET updated_at = excluded.updated_at, metadata = excluded.metadata,"
            " started = MAX(lg_threads.started, excluded.started)",
            (thread_id, now, now, json.dumps(metadata), int(started), owner),
        )
        row = await self.get_thread(thread_id)
        assert row is not None
        return row

    async def mark_started(self, thread_id: str) -> None:
        await self._conn.execute(
            "UPDATE lg_threads SET started = 1, updated_at = ? WHERE thread_id = ?", (utc_now_iso(), thread_id)
        )

    async def all_threads(self) -> list[ThreadRow]:
        async with self._conn.execute("SELECT * FROM lg_threads ORDER BY created_at DESC") as cur:
            return [_thread(r) for r in await cur.fetchall()]

    async def delete_thread(self, thread_id: str) -> None:
        await self._conn.execute("DELETE FROM lg_runs WHERE thread_id = ?", (thread_id,))
        await self._conn.execute("DELETE FROM lg_threads WHERE thread_id = ?", (thread_id,))

    # --- runs -----------------------------------------------------------------------------------

    async def add_run(self, run: RunRow) -> None:
        await self._conn.execute(
            "INSERT INTO lg_runs (run_id, thread_id, assistant_id, status, created_at, updated_at, metadata,"
            " multitask_strategy, kwargs, start_seq, cancel_reason, request, starting)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.run_id,
                run.thread_id,
                run.assistant_id,
                run.status,
                run.created_at,
                run.updated_at,
                json.dumps(run.metadata),
                run.multitask_strategy,
                json.dumps(run.kwargs, default=str),
                run.start_seq,
                run.cancel_reason,
                None if run.request is None else json.dumps(run.request),
                int(run.starting),
            ),
        )

    async def get_run(self, thread_id: str, run_id: str) -> RunRow | None:
        async with self._conn.execute(
            "SELECT * FROM lg_runs WHERE run_id = ? AND thread_id = ?", (run_id, thread_id)
        ) as cur:
            row = await cur.fetchone()
        return None if row is None else _run(row)

    async def runs_of(self, thread_id: str) -> list[RunRow]:
        """The thread's runs, oldest first."""
        async with self._conn.execute(
            "SELECT * FROM lg_runs WHERE thread_id = ? ORDER BY created_at, rowid", (thread_id,)
        ) as cur:
            return [_run(r) for r in await cur.fetchall()]

    async def threads_with_pending_runs(self) -> list[str]:
        async with self._conn.execute("SELECT DISTINCT thread_id FROM lg_runs WHERE status = 'pending'") as cur:
            return [str(r[0]) for r in await cur.fetchall()]

    async def delete_run(self, run_id: str) -> None:
        await self._conn.execute("DELETE FROM lg_runs WHERE run_id = ?", (run_id,))

    async def update_run(self, run_id: str, **fields: Any) -> None:
        if "output" in fields:
            fields["output"] = json.dumps(fields["output"], default=str)
        if "starting" in fields:
            fields["starting"] = int(fields["starting"])
        fields["updated_at"] = utc_now_iso()
        assignments = ", ".join(f"{k} = ?" for k in fields)
        await self._conn.execute(f"UPDATE lg_runs SET {assignments} WHERE run_id = ?", (*fields.values(), run_id))


@asynccontextmanager
async def open_thread_runs(conn: aiosqlite.Connection | None, data_dir: Path) -> AsyncIterator[ThreadRuns]:
    """On sessions.db's connection when there is one (SQLite), else on the data dir's langgraph.db."""
    own = await open_database(data_dir / "langgraph.db") if conn is None else None
    try:
        runs = ThreadRuns(own or conn)  # type: ignore[arg-type]
        await runs.create_tables()
        yield runs
    finally:
        if own is not None:
            await own.close()
