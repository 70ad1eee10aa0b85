"""Fetches result pages for their full text (DESIGN §4). Contract only; the implementation is issue 4."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from research_tool.core.errors import ProviderUnavailableError
from research_tool.core.settings import Settings


@dataclass(frozen=True)
class FetchedPage:
    url: str  # as requested
    final_url: str  # after redirects
    title: str | None
    text: str  # main text, extracted
    content_type: str
    backend: str  # "httpx" | "playwright"


class Crawler:
    name = "crawler"

    def __init__(self, settings: Settings, client: httpx.AsyncClient) -> None:
        self.settings = settings
        self.client = client

    async def fetch(self, url: str, *, deadline: float) -> FetchedPage:
        """Fetch and extract one page before `deadline` (time.monotonic()); raises ProviderError subclasses."""
        raise ProviderUnavailableError(self.name, "crawler not implemented yet", url=url)
