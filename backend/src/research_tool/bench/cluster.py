"""Benchmark: the cluster (issue 13) on this machine: one API node (`research-tool serve --no-worker`, uvicorn) and
N `research-tool worker` processes sharing a fresh Postgres database (created for the run, dropped after) and,
for the rate limits, Redis; sessions use the Wikipedia replay server (its own process) and the offline engine.

Four parts, each on a database of its own:
- throughput: the same batch of CPU-bound sessions (replay delay 0.1 s) with 1, 2 and 4 workers: sessions per
  minute beside the CPU bound (cores x 60 / CPU-seconds per session of the API node and the workers, measured in
  the same run; Postgres's own CPU is not in it, and it shares the same cores);
- watched load: many sessions spread over the workers, one WebSocket per session on the API node (`after=0`:
  replay, then live, woken by the workers' NOTIFY) and `GET /status` polled open-loop: status p95, event lag p95
  (an event's `ts`, written by a worker, to the client receiving it from the API node);
- a worker killed with SIGKILL while its sessions run: time from the kill to each of its sessions' next event,
  written by another worker once the lease (RESEARCH_LEASE_TTL_S, default 15 s) expired;
- rate limits across workers: sessions on three workers share a 1/s Semantic Scholar replay (in this process,
  recording arrivals) through RESEARCH_REDIS_URL; violations are consecutive arrivals closer than 1 s less the
  rate-limit benchmark's jitter allowance.

`python -m research_tool.bench --only cluster` runs it (~6 minutes on an idle 2-core machine with the default
sizes; `--quick` ~1.5 minutes); plain `make bench` runs it only when Postgres answers, and reports
"skipped: Postgres not reachable at ..." otherwise. RESEARCH_BENCH_POSTGRES_URL (a maintenance database the
benchmark may create databases next to) and RESEARCH_BENCH_REDIS_URL choose the services.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from research_tool.bench.fresh_database import admin_url, fresh_database, postgres_unavailable
from research_tool.bench.process_tree import tree_cpu_seconds
from research_tool.bench.rate_limits import JITTER_S, spacing
from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.replay_process import replay_process
from research_tool.bench.results import BenchResult
from research_tool.bench.scale import (
    EVENT_LAG_P95_TARGET_MS,
    STATUS_P95_TARGET_MS,
    STATUS_POLLS_PER_S,
    WATCH_TIMEOUT_BASE_S,
    WATCH_TIMEOUT_PER_SESSION_S,
    WIKIPEDIA_RPS,
    add_throughput,
    final_records,
    watched_outcome,
)
from research_tool.bench.server_process import ServerProcess, cli_api_node, start_cli_worker, stop_processes
from research_tool.bench.start_burst import start_sessions
from research_tool.bench.stats import ms, percentile
from research_tool.bench.watchers import SessionWatch, StatusPoller, watch_session
from research_tool.bench.wiki_replay import build_pages, running_wiki
from research_tool.providers.http_client import PooledAiohttpTransport

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
WORKER_READY_TEXT = "Worker started"  # what `research-tool worker` prints on stderr once it takes sessions
DEFAULT_LEASE_TTL_S = 15.0  # RESEARCH_LEASE_TTL_S's default: what a user's cluster recovers in
DEFAULT_WORKER_POLL_S = 3.0  # RESEARCH_WORKER_POLL_S's default
RECOVERY_GRACE_S = 2.0  # a resumed session's first step (checkpoint load) before it writes an event
SCHOLAR_RPS = 1.0
REPLAY_LATENCY_S = 0.1
KILL_REPLAY_DELAY_S = 1.0  # long enough that sessions are mid-run when the worker dies
EVENTS_BEFORE_KILL = 3
WATCH_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ClusterSizes:
    worker_counts: tuple[int, ...] = (1, 2, 4)
    throughput_sessions: int = 30
    watch_sessions: int = 300
    watch_workers: int = 2
    kill_sessions: int = 6
    rate_workers: int = 3
    rate_sessions: int = 6
    max_iterations: int = 2
    lease_ttl_s: float = DEFAULT_LEASE_TTL_S  # of the kill part (the default: what a user's cluster recovers in)


QUICK_CLUSTER = ClusterSizes(
    worker_counts=(1, 2),
    throughput_sessions=4,
    watch_sessions=10,
    kill_sessions=2,
    rate_sessions=3,
    max_iterations=1,
    lease_ttl_s=3.0,
)


def redis_url() -> str:
    return os.environ.get("RESEARCH_BENCH_REDIS_URL", DEFAULT_REDIS_URL)


async def redis_unavailable(url: str) -> str | None:
    """None when `url` answers PING; else why not (one line)."""
    try:
        from redis.asyncio import Redis
    except ImportError:
        return "redis-py is not installed (the 'redis' extra)"
    client = Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        await client.ping()
    except Exception as exc:  # redis-py's errors, OSError
        return f"Redis not reachable at {url}: {type(exc).__name__}: {exc}"
    finally:
        await client.aclose()
    return None


@dataclass
class Cluster:
    """One API node and its workers on one database; `client` talks to the API node."""

    api: ServerProcess
    client: httpx.AsyncClient
    env: dict[str, str]
    workdir: Path
    workers: list[ServerProcess] = field(default_factory=list)

    async def add_worker(self) -> ServerProcess:
        worker = await start_cli_worker(self.env, self.workdir, f"worker-{len(self.workers)}", WORKER_READY_TEXT)
        self.workers.append(worker)
        return worker

    def cpu_seconds(self) -> dict[int, float]:
        """CPU seconds of every process of the cluster (the API node, the workers, their children) by pid."""
        totals: dict[int, float] = {}
        for process in (self.api, *self.workers):
            totals.update(tree_cpu_seconds(process.pid))
        return totals


@asynccontextmanager
async def running_cluster(env: BenchEnvironment, workdir: Path, workers: int) -> AsyncIterator[Cluster]:
    """The API node, then `workers` workers, all killed on exit."""
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    process_env = env.process_env()
    async with (
        httpx.AsyncClient(
            timeout=120, transport=PooledAiohttpTransport(limits=limits, trust_env=False), trust_env=False
        ) as client,
        cli_api_node(process_env, workdir, client) as api,
    ):
        cluster = Cluster(api=api, client=client, env=process_env, workdir=workdir)
        try:
            for _ in range(workers):
                await cluster.add_worker()
            yield cluster
        finally:
            await stop_processes(cluster.workers)


def cluster_environment(
    workdir: Path,
    database: str,
    providers: tuple[ReplayProvider, ...],
    *,
    shared_limits: str | None = None,
    **extra: Any,
) -> BenchEnvironment:
    """`cpu_workers` 0: each worker is one process, so throughput shows what a worker adds."""
    values: dict[str, Any] = {"database_url": database, "cpu_workers": 0, **extra}
    if shared_limits is not None:
        values.update(redis_url=shared_limits, redis_prefix=f"rt-bench-{uuid.uuid4().hex[:12]}")
    # max_concurrent_sessions None: each worker's default (RESEARCH_MAX_CONCURRENT_SESSIONS is per worker)
    return BenchEnvironment(data_dir=workdir / "data", providers=providers, max_concurrent_sessions=None, extra=values)


async def run_watched(
    cluster: Cluster,
    n: int,
    max_iterations: int,
    *,
    providers: tuple[str, ...] = ("wikipedia",),
    tier: str = "standard",
) -> dict[str, Any]:
    """Start n sessions through the API node, watch each over a WebSocket while /status is polled; the row."""
    base = cluster.api.base_url
    cpu_before = cluster.cpu_seconds()
    began = time.time()
    ids, start_latencies, start_failures = await start_sessions(base, n, max_iterations, providers=providers, tier=tier)
    watches = [SessionWatch(sid) for sid in ids]
    stop = asyncio.Event()
    poller = StatusPoller(cluster.client, base, STATUS_POLLS_PER_S)
    polling = asyncio.create_task(poller.run(ids, stop))
    timeout_s = WATCH_TIMEOUT_BASE_S + WATCH_TIMEOUT_PER_SESSION_S * n
    await asyncio.gather(*(watch_session(cluster.api.ws_url, w, timeout_s) for w in watches))
    stop.set()
    await polling
    cpu_after = cluster.cpu_seconds()
    records = await final_records(cluster.client, base, ids)
    return {
        "sessions": n,
        "workers": len(cluster.workers),
        "failed_starts": len(start_failures),
        "start_failures": start_failures[:5],
        "start_p95_ms": ms(percentile(start_latencies, 0.95)),
        **watched_outcome(watches, records, began, cpu_before, cpu_after),
        "status_polls": len(poller.latencies_s),
        "status_errors": poller.errors,
        "status_p95_ms": ms(percentile(poller.latencies_s, 0.95)),
    }


async def _throughput(result: BenchResult, workdir: Path, sizes: ClusterSizes, postgres: str) -> None:
    rows = []
    async with replay_process(REPLAY_LATENCY_S) as wiki_url:
        wiki = ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS)
        for workers in sizes.worker_counts:
            label = f"throughput-{workers}w"
            async with fresh_database(postgres) as database:
                env = cluster_environment(workdir / label, database, (wiki,))
                async with running_cluster(env, workdir / label, workers) as cluster:
                    row = await run_watched(cluster, sizes.throughput_sessions, sizes.max_iterations)
            rows.append(row)
            add_throughput(
                result,
                f"throughput, {workers} worker{'s' if workers > 1 else ''}: sessions per minute",
                row,
                processes="API node + workers",
                note=f"; {row['completed']}/{row['sessions']} completed, {row['lost']} lost",
            )
    result.details["throughput"] = rows


async def _watched_load(result: BenchResult, workdir: Path, sizes: ClusterSizes, postgres: str) -> None:
    label = "watched"
    async with replay_process(REPLAY_LATENCY_S) as wiki_url, fresh_database(postgres) as database:
        env = cluster_environment(workdir / label, database, (ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),))
        async with running_cluster(env, workdir / label, sizes.watch_workers) as cluster:
            row = await run_watched(cluster, sizes.watch_sessions, sizes.max_iterations)
    result.details["watched"] = row
    p = f"{row['sessions']} sessions on {row['workers']} workers:"
    result.add(f"{p} status p95", row["status_p95_ms"], "ms", target=STATUS_P95_TARGET_MS, comparison="<=")
    result.add(
        f"{p} event lag p95",
        row["event_lag_p95_ms"],
        "ms",
        target=EVENT_LAG_P95_TARGET_MS,
        comparison="<=",
        note="worker's event ts to the client on the API node (NOTIFY wake-up, events table read)",
    )
    result.add(f"{p} sessions lost", row["lost"], "", target=0, comparison="==", note="not completed, or a gap")


async def _kill_recovery(result: BenchResult, workdir: Path, sizes: ClusterSizes, postgres: str) -> None:
    label = "kill"
    async with replay_process(KILL_REPLAY_DELAY_S) as wiki_url, fresh_database(postgres) as database:
        env = cluster_environment(
            workdir / label,
            database,
            (ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
            lease_ttl_s=sizes.lease_ttl_s,
        )
        async with running_cluster(env, workdir / label, 1) as cluster:
            victim = cluster.workers[0]
            ids, _, failures = await start_sessions(cluster.api.base_url, sizes.kill_sessions, 2)
            watches = [SessionWatch(sid) for sid in ids]
            watching = [asyncio.create_task(watch_session(cluster.api.ws_url, w, WATCH_TIMEOUT_S)) for w in watches]
            await _until(lambda: all(len(w.seqs) >= EVENTS_BEFORE_KILL for w in watches), 120.0)
            await cluster.add_worker()  # the rescuer, up before the kill: its start-up is not in the figure
            running = [w for w in watches if w.final_type is None]
            killed_at = time.time()
            await asyncio.to_thread(victim.kill)
            await asyncio.gather(*watching)
    resumed = [next((ts for ts in w.stamps if ts > killed_at), None) for w in running]
    recovery = [ts - killed_at for ts in resumed if ts is not None]
    bound = sizes.lease_ttl_s + DEFAULT_WORKER_POLL_S + RECOVERY_GRACE_S
    row = {
        "sessions": len(ids),
        "failed_starts": len(failures),
        "running_at_kill": len(running),
        "resumed": len(recovery),
        "completed": sum(w.final_type == "session_completed" for w in watches),
        "gapless": sum(w.gapless for w in watches),
        "recovery_p50_s": round(percentile(recovery, 0.5) or 0.0, 2) if recovery else None,
        "recovery_max_s": round(max(recovery), 2) if recovery else None,
    }
    result.details["kill"] = row
    result.add(
        "kill -9 of a worker -> its sessions' next event on another worker (max)",
        row["recovery_max_s"],
        "s",
        target=bound,
        comparison="<=",
        note=f"p50 {row['recovery_p50_s']} s over {row['resumed']}/{row['running_at_kill']} sessions running at the "
        f"kill; lease TTL {sizes.lease_ttl_s:g} s + poll {DEFAULT_WORKER_POLL_S:g} s + {RECOVERY_GRACE_S:g} s",
    )
    result.add(
        "kill -9: sessions completed, gapless",
        f"{row['completed']}/{row['sessions']}, {row['gapless']}/{row['sessions']}",
    )


async def _rate_limits(result: BenchResult, workdir: Path, sizes: ClusterSizes, postgres: str) -> None:
    shared = redis_url()
    reason = await redis_unavailable(shared)
    label = f"semantic_scholar ({SCHOLAR_RPS:g}/s) across {sizes.rate_workers} workers: violations"
    if reason is not None:
        result.add(label, None, note=f"skipped: {reason}")
        return
    pages = await asyncio.to_thread(build_pages)
    async with AsyncExitStack() as stack:
        wiki_url = await stack.enter_async_context(replay_process(REPLAY_LATENCY_S))
        scholar_url, scholar = stack.enter_context(running_wiki(REPLAY_LATENCY_S, pages))
        database = await stack.enter_async_context(fresh_database(postgres))
        providers = (
            ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),
            ReplayProvider("semantic_scholar", scholar_url, SCHOLAR_RPS),
        )
        env = cluster_environment(workdir / "rate", database, providers, shared_limits=shared)
        cluster = await stack.enter_async_context(running_cluster(env, workdir / "rate", sizes.rate_workers))
        row = await run_watched(
            cluster, sizes.rate_sessions, 1, providers=("wikipedia", "semantic_scholar"), tier="simple"
        )
        seen = spacing(scholar.arrival_times(), SCHOLAR_RPS)
    result.details["rate_limits"] = {**seen, "sessions": row}
    result.add(
        label,
        seen["violations"],
        "",
        target=0,
        comparison="==",
        note=f"{seen['requests']} requests, minimum spacing {seen['min_spacing_ms']} ms, "
        f"{seen['strict_violations']} without the {JITTER_S * 1000:g} ms jitter allowance; limits through Redis",
    )


async def _until(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition still false after {timeout_s:g} s")
        await asyncio.sleep(0.1)


async def run_cluster(workdir: Path, sizes: ClusterSizes | None = None) -> BenchResult:
    sizes = sizes or ClusterSizes()
    postgres = admin_url()
    result = BenchResult(
        name="cluster",
        title="Cluster: API node + workers on Postgres (and Redis for the limits)",
        parameters={
            "api_nodes": 1,
            "worker_counts": list(sizes.worker_counts),
            "throughput_sessions": sizes.throughput_sessions,
            "watch_sessions": sizes.watch_sessions,
            "watch_workers": sizes.watch_workers,
            "max_iterations": sizes.max_iterations,
            "engine": "offline",
            "replay_delay_s": REPLAY_LATENCY_S,
            "worker_cpu_pool": "none (RESEARCH_CPU_WORKERS=0: each worker is one process)",
            "lease_ttl_s (kill part)": sizes.lease_ttl_s,
            "postgres": postgres,
        },
    )
    started = time.perf_counter()
    reason = await postgres_unavailable(postgres)
    if reason is not None:
        result.skipped = f"skipped: {reason}"
        return result
    await _throughput(result, workdir / "cluster", sizes, postgres)
    await _watched_load(result, workdir / "cluster", sizes, postgres)
    await _kill_recovery(result, workdir / "cluster", sizes, postgres)
    await _rate_limits(result, workdir / "cluster", sizes, postgres)
    result.seconds = round(time.perf_counter() - started, 2)
    return result
