"""Which storage a process uses: SQLite files under RESEARCH_DATA_DIR (the default, one process per data dir)
or Postgres (RESEARCH_DATABASE_URL, any number of processes). Both give the same stores (runtime/stores.py).

Nothing here imports psycopg unless Postgres is asked for, so the package works without the `postgres` extra.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiosqlite

from research_tool.core.extras import require_postgres_extra
from research_tool.core.settings import Settings
from research_tool.providers.memory import MemoryStore
from research_tool.runtime.checkpoints import PrunableSqliteSaver, open_checkpointer
from research_tool.runtime.content_store import ContentStore
from research_tool.runtime.event_log import EventLog
from research_tool.runtime.ownership import DataDirOwner
from research_tool.runtime.session_store import SessionStore
from research_tool.runtime.storage import open_database
from research_tool.runtime.stores import ContentStoreProtocol, EventLogProtocol, SessionStoreProtocol
from research_tool.runtime.users import UserStore, UserStoreProtocol

if TYPE_CHECKING:
    from research_tool.runtime.postgres.checkpoints import PrunablePostgresSaver

    Checkpointer = PrunableSqliteSaver | PrunablePostgresSaver
else:
    Checkpointer = Any


@dataclass
class Storage:
    store: SessionStoreProtocol
    events: EventLogProtocol
    content: ContentStoreProtocol
    checkpointer: Checkpointer
    memory: MemoryStore
    users: UserStoreProtocol
    conn: aiosqlite.Connection | None = None  # sessions.db (SQLite only)
    pool: Any = None  # the psycopg AsyncConnectionPool (Postgres only)


@asynccontextmanager
async def open_storage(settings: Settings, *, own_data_dir: bool = True) -> AsyncIterator[Storage]:
    """The process's storage, open for as long as the block runs sessions. SQLite: the data dir's exclusive
    owner lock is held meanwhile (runtime/ownership.py: DataDirInUseError when another process holds it).
    `own_data_dir=False`: only to read a finished session's report (`show`), beside a live owner."""
    if settings.database_url:
        require_postgres_extra()
        from research_tool.runtime.postgres.storage import open_postgres_storage

        async with open_postgres_storage(settings.database_url, pool_size=settings.database_pool_size) as pg:
            yield Storage(
                store=pg.store,
                events=pg.events,
                content=pg.content,
                checkpointer=pg.checkpointer,
                memory=MemoryStore(pg.memory),
                users=pg.users,
                pool=pg.pool,
            )
        return
    owner = await DataDirOwner.acquire(settings.data_dir) if own_data_dir else DataDirOwner(None)
    try:
        conn = await open_database(settings.db_path("sessions.db"))
        try:
            content = await ContentStore.open(settings.db_path("content.db"))
            try:
                async with open_checkpointer(settings.db_path("checkpoints.db")) as checkpointer:
                    yield Storage(
                        store=SessionStore(conn),
                        events=EventLog(conn),
                        content=content,
                        checkpointer=checkpointer,
                        memory=MemoryStore.from_settings(settings),
                        users=UserStore(conn),
                        conn=conn,
                    )
            finally:
                await content.aclose()
        finally:
            await conn.close()
    finally:
        owner.release()


@asynccontextmanager
async def open_memory(settings: Settings) -> AsyncIterator[MemoryStore]:
    """The provider memory alone (`providers --domain`)."""
    if settings.database_url:
        require_postgres_extra()
        from research_tool.runtime.postgres.storage import open_postgres_storage

        async with open_postgres_storage(settings.database_url, pool_size=2) as pg:
            yield MemoryStore(pg.memory)
        return
    yield MemoryStore.from_settings(settings)


@asynccontextmanager
async def open_users(settings: Settings) -> AsyncIterator[UserStoreProtocol]:
    """The users and the audit log alone (`research-tool users`, `audit`): no owner lock, beside a live server."""
    if settings.database_url:
        require_postgres_extra()
        from research_tool.runtime.postgres.storage import open_postgres_storage

        async with open_postgres_storage(settings.database_url, pool_size=2) as pg:
            yield pg.users
        return
    conn = await open_database(settings.db_path("sessions.db"))
    try:
        yield UserStore(conn)
    finally:
        await conn.close()
