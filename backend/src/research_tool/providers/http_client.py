"""The one pooled httpx.AsyncClient every provider and the crawler share.

Provider requests reach it only through their endpoint's gate (`RateLimiter.slot`: at most
RESEARCH_PROVIDER_MAX_IN_FLIGHT each), so the pool is sized to hold every request the gates let through
without queueing any of them, and keeps those connections alive for the next request instead of closing
all but a few (a new TCP connection per request was most of what the client cost at a hundred sessions).
"""

from __future__ import annotations

import httpx

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


def create_http_client(max_in_flight_per_endpoint: int = DEFAULT_MAX_IN_FLIGHT) -> httpx.AsyncClient:
    """A pooled client; the owner (CLI run, app lifespan) closes it with `await client.aclose()`."""
    return httpx.AsyncClient(
        timeout=DEFAULT_TIMEOUT,
        headers={"User-Agent": USER_AGENT},
        limits=pool_limits(max_in_flight_per_endpoint),
        follow_redirects=False,
        trust_env=False,
    )
