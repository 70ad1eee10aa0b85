"""The one pooled httpx.AsyncClient every provider and the crawler share.

Provider requests reach it only through their endpoint's gate (`RateLimiter.slot`: at most
RESEARCH_PROVIDER_MAX_IN_FLIGHT each), so the pool is sized to hold every request the gates let through
without queueing any of them, and keeps those connections alive for the next request.

The client keeps httpx's API (every provider, the crawler and the engines use it) but sends through aiohttp's
connection pool (httpx-aiohttp's transport). httpcore's pool walks all its connections, each with a
`poll()` syscall, for every connection on every request added or removed: with 64 connections that is
~8,000 checks per request, all on the event loop. Measured by `python -m research_tool.bench.http_clients`
(README, "HTTP client"): 4-7 ms of CPU per request for httpx's own transport against 0.3 ms on aiohttp's.
"""

from __future__ import annotations

import asyncio

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from research_tool import __version__
from research_tool.core.settings import PROVIDER_NAMES
from research_tool.providers.resilience.rate_limiter import DEFAULT_MAX_IN_FLIGHT

USER_AGENT = f"research-tool/{__version__} (self-hosted deep-research backend; +https://github.com/research-tool)"
DEFAULT_TIMEOUT = httpx.Timeout(20.0, connect=5.0)
# Search providers that speak HTTP through provider_http.send (every provider but the local corpus and the crawler).
REMOTE_PROVIDERS = len([name for name in PROVIDER_NAMES if name not in ("local", "crawler")])
# The crawler's share of the pool (its per-host limiters space its requests; they are not gated by count).
CRAWLER_CONNECTIONS = 64
KEEPALIVE_EXPIRY_S = 30.0


def pool_limits(max_in_flight_per_endpoint: int = DEFAULT_MAX_IN_FLIGHT) -> httpx.Limits:
    """Room for every gated provider request plus the crawler's; all of them kept alive between requests."""
    connections = max_in_flight_per_endpoint * REMOTE_PROVIDERS + CRAWLER_CONNECTIONS
    return httpx.Limits(
        max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=KEEPALIVE_EXPIRY_S
    )


class PooledAiohttpTransport(AiohttpTransport):
    """aiohttp's pool under httpx: no cookie jar of its own (httpx keeps the client's), and a refused or
    reset connection raised as httpx.ConnectError / ReadError, not as the timeout the library maps it to."""

    def get_client(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self.limits.max_connections or 0,
            keepalive_timeout=self.limits.keepalive_expiry,
            ssl=self.ssl_context,
        )
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except httpx.ConnectTimeout as exc:
            cause = exc.__cause__
            if cause is None or isinstance(cause, asyncio.TimeoutError):
                raise
            if isinstance(cause, aiohttp.ClientConnectorError):
                raise httpx.ConnectError(str(exc), request=request) from cause
            raise httpx.ReadError(str(exc), request=request) from cause


def create_http_client(max_in_flight_per_endpoint: int = DEFAULT_MAX_IN_FLIGHT) -> httpx.AsyncClient:
    """A pooled client; the owner (CLI run, app lifespan) closes it with `await client.aclose()`."""
    return httpx.AsyncClient(
        timeout=DEFAULT_TIMEOUT,
        headers={"User-Agent": USER_AGENT},
        transport=PooledAiohttpTransport(limits=pool_limits(max_in_flight_per_endpoint), trust_env=False),
        follow_redirects=False,
        trust_env=False,
    )
