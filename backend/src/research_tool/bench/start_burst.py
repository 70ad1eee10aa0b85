"""The burst every server benchmark starts with: N `POST /api/research/start` sent together, each timed."""

from __future__ import annotations

import asyncio
import time

import httpx

QUESTIONS = (
    "How do I run a subprocess with a timeout and capture its output?",
    "How do I read and write JSON files with the json module?",
    "How do I copy a directory tree and remove files with shutil?",
    "How do I parse command line arguments with argparse subcommands?",
    "How do I compress files into a zip archive with zipfile?",
    "How do I sort and merge lists with heapq and bisect?",
    "How do I write rows to a CSV file and read them back?",
    "How do I store records in an sqlite3 database and query them?",
)


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
