"""A provider whose host name does not resolve (no network, issue 24): one failed call opens its breaker, no retry,
and the calls already waiting for their turn in the rate limiter are refused at once instead of waiting it out.

`nonexistent.invalid` never resolves (RFC 2606): the failure happens in the resolver, no packet leaves the host.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from research_tool.core.settings import Settings
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.resilience.circuit_breaker import CircuitBreakerRegistry, CircuitState
from research_tool.providers.search.duckduckgo import DuckDuckGoProvider
from research_tool.providers.search.wikipedia import WikipediaProvider

UNRESOLVABLE = "http://nonexistent.invalid"


async def test_a_host_not_found_opens_the_breaker_on_the_first_failure_without_retries(
    make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    provider = WikipediaProvider(make_settings(wikipedia_base_url=UNRESOLVABLE), client)
    gateway = SearchGateway(breakers=CircuitBreakerRegistry())
    deadline = time.monotonic() + 30

    first = await gateway.search(provider, "kettle", 5, deadline=deadline)
    assert first.failure is not None and first.failure.error_type == "dns" and first.attempts == 1
    assert gateway.breaker(provider).state is CircuitState.OPEN
    second = await gateway.search(provider, "teapot", 5, deadline=deadline)
    assert second.failure is not None and second.failure.error_type == "circuit_open"


async def test_duckduckgos_own_resolver_failure_counts_as_host_not_found(
    make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    provider = DuckDuckGoProvider(make_settings(duckduckgo_base_url=UNRESOLVABLE), client)
    gateway = SearchGateway(breakers=CircuitBreakerRegistry())
    outcome = await gateway.search(provider, "kettle", 5, deadline=time.monotonic() + 30)
    assert outcome.failure is not None and outcome.failure.error_type == "dns" and outcome.attempts == 1
    assert gateway.breaker(provider).state is CircuitState.OPEN


async def test_calls_waiting_for_their_turn_are_refused_once_the_host_is_not_found(
    make_settings: Callable[..., Settings], client: httpx.AsyncClient
) -> None:
    # one request per 20 s: without the breaker ending their wait, the last of four calls would wait a minute
    provider = WikipediaProvider(make_settings(wikipedia_base_url=UNRESOLVABLE, wikipedia_rps=0.05), client)
    gateway = SearchGateway(breakers=CircuitBreakerRegistry())
    deadline = time.monotonic() + 120
    async with asyncio.timeout(10):
        outcomes = await asyncio.gather(
            *(gateway.search(provider, f"query {i}", 5, deadline=deadline) for i in range(4))
        )
    kinds = sorted(o.failure.error_type for o in outcomes if o.failure is not None)
    assert kinds == ["circuit_open", "circuit_open", "circuit_open", "dns"]
    assert all(o.attempts == 1 for o in outcomes)
