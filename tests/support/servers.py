"""`research-tool serve` as a real subprocess on 127.0.0.1, for tests that need a whole server process."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx

START_TIMEOUT_S = 30.0


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "research_tool", *args]


@contextmanager
def serve(env: dict[str, str], cwd: Path, port: int, *, log: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """The server, killed on the way out; its stderr is a pipe, or the file `log` (a server that logs much
    would block on a pipe nobody reads)."""
    log_file = open(log, "wb") if log else None  # noqa: SIM115 - the child keeps its own copy of the descriptor
    try:
        process = subprocess.Popen(
            cli("serve", "--host", "127.0.0.1", "--port", str(port)),
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=log_file or subprocess.PIPE,
        )
    finally:
        if log_file:
            log_file.close()
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()


async def healthy(port: int) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2, trust_env=False) as client:
            return (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
    except httpx.TransportError:
        return False


async def first_healthy(servers: dict[int, subprocess.Popen[bytes]]) -> int:
    """The port of the first server to answer /healthz (the others may still be starting or exiting)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for port in servers:
            if await healthy(port):
                return port
        await asyncio.sleep(0.1)
    raise AssertionError("no server came up")


async def until_healthy(
    client: httpx.AsyncClient, url: str, exited: Callable[[], str | None], timeout_s: float = START_TIMEOUT_S
) -> None:
    """Poll `url`/healthz until it answers 200. Fails with what `exited()` says once the server has gone (None
    while it runs), or when `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        gone = exited()
        assert gone is None, gone
        try:
            if (await client.get(f"{url}/healthz", timeout=2)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not come up"
        await asyncio.sleep(0.05)


@asynccontextmanager
async def serving_until_sigterm(env: dict[str, str], cwd: Path, port: int) -> AsyncIterator[str]:
    """`serve` started with asyncio, its URL once /healthz answers 200 (60 s at most), then SIGTERM (and a kill
    if it has not exited within 15 s) on the way out."""
    command = cli("serve", "--host", "127.0.0.1", "--port", str(port))
    process = await asyncio.create_subprocess_exec(
        *command, env=env, cwd=cwd, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            await until_healthy(client, url, lambda: None if process.returncode is None else "the server exited", 60)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 15)
        except TimeoutError:
            process.kill()
            await process.wait()
