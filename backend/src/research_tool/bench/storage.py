"""Benchmark 6, storage that stays small: what sessions leave on disk and in the server's memory, through a
real uvicorn server subprocess (one worker) on 127.0.0.1, the offline engine and the Wikipedia replay
provider (a process of its own, 10 ms per request).

1. Disk: a fresh data dir; N sessions (standard tier, 2 cycles, md + json exports; `sessions` of them,
   `concurrency` at a time through `POST /run`); then every one deleted with
   `DELETE /api/research/{id}`. Figures: checkpoint bytes per completed session (target <= 300 KB), page
   text stored, data dir size empty / after the sessions / after deleting them (target: back within 10% of
   empty).
   Then the demo corpus (issue 24): `demo_sessions` standard sessions over the `local` provider and the demo corpus
   (built in the work dir), one per how-to question, as `make run` runs them; figure: checkpoints + events + page
   text per session (target <= 300 KB; 492 KB when the issue was filed, 285 KB just before its storage change:
   233 KB checkpoints, 37 KB events, 15 KB page text).
2. Memory: another fresh server (storage_memory_server: the same app under uvicorn, plus a memory probe)
   runs `rss_sessions` small sessions (simple tier, one cycle, json export, `concurrency` at a time) in rounds
   of `rss_step`, against a replay of its own whose pages are cut to MEMORY_PAGE_CHARS (every per-session
   structure of the server is used as with whole pages, at a fraction of the engine's CPU); after each round,
   with no session in flight, the server runs a full garbage collection and reports its RSS and its Python
   heap (tracemalloc, counted from the first session).
   Figures: RSS and Python-heap growth per finished session over the second half of the run (least-squares
   slopes). The first half is the warm-up the slopes leave out: SQLite's page caches (512 KiB a connection),
   the allocator's arenas, the worker threads and the engine's bounded caches fill up in it. "Flat" is the
   steady state: targets <= 1 KB per session of RSS and <= 0.1 KB of Python heap, i.e. a server that has
   finished 1,000 sessions holds no more than one that has finished 500. For attributing growth,
   `snapshot_frames` > 0 makes the server dump a tracemalloc snapshot at every probe (see
   storage_memory_server).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import httpx

from research_tool.bench.questions import QUESTIONS as HOWTO_QUESTIONS
from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.replay_process import replay_process
from research_tool.bench.results import BenchResult
from research_tool.bench.server_process import (
    ServerProcess,
    ServerStartError,
    free_port,
    spawned_server,
    uvicorn_server,
)
from research_tool.bench.session_storage import storage_per_session
from research_tool.bench.storage_memory_server import PROBE_SIGNAL, probe_path
from research_tool.demo_corpus import build_demo_corpus
from research_tool.runtime.janitor import data_dir_bytes

QUESTIONS = (*HOWTO_QUESTIONS[:5], HOWTO_QUESTIONS[6])  # the CSV question as the sixth
LATENCY_S = 0.01
WIKIPEDIA_RPS = 1000.0
CHECKPOINT_TARGET_BYTES = 300_000
EMPTY_RATIO_TARGET = 1.10
RSS_SLOPE_TARGET_KB = 1.0
HEAP_SLOPE_TARGET_KB = 0.1  # no Python object kept per session (the smallest dict is ~0.2 KB)
PROBE_TIMEOUT_S = 60.0
SESSION_TIMEOUT_S = 120.0
# The memory part's pages are short: a session still goes through every per-session structure of the server
# (admission, runner, event log and fan-out, checkpoints, content store, export) with a seventh of the text
# to read, so a thousand of them fit in minutes on a shared machine.
MEMORY_PAGE_CHARS = 3000


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


DEMO_STORAGE_TARGET_BYTES = 300_000
DEMO_STORAGE_BEFORE_BYTES = 492_000  # issue 24, as filed
DEMO_STORAGE_BEFORE_CHANGE = {"checkpoints": 232_635, "events": 37_241, "page_text": 15_347}  # 8 sessions, 2026-11


def _page_text_bytes(data_dir: Path) -> tuple[int, int]:
    """(rows, text bytes) of the page text store."""
    with closing(sqlite3.connect(f"file:{data_dir / 'content.db'}?mode=ro", uri=True)) as db:
        rows, size = db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(text)), 0) FROM page_text").fetchone()
    return int(rows), int(size)


async def _demo_corpus_disk(workdir: Path, client: httpx.AsyncClient, sessions: int) -> dict[str, Any]:
    """Standard sessions over the demo corpus with `local`, as `make run` runs one: what each leaves on disk."""
    corpus = workdir / "demo_corpus"
    build_demo_corpus(corpus)
    env = BenchEnvironment(
        data_dir=workdir / "demo" / "data", providers=(), max_concurrent_sessions=2, extra={"corpus_dirs": corpus}
    )
    async with uvicorn_server(env.process_env(), workdir / "demo", client) as server:
        bodies = [
            {
                "query": HOWTO_QUESTIONS[i % len(HOWTO_QUESTIONS)],
                "tier": "standard",
                "providers": ["local"],
                "fetch": False,
                "clarify": False,
                "formats": ["md", "json"],
            }
            for i in range(sessions)
        ]
        ids = await _run_sessions(client, server, bodies, 2)
        storage = storage_per_session(env.data_dir, ids)
        rows, text_bytes = _page_text_bytes(env.data_dir)
    n = max(1, len(ids))
    page_text = round(text_bytes / n)
    return {
        "sessions": len(ids),
        "page_text_rows": rows,
        "page_text_bytes_per_session": page_text,
        "total_bytes_per_session": storage["checkpoint_bytes_per_session"]
        + storage["event_bytes_per_session"]
        + page_text,
        **storage,
    }


async def _probe(server: ServerProcess, probe_dir: Path, number: int) -> dict[str, Any]:
    """Ask the server for its memory figures (storage_memory_server: SIGUSR1, then a JSON file)."""
    server.process.send_signal(PROBE_SIGNAL)
    path = probe_path(probe_dir, number)
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while not path.exists():
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise ServerStartError(f"the server gave no memory probe: {server.stderr_tail()}")
        await asyncio.sleep(0.05)
    figures: dict[str, Any] = json.loads(path.read_text())
    return figures


@asynccontextmanager
async def _probed_server(
    env: BenchEnvironment, workdir: Path, client: httpx.AsyncClient, snapshot_frames: int = 0
) -> AsyncIterator[ServerProcess]:
    """The app under uvicorn as `uvicorn_server` runs it, in storage_memory_server (which answers probes)."""
    port = free_port()
    probe_dir = workdir / "probes"
    command = [
        sys.executable,
        "-m",
        "research_tool.bench.storage_memory_server",
        str(port),
        str(probe_dir),
        str(snapshot_frames),
    ]
    stderr_name = f"server-{port}.stderr"
    async with spawned_server(command, port, env.process_env(), workdir, client, stderr_name=stderr_name) as server:
        yield server


def _slopes(samples: list[tuple[int, int]], sessions: int) -> dict[str, float | None]:
    def rounded(points: list[tuple[int, int]]) -> float | None:
        slope = slope_kb_per_session(points)
        return round(slope, 3) if slope is not None else None

    return {
        "second_half": rounded([(x, y) for x, y in samples if x >= sessions // 2]),
        "last_quarter": rounded([(x, y) for x, y in samples if x >= sessions * 3 // 4]),
        "all": rounded(samples),
    }


async def _memory(
    workdir: Path,
    wiki_url: str,
    client: httpx.AsyncClient,
    sessions: int,
    concurrency: int,
    step: int,
    snapshot_frames: int = 0,
) -> dict[str, Any]:
    """`sessions` small sessions in rounds of `step`; after each round (no session in flight) the server
    collects its garbage and reports its RSS and traced Python heap."""
    env = BenchEnvironment(
        data_dir=workdir / "memory" / "data",
        providers=(ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
        max_concurrent_sessions=concurrency,
    )
    probe_dir = workdir / "memory" / "probes"
    async with _probed_server(env, workdir / "memory", client, snapshot_frames) as server:
        idle = await _probe(server, probe_dir, 1)  # also starts tracing: the heap counts from here
        rss: list[tuple[int, int]] = []
        heap: list[tuple[int, int]] = []
        gc_objects: list[tuple[int, int]] = []
        sqlite: list[tuple[int, int]] = []
        bodies = [_body(i, tier="simple", max_iterations=1, formats=["json"]) for i in range(sessions)]
        started = time.perf_counter()
        for done in range(step, sessions + 1, step):
            await _run_sessions(client, server, bodies[done - step : done], concurrency)
            figures = await _probe(server, probe_dir, len(rss) + 2)
            rss.append((done, int(figures["rss_kb"] or 0)))
            heap.append((done, round(int(figures["python_heap_bytes"] or 0) / 1024)))
            gc_objects.append((done, int(figures["gc_objects"])))
            sqlite.append((done, round(int(figures.get("sqlite_bytes") or 0) / 1024)))
        span = time.perf_counter() - started
    return {
        "sessions": rss[-1][0] if rss else 0,
        "span_s": round(span, 1),
        "idle_rss_kb": idle["rss_kb"],
        "final_rss_kb": rss[-1][1] if rss else None,
        "final_python_heap_kb": heap[-1][1] if heap else None,
        "rss_kb": rss,
        "python_heap_kb": heap,
        "gc_objects": gc_objects,
        "sqlite_kb": sqlite,
        "rss_slope_kb_per_session": _slopes(rss, sessions),
        "python_heap_slope_kb_per_session": _slopes(heap, sessions),
        "gc_objects_per_session": _slopes(gc_objects, sessions),
        "sqlite_slope_kb_per_session": _slopes(sqlite, sessions),
    }


async def run_storage(
    workdir: Path,
    *,
    sessions: int = 100,
    rss_sessions: int = 1000,
    rss_step: int = 50,
    concurrency: int = 8,
    max_iterations: int = 2,
    demo_sessions: int = len(HOWTO_QUESTIONS),
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
    async with httpx.AsyncClient(timeout=60, limits=limits, trust_env=False) as client:
        async with replay_process(LATENCY_S) as wiki_url:
            disk = await _disk(workdir, wiki_url, client, sessions, concurrency, max_iterations)
        demo = await _demo_corpus_disk(workdir, client, demo_sessions)
        async with replay_process(LATENCY_S, page_chars=MEMORY_PAGE_CHARS) as wiki_url:
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
    before = sum(DEMO_STORAGE_BEFORE_CHANGE.values())
    result.add(
        "demo corpus: checkpoints + events + page text per standard session",
        demo["total_bytes_per_session"],
        "B",
        target=DEMO_STORAGE_TARGET_BYTES,
        comparison="<=",
        note=f"{demo['sessions']} sessions; {DEMO_STORAGE_BEFORE_BYTES} B as filed, {before} B before the change",
    )
    result.add("demo corpus: checkpoint bytes per session", demo["checkpoint_bytes_per_session"], "B",
               note=f"{DEMO_STORAGE_BEFORE_CHANGE['checkpoints']} B before")  # fmt: skip
    result.add("demo corpus: event bytes per session", demo["event_bytes_per_session"], "B",
               note=f"{DEMO_STORAGE_BEFORE_CHANGE['events']} B before")  # fmt: skip
    result.add("demo corpus: page text bytes per session", demo["page_text_bytes_per_session"], "B",
               note=f"{DEMO_STORAGE_BEFORE_CHANGE['page_text']} B before: local text is now referenced")  # fmt: skip
    m = memory["sessions"]
    result.add(f"RSS after {m} sessions", round((memory["final_rss_kb"] or 0) / 1024, 1), "MB", note="after gc")
    result.add(
        "RSS growth per finished session (second half)",
        memory["rss_slope_kb_per_session"]["second_half"],
        "KB",
        target=RSS_SLOPE_TARGET_KB,
        comparison="<=",
        note=f"{m} sessions in {memory['span_s']:.0f} s",
    )
    result.add(
        "RSS growth per finished session (last quarter)", memory["rss_slope_kb_per_session"]["last_quarter"], "KB"
    )
    result.add(
        f"Python heap held after {m} sessions",
        round((memory["final_python_heap_kb"] or 0) / 1024, 2),
        "MB",
        note="tracemalloc, allocated since the first session",
    )
    result.add(
        "Python heap growth per finished session (second half)",
        memory["python_heap_slope_kb_per_session"]["second_half"],
        "KB",
        target=HEAP_SLOPE_TARGET_KB,
        comparison="<=",
    )
    result.details = {"disk": disk, "demo_corpus": demo, "memory": memory}
    result.seconds = round(time.perf_counter() - started, 2)
    return result
