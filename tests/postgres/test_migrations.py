"""Versioned migrations: each file applied once, however often and however many processes at once migrate."""

from __future__ import annotations

import asyncio

from research_tool.runtime.postgres.migrations import available_migrations
from research_tool.runtime.postgres.pool import open_pool
from research_tool.runtime.postgres.storage import PrunablePostgresSaver, prepare_schema


async def _recorded(url: str) -> list[int]:
    async with open_pool(url, size=1) as pool, pool.connection() as conn:
        cur = await conn.execute("SELECT version FROM schema_migrations ORDER BY version")
        return [int(r["version"]) for r in await cur.fetchall()]


async def test_migrations_apply_once_and_again_apply_nothing(pg_url: str) -> None:
    versions = [m.version for m in available_migrations()]
    assert versions[0] == 1 and versions == sorted(set(versions))
    async with open_pool(pg_url, size=2) as pool:
        assert await prepare_schema(pg_url, pool, PrunablePostgresSaver(pool)) == versions
        assert await prepare_schema(pg_url, pool, PrunablePostgresSaver(pool)) == []
    assert await _recorded(pg_url) == versions


async def test_processes_migrating_at_once_apply_each_file_once(pg_url: str) -> None:
    """Four "processes" (pools of their own) start on an empty database together."""

    async def start() -> list[int]:
        async with open_pool(pg_url, size=2) as pool:
            return await prepare_schema(pg_url, pool, PrunablePostgresSaver(pool))

    applied = await asyncio.gather(*(start() for _ in range(4)))
    versions = [m.version for m in available_migrations()]
    assert sorted(v for one in applied for v in one) == versions
    assert await _recorded(pg_url) == versions
    async with open_pool(pg_url, size=1) as pool, pool.connection() as conn:
        cur = await conn.execute("SELECT v, COUNT(*) AS n FROM checkpoint_migrations GROUP BY v HAVING COUNT(*) > 1")
        assert await cur.fetchall() == []
