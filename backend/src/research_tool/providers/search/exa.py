"""Exa neural web search (POST /search with highlights and a short text excerpt)."""

from __future__ import annotations

from typing import Any, ClassVar

from research_tool.core.settings import secret_value
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider
from research_tool.providers.provider_http import json_body, send
from research_tool.providers.snippets import plain_text
from research_tool.providers.source_identity import canonical_url

TEXT_CHARS = 2000


class ExaProvider(SearchProvider):
    name: ClassVar[str] = "exa"
    default_rps: ClassVar[float] = 5.0
    default_base_url: ClassVar[str] = "https://api.exa.ai"
    key_field: ClassVar[str | None] = "exa_api_key"
    key_env: ClassVar[str] = "EXA_API_KEY"

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        filters = filters or {}
        payload: dict[str, Any] = {
            "query": query,
            "numResults": max(1, min(max_results, 100)),
            "type": filters.get("type", "auto"),
            "contents": {"highlights": True, "text": {"maxCharacters": TEXT_CHARS}},
        }
        for key in ("includeDomains", "excludeDomains", "startPublishedDate", "category"):
            if key in filters:
                payload[key] = filters[key]
        response = await send(
            self,
            "POST",
            f"{self.base_url}/search",
            json_body=payload,
            headers={"x-api-key": secret_value(self.settings.exa_api_key) or ""},
        )
        body = json_body(self, response)
        return [self._result(item, rank, query) for rank, item in enumerate(body.get("results") or [], 1)][:max_results]

    def _result(self, item: dict[str, Any], rank: int, query: str) -> SourceResult:
        highlights = [plain_text(h) for h in item.get("highlights") or [] if h]
        text = item.get("text") or ""
        snippet = " … ".join(highlights) if highlights else plain_text(text)[:500]
        author = item.get("author")
        score = item.get("score")
        return SourceResult(
            url=canonical_url(item["url"]),
            title=plain_text(item.get("title")) or item["url"],
            snippet=snippet,
            source_name=self.name,
            full_content=text or None,
            quality_score=min(1.0, max(0.0, float(score))) if isinstance(score, int | float) else 0.5,
            published_date=item.get("publishedDate") or None,
            authors=[a.strip() for a in author.split(",") if a.strip()] if isinstance(author, str) else [],
            rank=rank,
            query=query,
        )
