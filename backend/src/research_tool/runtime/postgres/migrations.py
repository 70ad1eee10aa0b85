"""Versioned schema migrations: `migrations/NNNN_name.sql`, applied in file-name order, each once.

Applied versions are recorded in `schema_migrations(version, name, applied_at)`. The whole run holds a
transaction-level advisory lock, so processes that start at once migrate one after the other: the first
applies what is missing, the others find it recorded and apply nothing. Each file runs in the same
transaction as its record, so a failed file leaves no trace and is retried at the next start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from research_tool.core.logging import get_logger

log = get_logger(__name__)

# Any fixed 64-bit number: the key of the advisory lock every migrating process takes.
MIGRATION_LOCK_KEY = 7_271_346_013_113
_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """Every migration file shipped with the package, in version order."""
    folder = resources.files("research_tool.runtime.postgres") / "migrations"
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is not None:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two migration files share a version: {versions}")
    return found


async def migrate(conn: AsyncConnection[DictRow]) -> list[int]:
    """Apply the migrations the database has not had yet, in one transaction on `conn` (autocommit, dict rows);
    returns the versions applied now."""
    migrations = available_migrations()
    applied_now: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT version FROM schema_migrations")
        done = {int(row["version"]) for row in await cur.fetchall()}
        for migration in migrations:
            if migration.version in done:
                continue
            await conn.execute(migration.sql.encode("utf-8"))
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (migration.version, migration.name)
            )
            applied_now.append(migration.version)
    if applied_now:
        log.info("postgres_migrated", versions=applied_now)
    return applied_now
