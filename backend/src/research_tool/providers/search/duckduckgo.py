"""DuckDuckGo web search through the `ddgs` package's DuckDuckGo engine.

ddgs is synchronous (primp), so each search runs in a worker thread. Its engine keeps the search URL on
the instance, so `RESEARCH_DUCKDUCKGO_BASE_URL` points it elsewhere (`<base>/html/`), and the status
code is checked here (ddgs itself turns every non-200 into "no results"): 429 and DuckDuckGo's 202
anomaly page are rate limits, 403 is access denied, 5xx a server error.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, ClassVar

from ddgs.engines.duckduckgo import Duckduckgo
from ddgs.exceptions import DDGSException, TimeoutException
from ddgs.results import TextResult

from research_tool.core.errors import (
    AccessDeniedError,
    HostUnresolvedError,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeoutError,
)
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider
from research_tool.providers.provider_http import rate_limited
from research_tool.providers.resilience.rate_limiter import provider_limiter
from research_tool.providers.snippets import plain_text
from research_tool.providers.source_identity import canonical_url

TIMEOUT_S = 15


class _StatusError(Exception):
    """Carries a non-200 status out of the ddgs worker thread."""

    def __init__(self, status: int, url: str) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.url = url


class _CheckedDuckduckgo(Duckduckgo):
    """ddgs's engine, with a configurable URL and the status code kept instead of dropped."""

    def __init__(self, search_url: str) -> None:
        super().__init__(timeout=TIMEOUT_S)
        self.search_url = search_url

    def request(self, *args: Any, **kwargs: Any) -> Any:
        response = self.http_client.request(*args, **kwargs)
        if response.status_code != 200:
            raise _StatusError(response.status_code, self.search_url)
        return response.text


def dns_failed(exc: BaseException) -> bool:
    """Whether ddgs failed because the host name did not resolve: its HTTP client (primp) resolves names itself
    and raises its own DNSError, carried as the DDGSException's cause."""
    current: BaseException | None = exc
    for _ in range(5):
        if current is None:
            break
        if type(current).__name__ == "DNSError" or "error resolving DNS" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def normalize_results(items: list[TextResult] | list[dict[str, str]], query: str, limit: int) -> list[SourceResult]:
    """ddgs text results ({title, href, body}) as SourceResults, best first."""
    results: list[SourceResult] = []
    for item in items:
        data = item if isinstance(item, dict) else {"title": item.title, "href": item.href, "body": item.body}
        href = (data.get("href") or "").strip()
        if not href.lower().startswith(("http://", "https://")):
            continue
        results.append(
            SourceResult(
                url=canonical_url(href),
                title=plain_text(data.get("title")) or href,
                snippet=plain_text(data.get("body")),
                source_name=DuckDuckGoProvider.name,
                rank=len(results) + 1,
                query=query,
            )
        )
        if len(results) >= limit:
            break
    return results


class DuckDuckGoProvider(SearchProvider):
    name: ClassVar[str] = "duckduckgo"
    default_rps: ClassVar[float] = 0.5
    default_base_url: ClassVar[str] = "https://html.duckduckgo.com"

    _engine: _CheckedDuckduckgo | None = None
    _engine_guard = threading.Lock()

    def _get_engine(self) -> _CheckedDuckduckgo:
        with self._engine_guard:
            if self._engine is None:
                self._engine = _CheckedDuckduckgo(f"{self.base_url}/html/")
            return self._engine

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        region = (filters or {}).get("region", "wt-wt")
        engine = self._get_engine()
        await provider_limiter(self).acquire()
        try:
            items = await asyncio.to_thread(engine.search, query, region=region)
        except _StatusError as exc:
            if exc.status in (202, 429):
                raise rate_limited(self, f"HTTP {exc.status} (anomaly/rate-limit page)", url=exc.url) from exc
            if exc.status in (401, 403):
                raise AccessDeniedError(self.name, f"HTTP {exc.status}", url=exc.url) from exc
            if exc.status >= 500:
                raise ProviderServerError(self.name, f"HTTP {exc.status}", status=exc.status, url=exc.url) from exc
            raise ProviderResponseError(self.name, f"HTTP {exc.status}", url=exc.url) from exc
        except TimeoutException as exc:
            raise ProviderTimeoutError(self.name, f"timed out: {exc}", url=engine.search_url) from exc
        except DDGSException as exc:
            if dns_failed(exc):
                raise HostUnresolvedError(self.name, f"host not found: {exc}", url=engine.search_url) from exc
            raise ProviderServerError(self.name, f"request failed: {exc}", status=0, url=engine.search_url) from exc
        return normalize_results(items or [], query, max_results)
