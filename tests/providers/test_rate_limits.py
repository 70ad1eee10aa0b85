"""Per-provider rate limits, shared by the whole process, adaptive to the server's pauses (DESIGN §4)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

import httpx

from research_tool.core.settings import Settings
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.resilience.circuit_breaker import CircuitBreakerRegistry
from research_tool.providers.resilience.retry import RetryPolicy
from research_tool.providers.search.brave import BraveProvider
from research_tool.providers.search.pubmed import PubMedProvider
from research_tool.providers.search.semantic_scholar import SemanticScholarProvider
from tests.support.polling import eventually

from .recordings import raw_bytes, vcr_interactions
from .replay import ReplayServer, Reply

FAST_RETRIES = RetryPolicy(max_attempts=3, initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0.0)


async def test_ten_concurrent_searches_at_two_per_second(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    replay.route("/graph/v1/paper/search", vcr_interactions("semantic_scholar", "test_search_paper.yaml")[0].reply())
    provider = SemanticScholarProvider(make_settings(semantic_scholar_rps=2.0), client)
    gateway = SearchGateway(breakers=CircuitBreakerRegistry())
    deadline = time.monotonic() + 30

    started = time.monotonic()
    outcomes = await asyncio.gather(*(gateway.search(provider, f"q{i}", 5, deadline=deadline) for i in range(10)))
    elapsed = time.monotonic() - started

    assert all(o.ok and len(o.results) == 5 for o in outcomes)
    arrivals = sorted(r.at for r in replay.requests_for("/graph/v1/paper/search"))
    assert len(arrivals) == 10
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) >= 0.48, gaps
    assert 4.5 * 0.9 <= elapsed <= 4.5 * 1.1, elapsed


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

    await eventually(first_request_arrived, every_s=0.005)
    await asyncio.sleep(0.1)  # the 429 has been answered; session B asks now
    second = await session_b[0].search(session_b[1], "world", 3, deadline=deadline)
    outcome_a = await first

    assert outcome_a.ok and outcome_a.attempts == 2
    assert second.ok and second.attempts == 1
    rate_limited, *after = sorted(r.at for r in replay.requests_for("/res/v1/web/search"))
    assert len(after) == 2
    assert min(after) - rate_limited >= 1.95, [t - rate_limited for t in after]


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
    assert second - first >= 1.9  # no Retry-After: the default pause applies to everyone
