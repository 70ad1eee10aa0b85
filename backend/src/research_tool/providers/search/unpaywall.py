"""Unpaywall: the best open-access copy of a paper, by DOI (GET /v2/{doi}?email=...).

Not a keyword search engine: `search` finds the DOI in the query and returns at most one result (the
open-access copy). `lookup(doi)` gives the whole record; the open-access fallback uses it.
"""

from __future__ import annotations

from typing import Any, ClassVar
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict

from research_tool.core.errors import ProviderResponseError
from research_tool.core.logging import get_logger
from research_tool.models.entities import SourceResult
from research_tool.providers.base import SearchProvider, SourceKind
from research_tool.providers.provider_http import json_body, raise_for_status, send
from research_tool.providers.source_identity import canonical_url, find_doi, normalize_doi

log = get_logger(__name__)


class OpenAccessLocation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str | None = None
    url_for_pdf: str | None = None
    url_for_landing_page: str | None = None
    host_type: str | None = None
    version: str | None = None
    license: str | None = None
    is_best: bool = False


class UnpaywallRecord(BaseModel):
    """The fields of an Unpaywall /v2 record this tool uses (the API sends more; they are ignored)."""

    model_config = ConfigDict(extra="ignore")

    doi: str
    title: str | None = None
    is_oa: bool = False
    oa_status: str | None = None
    published_date: str | None = None
    year: int | None = None
    journal_name: str | None = None
    doi_url: str | None = None
    best_oa_location: OpenAccessLocation | None = None
    oa_locations: list[OpenAccessLocation] = []
    z_authors: list[dict[str, Any]] | None = None

    def authors(self) -> list[str]:
        names = []
        for author in self.z_authors or []:
            name = " ".join(p for p in (author.get("given"), author.get("family")) if p) or author.get(
                "raw_author_name"
            )
            if name:
                names.append(str(name))
        return names

    def candidate_urls(self) -> list[str]:
        """Open-access URLs worth fetching, best first, without repeats."""
        locations = [self.best_oa_location] if self.best_oa_location else []
        locations += [loc for loc in self.oa_locations if loc is not self.best_oa_location]
        urls: list[str] = []
        for loc in locations:
            for url in (loc.url, loc.url_for_landing_page, loc.url_for_pdf):
                if url and url not in urls:
                    urls.append(url)
        return urls


class UnpaywallProvider(SearchProvider):
    name: ClassVar[str] = "unpaywall"
    default_rps: ClassVar[float] = 5.0
    default_base_url: ClassVar[str] = "https://api.unpaywall.org"
    key_field: ClassVar[str | None] = "unpaywall_email"
    key_env: ClassVar[str] = "UNPAYWALL_EMAIL"
    kind: ClassVar[SourceKind] = "academic"

    async def lookup(self, doi: str) -> UnpaywallRecord | None:
        """The record for `doi`, or None when Unpaywall does not know it (404)."""
        clean = normalize_doi(doi)
        if not clean:
            raise ProviderResponseError(self.name, f"not a DOI: {doi!r}")
        response = await send(
            self,
            "GET",
            f"{self.base_url}/v2/{quote(clean, safe='/()')}",
            params={"email": self.settings.unpaywall_email or ""},
            check=False,
        )
        if response.status_code == 404:
            log.info("unpaywall_unknown_doi", doi=clean)
            return None
        raise_for_status(self, response)
        body = json_body(self, response)
        try:
            return UnpaywallRecord.model_validate(body)
        except ValueError as exc:
            raise ProviderResponseError(self.name, f"unexpected record: {exc}", url=str(response.request.url)) from exc

    async def search(
        self, query: str, max_results: int = 10, filters: dict[str, Any] | None = None
    ) -> list[SourceResult]:
        doi = find_doi(query)
        if not doi:
            log.info("unpaywall_query_without_doi", query=query)
            return []
        record = await self.lookup(doi)
        if record is None or not record.is_oa or not record.candidate_urls():
            return []
        best = record.candidate_urls()[0]
        status = f"open access ({record.oa_status})" if record.oa_status else "open access"
        venue = f" in {record.journal_name}" if record.journal_name else ""
        return [
            SourceResult(
                url=canonical_url(best),
                title=record.title or record.doi,
                snippet=f"{status} copy of {record.doi}{venue}",
                source_name=self.name,
                published_date=record.published_date or (str(record.year) if record.year else None),
                authors=record.authors(),
                doi=normalize_doi(record.doi),
                rank=1,
                query=query,
            )
        ][:max_results]
