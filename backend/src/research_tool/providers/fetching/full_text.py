"""Full text for one search result, with the obstacle handling of DESIGN §4: fetch the page; on an
access failure (401/402/403, CAPTCHA, paywall) or any other fetch failure, record it, try the
open-access copy when the source has a DOI, and otherwise keep the search snippet. Never raises for
provider failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from research_tool.core.errors import ProviderError
from research_tool.models.entities import AccessFailure, SourceResult
from research_tool.providers.fetching.crawler import Crawler, RenderMode
from research_tool.providers.fetching.open_access import fetch_open_access
from research_tool.providers.gateway import access_failure
from research_tool.providers.search.unpaywall import UnpaywallProvider

FullTextSource = Literal["page", "open_access", "snippet"]


@dataclass
class FullTextOutcome:
    source: SourceResult  # full_content filled when a text was fetched; otherwise unchanged (snippet kept)
    text_from: FullTextSource
    fetched_url: str | None = None
    failures: list[AccessFailure] = field(default_factory=list)


async def fetch_full_text(
    source: SourceResult,
    *,
    crawler: Crawler,
    deadline: float,
    unpaywall: UnpaywallProvider | None = None,
    iteration: int = 0,
    render: RenderMode = "auto",
) -> FullTextOutcome:
    failures: list[AccessFailure] = []
    try:
        page = await crawler.fetch(source.url, deadline=deadline, render=render)
    except ProviderError as exc:
        failures.append(
            access_failure(exc, provider=crawler.name, url=source.url, query=source.query, iteration=iteration)
        )
    else:
        return FullTextOutcome(
            source=source.model_copy(update={"full_content": page.text}),
            text_from="page",
            fetched_url=page.final_url,
        )
    if source.doi and unpaywall is not None:
        copy = await fetch_open_access(
            source.doi, unpaywall=unpaywall, crawler=crawler, deadline=deadline, iteration=iteration
        )
        failures.extend(copy.failures)
        if copy.page is not None:
            return FullTextOutcome(
                source=source.model_copy(update={"full_content": copy.page.text}),
                text_from="open_access",
                fetched_url=copy.url,
                failures=failures,
            )
    return FullTextOutcome(source=source, text_from="snippet", failures=failures)
