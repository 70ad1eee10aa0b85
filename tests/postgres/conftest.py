"""Real Postgres for the storage tests: each test gets a schema of its own in the `test` database (through
`search_path` in the URL), dropped afterwards. Skips when the server or the `postgres` extra is missing.

RESEARCH_TEST_DATABASE_URL names another database to use (default: the local one of DESIGN and CI).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest

from research_tool.core.settings import Settings

BASE_URL = os.environ.get("RESEARCH_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")

psycopg = pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")


def schema_url(schema: str) -> str:
    separator = "&" if "?" in BASE_URL else "?"
    return f"{BASE_URL}{separator}options={quote(f'-csearch_path={schema}')}"


async def _admin() -> psycopg.AsyncConnection[tuple[object, ...]]:
    try:
        return await psycopg.AsyncConnection.connect(BASE_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"Postgres is not reachable at {BASE_URL.split('@')[-1]}: {str(exc).splitlines()[0]}")


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    """A URL whose connections see only a fresh, empty schema."""
    schema = f"rt_{uuid.uuid4().hex[:12]}"
    admin = await _admin()
    async with admin:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield schema_url(schema)
        finally:
            await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def pg_settings(pg_url: str, tmp_path: Path) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", llm="offline", database_url=pg_url)  # type: ignore[call-arg]
