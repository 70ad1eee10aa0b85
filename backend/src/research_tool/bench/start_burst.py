"""The burst every server benchmark starts with: N `POST /api/research/start` sent together, each timed."""

from __future__ import annotations

import asyncio
import time

import httpx

from research_tool.bench.questions import QUESTIONS


async def start_sessions(
    client: httpx.AsyncClient,
    base_url: str,
    n: int,
    max_iterations: int,
    *,
    providers: tuple[str, ...] = ("wikipedia",),
    tier: str = "standard",
) -> tuple[list[str], list[float], list[str]]:
    """POST n starts together: (accepted session ids, latency of every answered POST, failures)."""
    latencies: list[float] = []
    failures: list[str] = []

    async def start(i: int) -> str | None:
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
            response = await client.post(f"{base_url}/api/research/start", json=body)
        except httpx.HTTPError as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
            return None
        latencies.append(time.perf_counter() - began)
        if response.status_code != 202:
            failures.append(f"HTTP {response.status_code} (Retry-After {response.headers.get('retry-after')})")
            return None
        return str(response.json()["session_id"])

    ids = await asyncio.gather(*(start(i) for i in range(n)))
    return [sid for sid in ids if sid], latencies, failures
