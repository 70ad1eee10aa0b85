"""arXiv search via its Atom API (GET /api/query)."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from lxml import etree

from research_tool.core.errors import ProviderResponseError
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider, SourceKind
from research_tool.providers.provider_http import raise_for_status, send, xml_root
from research_tool.providers.snippets import plain_text
from research_tool.providers.source_identity import arxiv_doi, arxiv_id, canonical_url, normalize_doi

NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
}
_FIELDED = re.compile(r"\b(ti|au|abs|co|jr|cat|rn|id|all):", re.IGNORECASE)
_TERM = re.compile(r"[\w\-]+", re.UNICODE)


def build_search_query(query: str) -> str:
    """A plain question becomes `all:term AND all:term ...`; a fielded arXiv query is passed as is."""
    if _FIELDED.search(query):
        return query
    terms = _TERM.findall(query)
    return " AND ".join(f"all:{t}" for t in terms) or f'all:"{query}"'


class ArxivProvider(SearchProvider):
    name: ClassVar[str] = "arxiv"
    default_rps: ClassVar[float] = 1.0 / 3.0
    default_base_url: ClassVar[str] = "https://export.arxiv.org"
    kind: ClassVar[SourceKind] = "academic"

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        params = {
            "search_query": build_search_query(query),
            "start": 0,
            "max_results": max(1, min(max_results, 100)),
            "sortBy": (filters or {}).get("sortBy", "relevance"),
            "sortOrder": "descending",
        }
        response = await send(self, "GET", f"{self.base_url}/api/query", params=params, check=False)
        url = str(response.request.url)
        if response.status_code >= 400 and response.content.lstrip().startswith(b"<"):
            # arXiv reports a bad query as HTTP 400 with an Atom feed holding one "Error" entry.
            root = xml_root(self, response.content, url=url)
            message = self._error_entry(root)
            if message and response.status_code < 500:
                raise ProviderResponseError(self.name, f"HTTP {response.status_code}: {message}", url=url)
        raise_for_status(self, response)
        root = xml_root(self, response.content, url=url)
        message = self._error_entry(root)
        if message:
            raise ProviderResponseError(self.name, message, url=url)
        entries = root.findall("atom:entry", NS)
        return [self._result(e, rank, query) for rank, e in enumerate(entries, 1)][:max_results]

    @staticmethod
    def _error_entry(root: etree._Element) -> str | None:
        for entry in root.findall("atom:entry", NS):
            entry_id = entry.findtext("atom:id", default="", namespaces=NS)
            if "/api/errors" in entry_id or entry.findtext("atom:title", default="", namespaces=NS) == "Error":
                return plain_text(entry.findtext("atom:summary", default="", namespaces=NS)) or "arXiv API error"
        return None

    def _result(self, entry: etree._Element, rank: int, query: str) -> SourceResult:
        entry_id = entry.findtext("atom:id", default="", namespaces=NS).strip()
        abs_url = entry_id.replace("http://", "https://", 1)
        for link in entry.findall("atom:link", NS):
            if link.get("rel") == "alternate" and link.get("href"):
                abs_url = link.get("href", abs_url)
        paper = arxiv_id(abs_url) or arxiv_id(entry_id)
        doi = normalize_doi(entry.findtext("arxiv:doi", default="", namespaces=NS))
        if not doi and paper:
            doi = arxiv_doi(paper)
        authors = [
            plain_text(a.findtext("atom:name", default="", namespaces=NS)) for a in entry.findall("atom:author", NS)
        ]
        return SourceResult(
            url=canonical_url(abs_url),
            title=plain_text(entry.findtext("atom:title", default="", namespaces=NS)) or abs_url,
            snippet=plain_text(entry.findtext("atom:summary", default="", namespaces=NS)),
            source_name=self.name,
            published_date=(entry.findtext("atom:published", default="", namespaces=NS).strip() or None),
            authors=[a for a in authors if a],
            doi=doi,
            rank=rank,
            query=query,
        )
