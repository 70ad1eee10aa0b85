"""Every provider call goes through the gateway: rate limit, retries, circuit breaker, deadline.

The gateway is process-wide (one per CLI run or server), so all sessions share each provider's
rate limiter and breaker. A call never raises for a provider failure: it returns a SearchOutcome
whose `failure` says what went wrong, so a failing provider degrades a session but never crashes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from research_tool.core.errors import ProviderError
from research_tool.core.logging import get_logger
from research_tool.models.entities import AccessFailure, SourceResult
from research_tool.services.search.provider import SearchProvider

log = get_logger(__name__)


@dataclass
class SearchOutcome:
    provider: str
    query: str
    results: list[SourceResult] = field(default_factory=list)
    failure: AccessFailure | None = None
    latency_s: float = 0.0
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.failure is None


class SearchGateway:
    """Minimal gateway: one attempt, failures recorded. (Rate limits, retries and breakers: issue 4.)"""

    async def search(
        self,
        provider: SearchProvider,
        query: str,
        max_results: int,
        *,
        deadline: float,
        iteration: int = 0,
    ) -> SearchOutcome:
        """`deadline` is a time.monotonic() value the call (waits included) must not pass."""
        started = time.monotonic()
        try:
            results = await provider.search(query, max_results)
        except ProviderError as exc:
            failure = AccessFailure(
                provider=provider.name,
                url=exc.url,
                query=query,
                error_type=exc.error_type,
                message=exc.message,
                iteration=iteration,
            )
            log.warning("provider_failed", provider=provider.name, error_type=exc.error_type)
            return SearchOutcome(provider.name, query, failure=failure, latency_s=time.monotonic() - started)
        return SearchOutcome(provider.name, query, results=results, latency_s=time.monotonic() - started)
