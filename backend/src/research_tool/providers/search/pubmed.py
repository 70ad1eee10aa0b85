"""PubMed via NCBI E-utilities: esearch for ids, then efetch XML for titles, abstracts, authors and DOIs."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx
from lxml import etree

from research_tool.core.errors import ProviderResponseError
from research_tool.core.settings import secret_value
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider, SourceKind
from research_tool.providers.provider_http import rate_limited, send, xml_root
from research_tool.providers.snippets import plain_text
from research_tool.providers.source_identity import normalize_doi

_MONTHS = {
    m: i for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1)
}


def _text(node: etree._Element | None) -> str:
    if node is None:
        return ""
    return plain_text(etree.tostring(node, method="text", encoding="unicode", with_tail=False))


def publication_date(article: etree._Element) -> str | None:
    """ISO date (or year-month, or year) from the journal issue's PubDate (MedlineDate: its year)."""
    pub = article.find(".//Article/Journal/JournalIssue/PubDate")
    if pub is None:
        return None
    year = pub.findtext("Year")
    if not year:
        medline = pub.findtext("MedlineDate") or ""
        return medline[:4] if medline[:4].isdigit() else None
    month_raw = (pub.findtext("Month") or "").strip()
    month = int(month_raw) if month_raw.isdigit() else _MONTHS.get(month_raw[:3].lower())
    if not month:
        return year
    day = (pub.findtext("Day") or "").strip()
    return f"{year}-{month:02d}-{int(day):02d}" if day.isdigit() else f"{year}-{month:02d}"


class PubMedProvider(SearchProvider):
    name: ClassVar[str] = "pubmed"
    default_rps: ClassVar[float] = 3.0
    default_base_url: ClassVar[str] = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"
    key_field: ClassVar[str | None] = "ncbi_api_key"
    key_env: ClassVar[str] = "NCBI_API_KEY"
    key_required: ClassVar[bool] = False
    kind: ClassVar[SourceKind] = "academic"

    @property
    def requests_per_second(self) -> float:
        # NCBI allows 10/s with an API key, 3/s without.
        return self.settings.provider_rps(
            self.name, 10.0 if secret_value(self.settings.ncbi_api_key) else self.default_rps
        )

    def _params(self, **params: Any) -> dict[str, Any]:
        params.setdefault("db", "pubmed")
        params["tool"] = "research-tool"
        key = secret_value(self.settings.ncbi_api_key)
        if key:
            params["api_key"] = key
        return params

    def _check_rate_limit_body(self, response: httpx.Response) -> None:
        """NCBI may answer a rate limit with HTTP 200 and `{"error":"API rate limit exceeded",...}`."""
        head = response.content[:512].lstrip()
        if head.startswith(b"{") and b"rate limit" in head.lower():
            raise rate_limited(
                self, f"HTTP {response.status_code} with rate-limit body: {head[:120]!r}", url=str(response.request.url)
            )

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        ids = await self._search_ids(query, max_results, filters or {})
        if not ids:
            return []
        articles = await self._fetch(ids)
        return [self._result(a, rank, query) for rank, a in enumerate(articles, 1)][:max_results]

    async def _search_ids(self, query: str, max_results: int, filters: dict[str, Any]) -> list[str]:
        params = self._params(term=query, retmax=max(1, min(max_results, 100)), retmode="xml", sort="relevance")
        for key in ("mindate", "maxdate", "datetype"):
            if key in filters:
                params[key] = filters[key]
        response = await send(self, "GET", f"{self.base_url}/esearch.fcgi", params=params)
        self._check_rate_limit_body(response)
        root = xml_root(self, response.content, url=str(response.request.url))
        error = root.findtext("ERROR")
        if error:
            raise ProviderResponseError(self.name, f"esearch: {error}", url=str(response.request.url))
        return [(i.text or "").strip() for i in root.findall("IdList/Id") if (i.text or "").strip()][:max_results]

    async def _fetch(self, ids: list[str]) -> list[etree._Element]:
        params = self._params(id=",".join(ids), retmode="xml", rettype="abstract")
        response = await send(self, "GET", f"{self.base_url}/efetch.fcgi", params=params)
        self._check_rate_limit_body(response)
        root = xml_root(self, response.content, url=str(response.request.url))
        return root.findall("PubmedArticle")

    def _result(self, article: etree._Element, rank: int, query: str) -> SourceResult:
        pmid = (article.findtext("MedlineCitation/PMID") or "").strip()
        title = _text(article.find("MedlineCitation/Article/ArticleTitle"))
        parts = []
        for node in article.findall("MedlineCitation/Article/Abstract/AbstractText"):
            label = node.get("Label")
            text = _text(node)
            parts.append(f"{label}: {text}" if label else text)
        authors = []
        for author in article.findall("MedlineCitation/Article/AuthorList/Author"):
            collective = author.findtext("CollectiveName")
            name = " ".join(p for p in (author.findtext("ForeName"), author.findtext("LastName")) if p)
            if name or collective:
                authors.append(name or collective or "")
        doi = None
        for article_id in article.findall("PubmedData/ArticleIdList/ArticleId"):
            if article_id.get("IdType") == "doi":
                doi = normalize_doi(article_id.text)
        if not doi:
            for eloc in article.findall("MedlineCitation/Article/ELocationID"):
                if eloc.get("EIdType") == "doi":
                    doi = normalize_doi(eloc.text)
        return SourceResult(
            url=f"https://pubmed.ncbi.nlm.nih.gov/{pmid}/",
            title=title or f"PubMed {pmid}",
            snippet=" ".join(parts),
            source_name=self.name,
            published_date=publication_date(article),
            authors=authors,
            doi=doi,
            rank=rank,
            query=query,
        )
