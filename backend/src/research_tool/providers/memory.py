"""Cross-session memory: what each provider returned, what got cited, what failed, per domain (SQLite here,
Postgres through runtime/postgres/memory.py).

The plan node ranks providers with `rank_providers` (the seed's anti-pattern #5: ignoring source
quality); `research-tool providers --domain X` shows the same ranking via `provider_stats`.

Score (0..1, higher is better) = 0.6 * reliability + 0.4 * citation yield, where
- reliability = (calls + 1) / (calls + failures + 2)   (Laplace prior: 0.5 with no history),
- citation yield = r / (r + d), r = (citations + 1) / (results + 2) for the provider and d the same
  ratio over all providers of the domain (0.5 when the provider is as useful as the average).
A provider with no history scores 0.5 (neutral: new providers still get tried); a reliable one whose
results get cited ranks above it, a failing one below it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import aiosqlite
from pydantic import BaseModel, ConfigDict

from research_tool.core.settings import Settings
from research_tool.models.entities import AccessFailure, utc_now_iso

NEUTRAL_SCORE = 0.5
BUSY_TIMEOUT_MS = 5000
RELIABILITY_WEIGHT = 0.6
CITATION_WEIGHT = 0.4

_SCHEMA = """
CREATE TABLE IF NOT EXISTS provider_stats (
    domain TEXT NOT NULL,
    provider TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    results INTEGER NOT NULL DEFAULT 0,
    citations INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (domain, provider)
);
CREATE TABLE IF NOT EXISTS access_failures (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    domain TEXT NOT NULL,
    provider TEXT NOT NULL,
    url TEXT,
    query TEXT,
    error_type TEXT NOT NULL,
    message TEXT NOT NULL,
    iteration INTEGER NOT NULL DEFAULT 0,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS access_failures_provider ON access_failures (provider, id);
"""


class ProviderStats(BaseModel):
    model_config = ConfigDict(extra="forbid")

    domain: str
    provider: str
    calls: int = 0
    results: int = 0
    citations: int = 0
    failures: int = 0
    score: float = NEUTRAL_SCORE


def _ratio(citations: int, results: int) -> float:
    return (citations + 1) / (results + 2)


def _score(stats: ProviderStats | None, domain_ratio: float) -> float:
    if stats is None:
        return NEUTRAL_SCORE
    reliability = (stats.calls + 1) / (stats.calls + stats.failures + 2)
    ratio = _ratio(stats.citations, stats.results)
    citation_yield = ratio / (ratio + domain_ratio)
    return round(RELIABILITY_WEIGHT * reliability + CITATION_WEIGHT * citation_yield, 6)


# One stats row as storage returns it: (provider, calls, results, citations, failures).
StatsRow = tuple[str, int, int, int, int]
# The columns both storages read, in this order (`SELECT provider, calls, ...`).
STATS_COLUMNS = ("provider", "calls", "results", "citations", "failures")
FAILURE_COLUMNS = ("provider", "url", "query", "error_type", "message", "iteration", "at")


def stats_row(values: Sequence[Any]) -> StatsRow:
    """A stats row from the values of `STATS_COLUMNS`, in that order, as either database returns them."""
    provider, calls, results, citations, failures = values
    return (str(provider), int(calls), int(results), int(citations), int(failures))


def failure_from_row(values: Sequence[Any]) -> AccessFailure:
    """An access failure from the values of `FAILURE_COLUMNS`, in that order."""
    return AccessFailure.model_validate(dict(zip(FAILURE_COLUMNS, values, strict=True)))


def failure_values(domain: str, failure: AccessFailure) -> tuple[Any, ...]:
    """The values of an `access_failures` insert: (domain, *FAILURE_COLUMNS)."""
    return (domain, *(getattr(failure, column) for column in FAILURE_COLUMNS))


class MemoryStorage(Protocol):
    """Where the memory lives: SQLite here (`SqliteMemoryStorage`), Postgres in the runtime layer."""

    async def initialize(self) -> None: ...
    async def bump(
        self, domain: str, provider: str, *, calls: int, results: int, citations: int, failures: int
    ) -> None:
        """Add the counts to the (domain, provider) row, creating it at zero first."""
        ...

    async def add_failure(self, domain: str, failure: AccessFailure) -> None: ...
    async def stats_rows(self, domain: str) -> list[StatsRow]: ...
    async def failure_rows(self, limit: int, provider: str | None) -> list[AccessFailure]:
        """Most recent first."""
        ...


class SqliteMemoryStorage:
    """`memory.db`: one short connection per operation, so any task or process may use it.

    Writes take one path: one at a time in this process (`_writing`), each a single statement in autocommit
    mode, so SQLite's write lock is held only while that statement runs in the connection's thread. A write
    used to be an implicit transaction committed by a second call: between the two the lock stayed held until
    the event loop came back to it, and when the loop stalled, the other sessions' writes ran out of
    busy_timeout and failed their sessions ("database is locked", issue 22).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ready = False
        self._writing = asyncio.Lock()

    async def _write(self, sql: str, params: Sequence[Any]) -> None:
        await self.initialize()
        async with self._writing, aiosqlite.connect(self.path, isolation_level=None) as db:
            await db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            await db.execute(sql, params)

    async def initialize(self) -> None:
        if self._ready:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        async with aiosqlite.connect(self.path) as db:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.executescript(_SCHEMA)
            await db.commit()
        self._ready = True

    async def bump(
        self, domain: str, provider: str, *, calls: int, results: int, citations: int, failures: int
    ) -> None:
        await self._write(
            """
                INSERT INTO provider_stats (domain, provider, calls, results, citations, failures, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (domain, provider) DO UPDATE SET
                    calls = calls + excluded.calls,
                    results = results + excluded.results,
                    citations = citations + excluded.citations,
                    failures = failures + excluded.failures,
                    updated_at = excluded.updated_at
                """,
            (domain, provider, calls, results, citations, failures, utc_now_iso()),
        )

    async def add_failure(self, domain: str, failure: AccessFailure) -> None:
        await self._write(
            """
                INSERT INTO access_failures (domain, provider, url, query, error_type, message, iteration, at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            failure_values(domain, failure),
        )

    async def stats_rows(self, domain: str) -> list[StatsRow]:
        await self.initialize()
        async with aiosqlite.connect(self.path) as db:
            cursor = await db.execute(
                "SELECT provider, calls, results, citations, failures FROM provider_stats WHERE domain = ?",
                (domain,),
            )
            rows = await cursor.fetchall()
        return [stats_row(r) for r in rows]

    async def failure_rows(self, limit: int, provider: str | None) -> list[AccessFailure]:
        await self.initialize()
        query = "SELECT provider, url, query, error_type, message, iteration, at FROM access_failures"
        params: tuple[object, ...] = ()
        if provider:
            query += " WHERE provider = ?"
            params = (provider,)
        query += " ORDER BY id DESC LIMIT ?"
        async with aiosqlite.connect(self.path) as db:
            cursor = await db.execute(query, (*params, max(limit, 0)))
            rows = await cursor.fetchall()
        return [failure_from_row(r) for r in rows]


class MemoryStore:
    """The memory's scoring over a storage (SQLite `memory.db` unless given one)."""

    def __init__(self, target: Settings | Path | MemoryStorage) -> None:
        """`MemoryStore(settings)` uses `settings.db_path("memory.db")`; a Path names the file directly; any
        other MemoryStorage (Postgres) is used as it is."""
        if isinstance(target, Settings):
            target = target.db_path("memory.db")
        self.storage: MemoryStorage = SqliteMemoryStorage(target) if isinstance(target, Path) else target

    @property
    def path(self) -> Path | None:
        """The SQLite file, when the memory is in one."""
        return self.storage.path if isinstance(self.storage, SqliteMemoryStorage) else None

    @classmethod
    def from_settings(cls, settings: Settings) -> MemoryStore:
        return cls(settings.db_path("memory.db"))

    async def __aenter__(self) -> MemoryStore:
        await self.initialize()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def initialize(self) -> None:
        await self.storage.initialize()

    async def _bump(
        self, domain: str, provider: str, *, calls: int = 0, results: int = 0, citations: int = 0, failures: int = 0
    ) -> None:
        await self.storage.bump(domain, provider, calls=calls, results=results, citations=citations, failures=failures)

    async def record_results(self, domain: str, provider: str, count: int) -> None:
        """One successful call of `provider` that returned `count` results."""
        await self._bump(domain, provider, calls=1, results=max(count, 0))

    async def record_citations(self, domain: str, provider: str, count: int) -> None:
        """`count` of the provider's results were cited in a final report."""
        await self._bump(domain, provider, citations=max(count, 0))

    async def record_failure(self, domain: str, failure: AccessFailure) -> None:
        await self._bump(domain, failure.provider, failures=1)
        await self.storage.add_failure(domain, failure)

    async def provider_stats(self, domain: str) -> list[ProviderStats]:
        """Every provider with history in `domain`, best score first."""
        stats = [
            ProviderStats(domain=domain, provider=p, calls=c, results=r, citations=ci, failures=f)
            for p, c, r, ci, f in await self.storage.stats_rows(domain)
        ]
        domain_ratio = _ratio(sum(s.citations for s in stats), sum(s.results for s in stats))
        scored = [s.model_copy(update={"score": _score(s, domain_ratio)}) for s in stats]
        return sorted(scored, key=lambda s: s.score, reverse=True)

    async def rank_providers(self, domain: str, names: list[str]) -> list[tuple[str, float]]:
        """`names` with their scores, best first; unknown providers get the neutral 0.5; ties keep input order."""
        known = {s.provider: s for s in await self.provider_stats(domain)}
        all_stats = list(known.values())
        domain_ratio = _ratio(sum(s.citations for s in all_stats), sum(s.results for s in all_stats))
        scored = [(name, _score(known.get(name), domain_ratio)) for name in names]
        return sorted(scored, key=lambda pair: pair[1], reverse=True)

    async def failures(self, limit: int = 50, *, provider: str | None = None) -> list[AccessFailure]:
        """Most recent access failures first."""
        return await self.storage.failure_rows(limit, provider)
