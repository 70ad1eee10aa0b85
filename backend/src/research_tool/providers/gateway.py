"""Every provider call goes through the gateway: rate limit, retries, circuit breaker, deadline.

The gateway's breakers and the providers' rate limiters are process-wide (CIRCUIT_BREAKERS,
RATE_LIMITERS), so all sessions share each provider's limiter and breaker; with RESEARCH_REDIS_URL, all
processes do (resilience/shared_limits.py). A call never raises for a
provider failure: it returns a SearchOutcome whose `failure` says what went wrong, so a failing
provider degrades a session but never crashes it. Cancellation (a user's stop) still propagates.

Per call (DESIGN §4 decision tree):
- provider not configured -> failure `provider_unavailable`, no request;
- breaker open -> failure `circuit_open`, no request;
- 429 / rate-limit body -> the provider's limiter is paused for everyone (Retry-After, X-RateLimit-Reset),
  then retried; timeouts and 5xx -> retried with capped, jittered backoff; no wait passes `deadline`;
- 5xx, timeouts and connection failures count towards the breaker (open after 5 consecutive, half-open
  after the reset timeout); a host name that does not resolve opens it at once and is not retried;
  401/402/403 and bad requests are recorded and not retried.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from research_tool.core import telemetry
from research_tool.core.errors import (
    CircuitOpenError,
    HostUnresolvedError,
    ProviderError,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
    SessionDeadlineError,
)
from research_tool.core.logging import get_logger
from research_tool.models.entities import AccessFailure, SourceResult
from research_tool.providers.base import SearchProvider
from research_tool.providers.resilience.circuit_breaker import (
    CIRCUIT_BREAKERS,
    CURRENT_BREAKER,
    CircuitBreaker,
    CircuitBreakerRegistry,
)
from research_tool.providers.resilience.rate_limiter import endpoint_key, provider_limiter
from research_tool.providers.resilience.retry import RetryPolicy, deadline_retrying

if TYPE_CHECKING:
    from research_tool.providers.memory import MemoryStore

log = get_logger(__name__)

# Failures that say the provider itself is unwell (they trip the breaker).
NOT_REMEMBERED = frozenset({ProviderUnavailableError.error_type, CircuitOpenError.error_type})
BREAKER_FAILURES: tuple[type[ProviderError], ...] = (ProviderServerError, ProviderTimeoutError)


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


def access_failure(
    exc: ProviderError, *, provider: str, query: str | None = None, url: str | None = None, iteration: int = 0
) -> AccessFailure:
    """The AccessFailure record (state and memory store) for a typed provider error."""
    return AccessFailure(
        provider=provider,
        url=url or exc.url,
        query=query,
        error_type=exc.error_type,
        message=exc.message,
        iteration=iteration,
    )


class SearchGateway:
    """Process-wide entry point for provider searches.

    `breakers` defaults to the process-wide registry; tests pass their own (with a short reset timeout).
    With `memory`, a call that names its `domain` records results and failures in the memory store.
    """

    def __init__(
        self,
        *,
        breakers: CircuitBreakerRegistry | None = None,
        retry_policy: RetryPolicy | None = None,
        memory: MemoryStore | None = None,
    ) -> None:
        self.breakers = breakers if breakers is not None else CIRCUIT_BREAKERS
        self.retry_policy = retry_policy or RetryPolicy()
        self.memory = memory

    def breaker(self, provider: SearchProvider) -> CircuitBreaker:
        """The process-wide breaker of `provider`'s endpoint (name and base URL)."""
        return self.breakers.get(endpoint_key(provider.name, provider.base_url))

    async def search(
        self,
        provider: SearchProvider,
        query: str,
        max_results: int,
        *,
        deadline: float,
        iteration: int = 0,
        filters: dict[str, Any] | None = None,
        domain: str | None = None,
    ) -> SearchOutcome:
        """`deadline` is a time.monotonic() value the call (waits included) must not pass. With tracing on, the
        call is a `provider.search` span (its retries and rate-limit waits are events on it)."""
        if not telemetry.enabled():
            return await self._search(provider, query, max_results, deadline, iteration, filters, domain)
        attributes = {"research.provider": provider.name, "research.query.sha256": telemetry.text_digest(query)}
        if telemetry.content_enabled():
            attributes["research.query"] = query
        with telemetry.span("provider.search", attributes, kind="client") as span:
            outcome = await self._search(provider, query, max_results, deadline, iteration, filters, domain)
            span.set_many(
                {
                    "research.provider.attempts": outcome.attempts,
                    "research.provider.status": "ok" if outcome.failure is None else outcome.failure.error_type,
                    "research.provider.latency_s": round(outcome.latency_s, 4),
                    "research.provider.results": len(outcome.results),
                    "research.provider.breaker": self.breaker(provider).state.value,
                }
            )
            if outcome.failure is not None:
                span.fail(f"{outcome.failure.error_type}: {outcome.failure.message}"[:300])
        return outcome

    async def _search(
        self,
        provider: SearchProvider,
        query: str,
        max_results: int,
        deadline: float,
        iteration: int,
        filters: dict[str, Any] | None,
        domain: str | None,
    ) -> SearchOutcome:
        started = time.monotonic()
        attempts = 0
        try:
            reason = provider.unavailable_reason()
            if reason:
                raise ProviderUnavailableError(provider.name, reason)
            if started >= deadline:
                raise SessionDeadlineError(provider.name, "session deadline already passed")
            breaker = self.breaker(provider)
            async for attempt in deadline_retrying(deadline, self.retry_policy):
                with attempt:
                    attempts += 1
                    results = await self._attempt(provider, breaker, query, max_results, filters, deadline)
        except ProviderError as exc:
            failure = access_failure(exc, provider=provider.name, query=query, iteration=iteration)
            # a refusal by an open breaker is the consequence of failures already logged (circuit_opened)
            report = log.info if isinstance(exc, CircuitOpenError) else log.warning
            report(
                "provider_failed",
                provider=provider.name,
                error_type=exc.error_type,
                message=exc.message,
                attempts=attempts,
            )
            outcome = SearchOutcome(
                provider.name, query, failure=failure, latency_s=time.monotonic() - started, attempts=attempts
            )
        else:
            outcome = SearchOutcome(
                provider.name, query, results=results, latency_s=time.monotonic() - started, attempts=attempts
            )
        await self._remember(outcome, domain)
        return outcome

    async def _attempt(
        self,
        provider: SearchProvider,
        breaker: CircuitBreaker,
        query: str,
        max_results: int,
        filters: dict[str, Any] | None,
        deadline: float,
    ) -> list[SourceResult]:
        paused_until = provider_limiter(provider).paused_until
        if paused_until >= deadline:
            raise RateLimitError(
                provider.name,
                "rate-limited by the provider until after the session deadline",
                retry_after=paused_until - time.monotonic(),
            )
        # after the pause check: a half-open probe taken here is always released or settled below
        if not await breaker.admit():
            raise CircuitOpenError(
                provider.name, f"circuit open after repeated failures; retry in {breaker.retry_in():.0f} s"
            )
        remaining = deadline - time.monotonic()
        settled = False  # the breaker was told how the call went
        current = CURRENT_BREAKER.set(breaker)
        try:
            async with asyncio.timeout(max(remaining, 0.0)):
                results = await provider.search(query, max_results, filters)
        except CircuitOpenError:
            raise  # opened by another call while this one waited for its turn: no request was made
        except TimeoutError:
            # Cut off by the session's deadline (maybe while waiting for the rate limiter): not the provider's fault.
            raise SessionDeadlineError(provider.name, "session deadline reached") from None
        except HostUnresolvedError:
            await breaker.tripped()  # no retry can resolve it: the next calls are refused at once
            settled = True
            raise
        except BREAKER_FAILURES:
            await breaker.failed()
            settled = True
            raise
        except RateLimitError:
            raise
        except ProviderError:
            await breaker.succeeded()  # it answered: the provider is up, the request was refused
            settled = True
            raise
        except Exception as exc:
            log.exception("provider_parse_failed", provider=provider.name)
            raise ProviderResponseError(provider.name, f"could not read response: {type(exc).__name__}: {exc}") from exc
        finally:
            CURRENT_BREAKER.reset(current)
            if not settled:
                # Whatever ended the call without a verdict (a deadline, a 429, an unreadable answer, or a
                # cancellation by a stop or a deadline), a half-open probe must not stay in flight: the
                # process-wide breaker would refuse this provider until the process restarts.
                breaker.probe_ended()
        await breaker.succeeded()
        return results

    async def _remember(self, outcome: SearchOutcome, domain: str | None) -> None:
        if self.memory is None or domain is None:
            return
        if outcome.failure is not None:
            # no request was made for these: they say nothing new about the provider
            if outcome.failure.error_type not in NOT_REMEMBERED:
                await self.memory.record_failure(domain, outcome.failure)
        else:
            await self.memory.record_results(domain, outcome.provider, len(outcome.results))
