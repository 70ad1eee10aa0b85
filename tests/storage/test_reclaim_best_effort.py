"""Reclaiming SQLite space is best effort: with a reader mid-statement on the same connection (a cursor between
fetchone() and its close), `PRAGMA wal_checkpoint` fails with 'database table is locked'; the reclaim is then
deferred instead of failing the delete that asked for it, and a later one still shrinks the file."""

from __future__ import annotations

from pathlib import Path

from research_tool.runtime.storage import open_database, reclaim_space

INSERT = "INSERT INTO events (session_id, seq, ts, type, phase, message, data) VALUES (?, ?, 't', 'x', NULL, ?, '{}')"


async def test_a_reader_mid_statement_defers_the_reclaim_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    conn = await open_database(path)
    try:
        await conn.executemany(INSERT, [("s", seq, "m" * 3000) for seq in range(1, 300)])
        await conn.execute("DELETE FROM events WHERE seq > 5")
        reader = await conn.execute("SELECT seq FROM events ORDER BY seq")
        assert await reader.fetchone() is not None  # in progress: more rows to come
        await reclaim_space(conn)  # raised OperationalError('database table is locked') before
        assert [row[0] async for row in reader] == [2, 3, 4, 5]  # the reader is unharmed
        await reader.close()
        size_before = path.stat().st_size
        await reclaim_space(conn)
        assert not conn.in_transaction
        assert path.stat().st_size <= size_before
    finally:
        await conn.close()
