"""Per-provider rate limits, shared by the whole process, adaptive to the server's pauses (DESIGN §4).

Times are compared on one clock, time.monotonic(): the limiter's grants and pauses, and the replay
server's arrival times. The limiter's contract is exact on its own clock (grants at least one interval
apart, none before a pause ends); a request reaches the server some time after its grant, and the only
slack allowed on arrival spacing is the spread of those delays, measured in the test itself.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import statistics
import time
from collections.abc import Callable

import httpx
import pytest

from research_tool.core.settings import Settings
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.provider_http import DEFAULT_RATE_LIMIT_PAUSE_S
from research_tool.providers.resilience.circuit_breaker import CircuitBreakerRegistry
from research_tool.providers.resilience.rate_limiter import RateLimiter, provider_limiter
from research_tool.providers.resilience.retry import RetryPolicy
from research_tool.providers.search.brave import BraveProvider
from research_tool.providers.search.pubmed import PubMedProvider
from research_tool.providers.search.semantic_scholar import SemanticScholarProvider
from tests.support.polling import eventually

from .recordings import raw_bytes, vcr_interactions
from .replay import ReplayServer, Reply

FAST_RETRIES = RetryPolicy(max_attempts=3, initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0.0)


def record_grants(limiter: RateLimiter, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The limiter's grant times (its own clock), appended as each acquire() returns."""
    grants: list[float] = []
    acquire = limiter.acquire

    async def recording_acquire() -> None:
        await acquire()
        grants.append(limiter.last_granted_at)

    monkeypatch.setattr(limiter, "acquire", recording_acquire)
    return grants


@pytest.mark.slow
async def test_ten_concurrent_searches_at_two_per_second(
    replay: ReplayServer,
    make_settings: Callable[..., Settings],
    client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    replay.route("/graph/v1/paper/search", vcr_interactions("semantic_scholar", "test_search_paper.yaml")[0].reply())
    provider = SemanticScholarProvider(make_settings(semantic_scholar_rps=2.0), client)
    limiter = provider_limiter(provider)
    grants = record_grants(limiter, monkeypatch)
    gateway = SearchGateway(breakers=CircuitBreakerRegistry())
    deadline = time.monotonic() + 30

    outcomes = await asyncio.gather(*(gateway.search(provider, f"q{i}", 5, deadline=deadline) for i in range(10)))

    assert all(o.ok and len(o.results) == 5 for o in outcomes)
    assert limiter.interval >= 0.5
    # the limiter's own clock: ten grants, each at least one interval after the one before
    assert len(grants) == 10
    grant_gaps = [b - a for a, b in itertools.pairwise(grants)]
    assert min(grant_gaps) >= limiter.interval, grant_gaps
    # and not held back for nothing: the typical gap is one interval, not two
    assert statistics.median(grant_gaps) < 1.5 * limiter.interval, grant_gaps
    # the server's clock: arrival spacing may shrink only by the spread of grant-to-arrival delays
    arrivals = sorted(r.at for r in replay.requests_for("/graph/v1/paper/search"))
    assert len(arrivals) == 10
    delays = [arrived - granted for granted, arrived in zip(sorted(grants), arrivals, strict=True)]
    assert min(delays) >= 0.0, delays  # a request never reaches the server before its grant
    slack = max(delays) - min(delays)
    arrival_gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(arrival_gaps) >= limiter.interval - slack, (arrival_gaps, slack)


async def test_retry_after_holds_every_sessions_next_request(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    ok = Reply(200, body=raw_bytes("brave", "web.json"), content_type="application/json")
    replay.route(
        "/res/v1/web/search", Reply(429, body={"error": {"code": "RATE_LIMITED"}}, headers={"Retry-After": "2"}), ok
    )
    settings = make_settings(brave_api_key="k", brave_rps=20.0)
    # two sessions: separate gateways and provider objects, one process
    session_a = (SearchGateway(retry_policy=FAST_RETRIES), BraveProvider(settings, client))
    session_b = (SearchGateway(retry_policy=FAST_RETRIES), BraveProvider(settings, client))
    deadline = time.monotonic() + 20

    first = asyncio.create_task(session_a[0].search(session_a[1], "hello", 3, deadline=deadline))

    async def first_request_arrived() -> bool:
        return bool(replay.requests_for("/res/v1/web/search"))

    limiter = provider_limiter(session_a[1])

    async def paused_by_the_429() -> bool:
        return limiter.paused_until > -math.inf

    await eventually(paused_by_the_429, every_s=0.005)  # the 429 has been answered; session B asks now
    pause_ends = limiter.paused_until
    second = await session_b[0].search(session_b[1], "world", 3, deadline=deadline)
    outcome_a = await first

    assert outcome_a.ok and outcome_a.attempts == 2
    assert second.ok and second.attempts == 1
    rate_limited, *after = sorted(r.at for r in replay.requests_for("/res/v1/web/search"))
    assert len(after) == 2
    # the pause (Retry-After: 2) starts when the 429 is read, after it reached the server ...
    assert pause_ends - rate_limited >= 2.0
    # ... and neither session's next request reaches the server before it ends
    assert min(after) >= pause_ends, [t - pause_ends for t in after]


async def test_pubmed_rate_limit_body_pauses_and_retries(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    replay.route(
        "/esearch.fcgi",
        Reply(200, body={"error": "API rate limit exceeded", "count": "4", "limit": "3"}),
        Reply(200, body=raw_bytes("pubmed", "esearch8.xml"), content_type="text/xml"),
    )
    provider = PubMedProvider(make_settings(pubmed_rps=20.0), client)
    outcome = await SearchGateway(retry_policy=FAST_RETRIES).search(
        provider, "abcXYZ", 5, deadline=time.monotonic() + 10
    )
    assert outcome.ok and outcome.results == [] and outcome.attempts == 2
    first, second = (r.at for r in replay.requests_for("/esearch.fcgi"))
    # no Retry-After: the default pause applies to everyone, from when the body was read
    pause_ends = provider_limiter(provider).paused_until
    assert pause_ends - first >= DEFAULT_RATE_LIMIT_PAUSE_S
    assert second >= pause_ends
