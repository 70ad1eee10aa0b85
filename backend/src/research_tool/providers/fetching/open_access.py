"""The open-access fallback: a paywalled (or otherwise unreachable) paper with a DOI is looked up in
Unpaywall, and its open-access copies are fetched by the crawler (best location first)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from research_tool.core.errors import ProviderError, ProviderUnavailableError
from research_tool.core.logging import get_logger
from research_tool.models.entities import AccessFailure
from research_tool.providers.fetching.crawler import Crawler, FetchedPage
from research_tool.providers.gateway import access_failure
from research_tool.providers.search.unpaywall import UnpaywallProvider

log = get_logger(__name__)

MAX_CANDIDATES = 3


@dataclass
class OpenAccessResult:
    doi: str
    page: FetchedPage | None = None  # the fetched open-access copy, if any
    url: str | None = None  # where it came from
    failures: list[AccessFailure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.page is not None


async def fetch_open_access(
    doi: str,
    *,
    unpaywall: UnpaywallProvider,
    crawler: Crawler,
    deadline: float,
    iteration: int = 0,
) -> OpenAccessResult:
    """Fetch the best open-access copy of `doi`. Never raises for provider failures: they are in `failures`.

    The copies' URLs come from Unpaywall's data, so the crawler treats them as untrusted (SSRF checks).
    """
    result = OpenAccessResult(doi=doi)
    try:
        reason = unpaywall.unavailable_reason()
        if reason:
            raise ProviderUnavailableError(unpaywall.name, reason)
        record = await unpaywall.lookup(doi)
    except ProviderError as exc:
        result.failures.append(access_failure(exc, provider=unpaywall.name, query=doi, iteration=iteration))
        return result
    if record is None or not record.is_oa:
        log.info("no_open_access_copy", doi=doi)
        return result
    for url in record.candidate_urls()[:MAX_CANDIDATES]:
        if time.monotonic() >= deadline:
            break
        try:
            page = await crawler.fetch(url, deadline=deadline)
        except ProviderError as exc:
            result.failures.append(access_failure(exc, provider=crawler.name, url=url, iteration=iteration))
            continue
        result.page, result.url = page, url
        log.info("open_access_copy_fetched", doi=doi, url=url)
        break
    return result
