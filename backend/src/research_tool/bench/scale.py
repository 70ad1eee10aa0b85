"""Benchmark 2, scale on one machine: N sessions started at once through a real uvicorn server subprocess
(one worker, the server's default settings: RESEARCH_MAX_CONCURRENT_SESSIONS run, the rest wait in its
queue) on 127.0.0.1, watched as a UI would watch them.

Per (size N, replay delay): a fresh data dir and server, N `POST /start` sent together (each timed), one
WebSocket client per session (`?after=0`: replay, then live), `GET /status` and `/healthz` polled open-loop
at fixed rates, and the CPU time and resident memory of the server and its CPU workers read from /proc.
Sessions use the Wikipedia replay provider (in a process of its own; `delay` per request, rate limit set
high so that the server, not the provider's budget, is what is measured) and the offline engine.

Figures, each beside its target from issue 15: start POST p95, failed starts, status p95, /healthz p95,
event lag p95 (an event's `ts` to the client receiving it, live events only), sessions ending on the time
guard, sessions per minute against the CPU bound (cores x 60 / CPU-seconds per session, measured in the
same run), peak RSS of the server and its workers, sessions completed with a report.

The default matrix (100 x 0.1 s, 300 x 1.0 s, 1,000 x 1.0 s) takes ~12 minutes on an idle 2-core machine;
`--sizes` and `--delays` choose another (every size at every delay).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from pathlib import Path
from typing import Any

import httpx

from research_tool.bench.http_floor import floor_starts
from research_tool.bench.process_tree import (
    cpu_seconds,
    machine_cpu_seconds,
    tree_cpu_seconds,
    tree_peak_rss_kb,
    tree_rss_kb,
)
from research_tool.bench.profiling import py_spy_record
from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.replay_process import replay_process
from research_tool.bench.results import BenchResult
from research_tool.bench.server_process import ServerProcess, uvicorn_server
from research_tool.bench.session_storage import storage_per_session
from research_tool.bench.start_burst import start_sessions
from research_tool.bench.stats import ms, percentile
from research_tool.bench.watchers import MemorySampler, SessionWatch, StatusPoller, watch_session
from research_tool.providers.http_client import PooledAiohttpTransport

# (sessions, replay delay in s): the default matrix. 1,000 x 1.0 s is the acceptance run.
DEFAULT_RUNS: tuple[tuple[int, float], ...] = ((100, 0.1), (300, 1.0), (1000, 1.0))
WIKIPEDIA_RPS = 1000.0
STATUS_POLLS_PER_S = 20.0
HEALTH_POLLS_PER_S = 5.0  # /healthz touches no database: its latency is the event loop's own delay
WATCH_TIMEOUT_BASE_S = 300.0
WATCH_TIMEOUT_PER_SESSION_S = 1.5  # a session queued behind N others waits for them
# Targets of issue 15 (1,000 sessions, one worker, 2 cores, replay delay 1.0 s, default settings).
START_P95_TARGET_MS = 200
STATUS_P95_TARGET_MS = 50
HEALTHZ_P95_TARGET_MS = 50
EVENT_LAG_P95_TARGET_MS = 100
PEAK_RSS_TARGET_MB = 1024
THROUGHPUT_FRACTION_OF_CPU_BOUND = 0.8


async def final_records(client: httpx.AsyncClient, base_url: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for sid in ids:
        response = await client.get(f"{base_url}/api/research/{sid}/status")
        records[sid] = response.json() if response.status_code == 200 else {"status": f"http {response.status_code}"}
    return records


def watched_outcome(
    watches: list[SessionWatch],
    records: dict[str, dict[str, Any]],
    began: float,
    cpu_before: dict[int, float],
    cpu_after: dict[int, float],
) -> dict[str, Any]:
    """The figures of a watched run that the one-server (scale) and cluster benchmarks both report: sessions
    completed (a final `session_completed` event and status `completed`) and lost (not completed, or a gap in
    events), throughput from `began` (time.time()) to the last completion, CPU per completed session from
    the per-process CPU seconds before and after, and the live event lag."""
    completed = [
        w for w in watches if w.final_type == "session_completed" and records[w.session_id].get("status") == "completed"
    ]
    lost = [w.session_id for w in watches if w not in completed or not w.gapless]
    finished = [w.finished_at for w in completed if w.finished_at]
    span = (max(finished) - began) if finished else None
    lags = [lag for w in watches for lag in w.lags_s]
    cpu_s = sum(cpu_after.get(pid, 0.0) - cpu_before.get(pid, 0.0) for pid in cpu_after)
    cpu_per_session = cpu_s / len(completed) if completed else None
    cores = os.cpu_count() or 1
    return {
        "completed": len(completed),
        "lost": len(lost),
        "lost_ids": lost[:10],
        "watch_errors": [w.error for w in watches if w.error][:5],
        "span_s": round(span, 2) if span else None,
        "sessions_per_min": round(60 * len(completed) / span, 1) if span else None,
        "cpu_s": round(cpu_s, 1),
        "cpu_s_per_session": round(cpu_per_session, 3) if cpu_per_session else None,
        "cpu_bound_per_min": round(cores * 60 / cpu_per_session, 1) if cpu_per_session else None,
        "live_events": len(lags),
        "event_lag_p50_ms": ms(percentile(lags, 0.5)),
        "event_lag_p95_ms": ms(percentile(lags, 0.95)),
        "event_lag_max_ms": ms(max(lags, default=0.0)),
    }


async def _sample_tree_rss(server: ServerProcess, stop: asyncio.Event, peak: list[int], interval_s: float) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], await asyncio.to_thread(tree_rss_kb, server.pid))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)


def measuring_client(n: int) -> httpx.AsyncClient:
    """The benchmark's client for polls, /metrics and the final reads of `n` sessions (the burst of starts has
    its own), on aiohttp's pool too: httpx's own pool, with hundreds of connections, would spend more time on
    the bench's side than the server takes to answer (README "HTTP client")."""
    limits = httpx.Limits(max_connections=n + 50, max_keepalive_connections=n + 50)
    return httpx.AsyncClient(
        timeout=120, transport=PooledAiohttpTransport(limits=limits, trust_env=False), trust_env=False
    )


async def run_size(
    n: int,
    delay_s: float,
    workdir: Path,
    *,
    max_iterations: int,
    profile_dir: Path | None = None,
    server_env: dict[str, str] | None = None,
    label: str = "",
) -> dict[str, Any]:
    """One size of the scale run; `server_env` is added to the server's environment (the answer reader off)."""
    label = label or f"scale-{n}-{delay_s:g}s"
    async with replay_process(delay_s) as wiki_url:
        env = BenchEnvironment(
            data_dir=workdir / label / "data",
            providers=(ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
            max_concurrent_sessions=None,  # the server's default: the rest wait in its queue
        )
        async with measuring_client(n) as client:
            floor = await floor_starts(n, workdir / label / "floor", client, env.process_env())
            process_env = {**env.process_env(), **(server_env or {})}
            async with uvicorn_server(process_env, workdir / label, client) as server:
                if profile_dir is None:
                    row = await _measure(n, server, client, env, max_iterations)
                else:
                    with py_spy_record(server.pid, profile_dir / f"{label}.py-spy.txt") as profile:
                        row = await _measure(n, server, client, env, max_iterations)
                    row["profile"] = str(profile) if profile else None
                return {"delay_s": delay_s, **row, **floor}


async def _measure(
    n: int, server: ServerProcess, client: httpx.AsyncClient, env: BenchEnvironment, max_iterations: int
) -> dict[str, Any]:
    idle_rss = server.sample_rss() or 0
    metrics_before = (await client.get(f"{server.base_url}/metrics")).text
    cpu_before = tree_cpu_seconds(server.pid)
    machine_before = machine_cpu_seconds()
    began = time.time()
    server_cpu_before = cpu_seconds(server.pid)
    ids, start_latencies, start_failures = await start_sessions(server.base_url, n, max_iterations)
    start_cpu_ms = 1000 * (cpu_seconds(server.pid) - server_cpu_before)
    watches = [SessionWatch(sid) for sid in ids]
    stop = asyncio.Event()
    poller = StatusPoller(client, server.base_url, STATUS_POLLS_PER_S)
    health = StatusPoller(client, server.base_url, HEALTH_POLLS_PER_S, fixed_path="/healthz")
    sampler = MemorySampler(server, watches)
    tree_peak = [0]
    background = [
        asyncio.create_task(poller.run(ids, stop)),
        asyncio.create_task(health.run(ids, stop)),
        asyncio.create_task(sampler.run(stop)),
        asyncio.create_task(_sample_tree_rss(server, stop, tree_peak, 0.5)),
    ]
    timeout_s = WATCH_TIMEOUT_BASE_S + WATCH_TIMEOUT_PER_SESSION_S * n
    await asyncio.gather(*(watch_session(server.ws_url, w, timeout_s) for w in watches))
    stop.set()
    await asyncio.gather(*background)
    cpu_after = tree_cpu_seconds(server.pid)
    elapsed = time.time() - began
    machine = machine_use(machine_before, machine_cpu_seconds(), elapsed)
    peak_tree_kb = max(tree_peak[0], tree_peak_rss_kb(server.pid))
    records = await final_records(client, server.base_url, ids)
    max_running = max((s[2] for s in sampler.samples), default=0)
    metrics_text = (await client.get(f"{server.base_url}/metrics")).text
    loop_lag = bucket_counts(metrics_text, LOOP_LAG_METRIC) - bucket_counts(metrics_before, LOOP_LAG_METRIC)
    gc_full = bucket_counts(metrics_text, GC_PAUSE_METRIC, 'generation="2"') - bucket_counts(
        metrics_before, GC_PAUSE_METRIC, 'generation="2"'
    )
    server_max_running = gauge(metrics_text, "research_sessions_max_running_seen")
    storage = storage_per_session(env.data_dir, ids)

    outcome = watched_outcome(watches, records, began, cpu_before, cpu_after)
    time_guard = sum(1 for r in records.values() if r.get("stop_reason") == "max_execution_time")
    running_peak = max(int(server_max_running or 0), max_running)
    return {
        "sessions": n,
        "started": len(ids),
        "failed_starts": len(start_failures),
        "start_failures": start_failures[:5],
        "start_p50_ms": ms(percentile(start_latencies, 0.5)),
        "start_p95_ms": ms(percentile(start_latencies, 0.95)),
        "start_cpu_ms_per_start": round(start_cpu_ms / n, 3) if n else None,
        "time_guard": time_guard,
        **outcome,
        **machine,
        "server_cores": round(outcome["cpu_s"] / elapsed, 2) if elapsed > 0 else 0.0,
        "status_polls": len(poller.latencies_s),
        "status_errors": poller.errors,
        "status_p50_ms": ms(percentile(poller.latencies_s, 0.5)),
        "status_p95_ms": ms(percentile(poller.latencies_s, 0.95)),
        "status_max_ms": ms(max(poller.latencies_s, default=0.0)),
        "healthz_p50_ms": ms(percentile(health.latencies_s, 0.5)),
        "healthz_p95_ms": ms(percentile(health.latencies_s, 0.95)),
        "loop_lag_p95_ms": ms(loop_lag.quantile(0.95)),
        "loop_lag_p99_ms": ms(loop_lag.quantile(0.99)),
        "gc_full_collections": gc_full.total,
        "gc_full_p95_ms": ms(gc_full.quantile(0.95)),
        "idle_rss_mb": round(idle_rss / 1024, 1),
        "peak_rss_mb": round(peak_tree_kb / 1024, 1),
        "max_running_sessions": running_peak,
        **storage,
    }


def machine_use(before: tuple[float, float], after: tuple[float, float], seconds: float) -> dict[str, float]:
    """Cores busy and idle on the whole machine over `seconds` (server, workers, the bench's own client and
    replay, anything else), from two `machine_cpu_seconds` readings."""
    if seconds <= 0:
        return {"machine_busy_cores": 0.0, "machine_idle_cores": 0.0}
    return {
        "machine_busy_cores": round((after[0] - before[0]) / seconds, 2),
        "machine_idle_cores": round((after[1] - before[1]) / seconds, 2),
    }


LOOP_LAG_METRIC = "research_event_loop_lag_seconds"
GC_PAUSE_METRIC = "research_gc_pause_seconds"


class Buckets:
    """A Prometheus histogram's cumulative bucket counts (upper bound -> count), as scraped."""

    def __init__(self, counts: dict[float, float]) -> None:
        self.counts = counts

    @property
    def total(self) -> int:
        return int(self.counts.get(math.inf, 0.0))

    def __sub__(self, before: Buckets) -> Buckets:
        return Buckets({le: n - before.counts.get(le, 0.0) for le, n in self.counts.items()})

    def quantile(self, q: float) -> float:
        """The upper bound of the bucket holding the q-quantile (an over-estimate by at most one bucket);
        the largest finite bound when it falls in +Inf, 0 with no observation."""
        total = self.total
        if total <= 0:
            return 0.0
        finite = sorted(le for le in self.counts if le != math.inf)
        for le in finite:
            if self.counts[le] >= q * total:
                return le
        return finite[-1] if finite else 0.0


def bucket_counts(text: str, name: str, label: str = "") -> Buckets:
    """The buckets of histogram `name` in a /metrics text (only the series that also carries `label`)."""
    counts: dict[float, float] = {}
    prefix = name + "_bucket{"
    for line in text.splitlines():
        if not line.startswith(prefix) or (label and label not in line):
            continue
        labels, _, value = line[len(prefix) :].partition("} ")
        le = labels.split('le="', 1)[1].split('"', 1)[0]
        counts[math.inf if le == "+Inf" else float(le)] = float(value)
    return Buckets(counts)


def gauge(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def add_throughput(result: BenchResult, name: str, row: dict[str, Any], *, processes: str, note: str = "") -> None:
    """Sessions per minute against a share of the CPU bound (what `processes` could finish at the CPU time a
    completed session took), as `watched_outcome` measured them; `note` follows the CPU figure."""
    bound = row["cpu_bound_per_min"]
    result.add(
        name,
        row["sessions_per_min"],
        "/min",
        target=round(THROUGHPUT_FRACTION_OF_CPU_BOUND * bound, 1) if bound else None,
        comparison=">=" if bound else None,
        note=f"CPU bound {bound}/min ({row['cpu_s_per_session']} CPU-s per session, {processes}){note}",
    )


def _add_row(result: BenchResult, row: dict[str, Any]) -> None:
    n, delay = row["sessions"], row["delay_s"]
    p = f"{n} x {delay:g}s:"
    result.add(f"{p} start POST p95", row["start_p95_ms"], "ms", target=START_P95_TARGET_MS, comparison="<=")
    result.add(
        f"{p} start POST p95 of a do-nothing app (floor)",
        row["floor_start_p95_ms"],
        "ms",
        note="the same burst and client against a uvicorn app that only answers 202 (bench/http_floor.py); "
        f"server CPU per start: {row['start_cpu_ms_per_start']} ms here, {row['floor_cpu_ms_per_start']} ms there",
    )
    result.add(f"{p} failed starts", row["failed_starts"], "", target=0, comparison="==")
    result.add(f"{p} status p95", row["status_p95_ms"], "ms", target=STATUS_P95_TARGET_MS, comparison="<=")
    result.add(f"{p} /healthz p95", row["healthz_p95_ms"], "ms", target=HEALTHZ_P95_TARGET_MS, comparison="<=")
    result.add(
        f"{p} server event-loop lag p95 / p99",
        f"{row['loop_lag_p95_ms']} / {row['loop_lag_p99_ms']}",
        "ms",
        note="the server's own delay (a 0.1 s sleep woken late, bucket bound); /healthz minus this waited in the "
        f"client or the OS; full gc pauses: {row['gc_full_collections']}, p95 {row['gc_full_p95_ms']} ms",
    )
    result.add(f"{p} event lag p95", row["event_lag_p95_ms"], "ms", target=EVENT_LAG_P95_TARGET_MS, comparison="<=")
    result.add(f"{p} sessions on the time guard", row["time_guard"], "", target=0, comparison="==")
    add_throughput(result, f"{p} sessions per minute", row, processes="server + workers")
    result.add(
        f"{p} cores busy: server + workers / whole machine / idle",
        f"{row['server_cores']} / {row['machine_busy_cores']} / {row['machine_idle_cores']}",
        "",
        note=f"of {os.cpu_count()}; the machine's busy cores beyond the server's are the benchmark's own client "
        "and replay (and anything else running): the CPU bound above counts every core as the server's",
    )
    result.add(f"{p} peak RSS (server + workers)", row["peak_rss_mb"], "MB", target=PEAK_RSS_TARGET_MB, comparison="<=")
    result.add(f"{p} completed with a report", row["completed"], "", target=n, comparison="==")
    result.add(
        f"{p} sessions lost", row["lost"], "", target=0, comparison="==", note="not completed, or a gap in events"
    )
    result.add(f"{p} checkpoint bytes per session", row["checkpoint_bytes_per_session"], "B")
    result.add(
        f"{p} event rows / bytes per session",
        f"{row['event_rows_per_session']} / {row['event_bytes_per_session']}",
        "",
    )


async def run_scale(
    workdir: Path,
    *,
    runs: tuple[tuple[int, float], ...] = DEFAULT_RUNS,
    max_iterations: int = 2,
    profile_dir: Path | None = None,
) -> BenchResult:
    """`runs`: (sessions, replay delay) pairs. `profile_dir`: record the server with py-spy into
    `<dir>/scale-<N>-<delay>s.py-spy.txt` (collapsed stacks)."""
    result = BenchResult(
        name="scale",
        title="Scale: sessions started at once through one uvicorn worker",
        parameters={
            "runs": [list(r) for r in runs],
            "tier": "standard",
            "max_iterations": max_iterations,
            "engine": "offline",
            "provider": f"wikipedia replay, delay per request as in the run, {WIKIPEDIA_RPS:.0f}/s allowed",
            "server": "uvicorn subprocess, 1 worker, 127.0.0.1, default settings (queue past the running limit)",
            "status_polls_per_s": STATUS_POLLS_PER_S,
            "websocket_clients": "one per session",
        },
    )
    started = time.perf_counter()
    rows = []
    for n, delay in runs:
        row = await run_size(n, delay, workdir, max_iterations=max_iterations, profile_dir=profile_dir)
        rows.append(row)
        _add_row(result, row)
    result.details["runs"] = rows
    result.seconds = round(time.perf_counter() - started, 2)
    return result
