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


def _write_batch(conn: sqlite3.Connection, sql: str, rows: list[Params]) -> None:
    """In the connection's thread: every row or none (the connection is in autocommit mode). A COMMIT that
    fails (a reader's statement still in progress on this connection: a cursor between fetchone() and its
    close) rolls back too: left open, the transaction held the rows the row-by-row retry then wrote again
    (UNIQUE errors for rows that were in fact written) and made every later batch's BEGIN fail."""
    conn.execute("BEGIN")
    try:
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _write_rows(conn: sqlite3.Connection, sql: str, rows: list[Params]) -> list[BaseException | None]:
    """In the connection's thread: each row on its own, its error (or None) reported back."""
    outcomes: list[BaseException | None] = []
    for row in rows:
        try:
            conn.execute(sql, row)
            outcomes.append(None)
        except sqlite3.Error as exc:
            outcomes.append(exc)
    return outcomes


class GroupCommit:
    """Batched `INSERT`s of one statement on one aiosqlite connection opened in autocommit mode."""

    def __init__(self, conn: aiosqlite.Connection, sql: str) -> None:
        self._conn = conn
        self._sql = sql
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
                _write_rows, conn._conn, self._sql, rows
            )
            return outcomes
        return [None] * len(rows)
