"""The graph state: a TypedDict of plain JSON values with keyed, idempotent reducers.

Everything that accumulates is a dict keyed by a stable identity (canonical URL, normalized name, fact id,
iteration, ...). A node that is re-run after a crash returns the same keys again and the reducers merge them
instead of appending duplicates, so resuming never double-counts.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

JSONDict = dict[str, Any]


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Keyed union; the newer value wins for a key both sides have."""
    merged = dict(left or {})
    merged.update(right or {})
    return merged


def _union(a: list[Any], b: list[Any]) -> list[Any]:
    out = list(a)
    for item in b:
        if item not in out:
            out.append(item)
    return out


TEXT_FIELDS = ("full_content", "content_key", "content_length", "content_ref")


def merge_sources(left: dict[str, JSONDict] | None, right: dict[str, JSONDict] | None) -> dict[str, JSONDict]:
    """Sources by canonical URL: keep the first sighting, union who found it, keep fetched text once we have it."""
    merged = dict(left or {})
    for url, new in (right or {}).items():
        old = merged.get(url)
        if old is None:
            merged[url] = new
            continue
        combined = {**old}
        for key, value in new.items():
            if combined.get(key) in (None, "", []) and value not in (None, "", []):
                combined[key] = value
        # Page text, or its key in the content store (graph/nodes/page_text.py): the newer text once we have one.
        text_from = new if new.get("full_content") or new.get("content_key") else old
        for key in TEXT_FIELDS:
            if key in text_from or key in combined:
                combined[key] = text_from.get(key)
        combined["found_by"] = _union(old.get("found_by", []), new.get("found_by", []))
        combined["first_iteration"] = min(old.get("first_iteration", 0), new.get("first_iteration", 0))
        combined["best_rank"] = min(old.get("best_rank") or 10**6, new.get("best_rank") or 10**6)
        merged[url] = combined
    return merged


def _merged_mentions(old: JSONDict, new: JSONDict) -> int:
    """Mentions of one entity from two updates: summed when their sources are apart, the old count when the new
    update brings no source (merged twice), the larger count when they share some (which mentions are whose is
    not known)."""
    old_sources, new_sources = set(old.get("sources", [])), set(new.get("sources", []))
    old_count, new_count = int(old.get("mention_count", 1)), int(new.get("mention_count", 1))
    if new_sources <= old_sources:
        return old_count
    if not old_sources & new_sources:
        return old_count + new_count
    return max(old_count, new_count)


def merge_entities(left: dict[str, JSONDict] | None, right: dict[str, JSONDict] | None) -> dict[str, JSONDict]:
    """Entities by normalized name: union their sources; mentions add up over sources (`_merged_mentions`), never
    fewer than the sources."""
    merged = dict(left or {})
    for key, new in (right or {}).items():
        old = merged.get(key)
        if old is None:
            merged[key] = new
            continue
        sources = _union(old.get("sources", []), new.get("sources", []))
        merged[key] = {
            **old,
            "sources": sources,
            "mention_count": max(len(sources), _merged_mentions(old, new)),
            "iteration": min(old.get("iteration", 0), new.get("iteration", 0)),
            "entity_type": old.get("entity_type") if old.get("entity_type") != "other" else new.get("entity_type"),
        }
    return merged


def merge_facts(left: dict[str, JSONDict] | None, right: dict[str, JSONDict] | None) -> dict[str, JSONDict]:
    """Facts by id: union evidence by source URL; analysis fields (verified, confidence...) take the newer value."""
    merged = dict(left or {})
    for fact_id, new in (right or {}).items():
        old = merged.get(fact_id)
        if old is None:
            merged[fact_id] = new
            continue
        seen = {e["source_url"] for e in old.get("evidence", [])}
        evidence = list(old.get("evidence", []))
        evidence += [e for e in new.get("evidence", []) if e["source_url"] not in seen]
        merged[fact_id] = {
            **old,
            **new,
            "evidence": evidence,
            "iteration": min(old.get("iteration", 0), new.get("iteration", 0)),
        }
    return merged


def current_facts(facts: dict[str, JSONDict] | None) -> dict[str, JSONDict]:
    """Facts that were not merged into another one by cross-verification."""
    return {fid: f for fid, f in (facts or {}).items() if not f.get("duplicate")}


START_KEY = "start:0"  # `elapsed`: the time before the first node the limit counts (the CLI's start-up)


class ResearchState(TypedDict, total=False):
    # Set once at start.
    session_id: str
    original_query: str
    request: JSONDict  # ResearchRequest.model_dump(mode="json")
    tier: str
    privacy_mode: str
    started_at: str

    # Refined by clarify.
    refined_query: str
    domain: str
    clarification: JSONDict  # {"questions": [...], "answers": [...], "exchanges": n, "timed_out": bool}

    # Progress.
    current_phase: str
    iteration: int
    pending_queries: list[JSONDict]  # PlanQuery dumps for the next collect
    providers: list[str]  # chosen by plan for this session
    gaps: list[str]
    trail: JSONDict  # {"entity key": depth} of entities already followed

    # Accumulated, keyed (see the module docstring).
    queries_run: Annotated[dict[str, JSONDict], merge_dicts]  # normalized query -> {query, intent, iteration}
    provider_calls: Annotated[dict[str, JSONDict], merge_dicts]  # "iter|provider|query" -> {ok, results, ...}
    # canonical URL -> SourceResult + bookkeeping; `full_content` is None and the page text is in the content
    # store under (URL, `content_key`), `content_length` characters long (graph/nodes/page_text.py).
    sources: Annotated[dict[str, JSONDict], merge_sources]
    processed: Annotated[dict[str, int], merge_dicts]  # canonical URL -> iteration it was extracted in
    entities: Annotated[dict[str, JSONDict], merge_entities]
    facts: Annotated[dict[str, JSONDict], merge_facts]
    access_failures: Annotated[dict[str, JSONDict], merge_dicts]
    saturation_history: Annotated[dict[str, JSONDict], merge_dicts]  # str(iteration) -> metrics + decision
    quality_history: Annotated[dict[str, JSONDict], merge_dicts]  # str(iteration) -> quality score
    reflections: Annotated[dict[str, JSONDict], merge_dicts]  # str(iteration) -> ReflectionResponse dump
    error_log: Annotated[dict[str, JSONDict], merge_dicts]
    tokens: Annotated[dict[str, int], merge_dicts]  # "step:iteration" -> tokens used
    # "node:iteration" -> seconds spent; `START_KEY`: the time before the first node that the limit counts
    elapsed: Annotated[dict[str, float], merge_dicts]

    # Decision and output.
    should_stop: bool
    stop_reason: str | None
    degraded_mode: bool
    final_report: JSONDict | None
    export_paths: dict[str, str]
