"""A cluster on this machine for tests: a fresh Postgres database, API nodes (`research-tool serve --no-worker`)
and workers (`research-tool worker`) as real subprocesses on free loopback ports.

Reusable beyond the cluster test: `ClusterHarness(env=...)` takes extra environment variables (a Redis URL,
a provider's rate, ...) for every process it starts, `start_api()` / `start_worker()` add processes at any
time, and `kill(process)` sends SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from research_tool.core.settings import PROVIDER_NAMES
from tests.conftest import FOREIGN_ENV

POSTGRES_ADMIN_URL = os.environ.get("RESEARCH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
CLOSED_PORT_URL = "http://127.0.0.1:9"
START_TIMEOUT_S = 120.0  # five processes importing the stack at once on a busy 2-core machine


def _admin_connect() -> Any:
    psycopg = pytest.importorskip("psycopg", reason="the cluster tests need the 'postgres' extra (psycopg)")
    try:
        return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"Postgres is unreachable at {POSTGRES_ADMIN_URL}: {str(exc).strip()[:200]}")


def _with_database(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


@contextmanager
def fresh_database(prefix: str = "rt_cluster") -> Iterator[str]:
    """A new, empty database for one test (dropped afterwards, connections and all); skips the test when
    Postgres cannot be reached."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with _admin_connect() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(POSTGRES_ADMIN_URL, name)
    finally:
        with _admin_connect() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cluster_env(database_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a cluster process: nothing of the developer's, every provider but the ones the test
    names at a closed port, offline engine, short leases."""
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV and not k.startswith("RESEARCH_")}
    env.update({f"RESEARCH_{n.upper()}_BASE_URL": CLOSED_PORT_URL for n in PROVIDER_NAMES if n != "local"})
    env.update(
        RESEARCH_DATABASE_URL=database_url,
        RESEARCH_DATA_DIR=str(data_dir),
        RESEARCH_LLM="offline",
        RESEARCH_LOG_LEVEL="WARNING",
        RESEARCH_CPU_WORKERS="0",
        RESEARCH_DATABASE_POOL_SIZE="6",
        RESEARCH_LEASE_TTL_S="3",
        RESEARCH_WORKER_POLL_S="0.5",
    )
    env.update(extra)
    return env


@dataclass
class Node:
    role: str  # "api" or "worker"
    process: subprocess.Popen[bytes]
    port: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr_tail(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read().decode(errors="replace")[-3000:]


@dataclass
class ClusterHarness:
    database_url: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        stderr_log = open(self.workdir / f"{log_name}.log", "wb")  # noqa: SIM115 - the process owns it
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "research_tool", *args],
                env=cluster_env(self.database_url, self.workdir / "data", **self.env),
                cwd=self.workdir,
                stdout=subprocess.DEVNULL,
                stderr=stderr_log,
            )
        finally:
            stderr_log.close()

    def start_api(self) -> Node:
        port = free_port()
        process = self._spawn(["serve", "--no-worker", "--host", "127.0.0.1", "--port", str(port)], f"api-{port}")
        node = Node("api", process, port)
        self.nodes.append(node)
        return node

    def start_worker(self) -> Node:
        index = sum(1 for n in self.nodes if n.role == "worker")
        node = Node("worker", self._spawn(["worker"], f"worker-{index}"))
        self.nodes.append(node)
        return node

    def log_of(self, node: Node) -> str:
        name = f"api-{node.port}" if node.role == "api" else f"worker-{self.nodes.index(node)}"
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    @staticmethod
    def kill(node: Node) -> None:
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(timeout=10)

    @staticmethod
    def stop(node: Node) -> None:
        """A graceful stop (SIGTERM): a worker hands its sessions back, an API node closes its streams."""
        if node.process.poll() is None:
            node.process.terminate()
            try:
                node.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(timeout=10)

    def close(self) -> None:
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.kill()
            with suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout=10)


@contextmanager
def running_cluster(workdir: Path, **env: str) -> Iterator[ClusterHarness]:
    """A fresh database and a harness whose processes are all killed on exit."""
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    with fresh_database() as url:
        harness = ClusterHarness(url, workdir, dict(env))
        try:
            yield harness
        finally:
            harness.close()


@asynccontextmanager
async def api_client(harness: ClusterHarness, node: Node) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of an API node, once its /healthz answers."""
    async with httpx.AsyncClient(base_url=node.base_url, timeout=30, trust_env=False) as client:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert node.process.poll() is None, f"the API node died: {harness.log_of(node)}"
            try:
                if (await client.get("/healthz")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the API node did not come up: {harness.log_of(node)}"
            await asyncio.sleep(0.05)
        yield client
