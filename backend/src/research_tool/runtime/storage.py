"""The SQLite files of a data dir: sessions and events (`sessions.db`), page text (`content.db`, see
content_store.py), checkpoints (`checkpoints.db`, see checkpoints.py). Every one is created with
`auto_vacuum=INCREMENTAL`, so the pages that deleting sessions frees can be given back to the file system
(`reclaim_space`) without rewriting the whole file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite

from research_tool.core.logging import get_logger

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
    await conn.commit()
    return conn


async def _pragma_int(conn: aiosqlite.Connection, name: str) -> int:
    async with conn.execute(f"PRAGMA {name}") as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def reclaim_space(conn: aiosqlite.Connection, *, convert: bool = False) -> int:
    """Give the file's free pages back to the file system; returns the bytes the file shrank by.

    A file made with auto_vacuum=INCREMENTAL does it page by page (`PRAGMA incremental_vacuum`). A file made
    before that (auto_vacuum=NONE) can only shrink by a full VACUUM, which rewrites it: that happens only
    when `convert` is set (`research-tool gc`), and it switches the file to INCREMENTAL for good.
    """
    page_size = await _pragma_int(conn, "page_size")
    before = await _pragma_int(conn, "page_count")
    mode = await _pragma_int(conn, "auto_vacuum")
    if convert and mode != AUTO_VACUUM_INCREMENTAL:
        await conn.commit()
        await conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        await conn.execute("VACUUM")
        log.info("sqlite_vacuumed", pages_before=before)
    try:
        if mode == AUTO_VACUUM_INCREMENTAL:
            # Through executescript: it steps the pragma to the end (execute() stops after the first page).
            await conn.executescript("PRAGMA incremental_vacuum;")
        await conn.commit()
        await (await conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")).close()
    except sqlite3.OperationalError as exc:
        # Best effort: a reader of this connection mid-statement ("database table is locked") leaves the pages
        # for the next reclaim; failing here failed the DELETE that asked for it while the rows were gone.
        log.info("sqlite_reclaim_deferred", error=str(exc))
    after = await _pragma_int(conn, "page_count")
    return max(0, before - after) * page_size
