"""One "worker" for the cluster-limit tests: a real OS process with its own event loop, HTTP client and Redis
connection, wired as a worker is (runtime.shared_limits.open_shared_limits on the process-wide registries).

    python limits_process.py '{"redis_url": ..., "redis_prefix": ..., "base_url": ..., "rps": 1.0,
                               "attempts": 1, "failure_threshold": 5, "reset_timeout_s": 60}'

It prints {"ready": true} once set up (after one request to /warm-up, outside the limits), then for each line
{"searches": n} on stdin runs n Semantic Scholar searches at once through a SearchGateway and prints one JSON
line: {"outcomes": [{"ok", "error_type", "attempts"}, ...], "grants": [...]}, where grants are the cluster-wide
grants of the provider's limiter meanwhile, on Redis's clock (epoch seconds). EOF ends it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from research_tool.core.logging import configure_logging
from research_tool.core.settings import Settings
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.resilience.circuit_breaker import CIRCUIT_BREAKERS
from research_tool.providers.resilience.rate_limiter import RateLimiter, provider_limiter
from research_tool.providers.resilience.retry import RetryPolicy
from research_tool.providers.search.semantic_scholar import SemanticScholarProvider
from research_tool.runtime.shared_limits import open_shared_limits

WARM_UP_PATH = "/warm-up"


def record_cluster_grants(limiter: RateLimiter) -> list[float]:
    """Redis's time of each cluster-wide grant this process's limiter gets from now on."""
    grants: list[float] = []
    acquire = limiter.acquire

    async def recording_acquire() -> None:
        await acquire()
        if limiter.cluster_granted_at is not None:
            grants.append(limiter.cluster_granted_at)

    limiter.acquire = recording_acquire  # type: ignore[method-assign]
    return grants


def emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def serve(config: dict[str, Any]) -> None:
    settings = Settings(
        data_dir=Path(tempfile.gettempdir()) / "limits-process-unused",
        redis_url=config["redis_url"],
        redis_prefix=config["redis_prefix"],
        semantic_scholar_base_url=config["base_url"],
        semantic_scholar_rps=config["rps"],
    )
    CIRCUIT_BREAKERS.failure_threshold = config.get("failure_threshold", 5)
    CIRCUIT_BREAKERS.reset_timeout_s = config.get("reset_timeout_s", 60.0)
    retries = RetryPolicy(max_attempts=config.get("attempts", 1), initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0.0)
    loop = asyncio.get_running_loop()
    async with open_shared_limits(settings):
        client = httpx.AsyncClient()  # plain httpx: the aiohttp transport's import would double the start-up time
        try:
            provider = SemanticScholarProvider(settings, client)
            gateway = SearchGateway(retry_policy=retries)
            grants = record_cluster_grants(provider_limiter(provider))
            # the first request of a client pays for lazy imports and a connection: not inside a measured gap
            await client.get(f"{config['base_url']}{WARM_UP_PATH}")
            emit({"ready": True})
            while line := await loop.run_in_executor(None, sys.stdin.readline):
                count = json.loads(line)["searches"]
                deadline = time.monotonic() + 60
                outcomes = await asyncio.gather(
                    *(gateway.search(provider, f"q{i}", 3, deadline=deadline) for i in range(count))
                )
                emit(
                    {
                        "outcomes": [
                            {
                                "ok": o.ok,
                                "error_type": o.failure.error_type if o.failure else None,
                                "attempts": o.attempts,
                            }
                            for o in outcomes
                        ],
                        "grants": grants[:],
                    }
                )
                grants.clear()
        finally:
            await client.aclose()


if __name__ == "__main__":
    configure_logging("json", "WARNING")  # on stderr: stdout carries the replies
    asyncio.run(serve(json.loads(sys.argv[1])))
