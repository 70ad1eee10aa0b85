"""Redis for the tests of the cluster-wide limits: the machine's Redis (RESEARCH_TEST_REDIS_URL, default
127.0.0.1:6379) with a key prefix of its own per test, or a private redis-server a test may kill.

Tests that need Redis skip with the reason when it is unreachable (or when redis-py or redis-server is missing).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import pytest

DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/0"


def redis_url_for_tests() -> str:
    return os.environ.get("RESEARCH_TEST_REDIS_URL", DEFAULT_TEST_REDIS_URL)


def unique_prefix() -> str:
    """A key prefix no other test (or run) uses."""
    return f"rt-test-{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def reachable_redis(url: str) -> AsyncIterator[None]:
    """Skip the test unless redis-py is installed and `url` answers PING."""
    redis_asyncio = pytest.importorskip("redis.asyncio", reason="the 'redis' extra is not installed")
    client = redis_asyncio.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        await client.ping()
    except Exception as exc:
        pytest.skip(f"Redis not reachable at {url}: {type(exc).__name__}: {exc}")
    finally:
        await client.aclose()
    yield


async def delete_prefix(url: str, prefix: str) -> None:
    """Drop every key a test wrote under `prefix`."""
    from redis.asyncio import Redis

    client = Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def private_redis_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server of the test's own on a free loopback port (the test may kill it); skip if not installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, "redis-server exited at start"
                assert time.monotonic() < deadline, "redis-server did not listen within 10 s"
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0", process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
