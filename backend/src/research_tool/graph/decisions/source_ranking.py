"""Which retrieved sources the report should draw on.

Retrieval already said how well each source matches each query; the queries say how close they are to
the question. A source's score fuses its ranks over every query that found it (reciprocal-rank fusion,
each query weighted by how much of the question it covers), plus a small bonus for relevant, verified
facts. Then one step of link propagation follows the trail: a source whose title is named in the text of
one of the best sources (the bridge entity of a multi-hop question) inherits part of that source's score;
chunks that share a title (paragraphs of one document) pass nothing to each other.
Only sources with at least one extracted fact are eligible, with one exception: for a how-to question, a
retrieved API page whose name spells out most of the question ("csv.DictReader" for "read a CSV file into
dictionaries") is eligible even without facts; such a page often holds only a signature and a member
list, which yields no facts, yet it is the page the answer should lead with.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from typing import Any

from research_tool.engines.text.howto_answers import API_TITLE_MIN_MATCH, api_title_match
from research_tool.engines.text.howto_queries import is_howto
from research_tool.engines.text.tokens import stem_set
from research_tool.models.entities import Fact

RRF_K = 3.0
FACT_BONUS = 0.05
LINK_SHARE = 0.6  # part of a top source's score passed to each source it names
LINK_FROM_TOP = 3  # how many of the best sources pass score on
NAMED_SHARE = 0.5  # a page the question names by its title competes with this share of the best score
MIN_TITLE_CHARS = 4
PARENTHETICAL = re.compile(r"\s*\([^)]*\)\s*$")


def query_weight(query: str, question_stems: frozenset[str]) -> float:
    """Share of the query's terms that come from the question (a trail query about a new entity still counts)."""
    stems = stem_set(query)
    if not stems or not question_stems:
        return 0.0
    return len(stems & question_stems) / len(stems) * min(1.0, len(stems & question_stems) / 2)


def howto_query_weight(query: str, question_stems: frozenset[str]) -> float:
    """A how-to question's query also weighs by the share of the question it covers: its action-pair
    queries ("log file") widen the search, and what they alone find ranks below what the whole question finds."""
    if not question_stems:
        return 0.0
    return query_weight(query, question_stems) * len(stem_set(query) & question_stems) / len(question_stems)


def _title_key(title: str) -> str:
    return " ".join(PARENTHETICAL.sub("", html.unescape(title)).casefold().split())


def named_in_question(question: str, title: str) -> bool:
    """The question names the page: its title (without a parenthetical qualifier) as whole words ("Who
    founded Tolt Harbour?" names "Tolt Harbour (port)"). A bridge question names its first hop so; the many
    follow-up queries of a long session would otherwise outvote that page with pages they keep meeting."""
    key = _title_key(title)
    if len(key) < MIN_TITLE_CHARS:
        return False
    text = " ".join(html.unescape(question).casefold().split())
    return re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) is not None


def propagate_links(score: dict[str, float], sources: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Sources named (by title) in the text of the best-scored sources inherit part of their score."""
    top = sorted(score, key=lambda u: -score[u])[:LINK_FROM_TOP]
    texts = {u: " ".join(str((sources.get(u) or {}).get("full_content") or "").casefold().split()) for u in top}
    titles = {u: _title_key(str((sources.get(u) or {}).get("title") or "")) for u in score}
    linked = dict(score)
    for url in score:
        title = titles[url]
        if len(title) < MIN_TITLE_CHARS:
            continue
        for origin in top:
            # chunks of one document share its title: naming it is no link to another page
            if origin != url and titles[origin] != title and title in texts[origin]:
                linked[url] += LINK_SHARE * score[origin]
    return linked


def rank_sources(
    question: str,
    provider_calls: Iterable[Mapping[str, Any]],
    facts: Iterable[Fact],
    limit: int,
    sources: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    question_stems = stem_set(question)
    fact_bonus: dict[str, float] = {}
    for fact in facts:
        weight = FACT_BONUS * (0.5 + fact.relevance) * (2.0 if fact.verified else 1.0)
        for url in fact.source_urls:
            fact_bonus[url] = max(fact_bonus.get(url, 0.0), weight)
    api_match: dict[str, float] = {}
    for url, source in (sources or {}).items():
        match = api_title_match(question, str(source.get("title") or ""))
        if match >= API_TITLE_MIN_MATCH:
            api_match[url] = match
            fact_bonus.setdefault(url, 0.0)
    score = dict.fromkeys(fact_bonus, 0.0)
    weigh = howto_query_weight if is_howto(question) else query_weight
    for call in provider_calls:
        weight = weigh(str(call.get("query", "")), question_stems)
        for rank, url in enumerate(call.get("urls", []), start=1):
            if url in score:
                score[url] += weight / (RRF_K + rank)
    total = {u: score[u] + fact_bonus[u] for u in score}
    best = max(total.values(), default=0.0)
    for url, match in api_match.items():
        total[url] += match * best  # the page of the API the question spells out competes with the best
    for url in total:
        if named_in_question(question, str((sources or {}).get(url, {}).get("title") or "")):
            total[url] += NAMED_SHARE * best
    if sources is not None:
        total = propagate_links(total, sources)
    return sorted(total, key=lambda u: (-total[u], u))[:limit]
