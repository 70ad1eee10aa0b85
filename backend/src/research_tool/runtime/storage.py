"""The SQLite files of a data dir: sessions and events (`sessions.db`), page text (`content.db`, see
content_store.py), checkpoints (`checkpoints.db`, see checkpoints.py). Every one is created with
`auto_vacuum=INCREMENTAL`, so the pages that deleting sessions frees can be given back to the file system
(`reclaim_space`) without rewriting the whole file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal

import aiosqlite

from research_tool.core.logging import get_logger
from research_tool.runtime.users import USERS_SCHEMA

log = get_logger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    query TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    progress TEXT NOT NULL DEFAULT '{}',
    pending_questions TEXT NOT NULL DEFAULT '[]',
    clarify_answers TEXT,
    awaiting_since TEXT,
    error TEXT,
    trace_context TEXT,
    owner TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_created ON sessions(created_at DESC);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts TEXT NOT NULL,
    type TEXT NOT NULL,
    phase TEXT,
    message TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""

AUTO_VACUUM_INCREMENTAL = 2
# The WAL file is cut back to this size after a checkpoint that empties it (it otherwise keeps its peak size).
WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024
# Each connection's page cache is held at most this big (SQLite's default is 2,000 KiB). A server keeps three
# connections open for its life (sessions, content, checkpoints), and their caches filled a page at a time as
# the files grew: in the storage benchmark SQLite's heap went up by about 12 kB per finished session for the
# first few hundred sessions. At 512 KiB they are full after about a hundred; event appends and session reads
# took no measurably longer (a 31 MB sessions.db, 1,500 sessions of 30 events: within the run-to-run noise), as
# the pages that fall out stay in the OS's file cache.
PAGE_CACHE_KIB = 512


async def open_sqlite(path: Path, *, autocommit: bool = False) -> aiosqlite.Connection:
    """A connection in WAL mode; a new file gets auto_vacuum=INCREMENTAL (it must precede the first table).
    `autocommit`: every statement is its own transaction (no implicit BEGIN, commit() has nothing to do)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = await (aiosqlite.connect(path, isolation_level=None) if autocommit else aiosqlite.connect(path))
    await configure_connection(conn)
    return conn


async def configure_connection(conn: aiosqlite.Connection) -> None:
    await conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # no effect on a file that already has tables
    await conn.execute("PRAGMA journal_mode=WAL")
    await conn.execute("PRAGMA synchronous=NORMAL")
    await conn.execute("PRAGMA busy_timeout=5000")
    await conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
    await conn.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")  # negative: a size in KiB, not in pages


async def open_database(path: Path) -> aiosqlite.Connection:
    # Autocommit: each statement is its own transaction, so an event append or a status update is one trip to
    # the connection's thread instead of two (statement, then COMMIT); at a thousand sessions those trips
    # were the largest share of the event loop's time spent on SQLite.
    conn = await open_sqlite(path, autocommit=True)
    conn.row_factory = aiosqlite.Row
    await conn.executescript(SCHEMA)
    await _add_missing_columns(conn)
    await conn.executescript(USERS_SCHEMA)
    await conn.execute("CREATE INDEX IF NOT EXISTS sessions_by_owner ON sessions(owner, status)")
    await conn.commit()
    return conn


# Columns added to `sessions` after its first version: a data dir made before them gets them on open.
ADDED_SESSION_COLUMNS = {
    "trace_context": "TEXT",  # issue 36: the session's OpenTelemetry trace context
    "owner": "TEXT",  # issue 44: the user who started it (runtime/users.py); NULL: the local single user
}


async def _add_missing_columns(conn: aiosqlite.Connection) -> None:
    async with conn.execute("PRAGMA table_info(sessions)") as cur:
        present = {str(row[1]) for row in await cur.fetchall()}
    for name, kind in ADDED_SESSION_COLUMNS.items():
        if name not in present:
            await conn.execute(f"ALTER TABLE sessions ADD COLUMN {name} {kind}")


async def _pragma_int(conn: aiosqlite.Connection, name: str) -> int:
    async with conn.execute(f"PRAGMA {name}") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


CheckpointMode = Literal["PASSIVE", "TRUNCATE"]


def _checkpoint(conn: sqlite3.Connection, mode: CheckpointMode, wait: bool) -> tuple[int, int, int] | None:
    """In the connection's thread, start to end: a checkpoint whose cursor stayed open across an `await` was a
    write statement in progress, and every group commit that ran meanwhile failed its COMMIT (issue 22).
    Without `wait`, the busy timeout is 0 for the checkpoint alone: a reader elsewhere makes it return (or
    fail, and fall back to PASSIVE) at once instead of holding the connection's thread, and its writers."""
    previous = None if wait else int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    if previous is not None:
        conn.execute("PRAGMA busy_timeout=0")
    try:
        row = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
    finally:
        if previous is not None:
            conn.execute(f"PRAGMA busy_timeout={previous}")
    return (int(row[0]), int(row[1]), int(row[2])) if row else None


async def checkpoint_wal(conn: aiosqlite.Connection, mode: CheckpointMode = "PASSIVE", *, wait: bool = True) -> bool:
    """Copy the WAL back into the database file (TRUNCATE: and cut the WAL to nothing). Maintenance only: it
    never fails its caller. SQLite refuses it ("database table is locked") while a statement of the same
    connection is reading, and TRUNCATE also waits out other connections' readers (busy_timeout); then a
    PASSIVE one is tried, and what is left is done by a later checkpoint (SQLite's own, every 1,000 pages).
    Returns whether a checkpoint ran."""
    for attempt in (mode, "PASSIVE") if mode != "PASSIVE" else (mode,):
        try:
            # aiosqlite's own way of running a function in the connection's thread (as execute() does)
            await conn._execute(_checkpoint, conn._conn, attempt, wait)  # type: ignore[no-untyped-call]
            return True
        except sqlite3.OperationalError as exc:
            log.info("wal_checkpoint_deferred", mode=attempt, reason=str(exc))
    return False


async def reclaim_space(
    conn: aiosqlite.Connection, *, convert: bool = False, checkpoint: CheckpointMode = "TRUNCATE", wait: bool = True
) -> int:
    """Give the file's free pages back to the file system; returns the bytes the file shrank by.

    A file made with auto_vacuum=INCREMENTAL does it page by page (`PRAGMA incremental_vacuum`). A file made
    before that (auto_vacuum=NONE) can only shrink by a full VACUUM, which rewrites it: that happens only
    when `convert` is set (`research-tool gc`), and it switches the file to INCREMENTAL for good.
    `checkpoint`: how the WAL is then written back (checkpoint_wal; PASSIVE never waits for anyone, nor does
    TRUNCATE without `wait`).
    """
    page_size = await _pragma_int(conn, "page_size")
    before = await _pragma_int(conn, "page_count")
    mode = await _pragma_int(conn, "auto_vacuum")
    if mode == AUTO_VACUUM_INCREMENTAL:
        # Through executescript: it steps the pragma to the end (execute() stops after the first page).
        await conn.executescript("PRAGMA incremental_vacuum;")
    elif convert:
        await conn.commit()
        await conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        await conn.execute("VACUUM")
        log.info("sqlite_vacuumed", pages_before=before)
    await conn.commit()
    await checkpoint_wal(conn, checkpoint, wait=wait)
    after = await _pragma_int(conn, "page_count")
    return max(0, before - after) * page_size
