"""Group commit: rows that many tasks write at about the same time go to SQLite in one transaction.

A thousand starts arriving together each wrote a session row and its first event, one trip to the
connection's thread apiece, and the event log's lock made the event inserts wait for each other: a
thousand loop iterations in a row before the last start could answer. Here a write joins the batch that is
collecting; one flush at a time runs the whole batch (`executemany` inside BEGIN ... COMMIT, in the
connection's own thread, so no other statement interleaves) and wakes every writer. While a flush runs, the
next batch collects. A batch that fails is retried row by row, so one bad row fails only its own writer.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite

Params = Sequence[Any]
SAVEPOINT = "group_commit"


def _write_batch(conn: sqlite3.Connection, sql: str, rows: list[Params]) -> None:
    """In the connection's thread: every row or none (the connection is in autocommit mode).

    A savepoint rather than BEGIN: SQLite refuses to open one while a write statement of this connection is
    still in progress, before anything is opened, where BEGIN would succeed and its COMMIT fail. A rollback
    then would also undo rows that the row-by-row retry wrote meanwhile (their autocommit waits for that
    statement to end), rows whose writers were already told they were written."""
    conn.execute(f"SAVEPOINT {SAVEPOINT}")
    try:
        conn.executemany(sql, rows)
        conn.execute(f"RELEASE {SAVEPOINT}")
    except BaseException:
        _roll_back(conn)
        raise


def _roll_back(conn: sqlite3.Connection) -> None:
    """Leave the connection outside any transaction with nothing of the batch written. ROLLBACK TO, unlike
    ROLLBACK, leaves the connection's readers mid-query alone."""
    if not conn.in_transaction:
        return
    try:
        conn.execute(f"ROLLBACK TO {SAVEPOINT}")
        conn.execute(f"RELEASE {SAVEPOINT}")
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _write_rows(
    conn: sqlite3.Connection, sql: str, rows: list[Params], same_row_sql: str | None
) -> list[BaseException | None]:
    """In the connection's thread: each row on its own, its error (or None) reported back."""
    outcomes: list[BaseException | None] = []
    for row in rows:
        try:
            conn.execute(sql, row)
            outcomes.append(None)
        except sqlite3.IntegrityError as exc:
            stored = same_row_sql is not None and conn.execute(same_row_sql, row).fetchone() is not None
            outcomes.append(None if stored else exc)
        except sqlite3.Error as exc:
            outcomes.append(exc)
    return outcomes


class GroupCommit:
    """Batched `INSERT`s of one statement on one aiosqlite connection opened in autocommit mode.

    `same_row_sql`: a query taking the insert's parameters that returns a row when exactly that row is stored
    already (its key and every value): such a row is not an error."""

    def __init__(self, conn: aiosqlite.Connection, sql: str, *, same_row_sql: str | None = None) -> None:
        self._conn = conn
        self._sql = sql
        self._same_row_sql = same_row_sql
        self._pending: list[tuple[Params, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.batches = 0  # flushes so far (tests, diagnostics)

    async def write(self, row: Params) -> None:
        """Returns once `row` is committed; raises what SQLite raised for it."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((row, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_all(), name="group-commit")
        await future

    async def settled(self) -> None:
        """Returns once every write issued so far has been committed or has failed."""
        flusher = self._flusher
        if flusher is not None and not flusher.done():
            await asyncio.gather(asyncio.shield(flusher), return_exceptions=True)

    async def _flush_all(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            await self._flush(batch)

    async def _flush(self, batch: list[tuple[Params, asyncio.Future[None]]]) -> None:
        rows = [row for row, _ in batch]
        self.batches += 1
        try:
            outcomes = await self._run(rows)
        except BaseException as exc:  # the connection is closing, or this task was cancelled: nothing is known written
            error = exc if isinstance(exc, Exception) else RuntimeError("the write was cancelled")
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            raise
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():  # its writer was cancelled: the row is written all the same
                continue
            if outcome is None:
                future.set_result(None)
            else:
                future.set_exception(outcome)

    async def _run(self, rows: list[Params]) -> list[BaseException | None]:
        """Each row's error, or None: the batch in one transaction, or row by row when that fails."""
        conn = self._conn
        try:
            # aiosqlite's own way of running a function in the connection's thread (as execute() does)
            await conn._execute(_write_batch, conn._conn, self._sql, rows)  # type: ignore[no-untyped-call]
        except sqlite3.Error:
            outcomes: list[BaseException | None] = await conn._execute(  # type: ignore[no-untyped-call]
                _write_rows, conn._conn, self._sql, rows, self._same_row_sql
            )
            return outcomes
        return [None] * len(rows)
