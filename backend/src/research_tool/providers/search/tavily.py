"""Tavily web search (POST /search), on the shared httpx client rather than the SDK's own client."""

from __future__ import annotations

from typing import Any, ClassVar

from research_tool.core.settings import secret_value
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider
from research_tool.providers.provider_http import json_body, send
from research_tool.providers.snippets import plain_text
from research_tool.providers.source_identity import canonical_url


class TavilyProvider(SearchProvider):
    name: ClassVar[str] = "tavily"
    default_rps: ClassVar[float] = 1.5
    default_base_url: ClassVar[str] = "https://api.tavily.com"
    key_field: ClassVar[str | None] = "tavily_api_key"
    key_env: ClassVar[str] = "TAVILY_API_KEY"

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        filters = filters or {}
        payload: dict[str, Any] = {
            "query": query,
            "max_results": max(1, min(max_results, 20)),
            "search_depth": filters.get("search_depth", "basic"),
            "topic": filters.get("topic", "general"),
        }
        response = await send(
            self,
            "POST",
            f"{self.base_url}/search",
            json_body=payload,
            headers={"Authorization": f"Bearer {secret_value(self.settings.tavily_api_key) or ''}"},
        )
        body = json_body(self, response)
        return [self._result(item, rank, query) for rank, item in enumerate(body.get("results") or [], 1)][:max_results]

    def _result(self, item: dict[str, Any], rank: int, query: str) -> SourceResult:
        score = item.get("score")
        return SourceResult(
            url=canonical_url(item["url"]),
            title=plain_text(item.get("title")) or item["url"],
            snippet=plain_text(item.get("content")),
            source_name=self.name,
            full_content=item.get("raw_content") or None,
            quality_score=min(1.0, max(0.0, float(score))) if isinstance(score, int | float) else 0.5,
            published_date=item.get("published_date") or None,
            rank=rank,
            query=query,
        )
