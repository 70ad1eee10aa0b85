"""process: extract facts (with the quoted span and its source) and entities from newly collected sources."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime

from research_tool.core.wording import plural
from research_tool.graph.context import ResearchContext
from research_tool.graph.nodes.instrumentation import phase, record_errors
from research_tool.graph.nodes.page_focus import focus_long_pages
from research_tool.graph.nodes.page_text import with_page_text
from research_tool.graph.session_limits import resolve_limits
from research_tool.models.entities import SourceResult
from research_tool.models.state import ResearchState, merge_entities

EXTRACT_CONCURRENCY = 4
READ_FACTOR = 3  # sources read per cycle: up to READ_FACTOR x the tier's max_sources, best ranked first
# State-only fields of a source entry (content_key/content_length/content_ref: see graph/nodes/page_text.py).
BOOKKEEPING = ("found_by", "first_iteration", "best_rank", "content_key", "content_length", "content_ref")


def to_source(entry: dict[str, Any]) -> SourceResult:
    return SourceResult.model_validate({k: v for k, v in entry.items() if k not in BOOKKEEPING})


def sources_to_read(state: ResearchState, limit: int) -> list[dict[str, Any]]:
    processed = state.get("processed") or {}
    unread = [s for url, s in (state.get("sources") or {}).items() if url not in processed]
    unread.sort(key=lambda s: (s.get("best_rank") or 10**6, -len(s.get("found_by", [])), s["url"]))
    return unread[:limit]


@phase("process")
async def process_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    ctx = runtime.context
    iteration = int(state["iteration"])
    limits = resolve_limits(state["tier"], state["request"], ctx.settings)
    unread = sources_to_read(state, READ_FACTOR * limits.max_sources)
    query = state["refined_query"]
    batch = list((await with_page_text(ctx, {e["url"]: e for e in unread})).values())
    # with the semantic extra: a page longer than the engine reads keeps its passages nearest the question
    batch = await focus_long_pages(ctx, query, batch)
    semaphore = asyncio.Semaphore(EXTRACT_CONCURRENCY)

    async def extract(entry: dict[str, Any]) -> tuple[str, Any]:
        async with semaphore:
            return entry["url"], await ctx.engine.extract(query, to_source(entry), iteration)

    steps = await asyncio.gather(*(extract(e) for e in batch))
    facts: dict[str, dict[str, Any]] = {}
    entities: dict[str, dict[str, Any]] = {}
    tokens: dict[str, int] = {}
    errors: dict[str, dict[str, Any]] = {}
    for url, step in steps:
        for fact in step.value.facts:
            data = fact.model_dump(mode="json")
            if fact.id in facts:
                seen = {e["source_url"] for e in facts[fact.id]["evidence"]}
                facts[fact.id]["evidence"] += [e for e in data["evidence"] if e["source_url"] not in seen]
            else:
                facts[fact.id] = data
        for entity in step.value.entities:
            data = entity.model_dump(mode="json")
            if entity.key in entities:
                entities[entity.key] = merge_entities({entity.key: entities[entity.key]}, {entity.key: data})[
                    entity.key
                ]
            else:
                entities[entity.key] = data
        tokens[f"extract:{iteration}:{url}"] = step.tokens
        errors |= record_errors(f"extract:{iteration}:{url}", step.errors)
    await ctx.events.emit(
        "facts_extracted",
        "process",
        f"Read {plural(len(batch), 'source')}: {plural(len(facts), 'fact')} and "
        f"{plural(len(entities), 'entity', 'entities')}.",
        {"iteration": iteration, "sources_read": len(batch), "facts": len(facts), "entities": len(entities)},
    )
    return {
        "facts": facts,
        "entities": entities,
        "processed": {e["url"]: iteration for e in batch},
        "tokens": tokens,
        "error_log": errors,
    }
