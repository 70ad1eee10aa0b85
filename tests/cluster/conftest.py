"""Fixtures of the cluster tests: the replay corpus of the API tests, and a migrated fresh database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.api.conftest import wiki_pages  # noqa: F401 - the same replay corpus as the API tests
from tests.support.cluster import fresh_database


@pytest.fixture
def database_url() -> Iterator[str]:
    with fresh_database() as url:
        yield url


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Any]:
    """The process pool of the Postgres backend, on a database migrated to the latest version."""
    from research_tool.runtime.postgres.migrations import migrate
    from research_tool.runtime.postgres.pool import open_pool

    async with open_pool(database_url, size=4) as opened:
        async with opened.connection() as conn:
            await migrate(conn)
        yield opened
