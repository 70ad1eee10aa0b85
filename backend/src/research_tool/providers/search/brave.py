"""Brave web search (GET /res/v1/web/search)."""

from __future__ import annotations

from typing import Any, ClassVar

from research_tool.core.errors import AccessDeniedError
from research_tool.core.settings import secret_value
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider
from research_tool.providers.provider_http import error_message, json_body, raise_for_status, send
from research_tool.providers.snippets import plain_text
from research_tool.providers.source_identity import canonical_url


class BraveProvider(SearchProvider):
    name: ClassVar[str] = "brave"
    default_rps: ClassVar[float] = 1.0
    default_base_url: ClassVar[str] = "https://api.search.brave.com"
    key_field: ClassVar[str | None] = "brave_api_key"
    key_env: ClassVar[str] = "BRAVE_API_KEY"

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        params: dict[str, Any] = {"q": query, "count": max(1, min(max_results, 20))}
        for key in ("country", "search_lang", "freshness", "safesearch"):
            if filters and key in filters:
                params[key] = filters[key]
        response = await send(
            self,
            "GET",
            f"{self.base_url}/res/v1/web/search",
            params=params,
            headers={
                "X-Subscription-Token": secret_value(self.settings.brave_api_key) or "",
                "Accept": "application/json",
            },
            check=False,
        )
        if response.status_code == 422 and "SUBSCRIPTION_TOKEN_INVALID" in response.text:
            raise AccessDeniedError(self.name, error_message(response), url=str(response.request.url))
        raise_for_status(self, response)
        body = json_body(self, response)
        items = (body.get("web") or {}).get("results") or []
        return [self._result(item, rank, query) for rank, item in enumerate(items, 1)][:max_results]

    def _result(self, item: dict[str, Any], rank: int, query: str) -> SourceResult:
        extra = " ".join(plain_text(s) for s in item.get("extra_snippets") or [])
        snippet = plain_text(item.get("description"))
        return SourceResult(
            url=canonical_url(item["url"]),
            title=plain_text(item.get("title")) or item["url"],
            snippet=f"{snippet} {extra}".strip(),
            source_name=self.name,
            published_date=item.get("page_age") or None,
            rank=rank,
            query=query,
        )
