"""Semantic Scholar Graph API paper search (GET /graph/v1/paper/search)."""

from __future__ import annotations

from typing import Any, ClassVar

from research_tool.core.errors import ProviderResponseError
from research_tool.core.settings import secret_value
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider, SourceKind
from research_tool.providers.provider_http import json_body, send
from research_tool.providers.snippets import plain_text
from research_tool.providers.source_identity import arxiv_doi, canonical_url, normalize_doi

FIELDS = "title,url,abstract,authors,year,publicationDate,externalIds,venue,openAccessPdf,citationCount"


class SemanticScholarProvider(SearchProvider):
    name: ClassVar[str] = "semantic_scholar"
    default_rps: ClassVar[float] = 1.0
    default_base_url: ClassVar[str] = "https://api.semanticscholar.org"
    key_field: ClassVar[str | None] = "semantic_scholar_api_key"
    key_env: ClassVar[str] = "SEMANTIC_SCHOLAR_API_KEY"
    key_required: ClassVar[bool] = False
    kind: ClassVar[SourceKind] = "academic"

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        params: dict[str, Any] = {"query": query, "limit": max(1, min(max_results, 100)), "fields": FIELDS}
        for key in ("year", "fieldsOfStudy", "venue", "openAccessPdf"):
            if filters and key in filters:
                params[key] = filters[key]
        headers = {}
        api_key = secret_value(self.settings.semantic_scholar_api_key)
        if api_key:
            headers["x-api-key"] = api_key
        response = await send(self, "GET", f"{self.base_url}/graph/v1/paper/search", params=params, headers=headers)
        body = json_body(self, response)
        if not isinstance(body, dict):
            raise ProviderResponseError(self.name, "unexpected response shape", url=str(response.request.url))
        # No hits come back as {"total": 0, "offset": 0} with no "data" key.
        papers = body.get("data") or []
        results = [self._result(p, rank, query) for rank, p in enumerate(papers, 1) if p.get("title")]
        return results[:max_results]

    def _result(self, paper: dict[str, Any], rank: int, query: str) -> SourceResult:
        external = paper.get("externalIds") or {}
        doi = normalize_doi(external.get("DOI"))
        if not doi and external.get("ArXiv"):
            doi = arxiv_doi(external["ArXiv"])
        url = paper.get("url") or f"https://www.semanticscholar.org/paper/{paper['paperId']}"
        tldr = paper.get("tldr") or {}
        abstract = plain_text(paper.get("abstract")) or plain_text(tldr.get("text") if isinstance(tldr, dict) else "")
        date = paper.get("publicationDate") or (str(paper["year"]) if paper.get("year") else None)
        return SourceResult(
            url=canonical_url(url),
            title=plain_text(paper["title"]),
            snippet=abstract,
            source_name=self.name,
            published_date=date,
            authors=[a["name"] for a in paper.get("authors") or [] if a.get("name")],
            doi=doi,
            rank=rank,
            query=query,
        )
