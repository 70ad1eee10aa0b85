"""One psycopg async connection pool per process, shared by every store and the checkpointer.

Connections are in autocommit (a statement is its own transaction; multi-statement units open
`conn.transaction()`) and return rows as dicts (what AsyncPostgresSaver expects of a pool it is given).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from research_tool.core.errors import StorageUnavailableError
from research_tool.core.logging import get_logger

log = get_logger(__name__)

Pool = AsyncConnectionPool[AsyncConnection[DictRow]]

OPEN_TIMEOUT_S = 10.0


def connection_kwargs() -> dict[str, Any]:
    return {"autocommit": True, "row_factory": dict_row}


@asynccontextmanager
async def open_pool(url: str, *, size: int = 10) -> AsyncIterator[Pool]:
    """An open pool of up to `size` connections to `url`; it waits for a first connection (so a wrong URL fails
    here, in OPEN_TIMEOUT_S) and is closed when the block ends."""
    pool: Pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=size,
        kwargs=connection_kwargs(),
        connection_class=AsyncConnection[DictRow],
        open=False,
        name="research-tool",
    )
    try:
        await pool.open(wait=True, timeout=OPEN_TIMEOUT_S)
    except PoolTimeout:
        await pool.close()
        # Not the URL itself: it may carry a password.
        raise StorageUnavailableError(
            f"cannot connect to the Postgres database of RESEARCH_DATABASE_URL within {OPEN_TIMEOUT_S:g} s"
        ) from None
    log.debug("postgres_pool_opened", size=size)
    try:
        yield pool
    finally:
        await pool.close()
