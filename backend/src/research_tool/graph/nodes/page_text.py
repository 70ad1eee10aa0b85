"""Page text in and out of the graph state.

The state keeps, for each source, `content_key` (the text's SHA-256) and `content_length` instead of
`full_content`; the text itself lives in the context's PageTextStore (runtime/content_store.py). collect
moves fetched text out (`store_page_text`); the nodes that read text put it back just before they call
the engine or a decision (`with_page_text`, `hydrated`), so engines and decisions get the source dicts
they always got: `full_content` set, no content key fields. A text the store no longer has (deleted by
gc) leaves the source with its snippet, as a page that could not be fetched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from research_tool.graph.context import ResearchContext
from research_tool.models.state import ResearchState

CONTENT_KEY = "content_key"
CONTENT_LENGTH = "content_length"
CONTENT_FIELDS = (CONTENT_KEY, CONTENT_LENGTH)


async def store_page_text(ctx: ResearchContext, sources: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The sources with their `full_content` moved into the store (replaced by its key and length)."""
    texts = {url: str(entry["full_content"]) for url, entry in sources.items() if entry.get("full_content")}
    keys = await ctx.page_texts.put_many(ctx.session_id, texts)
    return {
        url: (
            {**entry, "full_content": None, CONTENT_KEY: keys[url], CONTENT_LENGTH: len(texts[url])}
            if url in keys
            else dict(entry)
        )
        for url, entry in sources.items()
    }


def _without_key(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in CONTENT_FIELDS}


async def with_page_text(ctx: ResearchContext, sources: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Copies of the sources with `full_content` read back from the store (state entries are not touched)."""
    refs = {
        url: (url, str(entry[CONTENT_KEY]))
        for url, entry in sources.items()
        if entry.get(CONTENT_KEY) and not entry.get("full_content")
    }
    texts = await ctx.page_texts.get_many(refs.values()) if refs else {}
    hydrated: dict[str, dict[str, Any]] = {}
    for url, entry in sources.items():
        copy = _without_key(entry)
        ref = refs.get(url)
        if ref is not None and ref in texts:
            copy["full_content"] = texts[ref]
        hydrated[url] = copy
    return hydrated


async def hydrated(ctx: ResearchContext, state: ResearchState) -> ResearchState:
    """The state as the nodes read it before page text left it: every source with its `full_content`."""
    sources = state.get("sources")
    if not sources:
        return state
    view: ResearchState = {**state}
    view["sources"] = await with_page_text(ctx, sources)
    return view
