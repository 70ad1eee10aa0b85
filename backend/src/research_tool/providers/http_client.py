"""The one pooled httpx.AsyncClient every provider and the crawler share."""

from __future__ import annotations

import httpx

from research_tool import __version__

USER_AGENT = f"research-tool/{__version__} (self-hosted deep-research backend; +https://github.com/research-tool)"
DEFAULT_TIMEOUT = httpx.Timeout(20.0, connect=5.0)


def create_http_client() -> httpx.AsyncClient:
    """A pooled client; the owner (CLI run, app lifespan) closes it with `await client.aclose()`."""
    return httpx.AsyncClient(
        timeout=DEFAULT_TIMEOUT,
        headers={"User-Agent": USER_AGENT},
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
        follow_redirects=False,
        trust_env=False,
    )
