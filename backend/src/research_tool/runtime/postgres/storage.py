"""Everything a process keeps in Postgres, opened in one place: the pool, the schema (migrations and the
checkpointer's own tables, each brought up to date once however many processes start at once), the stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from research_tool.runtime.postgres.checkpoints import PrunablePostgresSaver
from research_tool.runtime.postgres.content_store import PostgresContentStore
from research_tool.runtime.postgres.event_log import PostgresEventLog
from research_tool.runtime.postgres.memory import PostgresMemoryStorage
from research_tool.runtime.postgres.migrations import MIGRATION_LOCK_KEY, migrate
from research_tool.runtime.postgres.pool import Pool, open_pool
from research_tool.runtime.postgres.session_store import PostgresSessionStore


@dataclass
class PostgresStorage:
    pool: Pool
    store: PostgresSessionStore
    events: PostgresEventLog
    content: PostgresContentStore
    memory: PostgresMemoryStorage
    checkpointer: PrunablePostgresSaver


async def prepare_schema(url: str, pool: Pool, saver: PrunablePostgresSaver | None = None) -> list[int]:
    """Apply our migrations and the checkpointer's `setup()` while holding the migration lock on a connection
    of its own (AsyncPostgresSaver.setup takes no lock: two processes starting at once would both insert
    its version rows). Returns the versions of ours applied now."""
    async with await AsyncConnection.connect(url, autocommit=True, row_factory=dict_row) as lock_conn:
        await lock_conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            applied = await migrate(lock_conn)
            if saver is not None:
                await saver.setup()
        finally:
            await lock_conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    return applied


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
        )
