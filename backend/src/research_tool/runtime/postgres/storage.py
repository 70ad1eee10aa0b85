"""Everything a process keeps in Postgres, opened in one place: the pool, the schema (migrations and the
checkpointer's own tables, each brought up to date once however many processes start at once), the stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row

from research_tool.core.logging import get_logger
from research_tool.runtime.postgres.checkpoints import PrunablePostgresSaver
from research_tool.runtime.postgres.content_store import PostgresContentStore
from research_tool.runtime.postgres.event_log import PostgresEventLog
from research_tool.runtime.postgres.memory import PostgresMemoryStorage
from research_tool.runtime.postgres.migrations import MIGRATION_LOCK_KEY, migrate
from research_tool.runtime.postgres.pool import Pool, open_pool
from research_tool.runtime.postgres.session_store import PostgresSessionStore
from research_tool.runtime.postgres.users import PostgresUserStore

log = get_logger(__name__)

# How often a process that waits for another's migration asks for the lock again.
LOCK_POLL_S = 0.05


@dataclass
class PostgresStorage:
    pool: Pool
    store: PostgresSessionStore
    events: PostgresEventLog
    content: PostgresContentStore
    memory: PostgresMemoryStorage
    checkpointer: PrunablePostgresSaver
    users: PostgresUserStore


async def prepare_schema(url: str, pool: Pool, saver: PrunablePostgresSaver | None = None) -> list[int]:
    """Apply our migrations and the checkpointer's `setup()` while holding the migration lock on a connection
    of its own (AsyncPostgresSaver.setup takes no lock: two processes starting at once would both insert
    its version rows). Returns the versions of ours applied now."""
    async with await AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as lock_conn:
        await _take_lock(lock_conn)
        try:
            applied = await migrate(lock_conn)
            if saver is not None:
                await saver.setup()
        finally:
            await lock_conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied


async def _take_lock(conn: AsyncConnection[DictRow]) -> None:
    """The migration lock, asked for again and again rather than waited for in a statement: a waiting
    statement holds a snapshot, and the checkpointer's CREATE INDEX CONCURRENTLY waits for every older
    snapshot to end, so a blocked `pg_advisory_lock` would deadlock with the process that holds it."""
    waited = False
    while True:
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s) AS taken", (MIGRATION_LOCK_KEY,))
        row = await cur.fetchone()
        if row is not None and row["taken"]:
            if waited:
                log.info("postgres_migration_lock_taken")
            return
        waited = True
        await asyncio.sleep(LOCK_POLL_S)


@asynccontextmanager
async def open_postgres_storage(url: str, *, pool_size: int = 10) -> AsyncIterator[PostgresStorage]:
    async with open_pool(url, size=pool_size) as pool:
        saver = PrunablePostgresSaver(pool)
        await prepare_schema(url, pool, saver)
        yield PostgresStorage(
            pool=pool,
            store=PostgresSessionStore(pool),
            events=PostgresEventLog(pool),
            content=PostgresContentStore(pool),
            memory=PostgresMemoryStorage(pool),
            checkpointer=saver,
            users=PostgresUserStore(pool),
        )
