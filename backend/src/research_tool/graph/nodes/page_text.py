"""Page text in and out of the graph state.

The state keeps, for each source, `content_key` (the text's SHA-256) and `content_length` instead of
`full_content`; the text itself lives in the context's PageTextStore (runtime/content_store.py). collect
moves fetched text out (`store_page_text`); the nodes that read text put it back just before they call
the engine or a decision (`with_page_text`, `hydrated`), so engines and decisions get the source dicts
they always got: `full_content` set, no content key fields. A text the store no longer has (deleted by
gc) leaves the source with its snippet, as a page that could not be fetched.

A document of the `local` provider is not copied (issue 24): its text is already in the data dir's corpus index,
so the state keeps its key and length with `content_ref: "local"`, and the text is read back from the index. A
document edited since (its text no longer has the key) is read as gone: the source keeps its snippet. On Postgres
(RESEARCH_DATABASE_URL) texts are copied as before: any node of the cluster may resume a session, and the index is
the node's own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from research_tool.graph.context import ResearchContext
from research_tool.models.state import ResearchState
from research_tool.providers.search.local import indexed_texts

CONTENT_KEY = "content_key"
CONTENT_LENGTH = "content_length"
CONTENT_REF = "content_ref"  # "local": the text is the corpus index's, not in the page text store
LOCAL_REF = "local"
CONTENT_FIELDS = (CONTENT_KEY, CONTENT_LENGTH, CONTENT_REF)


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


async def store_page_text(ctx: ResearchContext, sources: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The sources with their `full_content` moved into the store (replaced by its key and length); a local
    document whose text is the index's is referenced, not copied."""
    texts = {url: str(entry["full_content"]) for url, entry in sources.items() if entry.get("full_content")}
    # On Postgres the store is the cluster's and the index is one node's: there every text is copied.
    by_reference = ctx.settings.database_url is None
    local = [url for url in texts if by_reference and LOCAL_REF in (sources[url].get("found_by") or ())]
    indexed = await indexed_texts(ctx.settings, local)
    referenced = {url: text_key(text) for url, text in texts.items() if url in indexed and indexed[url] == text}
    keys = await ctx.page_texts.put_many(ctx.session_id, {u: t for u, t in texts.items() if u not in referenced})
    keys.update(referenced)
    return {
        url: (
            {
                **entry,
                "full_content": None,
                CONTENT_KEY: keys[url],
                CONTENT_LENGTH: len(texts[url]),
                **({CONTENT_REF: LOCAL_REF} if url in referenced else {}),
            }
            if url in keys
            else dict(entry)
        )
        for url, entry in sources.items()
    }


async def _texts(
    ctx: ResearchContext, refs: Mapping[str, tuple[str, str]], local: set[str]
) -> dict[tuple[str, str], str]:
    """The text of each (url, key): local documents from the corpus index (when it still has that text), the
    others from the page text store."""
    stored = [ref for url, ref in refs.items() if url not in local]
    texts = await ctx.page_texts.get_many(stored) if stored else {}
    if local:
        for url, text in (await indexed_texts(ctx.settings, sorted(local))).items():
            ref = refs[url]
            if text_key(text) == ref[1]:
                texts[ref] = text
    return texts


def _without_key(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in CONTENT_FIELDS}


async def with_page_text(ctx: ResearchContext, sources: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Copies of the sources with `full_content` read back from the store (state entries are not touched)."""
    refs = {
        url: (url, str(entry[CONTENT_KEY]))
        for url, entry in sources.items()
        if entry.get(CONTENT_KEY) and not entry.get("full_content")
    }
    local = {url for url in refs if sources[url].get(CONTENT_REF) == LOCAL_REF}
    texts = await _texts(ctx, refs, local) if refs else {}
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
