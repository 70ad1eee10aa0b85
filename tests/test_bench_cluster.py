"""The cluster benchmark (`python -m research_tool.bench --only cluster`): skipped with its reason when Postgres is
not there, its pieces on their own, and (when Postgres, the `postgres` extra and the worker role are all there) a
run at its smallest size."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.bench import cluster as cluster_bench
from research_tool.bench.cluster import (
    QUICK_CLUSTER,
    ClusterSizes,
    cluster_environment,
    redis_unavailable,
    run_cluster,
)
from research_tool.bench.fresh_database import database_url, postgres_unavailable
from research_tool.bench.replay_env import ReplayProvider
from research_tool.bench.server_process import ServerStartError, start_cli_worker
from tests.support.redis_service import free_port, reachable_redis, redis_url_for_tests


async def test_without_postgres_the_cluster_benchmark_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    monkeypatch.setenv("RESEARCH_BENCH_POSTGRES_URL", closed)
    result = await run_cluster(tmp_path, QUICK_CLUSTER)
    assert result.skipped is not None and result.skipped.startswith("skipped: ")
    assert f"Postgres not reachable at {closed}" in result.skipped or "psycopg is not installed" in result.skipped
    assert not result.figures


async def test_redis_reachability_names_the_url() -> None:
    closed = f"redis://127.0.0.1:{free_port()}/0"
    reason = await redis_unavailable(closed)
    assert reason is not None and (closed in reason or "redis-py is not installed" in reason)
    url = redis_url_for_tests()
    async with reachable_redis(url):
        assert await redis_unavailable(url) is None


def test_cluster_processes_get_the_database_redis_and_replay_providers(tmp_path: Path) -> None:
    providers = (ReplayProvider("wikipedia", "http://127.0.0.1:1234", 1000.0),)
    env = cluster_environment(
        tmp_path, "postgresql://postgres@127.0.0.1:5432/rt_bench_x", providers, shared_limits="redis://r:6379/0"
    ).process_env()
    assert env["RESEARCH_DATABASE_URL"] == "postgresql://postgres@127.0.0.1:5432/rt_bench_x"
    assert env["RESEARCH_REDIS_URL"] == "redis://r:6379/0" and env["RESEARCH_REDIS_PREFIX"].startswith("rt-bench-")
    assert env["RESEARCH_WIKIPEDIA_BASE_URL"] == "http://127.0.0.1:1234"
    assert env["RESEARCH_CPU_WORKERS"] == "0" and env["RESEARCH_LLM"] == "offline"
    assert "RESEARCH_MAX_CONCURRENT_SESSIONS" not in env  # per worker: the worker's default
    assert env["RESEARCH_SEMANTIC_SCHOLAR_BASE_URL"] == "http://127.0.0.1:9"  # nothing leaves the machine
    assert database_url("postgresql://u@h:5432/postgres?sslmode=disable", "rt_x") == "postgresql://u@h:5432/rt_x"


async def test_a_worker_that_cannot_start_is_reported_not_waited_for(tmp_path: Path) -> None:
    env = cluster_environment(tmp_path, "", ()).process_env()
    env.pop("RESEARCH_DATABASE_URL")  # a worker without a database refuses to start (exit 2)
    with pytest.raises(ServerStartError, match="the worker exited with 2"):
        await start_cli_worker(env, tmp_path, "worker-0", cluster_bench.WORKER_READY_TEXT)


# smaller than --quick: every part runs, on the fewest sessions and processes that show it works
TINY_CLUSTER = ClusterSizes(
    worker_counts=(1,),
    throughput_sessions=2,
    watch_sessions=3,
    watch_workers=1,
    kill_sessions=1,
    rate_workers=2,
    rate_sessions=2,
    max_iterations=1,
    lease_ttl_s=3.0,
)


@pytest.mark.slow
async def test_the_cluster_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    reason = await postgres_unavailable(cluster_bench.admin_url())
    if reason is not None:
        pytest.skip(reason)
    result = await run_cluster(tmp_path, TINY_CLUSTER)
    assert result.skipped is None
    names = [f.name for f in result.figures]
    for workers in TINY_CLUSTER.worker_counts:
        label = f"throughput, {workers} worker{'s' if workers > 1 else ''}: sessions per minute"
        assert label in names and result.figure(label).value is not None, names
    watched = result.details["watched"]
    assert watched["completed"] == TINY_CLUSTER.watch_sessions and watched["lost"] == 0, watched  # start_failures too
    assert watched["status_p95_ms"] is not None and watched["event_lag_p95_ms"] is not None
    kill = result.details["kill"]
    assert kill["running_at_kill"] >= 1 and kill["resumed"] == kill["running_at_kill"]
    assert kill["completed"] == kill["sessions"] == kill["gapless"]
    rate = result.details.get("rate_limits")
    if rate is not None:  # Redis reachable; spacing itself is asserted in tests/providers/test_shared_limits.py
        assert rate["requests"] >= 2 and rate["violations"] is not None
