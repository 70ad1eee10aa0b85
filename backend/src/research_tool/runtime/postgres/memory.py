"""Provider memory in Postgres (`provider_stats`, `access_failures`): the storage behind providers.memory.MemoryStore
when RESEARCH_DATABASE_URL is set, shared by every worker."""

from __future__ import annotations

from research_tool.models.entities import AccessFailure, utc_now_iso
from research_tool.providers.memory import (
    FAILURE_COLUMNS,
    STATS_COLUMNS,
    StatsRow,
    failure_from_row,
    failure_values,
    stats_row,
)
from research_tool.runtime.postgres.pool import Pool


class PostgresMemoryStorage:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def initialize(self) -> None:
        """The tables come with the migrations."""

    async def bump(
        self, domain: str, provider: str, *, calls: int, results: int, citations: int, failures: int
    ) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                """
                INSERT INTO provider_stats AS s (domain, provider, calls, results, citations, failures, updated_at)
                VALUES (%s, %s, %s, %s, %s, %s, %s)
                ON CONFLICT (domain, provider) DO UPDATE SET
                    calls = s.calls + excluded.calls,
                    results = s.results + excluded.results,
                    citations = s.citations + excluded.citations,
                    failures = s.failures + excluded.failures,
                    updated_at = excluded.updated_at
                """,
                (domain, provider, calls, results, citations, failures, utc_now_iso()),
            )

    async def add_failure(self, domain: str, failure: AccessFailure) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                "INSERT INTO access_failures (domain, provider, url, query, error_type, message, iteration, at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                failure_values(domain, failure),
            )

    async def stats_rows(self, domain: str) -> list[StatsRow]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT provider, calls, results, citations, failures FROM provider_stats WHERE domain = %s", (domain,)
            )
            rows = await cur.fetchall()
        return [stats_row([r[column] for column in STATS_COLUMNS]) for r in rows]

    async def failure_rows(self, limit: int, provider: str | None) -> list[AccessFailure]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT provider, url, query, error_type, message, iteration, at FROM access_failures"
                " WHERE %(provider)s::text IS NULL OR provider = %(provider)s ORDER BY id DESC LIMIT %(limit)s",
                {"provider": provider or None, "limit": max(limit, 0)},
            )
            rows = await cur.fetchall()
        return [failure_from_row([r[column] for column in FAILURE_COLUMNS]) for r in rows]
