"""Which provider class serves which name, and how to build one."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

import httpx

from research_tool.core.errors import BadInputError
from research_tool.core.settings import Settings
from research_tool.providers.base import SearchProvider

# name -> "module:Class" under research_tool.providers.search; imported on first use so that a
# provider's optional dependency never slows down or breaks the others.
PROVIDER_CLASSES: dict[str, str] = {
    "tavily": "tavily:TavilyProvider",
    "exa": "exa:ExaProvider",
    "brave": "brave:BraveProvider",
    "semantic_scholar": "semantic_scholar:SemanticScholarProvider",
    "arxiv": "arxiv:ArxivProvider",
    "pubmed": "pubmed:PubMedProvider",
    "unpaywall": "unpaywall:UnpaywallProvider",
    "wikipedia": "wikipedia:WikipediaProvider",
    "duckduckgo": "duckduckgo:DuckDuckGoProvider",
    "local": "local:LocalProvider",
}


def provider_class(name: str) -> type[SearchProvider]:
    try:
        target = PROVIDER_CLASSES[name]
    except KeyError:
        known = ", ".join(PROVIDER_CLASSES)
        raise BadInputError(f"unknown provider '{name}'; known: {known}") from None
    module_name, class_name = target.split(":")
    module = importlib.import_module(f"research_tool.providers.search.{module_name}")
    cls: type[SearchProvider] = getattr(module, class_name)
    return cls


def create_provider(
    name: str,
    settings: Settings,
    client: httpx.AsyncClient,
    *,
    corpus_dirs: Sequence[Path] | None = None,
) -> SearchProvider:
    cls = provider_class(name)
    if name == "local":
        return cls(settings, client, corpus_dirs=corpus_dirs)  # type: ignore[call-arg]
    return cls(settings, client)
