"""The gateway's obstacle handling: circuit breaker, retries bounded by the deadline, no crash."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from research_tool.core.settings import Settings
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.memory import MemoryStore
from research_tool.providers.resilience.circuit_breaker import CircuitBreaker, CircuitBreakerRegistry, CircuitState
from research_tool.providers.resilience.retry import RetryPolicy
from research_tool.providers.search.semantic_scholar import SemanticScholarProvider
from research_tool.providers.search.tavily import TavilyProvider
from tests.support.timing import LOAD_SLACK_S

from .recordings import vcr_interactions
from .replay import ReplayServer, Reply

PATH = "/graph/v1/paper/search"
FAST_RETRIES = RetryPolicy(max_attempts=3, initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0.0)


def _ok() -> Reply:
    return vcr_interactions("semantic_scholar", "test_search_paper.yaml")[0].reply()


async def test_breaker_opens_after_five_consecutive_500s_then_half_opens(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    replay.route(PATH, Reply(500, body={"message": "Internal Server Error"}))
    provider = SemanticScholarProvider(make_settings(), client)
    gateway = SearchGateway(breakers=CircuitBreakerRegistry(reset_timeout_s=0.5), retry_policy=FAST_RETRIES)
    deadline = time.monotonic() + 30

    first = await gateway.search(provider, "a", 5, deadline=deadline)
    assert first.failure is not None and first.failure.error_type == "server_error" and first.attempts == 3
    second = await gateway.search(provider, "b", 5, deadline=deadline)
    assert second.failure is not None and second.failure.error_type == "circuit_open"
    assert len(replay.requests_for(PATH)) == 5
    assert gateway.breaker(provider).state is CircuitState.OPEN

    third = await gateway.search(provider, "c", 5, deadline=deadline)  # refused without a request
    assert (
        third.failure is not None
        and third.failure.error_type == "circuit_open"
        and third.failure.provider == "semantic_scholar"
    )
    assert len(replay.requests_for(PATH)) == 5

    replay.route(PATH, _ok())
    await asyncio.sleep(0.55)
    assert gateway.breaker(provider).state is CircuitState.HALF_OPEN
    probe = await gateway.search(provider, "d", 5, deadline=deadline)
    assert probe.ok and len(probe.results) == 5
    assert gateway.breaker(provider).state is CircuitState.CLOSED
    assert len(replay.requests_for(PATH)) == 6


async def test_failed_half_open_probe_reopens(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    replay.route(PATH, Reply(503))
    provider = SemanticScholarProvider(make_settings(), client)
    gateway = SearchGateway(
        breakers=CircuitBreakerRegistry(reset_timeout_s=0.3), retry_policy=RetryPolicy(max_attempts=1)
    )
    deadline = time.monotonic() + 30
    for _ in range(5):
        await gateway.search(provider, "q", 5, deadline=deadline)
    assert gateway.breaker(provider).state is CircuitState.OPEN
    await asyncio.sleep(0.35)
    probe = await gateway.search(provider, "q", 5, deadline=deadline)
    assert probe.failure is not None and probe.failure.error_type == "server_error"
    assert gateway.breaker(provider).state is CircuitState.OPEN
    assert len(replay.requests_for(PATH)) == 6


def test_breaker_allows_one_probe_at_a_time() -> None:
    now = [0.0]
    breaker = CircuitBreaker("p", failure_threshold=2, reset_timeout_s=60, clock=lambda: now[0])
    breaker.record_failure()
    assert breaker.state is CircuitState.CLOSED
    breaker.record_failure()
    assert breaker.state is CircuitState.OPEN and not breaker.allow()
    now[0] = 59.9
    assert not breaker.allow() and breaker.retry_in() > 0
    now[0] = 60.0
    assert breaker.allow() is True  # the probe
    assert breaker.allow() is False  # everyone else waits for it
    breaker.record_success()
    assert breaker.state is CircuitState.CLOSED and breaker.allow()


async def test_retries_never_pass_the_deadline(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    replay.route(PATH, Reply(500))
    provider = SemanticScholarProvider(make_settings(), client)
    gateway = SearchGateway(
        breakers=CircuitBreakerRegistry(failure_threshold=100),
        retry_policy=RetryPolicy(max_attempts=10, initial_wait_s=1.5, max_wait_s=20.0, jitter_s=0.0),
    )
    started = time.monotonic()
    # 1.5 s then 3 s backoff: the second wait would end past the 4 s deadline, so the gateway gives up after two
    # attempts, 1.5 s in; the bound leaves a busy machine 2.5 s and still tells that from waiting to the deadline
    outcome = await gateway.search(provider, "q", 5, deadline=started + 4.0)
    assert outcome.failure is not None and outcome.failure.error_type == "server_error"
    assert time.monotonic() - started < 4.0
    assert 1 <= outcome.attempts <= 2 and len(replay.requests_for(PATH)) == outcome.attempts


async def test_long_retry_after_gives_up_at_the_deadline(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    replay.route(PATH, Reply(429, body={"message": "Too Many Requests.", "code": "429"}, headers={"Retry-After": "30"}))
    provider = SemanticScholarProvider(make_settings(), client)
    started = time.monotonic()
    outcome = await SearchGateway(retry_policy=FAST_RETRIES).search(
        provider, "q", 5, deadline=started + 2 * LOAD_SLACK_S
    )
    elapsed = time.monotonic() - started
    assert outcome.failure is not None and outcome.failure.error_type == "rate_limited"
    assert elapsed < LOAD_SLACK_S  # no point waiting for a pause that ends after the deadline (waiting would reach it)
    assert len(replay.requests_for(PATH)) == 1


async def test_unavailable_provider_sends_nothing(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    outcome = await SearchGateway().search(
        TavilyProvider(make_settings(), client), "q", 5, deadline=time.monotonic() + 5
    )
    assert outcome.failure is not None and outcome.failure.error_type == "provider_unavailable"
    assert outcome.failure.message == "tavily: TAVILY_API_KEY is not set"
    assert replay.requests == []


async def test_unparseable_payload_is_a_recorded_failure_not_a_crash(
    replay: ReplayServer, make_settings: Callable[..., Settings], client: httpx.AsyncClient, tmp_path: Path
) -> None:
    replay.route(PATH, Reply(200, body={"total": 1, "data": [{"title": "no paperId nor url"}]}))
    memory = MemoryStore(tmp_path / "memory.db")
    gateway = SearchGateway(memory=memory)
    provider = SemanticScholarProvider(make_settings(), client)
    outcome = await gateway.search(provider, "q", 5, deadline=time.monotonic() + 5, domain="academic")
    assert outcome.failure is not None and outcome.failure.error_type == "bad_response"
    assert "KeyError" in outcome.failure.message
    recorded = await memory.failures(10)
    assert [(f.provider, f.error_type, f.query) for f in recorded] == [("semantic_scholar", "bad_response", "q")]

    replay.route(PATH, _ok())
    await gateway.search(provider, "turing", 5, deadline=time.monotonic() + 5, domain="academic")
    stats = {s.provider: s for s in await memory.provider_stats("academic")}
    assert (stats["semantic_scholar"].calls, stats["semantic_scholar"].results, stats["semantic_scholar"].failures) == (
        1,
        5,
        1,
    )


def test_breakers_and_limiters_are_shared_by_every_gateway_in_the_process(
    make_settings: Callable[..., Settings],
) -> None:
    from research_tool.providers.resilience.rate_limiter import provider_limiter

    settings = make_settings()
    one, other = (
        SemanticScholarProvider(settings, httpx.AsyncClient()),
        SemanticScholarProvider(settings, httpx.AsyncClient()),
    )
    assert SearchGateway().breaker(one) is SearchGateway().breaker(other)
    assert provider_limiter(one) is provider_limiter(other)
    elsewhere = SemanticScholarProvider(
        make_settings(semantic_scholar_base_url="http://127.0.0.1:9"), httpx.AsyncClient()
    )
    assert provider_limiter(elsewhere) is not provider_limiter(one)  # another endpoint, another budget
