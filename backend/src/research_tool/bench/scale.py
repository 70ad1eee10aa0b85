"""Benchmark 2, scale on one machine: N concurrent sessions through a real uvicorn server subprocess
(one worker) on 127.0.0.1, watched as a UI would watch them.

Per size N: a fresh data dir and server with RESEARCH_MAX_CONCURRENT_SESSIONS = N (so all N really run
at once, none waits in the queue), N sessions started together, one WebSocket client per session
(`?after=0`: replay, then live), `GET /status` polled open-loop at a fixed rate, and the server's RSS
sampled from /proc. Sessions use the Wikipedia replay provider (in a process of its own; 100 ms per
request, rate limit set high so that the server, not the provider's budget, is what is measured) and the offline engine.

Figures: sessions per minute, status p50/p95, event lag p95 (an event's `ts` to the client receiving it,
live events only), peak RSS and RSS per running session, checkpoint and event bytes per session, and
sessions lost (not completed, or a gap in their event stream). Targets at 100 sessions: status p95
<= 50 ms, event lag p95 <= 100 ms, no session lost.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from research_tool.bench.profiling import py_spy_record
from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.replay_process import replay_process
from research_tool.bench.results import BenchResult
from research_tool.bench.server_process import ServerProcess, uvicorn_server
from research_tool.bench.session_storage import storage_per_session
from research_tool.bench.stats import ms, percentile
from research_tool.bench.watchers import MemorySampler, SessionWatch, StatusPoller, watch_session

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
LATENCY_S = 0.1
WIKIPEDIA_RPS = 1000.0
STATUS_POLLS_PER_S = 20.0
HEALTH_POLLS_PER_S = 5.0  # /healthz touches no database: its latency is the event loop's own delay
STATUS_P95_TARGET_MS = 50
EVENT_LAG_P95_TARGET_MS = 100
TARGET_SESSIONS = 100


async def _start_all(client: httpx.AsyncClient, base_url: str, n: int, max_iterations: int) -> list[str]:
    async def start(i: int) -> str:
        body = {
            "query": QUESTIONS[i % len(QUESTIONS)],
            "tier": "standard",
            "providers": ["wikipedia"],
            "fetch": False,
            "clarify": False,
            "max_iterations": max_iterations,
            "formats": ["json"],
        }
        response = await client.post(f"{base_url}/api/research/start", json=body)
        response.raise_for_status()
        return str(response.json()["session_id"])

    return list(await asyncio.gather(*(start(i) for i in range(n))))


async def _final_statuses(client: httpx.AsyncClient, base_url: str, ids: list[str]) -> dict[str, str]:
    statuses = {}
    for sid in ids:
        response = await client.get(f"{base_url}/api/research/{sid}/status")
        statuses[sid] = (
            response.json().get("status", f"http {response.status_code}")
            if response.status_code == 200
            else f"http {response.status_code}"
        )
    return statuses


async def run_size(
    n: int, workdir: Path, *, max_iterations: int, timeout_s: float, profile_dir: Path | None = None
) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=n + 50, max_keepalive_connections=n + 50)
    async with replay_process(LATENCY_S) as wiki_url:
        env = BenchEnvironment(
            data_dir=workdir / f"scale-{n}" / "data",
            providers=(ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
            max_concurrent_sessions=n,
        )
        async with (
            httpx.AsyncClient(timeout=60, limits=limits, trust_env=False) as client,
            uvicorn_server(env.process_env(), workdir / f"scale-{n}", client) as server,
        ):
            if profile_dir is None:
                row = await _measure(n, server, client, env, max_iterations, timeout_s)
            else:
                with py_spy_record(server.pid, profile_dir / f"scale-{n}.py-spy.txt") as profile:
                    row = await _measure(n, server, client, env, max_iterations, timeout_s)
                row["profile"] = str(profile) if profile else None
            return row


async def _measure(
    n: int,
    server: ServerProcess,
    client: httpx.AsyncClient,
    env: BenchEnvironment,
    max_iterations: int,
    timeout_s: float,
) -> dict[str, Any]:
    idle_rss = server.sample_rss() or 0
    began = time.time()
    ids = await _start_all(client, server.base_url, n, max_iterations)
    watches = [SessionWatch(sid) for sid in ids]
    stop = asyncio.Event()
    poller = StatusPoller(client, server.base_url, STATUS_POLLS_PER_S)
    health = StatusPoller(client, server.base_url, HEALTH_POLLS_PER_S, fixed_path="/healthz")
    sampler = MemorySampler(server, watches)
    background = [
        asyncio.create_task(poller.run(ids, stop)),
        asyncio.create_task(health.run(ids, stop)),
        asyncio.create_task(sampler.run(stop)),
    ]
    await asyncio.gather(*(watch_session(server.ws_url, w, timeout_s) for w in watches))
    stop.set()
    await asyncio.gather(*background)
    statuses = await _final_statuses(client, server.base_url, ids)
    peak_rss = server.peak_rss_kb() or max((s[1] for s in sampler.samples), default=0)
    max_running = max((s[2] for s in sampler.samples), default=0)
    metrics_text = (await client.get(f"{server.base_url}/metrics")).text
    server_max_running = _gauge(metrics_text, "research_sessions_max_running_seen")
    storage = storage_per_session(env.data_dir, ids)

    completed = [
        w for w in watches if w.final_type == "session_completed" and statuses.get(w.session_id) == "completed"
    ]
    lost = [w.session_id for w in watches if w not in completed or not w.gapless]
    finished = [w.finished_at for w in completed if w.finished_at]
    span = (max(finished) - began) if finished else None
    lags = [lag for w in watches for lag in w.lags_s]
    running_peak = max(int(server_max_running or 0), max_running)
    return {
        "sessions": n,
        "completed": len(completed),
        "lost": len(lost),
        "lost_ids": lost[:10],
        "watch_errors": [w.error for w in watches if w.error][:5],
        "span_s": round(span, 2) if span else None,
        "sessions_per_min": round(60 * len(completed) / span, 1) if span else None,
        "status_polls": len(poller.latencies_s),
        "status_errors": poller.errors,
        "status_p50_ms": ms(percentile(poller.latencies_s, 0.5)),
        "status_p95_ms": ms(percentile(poller.latencies_s, 0.95)),
        "status_max_ms": ms(max(poller.latencies_s, default=0.0)),
        "healthz_p50_ms": ms(percentile(health.latencies_s, 0.5)),
        "healthz_p95_ms": ms(percentile(health.latencies_s, 0.95)),
        "live_events": len(lags),
        "event_lag_p50_ms": ms(percentile(lags, 0.5)),
        "event_lag_p95_ms": ms(percentile(lags, 0.95)),
        "event_lag_max_ms": ms(max(lags, default=0.0)),
        "idle_rss_mb": round(idle_rss / 1024, 1),
        "peak_rss_mb": round(peak_rss / 1024, 1),
        "max_running_sessions": running_peak,
        "rss_per_running_session_mb": round((peak_rss - idle_rss) / 1024 / running_peak, 2) if running_peak else None,
        **storage,
    }


def _gauge(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


async def run_scale(
    workdir: Path,
    *,
    sizes: tuple[int, ...] = (10, 50, 100),
    max_iterations: int = 2,
    timeout_s: float = 300.0,
    profile_dir: Path | None = None,
) -> BenchResult:
    """`profile_dir`: record the server with py-spy into `<dir>/scale-<N>.py-spy.txt` (collapsed stacks)."""
    result = BenchResult(
        name="scale",
        title="Scale: concurrent sessions through one uvicorn worker",
        parameters={
            "sizes": list(sizes),
            "tier": "standard",
            "max_iterations": max_iterations,
            "engine": "offline",
            "provider": f"wikipedia replay, {LATENCY_S * 1000:.0f} ms per request, {WIKIPEDIA_RPS:.0f}/s allowed",
            "max_concurrent_sessions": "= sessions (all run at once)",
            "status_polls_per_s": STATUS_POLLS_PER_S,
            "websocket_clients": "one per session",
            "server": "uvicorn subprocess, 1 worker, 127.0.0.1",
        },
    )
    started = time.perf_counter()
    rows = []
    for n in sizes:
        rows.append(
            await run_size(n, workdir, max_iterations=max_iterations, timeout_s=timeout_s, profile_dir=profile_dir)
        )
    for row in rows:
        n = row["sessions"]
        targeted = n == max(sizes) and n >= TARGET_SESSIONS
        status_target = {"target": STATUS_P95_TARGET_MS, "comparison": "<="} if targeted else {}
        lag_target = {"target": EVENT_LAG_P95_TARGET_MS, "comparison": "<="} if targeted else {}
        result.add(f"{n} sessions: sessions per minute", row["sessions_per_min"], "/min")
        result.add(f"{n} sessions: status p50", row["status_p50_ms"], "ms")
        result.add(f"{n} sessions: status p95", row["status_p95_ms"], "ms", **status_target)
        result.add(f"{n} sessions: /healthz p95 (event-loop delay)", row["healthz_p95_ms"], "ms")
        result.add(f"{n} sessions: event lag p95", row["event_lag_p95_ms"], "ms", **lag_target)
        result.add(f"{n} sessions: peak RSS", row["peak_rss_mb"], "MB")
        result.add(
            f"{n} sessions: RSS per running session",
            row["rss_per_running_session_mb"],
            "MB",
            note=f"(peak - idle) / {row['max_running_sessions']} running at once",
        )
        result.add(f"{n} sessions: checkpoint bytes per session", row["checkpoint_bytes_per_session"], "B")
        result.add(
            f"{n} sessions: event rows / bytes per session",
            f"{row['event_rows_per_session']} / {row['event_bytes_per_session']}",
            "",
        )
        result.add(f"{n} sessions: sessions lost", row["lost"], "", target=0, comparison="==")
    result.details["sizes"] = rows
    result.seconds = round(time.perf_counter() - started, 2)
    return result
