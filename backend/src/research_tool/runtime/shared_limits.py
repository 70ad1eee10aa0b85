"""The process's one Redis client for the cluster-wide provider limits (RESEARCH_REDIS_URL), opened and closed with
the process's services (composition.open_research_services), and handed to the limiter and breaker registries.

Unset, nothing is opened and every limiter and breaker stays in-process, as always. An unreachable Redis at start
is not fatal: the limits fall back to each process's own (a logged warning) and Redis is tried again as calls go.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from research_tool.core.extras import require_extra
from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings
from research_tool.providers.resilience.circuit_breaker import CIRCUIT_BREAKERS
from research_tool.providers.resilience.rate_limiter import RATE_LIMITERS
from research_tool.providers.resilience.shared_limits import CALL_TIMEOUT_S, SharedLimits

log = get_logger(__name__)


def check_shared_limits_settings(settings: Settings) -> None:
    """Raise MissingExtraError (bad input: exit 2, one line) when RESEARCH_REDIS_URL is set without redis-py."""
    if settings.redis_url is not None:
        require_extra("redis", "redis", "RESEARCH_REDIS_URL")


@asynccontextmanager
async def open_shared_limits(settings: Settings) -> AsyncIterator[SharedLimits | None]:
    """Share every provider's rate limit and circuit breaker with the other processes on `settings.redis_url`
    while open; yield None (and change nothing) when it is unset."""
    if settings.redis_url is None:
        yield None
        return
    check_shared_limits_settings(settings)
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    # A down Redis must cost a call at most CALL_TIMEOUT_S: short socket timeouts, one immediate reconnect
    # (a pooled connection that a Redis restart closed), no backoff.
    client = Redis.from_url(
        settings.redis_url,
        socket_connect_timeout=CALL_TIMEOUT_S,
        socket_timeout=CALL_TIMEOUT_S,
        retry=Retry(NoBackoff(), 1),
    )
    shared = SharedLimits(client, prefix=settings.redis_prefix)
    await shared.connect()  # an unreachable Redis is logged and retried as calls go, not fatal
    RATE_LIMITERS.share_through(shared)
    CIRCUIT_BREAKERS.share_through(shared)
    log.info("shared_limits_enabled", prefix=settings.redis_prefix)
    try:
        yield shared
    finally:
        if RATE_LIMITERS.shared is shared:
            RATE_LIMITERS.share_through(None)
        if CIRCUIT_BREAKERS.shared is shared:
            CIRCUIT_BREAKERS.share_through(None)
        await shared.drain()
        await client.aclose()
