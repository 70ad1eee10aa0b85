"""Benchmark 6, storage that stays small: what sessions leave on disk and in the server's memory, through a
real uvicorn server subprocess (one worker) on 127.0.0.1, the offline engine and the Wikipedia replay
provider (a process of its own, 10 ms per request).

1. Disk: a fresh data dir; N sessions (standard tier, 2 cycles, md + json exports; `sessions` of them,
   `concurrency` at a time through `POST /run`); then every one deleted with
   `DELETE /api/research/{id}`. Figures: checkpoint bytes per completed session (target <= 300 KB), page
   text stored, data dir size empty / after the sessions / after deleting them (target: back within 10% of
   empty).
2. Memory: another fresh server runs `rss_sessions` small sessions (simple tier, one cycle, json export,
   `concurrency` at a time) and its RSS is read from /proc after every `rss_step` finished sessions.
   Figure: RSS growth per finished session over the second half of the run (a least-squares slope; the
   first half lets SQLite's page caches and the allocator's arenas fill up), target <= 1 KB per session,
   i.e. flat: a server that has finished 1,000 sessions holds no more than one that has finished 500.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.replay_process import replay_process
from research_tool.bench.results import BenchResult
from research_tool.bench.server_process import ServerProcess, uvicorn_server
from research_tool.bench.session_storage import storage_per_session
from research_tool.runtime.janitor import data_dir_bytes

QUESTIONS = (
    "How do I run a subprocess with a timeout and capture its output?",
    "How do I read and write JSON files with the json module?",
    "How do I copy a directory tree and remove files with shutil?",
    "How do I parse command line arguments with argparse subcommands?",
    "How do I compress files into a zip archive with zipfile?",
    "How do I write rows to a CSV file and read them back?",
)
LATENCY_S = 0.01
WIKIPEDIA_RPS = 1000.0
CHECKPOINT_TARGET_BYTES = 300_000
EMPTY_RATIO_TARGET = 1.10
RSS_SLOPE_TARGET_KB = 1.0
SESSION_TIMEOUT_S = 120.0


def _body(i: int, *, tier: str, max_iterations: int, formats: list[str]) -> dict[str, Any]:
    return {
        "query": QUESTIONS[i % len(QUESTIONS)],
        "tier": tier,
        "providers": ["wikipedia"],
        "fetch": False,
        "clarify": False,
        "max_iterations": max_iterations,
        "formats": formats,
    }


async def _run_sessions(
    client: httpx.AsyncClient,
    server: ServerProcess,
    bodies: list[dict[str, Any]],
    concurrency: int,
    on_finished: Callable[[int], None] | None = None,
) -> list[str]:
    """Run every body through POST /run, `concurrency` at a time; the session ids, in order of finishing."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    ids: list[str] = []

    async def worker() -> None:
        while not queue.empty():
            body = queue.get_nowait()
            response = await client.post(f"{server.base_url}/run", json=body, timeout=SESSION_TIMEOUT_S)
            response.raise_for_status()
            ids.append(response.headers["X-Session-Id"])
            if on_finished is not None:
                on_finished(len(ids))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ids


def slope_kb_per_session(samples: list[tuple[int, int]]) -> float | None:
    """Least-squares slope of (finished sessions, RSS kB)."""
    if len(samples) < 2:
        return None
    n = len(samples)
    mean_x = sum(x for x, _ in samples) / n
    mean_y = sum(y for _, y in samples) / n
    var = sum((x - mean_x) ** 2 for x, _ in samples)
    if var == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in samples) / var


async def _disk(
    workdir: Path, wiki_url: str, client: httpx.AsyncClient, sessions: int, concurrency: int, max_iterations: int
) -> dict[str, Any]:
    env = BenchEnvironment(
        data_dir=workdir / "disk" / "data",
        providers=(ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
        max_concurrent_sessions=concurrency,
    )
    async with uvicorn_server(env.process_env(), workdir / "disk", client) as server:
        empty = data_dir_bytes(env.data_dir)
        bodies = [
            _body(i, tier="standard", max_iterations=max_iterations, formats=["md", "json"]) for i in range(sessions)
        ]
        started = time.perf_counter()
        ids = await _run_sessions(client, server, bodies, concurrency)
        span = time.perf_counter() - started
        full = data_dir_bytes(env.data_dir)
        storage = storage_per_session(env.data_dir, ids)
        content = sum(p.stat().st_size for p in env.data_dir.glob("content.db*"))
        for sid in ids:
            (await client.delete(f"{server.base_url}/api/research/{sid}")).raise_for_status()
        deleted = data_dir_bytes(env.data_dir)
    return {
        "sessions": len(ids),
        "span_s": round(span, 1),
        "empty_bytes": empty,
        "full_bytes": full,
        "deleted_bytes": deleted,
        "content_db_bytes": content,
        "after_delete_ratio": round(deleted / empty, 3) if empty else None,
        **storage,
    }


async def _memory(
    workdir: Path, wiki_url: str, client: httpx.AsyncClient, sessions: int, concurrency: int, step: int
) -> dict[str, Any]:
    env = BenchEnvironment(
        data_dir=workdir / "memory" / "data",
        providers=(ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
        max_concurrent_sessions=concurrency,
    )
    async with uvicorn_server(env.process_env(), workdir / "memory", client) as server:
        idle = server.rss_kb() or 0
        samples: list[tuple[int, int]] = []

        def sample(finished: int) -> None:
            if finished % step == 0:
                samples.append((finished, server.rss_kb() or 0))

        bodies = [_body(i, tier="simple", max_iterations=1, formats=["json"]) for i in range(sessions)]
        started = time.perf_counter()
        await _run_sessions(client, server, bodies, concurrency, on_finished=sample)
        span = time.perf_counter() - started
        final = server.rss_kb() or 0
    second_half = [(x, y) for x, y in samples if x >= sessions // 2]
    slope = slope_kb_per_session(second_half)
    last_quarter = slope_kb_per_session([(x, y) for x, y in samples if x >= sessions * 3 // 4])
    return {
        "sessions": sessions,
        "span_s": round(span, 1),
        "idle_rss_kb": idle,
        "final_rss_kb": final,
        "samples": samples,
        "slope_second_half_kb_per_session": round(slope, 3) if slope is not None else None,
        "slope_last_quarter_kb_per_session": round(last_quarter, 3) if last_quarter is not None else None,
        "slope_all_kb_per_session": round(slope_kb_per_session(samples) or 0.0, 3),
    }


async def run_storage(
    workdir: Path,
    *,
    sessions: int = 100,
    rss_sessions: int = 1000,
    rss_step: int = 50,
    concurrency: int = 8,
    max_iterations: int = 2,
) -> BenchResult:
    result = BenchResult(
        name="storage",
        title="Storage: disk per session, space given back, server memory over many sessions",
        parameters={
            "engine": "offline",
            "provider": f"wikipedia replay, {LATENCY_S * 1000:.0f} ms per request",
            "disk_sessions": f"{sessions} x standard tier, {max_iterations} cycles, md + json exports",
            "memory_sessions": f"{rss_sessions} x simple tier, 1 cycle, json export",
            "concurrency": concurrency,
            "server": "uvicorn subprocess, 1 worker, 127.0.0.1",
        },
    )
    started = time.perf_counter()
    limits = httpx.Limits(max_connections=concurrency + 10, max_keepalive_connections=concurrency + 10)
    async with (
        replay_process(LATENCY_S) as wiki_url,
        httpx.AsyncClient(timeout=60, limits=limits, trust_env=False) as client,
    ):
        disk = await _disk(workdir, wiki_url, client, sessions, concurrency, max_iterations)
        memory = await _memory(workdir, wiki_url, client, rss_sessions, concurrency, rss_step)
    n = disk["sessions"]
    result.add(
        "checkpoint bytes per completed session",
        disk["checkpoint_bytes_per_session"],
        "B",
        target=CHECKPOINT_TARGET_BYTES,
        comparison="<=",
    )
    result.add("page text stored (content.db)", round(disk["content_db_bytes"] / 1e6, 2), "MB", note=f"{n} sessions")
    result.add("data dir: empty", round(disk["empty_bytes"] / 1e6, 3), "MB")
    result.add(f"data dir: after {n} sessions", round(disk["full_bytes"] / 1e6, 3), "MB")
    result.add(f"data dir: after deleting the {n}", round(disk["deleted_bytes"] / 1e6, 3), "MB")
    result.add(
        "data dir after deleting / empty",
        disk["after_delete_ratio"],
        "x",
        target=EMPTY_RATIO_TARGET,
        comparison="<=",
    )
    result.add(f"RSS after {memory['sessions']} sessions", round(memory["final_rss_kb"] / 1024, 1), "MB")
    result.add(
        "RSS growth per finished session (second half)",
        memory["slope_second_half_kb_per_session"],
        "KB",
        target=RSS_SLOPE_TARGET_KB,
        comparison="<=",
        note=f"{memory['sessions']} sessions in {memory['span_s']:.0f} s",
    )
    result.add("RSS growth per finished session (last quarter)", memory["slope_last_quarter_kb_per_session"], "KB")
    result.details = {"disk": disk, "memory": memory}
    result.seconds = round(time.perf_counter() - started, 2)
    return result
