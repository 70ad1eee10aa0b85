"""Reading sessions and their events without the research machinery (`research-tool sessions`, `show`): no
owner lock, no checkpointer, no graph; only what start-up of those light commands can afford to import."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from research_tool.core.extras import require_postgres_extra
from research_tool.core.settings import Settings
from research_tool.runtime.event_log import EventLog
from research_tool.runtime.session_store import SessionStore
from research_tool.runtime.storage import open_database
from research_tool.runtime.stores import EventLogProtocol, SessionStoreProtocol


@dataclass
class SessionRecords:
    store: SessionStoreProtocol
    events: EventLogProtocol


@asynccontextmanager
async def open_session_records(settings: Settings) -> AsyncIterator[SessionRecords]:
    if settings.database_url:
        require_postgres_extra()
        from research_tool.runtime.postgres.storage import open_postgres_storage

        async with open_postgres_storage(settings.database_url, pool_size=2) as pg:
            yield SessionRecords(store=pg.store, events=pg.events)
        return
    conn = await open_database(settings.db_path("sessions.db"))
    try:
        yield SessionRecords(store=SessionStore(conn), events=EventLog(conn))
    finally:
        await conn.close()
