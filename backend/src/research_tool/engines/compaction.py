"""State compaction (seed 000 §9, issue 5 item 4): when to shrink what the model sees, and how.

Pure functions, no I/O. The graph state itself is the external store (checkpointed, keyed reducers that
only ever merge), so compaction never deletes from it: it shrinks the *context* the next reasoning steps get.
Older sources become handles (url, title, a short snippet, no full text) plus one readable digest; the most
recent ones are kept whole. Handles keep their URLs, so every source stays citable and its number resolves.

Triggers, checked by the nodes before reflect and synthesize:
- the token budget left falls below 25% of the start (`RESEARCH_TOKEN_BUDGET`);
- the serialized state passes 50K tokens;
- always right before synthesis (to leave the model room for its answer).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

BUDGET_LOW_FRACTION = 0.25
STATE_TOKEN_LIMIT = 50_000
CHARS_PER_TOKEN = 4
HANDLE_SNIPPET_CHARS = 300
DIGEST_GIST_CHARS = 200

REASON_BUDGET_LOW = "token_budget_low"
REASON_STATE_TOO_LARGE = "state_too_large"
REASON_BEFORE_SYNTHESIS = "before_synthesis"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def estimate_text_tokens(text: str) -> int:
    """About 4 characters a token: close enough for budgeting when a server reports no usage."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def estimate_tokens(value: Any) -> int:
    """Token estimate of any JSON-able value as it would be serialized (e.g. the whole graph state)."""
    if isinstance(value, str):
        return estimate_text_tokens(value)
    serialized = json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))
    return estimate_text_tokens(serialized)


def should_compact(tokens_used: int, token_budget: int, state_tokens: int, before_synthesis: bool) -> str | None:
    """The reason to compact now, or None. The most pressing reason wins when several apply."""
    if token_budget > 0 and token_budget - tokens_used < BUDGET_LOW_FRACTION * token_budget:
        return REASON_BUDGET_LOW
    if state_tokens > STATE_TOKEN_LIMIT:
        return REASON_STATE_TOO_LARGE
    if before_synthesis:
        return REASON_BEFORE_SYNTHESIS
    return None


class CompactionSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kept: int = Field(ge=0)  # sources kept whole
    compacted: int = Field(ge=0)  # sources reduced to handles
    compacted_urls: list[str] = Field(default_factory=list)
    handles: list[dict[str, Any]] = Field(default_factory=list)  # the older sources, without full text
    digest: str = ""  # one line per older source: "- title (url): first sentence"
    tokens_before: int = Field(ge=0)
    tokens_after: int = Field(ge=0)


def _as_dict(source: Any) -> dict[str, Any]:
    if isinstance(source, BaseModel):
        return source.model_dump(mode="json")
    return dict(source)


def _recency(index: int, source: Mapping[str, Any]) -> tuple[int, str, int]:
    """Later cycle first, then later retrieval, then later position in the input."""
    iteration = source.get("first_iteration", source.get("iteration", 0)) or 0
    return (int(iteration), str(source.get("retrieved_at") or ""), index)


def _first_sentence(text: str, max_chars: int) -> str:
    flat = " ".join(text.split())
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0] if flat else ""
    return sentence if len(sentence) <= max_chars else sentence[: max_chars - 1].rstrip() + "…"


def source_handle(source: Mapping[str, Any], snippet_chars: int = HANDLE_SNIPPET_CHARS) -> dict[str, Any]:
    """The source without its full text: same keys (so it converts like any source), short snippet."""
    handle = dict(source)
    text = str(source.get("snippet") or source.get("full_content") or "")
    flat = " ".join(text.split())
    handle["snippet"] = flat if len(flat) <= snippet_chars else flat[: snippet_chars - 1].rstrip() + "…"
    handle["full_content"] = None
    return handle


def compact_sources(
    sources: Mapping[str, Any] | Iterable[Any], keep_recent: int
) -> tuple[list[dict[str, Any]], CompactionSummary]:
    """Keep the `keep_recent` most recent sources whole (in their input order); summarize the rest.

    `sources` is the state's `sources` mapping (canonical URL -> source dict with bookkeeping) or any
    iterable of source dicts / `SourceResult`s. Returns the kept sources and a summary whose `handles` are
    the older sources without full text (still citable) and whose `digest` is a readable overview.
    """
    items = [_as_dict(s) for s in (sources.values() if isinstance(sources, Mapping) else sources)]
    keep_recent = max(0, keep_recent)
    ranked = sorted(range(len(items)), key=lambda i: _recency(i, items[i]), reverse=True)
    keep_indexes = set(ranked[:keep_recent])
    kept = [s for i, s in enumerate(items) if i in keep_indexes]
    older = [s for i, s in enumerate(items) if i not in keep_indexes]
    handles = [source_handle(s) for s in older]
    digest = "\n".join(
        f"- {s.get('title') or 'untitled'} ({s.get('url', '')}): "
        f"{_first_sentence(str(s.get('snippet') or s.get('full_content') or ''), DIGEST_GIST_CHARS)}"
        for s in older
    )
    summary = CompactionSummary(
        kept=len(kept),
        compacted=len(older),
        compacted_urls=[str(s.get("url", "")) for s in older],
        handles=handles,
        digest=digest,
        tokens_before=estimate_tokens(items),
        tokens_after=estimate_tokens([*kept, *handles]),
    )
    return kept, summary
