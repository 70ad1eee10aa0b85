"""Each provider's rate limit, Retry-After pause and circuit breaker hold across processes through Redis
(RESEARCH_REDIS_URL): three real OS processes (limits_process.py, each with its own event loop, HTTP client and
Redis connection) call one provider on a real HTTP server on 127.0.0.1 that records arrival times.

The limits are timed by Redis's clock: the contract is exact there (grants at least one interval apart, whichever
process asked). A request reaches the server some time after its grant, and on a busy 2-core machine two
processes' grant-to-arrival delays can differ by tens of ms, so arrivals (time.monotonic() in this process, the
same clock for every process on Linux) may come closer than the grants only by the spread of those delays,
measured in the test itself, as tests/providers/test_rate_limits.py does for one process.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import statistics
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from research_tool.core.settings import PROVIDER_NAMES
from tests.support.counting_server import counting_server
from tests.support.polling import eventually
from tests.support.redis_service import delete_prefix, reachable_redis, redis_url_for_tests, unique_prefix

from .recordings import vcr_interactions
from .replay import ReplayServer, Reply

SEARCH_PATH = "/graph/v1/paper/search"
PROCESS_SCRIPT = Path(__file__).with_name("limits_process.py")
START_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 60.0


@dataclass
class LimitsProcess:
    process: asyncio.subprocess.Process

    async def read(self) -> Any:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), REPLY_TIMEOUT_S)
        assert line, f"limits process exited (code {self.process.returncode})"
        return json.loads(line)

    def ask(self, searches: int) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"searches": searches}).encode() + b"\n")

    async def search(self, searches: int) -> list[dict[str, Any]]:
        self.ask(searches)
        return await self.outcomes()

    async def outcomes(self) -> list[dict[str, Any]]:
        reply: dict[str, Any] = await self.read()
        return list(reply["outcomes"])


@pytest.fixture
async def redis_prefix() -> AsyncIterator[tuple[str, str]]:
    url = redis_url_for_tests()
    async with reachable_redis(url):
        prefix = unique_prefix()
        try:
            yield url, prefix
        finally:
            await delete_prefix(url, prefix)


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env.update({f"{n.upper()}_API_KEY": "" for n in PROVIDER_NAMES})
    return env


@asynccontextmanager
async def limits_processes(count: int, **config: Any) -> AsyncIterator[list[LimitsProcess]]:
    """`count` worker-like processes, set up and ready (their Redis connection and HTTP client open)."""
    started: list[LimitsProcess] = []
    try:
        for _ in range(count):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                str(PROCESS_SCRIPT),
                json.dumps(config),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=child_env(),
            )
            started.append(LimitsProcess(process))
        for worker in started:
            assert (await asyncio.wait_for(worker.read(), START_TIMEOUT_S)) == {"ready": True}
        yield started
    finally:
        for worker in started:
            if worker.process.returncode is None:
                worker.process.kill()
            await worker.process.wait()


@pytest.fixture
def search_server() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.mark.slow
async def test_three_processes_keep_one_providers_spacing(
    redis_prefix: tuple[str, str], search_server: ReplayServer
) -> None:
    url, prefix = redis_prefix
    search_server.route(SEARCH_PATH, vcr_interactions("semantic_scholar", "test_search_paper.yaml")[0].reply())
    rps = 1.0
    async with limits_processes(
        3, redis_url=url, redis_prefix=prefix, base_url=search_server.base_url, rps=rps
    ) as workers:
        for worker, searches in zip(workers, (3, 3, 2), strict=True):  # all three ask at once
            worker.ask(searches)
        replies = [await worker.read() for worker in workers]

    assert all(o["ok"] for reply in replies for o in reply["outcomes"]), replies
    # the limits' own clock (Redis's): eight grants from three processes, each one interval after the last
    grants = sorted(g for reply in replies for g in reply["grants"])
    assert len(grants) == 8
    grant_gaps = [b - a for a, b in itertools.pairwise(grants)]
    assert min(grant_gaps) >= 1 / rps, grant_gaps
    # and not held back for nothing: one interval apart, not two
    assert statistics.median(grant_gaps) < 1.5 / rps, grant_gaps
    # the server's clock: arrivals may come closer only by the spread of grant-to-arrival delays (constant offset
    # between the two clocks cancels out of the spread)
    arrivals = sorted(r.at for r in search_server.requests_for(SEARCH_PATH))
    assert len(arrivals) == 8
    delays = [arrived - granted for granted, arrived in zip(grants, arrivals, strict=True)]
    slack = max(delays) - min(delays)
    arrival_gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(arrival_gaps) >= 1 / rps - slack, (arrival_gaps, slack)


@pytest.mark.slow
async def test_a_429_seen_by_one_process_pauses_the_others(
    redis_prefix: tuple[str, str], search_server: ReplayServer
) -> None:
    url, prefix = redis_prefix
    ok = vcr_interactions("semantic_scholar", "test_search_paper.yaml")[0].reply()
    search_server.route(
        SEARCH_PATH, Reply(429, body={"message": "Too Many Requests"}, headers={"Retry-After": "2"}), ok
    )
    async with limits_processes(
        3, redis_url=url, redis_prefix=prefix, base_url=search_server.base_url, rps=5.0, attempts=3
    ) as workers:
        for worker in workers:
            worker.ask(2)
        outcomes = [o for worker in workers for o in await worker.outcomes()]

    assert all(o["ok"] for o in outcomes), outcomes
    assert sorted(o["attempts"] for o in outcomes) == [1, 1, 1, 1, 1, 2]  # one search met the 429
    rate_limited, *after = sorted(r.at for r in search_server.requests_for(SEARCH_PATH))
    assert len(after) == 6
    # every process's next request waited out the Retry-After (the pause starts after the 429 arrived)
    assert min(after) - rate_limited >= 2.0, [t - rate_limited for t in after]


@pytest.mark.slow
async def test_the_breaker_opens_for_every_process_and_half_opens_with_one_probe(
    redis_prefix: tuple[str, str],
) -> None:
    url, prefix = redis_prefix
    from redis.asyncio import Redis

    redis = Redis.from_url(url)
    breaker_key = f"{prefix}:breaker:semantic_scholar@"
    with counting_server(status=500) as (base_url, counter):
        breaker_key += base_url

        def searches() -> int:
            with counter.lock:
                return sum(path.startswith(SEARCH_PATH) for path in counter.paths)

        async with limits_processes(
            3,
            redis_url=url,
            redis_prefix=prefix,
            base_url=base_url,
            rps=100.0,
            failure_threshold=3,
            reset_timeout_s=1.0,
        ) as (a, b, c):
            # three failures, from two processes, open it for all three
            assert [o["error_type"] for o in await a.search(2)] == ["server_error"] * 2
            assert [o["error_type"] for o in await b.search(1)] == ["server_error"]
            assert searches() == 3
            refused = [*(await c.search(2)), *(await a.search(1))]
            assert [o["error_type"] for o in refused] == ["circuit_open"] * 3
            assert searches() == 3  # no request left any process

            async def half_open_due() -> bool:
                seconds, micros = await redis.time()
                opened_at = int(await redis.hget(breaker_key, "opened_at") or 0)
                return seconds * 1_000_000 + micros >= opened_at + 1_000_000

            await eventually(half_open_due, within_s=5)
            for worker in (a, b, c):  # nine calls at once across the cluster
                worker.ask(3)
            outcomes = [o for worker in (a, b, c) for o in await worker.outcomes()]

    await redis.aclose()
    # exactly one probe reached the server; the other eight were refused as if open
    assert searches() == 4
    assert sorted(o["error_type"] for o in outcomes) == ["circuit_open"] * 8 + ["server_error"]
