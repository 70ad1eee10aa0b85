"""Wikipedia via the MediaWiki Action API: list=search, then plain-text intro extracts and page URLs."""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote

from research_tool.core.errors import ProviderError, ProviderResponseError
from research_tool.core.logging import get_logger
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider, SourceKind
from research_tool.providers.provider_http import json_body, rate_limited, send
from research_tool.providers.snippets import plain_text
from research_tool.providers.source_identity import canonical_url

log = get_logger(__name__)


class WikipediaProvider(SearchProvider):
    name: ClassVar[str] = "wikipedia"
    default_rps: ClassVar[float] = 2.0
    default_base_url: ClassVar[str] = "https://en.wikipedia.org"
    kind: ClassVar[SourceKind] = "encyclopedia"

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/w/api.php"

    async def _query(self, params: dict[str, Any]) -> dict[str, Any]:
        response = await send(self, "GET", self.api_url, params={"format": "json", "formatversion": 2, **params})
        body = json_body(self, response)
        error = body.get("error") if isinstance(body, dict) else None
        if error:
            code = error.get("code", "")
            message = f"{code}: {error.get('info', '')}"
            if code in ("ratelimited", "maxlag"):
                raise rate_limited(self, message, url=str(response.request.url))
            raise ProviderResponseError(self.name, message, url=str(response.request.url))
        return body if isinstance(body, dict) else {}

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        body = await self._query(
            {
                "action": "query",
                "list": "search",
                "srsearch": query,
                "srlimit": max(1, min(max_results, 50)),
                "srprop": "snippet|timestamp|wordcount|size",
            }
        )
        hits = (body.get("query") or {}).get("search") or []
        if not hits:
            return []
        pages = await self._pages([h["pageid"] for h in hits if "pageid" in h])
        results = []
        for rank, hit in enumerate(hits, 1):
            page = pages.get(hit.get("pageid"), {})
            title = hit.get("title", "")
            url = (
                page.get("canonicalurl")
                or page.get("fullurl")
                or f"{self.base_url}/wiki/{quote(title.replace(' ', '_'))}"
            )
            extract = (page.get("extract") or "").strip()
            results.append(
                SourceResult(
                    url=canonical_url(url),
                    title=title,
                    snippet=extract[:1000] or plain_text(hit.get("snippet")),
                    source_name=self.name,
                    full_content=extract or None,
                    published_date=hit.get("timestamp") or None,
                    rank=rank,
                    query=query,
                )
            )
        return results[:max_results]

    async def _pages(self, page_ids: list[int]) -> dict[int, dict[str, Any]]:
        """Intro extracts and URLs by page id; a failure here keeps the search snippets."""
        if not page_ids:
            return {}
        try:
            body = await self._query(
                {
                    "action": "query",
                    "pageids": "|".join(str(p) for p in page_ids),
                    "prop": "extracts|info",
                    "inprop": "url",
                    "exintro": 1,
                    "explaintext": 1,
                    "exlimit": "max",
                }
            )
        except ProviderError as exc:
            log.info("wikipedia_extracts_failed", error=exc.message)
            return {}
        pages = (body.get("query") or {}).get("pages") or []
        if isinstance(pages, dict):  # formatversion=1 shape
            pages = list(pages.values())
        return {p["pageid"]: p for p in pages if isinstance(p, dict) and "pageid" in p}
