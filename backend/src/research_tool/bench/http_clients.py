"""Micro-benchmark: what the HTTP client costs the event loop when many callers want one endpoint at once.

Every configuration sends the same requests (`requests` in all, `callers` at once, like that many sessions
each wanting a provider) to one keep-alive HTTP/1.1 server in a process of its own that answers a 4 KB JSON
body after `delay_s`. Measured in the calling process: wall time, CPU seconds per request (all of it on the
one event loop), and the loop's delay (a 10 ms ticker's lateness, p95): the figure that becomes /status and
/healthz latency in the server.

- httpx, ungated: every caller goes straight to the client (pool of 100, 20 kept alive): the old way.
- httpx, gated: callers wait on the endpoint gate (a semaphore of `gate`) before the client; the pool holds
  what passes and keeps it alive (`http_client.pool_limits`): the way provider_http.send works now.
- aiohttp, gated: the same gate in front of aiohttp's connector (limit = `gate`).

    python -m research_tool.bench.http_clients --requests 3000 --callers 1000 --delay 0.1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from research_tool.bench.stats import ms, percentile
from research_tool.providers.http_client import pool_limits

BODY = json.dumps({"query": {"search": [{"pageid": i, "title": f"Page {i}", "snippet": "x" * 80} for i in range(32)]}})
TICK_S = 0.010
OLD_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)

Send = Callable[[str], Awaitable[int]]


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI: answer every GET after the delay in the query string (`?delay=0.1`)."""
    if scope["type"] != "http":
        return
    delay = float(scope["query_string"].decode().partition("delay=")[2] or 0)
    await asyncio.sleep(delay)
    body = BODY.encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve(port: int) -> None:
    import uvicorn

    uvicorn.run(_app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


@asynccontextmanager
async def server_process() -> AsyncIterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "research_tool.bench.http_clients",
        "--serve",
        str(port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(trust_env=False) as probe:
            for _ in range(500):
                try:
                    await probe.get(f"{url}/?delay=0")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.02)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 10)


async def _loop_delays(stop: asyncio.Event, delays: list[float]) -> None:
    while not stop.is_set():
        began = time.perf_counter()
        await asyncio.sleep(TICK_S)
        delays.append(max(0.0, time.perf_counter() - began - TICK_S))


async def _drive(send: Send, url: str, requests: int, callers: int) -> dict[str, Any]:
    queue = list(range(requests))
    failures = 0

    async def caller() -> None:
        nonlocal failures
        while queue:
            queue.pop()
            try:
                if await send(url) != 200:
                    failures += 1
            except Exception:
                failures += 1

    stop, delays = asyncio.Event(), []  # type: ignore[var-annotated]
    ticker = asyncio.create_task(_loop_delays(stop, delays))
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    stop.set()
    await ticker
    return {
        "wall_s": round(wall, 2),
        "cpu_ms_per_request": round(1000 * cpu / requests, 3),
        "loop_delay_p95_ms": ms(percentile(delays, 0.95)),
        "failures": failures,
    }


def _gated(gate: int, send: Send) -> Send:
    semaphore = asyncio.Semaphore(gate)

    async def gated(url: str) -> int:
        async with semaphore:
            return await send(url)

    return gated


async def run_httpx(url: str, requests: int, callers: int, *, gate: int | None) -> dict[str, Any]:
    limits = OLD_LIMITS if gate is None else pool_limits(gate)
    async with httpx.AsyncClient(limits=limits, timeout=120, trust_env=False) as client:

        async def send(target: str) -> int:
            return (await client.get(target)).status_code

        return await _drive(send if gate is None else _gated(gate, send), url, requests, callers)


async def run_aiohttp(url: str, requests: int, callers: int, *, gate: int) -> dict[str, Any] | None:
    try:
        import aiohttp
    except ImportError:
        return None
    connector = aiohttp.TCPConnector(limit=gate, limit_per_host=gate)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:

        async def send(target: str) -> int:
            async with session.get(target) as response:
                await response.read()
                return response.status

        return await _drive(_gated(gate, send), url, requests, callers)


async def run_httpx_aiohttp(url: str, requests: int, callers: int, *, gate: int) -> dict[str, Any] | None:
    try:
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        return None
    transport = AiohttpTransport(limits=pool_limits(gate))
    async with httpx.AsyncClient(transport=transport, timeout=120, trust_env=False) as client:

        async def send(target: str) -> int:
            return (await client.get(target)).status_code

        return await _drive(_gated(gate, send), url, requests, callers)


async def compare(*, requests: int, callers: int, delay_s: float, gate: int) -> dict[str, dict[str, Any] | None]:
    async with server_process() as base:
        url = f"{base}/?delay={delay_s}"
        rows: dict[str, dict[str, Any] | None] = {}
        rows["httpx, ungated (pool 100, 20 kept alive)"] = await run_httpx(url, requests, callers, gate=None)
        rows[f"httpx, gated ({gate} in flight, pool sized to it)"] = await run_httpx(url, requests, callers, gate=gate)
        rows[f"aiohttp, gated ({gate} in flight)"] = await run_aiohttp(url, requests, callers, gate=gate)
        rows[f"httpx on aiohttp's transport, gated ({gate})"] = await run_httpx_aiohttp(
            url, requests, callers, gate=gate
        )
        return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--callers", type=int, default=1000)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--gate", type=int, default=64)
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    rows = asyncio.run(compare(requests=args.requests, callers=args.callers, delay_s=args.delay, gate=args.gate))
    sys.stdout.write(
        f"{args.requests} requests, {args.callers} callers at once, server delay {args.delay} s, gate {args.gate}\n"
    )
    for name, row in rows.items():
        sys.stdout.write(f"{name:48s} {row if row is not None else 'not installed'}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
