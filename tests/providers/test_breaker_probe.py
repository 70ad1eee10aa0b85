"""A half-open probe that is cancelled (a stop, a deadline) releases the breaker (issue 10 item 8): it used
to stay "in flight" forever, so the process-wide breaker refused the provider until a restart."""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

import httpx
import pytest

from research_tool.core.errors import ProviderServerError
from research_tool.core.settings import Settings
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.resilience.circuit_breaker import CircuitBreakerRegistry, CircuitState
from research_tool.providers.resilience.retry import RetryPolicy

RESET_S = 60.0


class ScriptedProvider(SearchProvider):
    """Fails while `failing`; otherwise signals `entered` and waits on `release` (a probe that hangs)."""

    name: ClassVar[str] = "scripted"
    default_rps: ClassVar[float] = 1000.0

    def __init__(self, settings: Settings, client: httpx.AsyncClient) -> None:
        super().__init__(settings, client)
        self.failing = True
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def unavailable_reason(self) -> str | None:
        return None

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        if self.failing:
            raise ProviderServerError(self.name, "HTTP 503", status=503)
        self.entered.set()
        await self.release.wait()
        return []


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("how", ["cancelled", "session deadline"])
async def test_a_cancelled_half_open_probe_releases_the_breaker(client: httpx.AsyncClient, how: str) -> None:
    clock = FakeClock()
    breakers = CircuitBreakerRegistry(failure_threshold=1, reset_timeout_s=RESET_S, clock=clock)
    gateway = SearchGateway(breakers=breakers, retry_policy=RetryPolicy(max_attempts=1))
    provider = ScriptedProvider(Settings(_env_file=None), client)  # type: ignore[call-arg]
    breaker = gateway.breaker(provider)
    far = time.monotonic() + 3600

    opened = await gateway.search(provider, "q", 5, deadline=far)
    assert opened.failure is not None and breaker.state is CircuitState.OPEN
    clock.now += RESET_S
    assert breaker.state is CircuitState.HALF_OPEN

    provider.failing = False
    outer_deadline: list[asyncio.Timeout] = []

    async def probe_under_a_caller_deadline() -> None:
        async with asyncio.timeout(None) as deadline:  # e.g. the collect node's own time limit
            outer_deadline.append(deadline)
            await gateway.search(provider, "q", 5, deadline=far)

    if how == "cancelled":  # a user's stop cancels the session task
        probe = asyncio.create_task(gateway.search(provider, "q", 5, deadline=far))
        await provider.entered.wait()
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
    else:
        task = asyncio.create_task(probe_under_a_caller_deadline())
        await provider.entered.wait()
        outer_deadline[0].reschedule(asyncio.get_running_loop().time())
        with pytest.raises(TimeoutError):
            await task

    assert breaker.state is CircuitState.HALF_OPEN
    provider.release.set()
    again = await gateway.search(provider, "q", 5, deadline=far)  # the next call may probe
    assert again.ok, again.failure
    assert breaker.state is CircuitState.CLOSED
