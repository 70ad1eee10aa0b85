"""The burst every server benchmark starts with: N `POST /api/research/start` sent together, each timed."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from research_tool.bench.questions import QUESTIONS

START_TIMEOUT_S = 120.0


async def start_sessions(
    base_url: str,
    n: int,
    max_iterations: int,
    *,
    providers: tuple[str, ...] = ("wikipedia",),
    tier: str = "standard",
) -> tuple[list[str], list[float], list[str]]:
    """POST n starts together: (accepted session ids, latency of every answered POST, failures).

    Sent by an aiohttp session of its own, a connection per start as `n` separate clients would open: httpx's
    API over the same pool cost the client about 0.13 ms more per request, time a burst of 1,000 spent on the
    benchmark's side of the socket and counted in every start's latency."""
    latencies: list[float] = []
    failures: list[str] = []
    url = f"{base_url}/api/research/start"

    async def start(session: aiohttp.ClientSession, i: int) -> str | None:
        body = {
            "query": QUESTIONS[i % len(QUESTIONS)],
            "tier": tier,
            "providers": list(providers),
            "fetch": False,
            "clarify": False,
            "max_iterations": max_iterations,
            "formats": ["json"],
        }
        began = time.perf_counter()
        try:
            async with session.post(url, json=body) as response:
                payload = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
            return None
        latencies.append(time.perf_counter() - began)
        if response.status != 202:
            failures.append(f"HTTP {response.status} (Retry-After {response.headers.get('retry-after')})")
            return None
        return str(json.loads(payload)["session_id"])

    connector = aiohttp.TCPConnector(limit=n + 50)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=START_TIMEOUT_S)
    ) as session:
        ids = await asyncio.gather(*(start(session, i) for i in range(n)))
    return [sid for sid in ids if sid], latencies, failures
