"""What sessions leave on disk: checkpoint and event bytes per session, read from the server's SQLite
files (read-only; SQLite lets a reader in beside the server's writer)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)


def checkpoint_bytes(data_dir: Path) -> dict[str, int]:
    """Per thread (session): bytes of its checkpoints (blob + metadata) and pending writes."""
    path = data_dir / "checkpoints.db"
    totals: dict[str, int] = {}
    with closing(_read_only(path)) as db:
        for thread_id, size in db.execute(
            "SELECT thread_id, SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints GROUP BY thread_id"
        ):
            totals[thread_id] = totals.get(thread_id, 0) + int(size or 0)
        for thread_id, size in db.execute("SELECT thread_id, SUM(LENGTH(value)) FROM writes GROUP BY thread_id"):
            totals[thread_id] = totals.get(thread_id, 0) + int(size or 0)
    return totals


def event_rows(data_dir: Path) -> dict[str, tuple[int, int]]:
    """Per session: (event rows, bytes of their columns)."""
    with closing(_read_only(data_dir / "sessions.db")) as db:
        rows = db.execute(
            "SELECT session_id, COUNT(*), SUM(LENGTH(ts) + LENGTH(type) + LENGTH(COALESCE(phase, '')) "
            "+ LENGTH(message) + LENGTH(data) + 16) FROM events GROUP BY session_id"
        ).fetchall()
    return {sid: (int(n), int(size or 0)) for sid, n, size in rows}


def storage_per_session(data_dir: Path, session_ids: list[str]) -> dict[str, Any]:
    checkpoints = checkpoint_bytes(data_dir)
    events = event_rows(data_dir)
    n = max(1, len(session_ids))
    return {
        "checkpoint_bytes_per_session": round(sum(checkpoints.get(s, 0) for s in session_ids) / n),
        "checkpoint_file_bytes_per_session": round(_file_bytes(data_dir / "checkpoints.db") / n),
        "event_rows_per_session": round(sum(events.get(s, (0, 0))[0] for s in session_ids) / n, 1),
        "event_bytes_per_session": round(sum(events.get(s, (0, 0))[1] for s in session_ids) / n),
        "sessions_db_file_bytes_per_session": round(_file_bytes(data_dir / "sessions.db") / n),
    }


def events_after(data_dir: Path, after_seq: dict[str, int]) -> dict[str, tuple[int, str]]:
    """Per session: the first event (seq, ts) with seq above `after_seq[session]`, when there is one."""
    found: dict[str, tuple[int, str]] = {}
    with closing(_read_only(data_dir / "sessions.db")) as db:
        for session_id, seq in after_seq.items():
            row = db.execute(
                "SELECT seq, ts FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT 1", (session_id, seq)
            ).fetchone()
            if row:
                found[session_id] = (int(row[0]), str(row[1]))
    return found


def last_seqs(data_dir: Path) -> dict[str, int]:
    with closing(_read_only(data_dir / "sessions.db")) as db:
        return {sid: int(seq) for sid, seq in db.execute("SELECT session_id, MAX(seq) FROM events GROUP BY session_id")}


def phases_seen(data_dir: Path, session_id: str) -> list[tuple[str, str | None]]:
    with closing(_read_only(data_dir / "sessions.db")) as db:
        return [
            (t, p)
            for t, p in db.execute("SELECT type, phase FROM events WHERE session_id = ? ORDER BY seq", (session_id,))
        ]
