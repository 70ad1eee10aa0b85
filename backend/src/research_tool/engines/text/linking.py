"""Relevance through links: a document that a relevant fact names is relevant too (the next hop).

A relevant fact that names another document's title (a work, a person, a place) makes that document
part of the answer's chain even though it shares few words with the question. Each linked document's
best fact rises to LEAD_SHARE of the linking fact's relevance and its other facts to REST_SHARE. The
update only ever raises values to a bound set by the linking facts, so applying it again after the next
cycle changes nothing that did not change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from research_tool.engines.text.entities import clean_title, find_mentions
from research_tool.models.entities import Fact, SourceResult, normalize_key

LINKING_RELEVANCE = 0.3  # facts below this do not lend relevance
LEAD_SHARE = 0.8
REST_SHARE = 0.6
MIN_TITLE_CHARS = 4


def linked_relevance(facts: Sequence[Fact], sources: dict[str, SourceResult]) -> dict[str, float]:
    """fact id -> raised relevance, for the facts of documents that a relevant fact of another document names."""
    by_title: dict[str, list[str]] = defaultdict(list)
    for url, source in sources.items():
        key = normalize_key(clean_title(source.title or ""))
        if len(key) >= MIN_TITLE_CHARS:
            by_title[key].append(url)
    if not by_title:
        return {}
    link: dict[str, float] = {}
    for fact in facts:
        if fact.relevance < LINKING_RELEVANCE:
            continue
        homes = set(fact.source_urls)
        for mention in find_mentions(fact.statement):
            if mention.entity_type in ("date", "number"):
                continue
            for url in by_title.get(normalize_key(mention.text), ()):
                if url not in homes:
                    link[url] = max(link.get(url, 0.0), fact.relevance)
    by_source: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        for url in fact.source_urls:
            if url in link:
                by_source[url].append(fact)
    raised: dict[str, float] = {}
    for url, members in by_source.items():
        ordered = sorted(members, key=lambda f: (-f.relevance, f.id))
        for position, fact in enumerate(ordered):
            share = LEAD_SHARE if position == 0 else REST_SHARE
            value = round(share * link[url], 4)
            if value > max(fact.relevance, raised.get(fact.id, 0.0)):
                raised[fact.id] = value
    return raised
