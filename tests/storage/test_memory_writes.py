"""`memory.db` writes hold SQLite's write lock only while their statement runs (issue 22): a write used to be
an implicit transaction that a second call committed, so whenever the event loop stalled between the two
(rendering a traceback, say), the lock stayed held for the whole stall and other writers' busy timeouts ran
out ("database is locked" failed sessions). Here the loop stalls over and over while writes go on, and a
thread watches how long the write lock stays taken at a stretch."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

from research_tool.providers.memory import SqliteMemoryStorage

WRITES = 2
STALL_S = 0.15
HELD_LIMIT_S = STALL_S / 2


def write_lock_taken(path: Path) -> bool:
    with closing(sqlite3.connect(path, timeout=0.0, isolation_level=None)) as other:
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return True
        other.execute("ROLLBACK")
        return False


def longest_hold(path: Path, done: threading.Event, result: list[float]) -> None:
    """In a thread: the longest stretch for which another connection held the write lock."""
    longest, since = 0.0, None
    while not done.is_set():
        now = time.monotonic()
        if write_lock_taken(path):
            since = now if since is None else since
            longest = max(longest, now - since)
        else:
            since = None
        time.sleep(0.001)
    result.append(longest)


async def stalls(done: threading.Event) -> None:
    """The event loop busy elsewhere most of the time, as under a storm of failures."""
    while not done.is_set():
        time.sleep(STALL_S)  # noqa: ASYNC251 - the stall under test: the loop runs nothing meanwhile
        await asyncio.sleep(0)


async def test_a_stalling_event_loop_never_keeps_memory_db_write_locked(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    storage = SqliteMemoryStorage(path)
    await storage.initialize()
    done, result = threading.Event(), []
    watcher = threading.Thread(target=longest_hold, args=(path, done, result))
    watcher.start()
    staller = asyncio.create_task(stalls(done))
    try:
        for _ in range(WRITES):
            await storage.bump("general", "wikipedia", calls=1, results=3, citations=0, failures=0)
    finally:
        done.set()
        await staller
        watcher.join()
    assert result[0] < HELD_LIMIT_S, f"the write lock was held {result[0]:.3f} s at a stretch"
    assert (await storage.stats_rows("general"))[0][1:3] == (WRITES, 3 * WRITES)
