"""A Postgres database of the benchmark's own (created empty, dropped with its connections afterwards), and the
check that tells `make bench` whether Postgres is there at all. psycopg comes with the `postgres` extra; without
it, or without a reachable server, the cluster benchmark is skipped with the reason."""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

# The maintenance database of the server the benchmark may create databases on.
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECT_TIMEOUT_S = 3


def admin_url() -> str:
    return os.environ.get("RESEARCH_BENCH_POSTGRES_URL", DEFAULT_ADMIN_URL)


def _psycopg() -> Any:
    """psycopg, imported by name: it is an optional dependency (the `postgres` extra)."""
    return importlib.import_module("psycopg")


async def postgres_unavailable(url: str) -> str | None:
    """None when `url` accepts a connection; else why not (one line)."""
    try:
        psycopg = _psycopg()
    except ImportError:
        return "psycopg is not installed (the 'postgres' extra)"
    try:
        connection = await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        return f"Postgres not reachable at {url}: {str(exc).strip().splitlines()[0][:200]}"
    await connection.close()
    return None


def database_url(url: str, name: str) -> str:
    """`url` (a maintenance database's) pointing at database `name` instead."""
    base, _, _ = url.partition("?")[0].rpartition("/")
    return f"{base}/{name}"


@asynccontextmanager
async def fresh_database(url: str, prefix: str = "rt_bench") -> AsyncIterator[str]:
    """Create an empty database next to `url`'s, yield its URL, drop it (and its connections) on exit."""
    psycopg = _psycopg()
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as admin:
        await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(url, name)
    finally:
        async with await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
        ) as admin:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
