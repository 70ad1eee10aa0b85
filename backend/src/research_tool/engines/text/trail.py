"""Reflection for the offline engine: slot-aware gaps and "follow the trail" queries, loop-safe.

After a cycle, the names that the most relevant facts mention but the question does not (the
person a relative clause of the question describes, once a fact names them) become the next queries,
combined with the question words those facts did not cover. Names whose
type fits an unfilled slot go first. Then queries aimed at the still empty slots, broader or
synonym reformulations of queries that found little, and coverage queries for question phrases no
fact mentions yet. A query whose signature (stem set) was already run is never proposed again, an
entity is followed once, and a trail stops at `max_trail_depth` hops from the question.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from research_tool.engines.base import ReflectionContext, ReflectionOutcome
from research_tool.engines.text.entities import clean_title, find_mentions
from research_tool.engines.text.keyphrases import build_query, keyphrases, query_signature, query_words
from research_tool.engines.text.slots import Slot, SlotReport, evaluate_slots
from research_tool.engines.text.tokens import stem, stem_set
from research_tool.models.entities import Fact, SourceResult, normalize_key, utc_now_iso
from research_tool.models.schemas import PlanQuery, ReflectionResponse, ResponseMetadata

TRAIL_FACT_RELEVANCE = 0.25  # facts below this do not seed trails
TRAIL_FACTS = 30  # how many of the most relevant facts seed trails
RESIDUAL_WORDS = 4
NEW_FACTS_STOPPED = 0.1  # a cycle adding fewer than this share of all facts adds nothing new

DEMONYMS = frozenset(
    """
    american british english french german italian spanish canadian australian indian chinese japanese russian irish
    scottish welsh dutch swedish norwegian danish finnish polish greek turkish mexican brazilian korean european
    african asian roman christian jewish muslim catholic protestant latin arabic
    """.split()
)
SYNONYMS: dict[str, str] = {
    "film": "movie",
    "movie": "film",
    "company": "corporation",
    "corporation": "company",
    "directed": "director",
    "director": "directed",
    "born": "birth",
    "died": "death",
    "founded": "established",
    "established": "founded",
    "timeout": "time limit",
    "error": "exception",
    "exception": "error",
    "function": "method",
    "method": "function",
    "city": "town",
    "singer": "musician",
    "wrote": "author",
    "author": "writer",
    "band": "group",
    "position": "office",
    "job": "occupation",
    "fast": "performance",
}


@dataclass
class _Candidate:
    name: str
    key: str
    score: float
    depth: int
    fact: Fact


def reflect(context: ReflectionContext, model: str = "offline") -> ReflectionOutcome:
    report = evaluate_slots(context.query, context.facts)
    sources = {s.url: s for s in context.sources}
    proposals = _Proposals(context.queries_run, context.max_queries)
    trail = dict(context.trail)

    candidates = trail_candidates(context, report, sources)
    trail_share = max(1, (context.max_queries * 3 + 4) // 5)
    residual_base = _residual_words(context.query)
    for candidate in candidates[:trail_share]:
        if proposals.full:
            break
        query = _trail_query(candidate, context.query, report, residual_base)
        if proposals.add(query, "follow_trail"):
            trail[candidate.key] = candidate.depth
    for query, intent in _slot_queries(context.query, report):
        proposals.add(query, intent)
    for query in _reformulations(context.failed_queries):
        proposals.add(query, "reformulate")
    for query in _coverage_queries(context.query, context.facts):
        proposals.add(query, "coverage")
    for candidate in candidates[trail_share:]:
        if proposals.full:
            break
        if proposals.add(_trail_query(candidate, context.query, report, residual_base), "follow_trail"):
            trail[candidate.key] = candidate.depth

    new_facts = [f for f in context.facts if f.iteration >= context.iteration]
    stopped = context.iteration > 1 and len(new_facts) <= max(1, NEW_FACTS_STOPPED * len(context.facts))
    sufficient = report.all_filled and bool(context.facts) and (stopped or not proposals.queries)
    response = ReflectionResponse(
        sufficient=sufficient,
        confidence=_confidence(report, context.facts),
        gaps=_gaps(report, context),
        new_queries=proposals.queries,
        metadata=ResponseMetadata(timestamp=utc_now_iso(), model=model, token_count=0),
    )
    return ReflectionOutcome(response=response, trail=trail, slots=dict(report.filled))


class _Proposals:
    """Queries for the next cycle: distinct by signature, none already run, at most `limit`."""

    def __init__(self, queries_run: Sequence[str], limit: int) -> None:
        self.seen = {query_signature(q) for q in queries_run}
        self.limit = limit
        self.queries: list[PlanQuery] = []

    @property
    def full(self) -> bool:
        return len(self.queries) >= self.limit

    def add(self, query: str, intent: str) -> bool:
        signature = query_signature(query)
        if self.full or not signature or signature in self.seen:
            return False
        self.seen.add(signature)
        self.queries.append(PlanQuery(query=query.strip(), intent=intent))
        return True


def trail_candidates(
    context: ReflectionContext, report: SlotReport, sources: dict[str, SourceResult]
) -> list[_Candidate]:
    """Names found next to the question's terms but not in the question, best lead first."""
    question_stems = stem_set(context.query)
    retrieved_titles = {normalize_key(clean_title(s.title)) for s in context.sources}
    wanted_types = {s.kind for s in report.unfilled if s.kind in ("person", "place")}
    seeds = sorted(
        (f for f in context.facts if f.relevance >= TRAIL_FACT_RELEVANCE), key=lambda f: (-f.relevance, f.id)
    )[:TRAIL_FACTS]
    scores: dict[str, _Candidate] = {}
    texts = [normalize_key(s.text()) for s in context.sources]
    for fact in seeds:
        for mention in find_mentions(fact.statement):
            if mention.entity_type in ("date", "number"):
                continue
            key = normalize_key(mention.text)
            stems = stem_set(mention.text)
            if not key or not stems or key in context.trail or key in DEMONYMS:
                continue
            if len(stems & question_stems) >= 0.5 * len(stems):
                continue  # the question already names it
            if key in retrieved_titles:
                continue  # its own document is already here: nothing to follow
            depth = _depth(fact, sources, context.trail)
            if depth > context.max_trail_depth:
                continue
            bonus = 1.5 if mention.entity_type in wanted_types else 1.0
            bonus *= 1.2 if len(mention.text.split()) >= 2 else 1.0
            # words right after the name that the question shares (a year or a qualifier in parentheses)
            attached = stem_set(fact.statement[mention.end : mention.end + 12]) & question_stems
            bonus *= 1.0 + 0.25 * len(attached)
            score = fact.relevance * bonus * _specificity(key, texts)
            old = scores.get(key)
            if old is None:
                scores[key] = _Candidate(mention.text, key, score, depth, fact)
            else:
                old.score += score
                old.depth = min(old.depth, depth)
    for source in context.sources:
        _add_title_candidate(source, context, question_stems, scores, sources)
    return sorted(scores.values(), key=lambda c: (-c.score, c.key))


def _specificity(key: str, texts: list[str]) -> float:
    """Names that many retrieved documents mention ("United States") lead nowhere in particular."""
    padded = f" {key} "
    frequency = sum(1 for text in texts if padded in f" {text} ")
    return 1.0 / (1.0 + math.log1p(max(0, frequency - 1)))


def _add_title_candidate(
    source: SourceResult,
    context: ReflectionContext,
    question_stems: frozenset[str],
    scores: dict[str, _Candidate],
    sources: dict[str, SourceResult],
) -> None:
    """A retrieved document's title that is not in the question: other documents may name it."""
    title = clean_title(source.title)
    key = normalize_key(title)
    stems = stem_set(title)
    if not key or key in scores or key in context.trail or not stems or stems <= question_stems:
        return
    facts = [f for f in context.facts if any(e.source_url == source.url for e in f.evidence)]
    best = max(facts, key=lambda f: f.relevance, default=None)
    if best is None or best.relevance < 2 * TRAIL_FACT_RELEVANCE:
        return
    depth = _depth(best, sources, context.trail)
    if depth <= context.max_trail_depth:
        scores[key] = _Candidate(title, key, 0.5 * best.relevance, depth, best)


def _depth(fact: Fact, sources: dict[str, SourceResult], trail: dict[str, int]) -> int:
    """1 + the depth of the followed entity whose trail query found this fact's source (0 if none)."""
    parent = 0
    for evidence in fact.evidence:
        source = sources.get(evidence.source_url)
        if source is None or not source.query:
            continue
        query_stems = stem_set(source.query)
        for key, depth in trail.items():
            key_stems = stem_set(key)
            if key_stems and key_stems <= query_stems:
                parent = max(parent, depth)
    return parent + 1


def _residual_words(question: str) -> list[str]:
    names = [m.text for m in find_mentions(question) if m.entity_type not in ("date", "number")]
    name_stems = {stem(w) for n in names for w in query_words(n)}
    return [w for w in query_words(question) if stem(w) not in name_stems]


def _trail_query(candidate: _Candidate, question: str, report: SlotReport, residual: list[str]) -> str:
    """The entity plus the question words its fact did not cover, slot words first."""
    covered = stem_set(candidate.fact.statement) | stem_set(candidate.name)
    slot_words = [t for s in report.unfilled for t in s.terms if s.name == "answer"]
    words = [w for w in [*slot_words, *residual] if stem(w) not in covered]
    if not words:
        words = list(slot_words) or residual[:2]
    return build_query(candidate.name, " ".join(words[:RESIDUAL_WORDS]), max_words=4 + RESIDUAL_WORDS)


def _slot_queries(question: str, report: SlotReport) -> list[tuple[str, str]]:
    names = [m.text for m in find_mentions(question) if m.entity_type not in ("date", "number")]
    main = " ".join(names[:2]) or " ".join(query_words(question)[:4])
    queries: list[tuple[str, str]] = []
    for slot in report.unfilled:
        if slot.name.startswith("subject:"):
            rest = " ".join(_residual_words(question)[:3])
            queries.append((build_query(slot.description, rest), f"fill_slot:{slot.kind}"))
            continue
        cue = _SLOT_CUES.get(slot.kind, "")
        queries.append((build_query(main, " ".join(slot.terms), cue, max_words=8), f"fill_slot:{slot.kind}"))
    return queries


_SLOT_CUES: dict[str, str] = {
    "person": "by",
    "date": "year date",
    "place": "located",
    "number": "number total",
    "reason": "because reason",
    "method": "how to use",
    "definition": "definition",
    "yes_no": "",
    "entity": "",
    "topic": "",
}


def _reformulations(failed: Sequence[str]) -> list[str]:
    out: list[str] = []
    for query in failed:
        terms = query_words(query)
        swapped = [SYNONYMS.get(t.casefold(), t) for t in terms]
        if swapped != terms:
            out.append(" ".join(swapped))
        if len(terms) >= 3:
            out.append(" ".join(terms[: max(2, len(terms) // 2)]))  # broader: the leading half
    return out


def _coverage_queries(question: str, facts: Sequence[Fact]) -> list[str]:
    """Question phrases that no relevant fact mentions yet."""
    covered: set[str] = set()
    for fact in facts:
        if fact.relevance >= TRAIL_FACT_RELEVANCE:
            covered |= stem_set(fact.statement)
    names = [m.text for m in find_mentions(question) if m.entity_type not in ("date", "number")]
    anchor = names[0] if names else ""
    out = []
    for phrase in keyphrases(question, limit=6):
        if not set(phrase.stems) <= covered:
            out.append(build_query(phrase.phrase, anchor, max_words=6))
    return out


def _confidence(report: SlotReport, facts: Sequence[Fact]) -> float:
    filled = sum(1 for s in report.slots if report.filled.get(s.name)) / max(1, len(report.slots))
    top = sorted(facts, key=lambda f: -f.relevance)[:5]
    support = sum(f.confidence for f in top) / len(top) if top else 0.0
    return round(min(1.0, 0.6 * filled + 0.4 * support), 3)


def _gaps(report: SlotReport, context: ReflectionContext) -> list[str]:
    gaps = [f"Not yet found: {slot.description} ({slot.kind.replace('_', '/')})." for slot in report.unfilled]
    by_id = {f.id: f for f in context.facts}
    shown: set[str] = set()
    for fact in sorted(context.facts, key=lambda f: -f.relevance):
        if fact.contradictions and fact.id not in shown and len(shown) < 4:
            other = by_id.get(fact.contradictions[0])
            if other is not None:
                shown |= {fact.id, other.id}
                gaps.append(f'Sources disagree: "{fact.statement}" versus "{other.statement}"')
    single = [f for f in context.facts if f.relevance >= 0.5 and not f.verified]
    if single:
        gaps.append(f"{len(single)} relevant claim(s) rest on a single source so far.")
    per_query: dict[str, int] = defaultdict(int)
    for query in context.failed_queries:
        per_query[query] += 1
    for query in list(per_query)[:2]:
        gaps.append(f'Few results for the query "{query}".')
    return gaps


__all__ = ["Slot", "reflect", "trail_candidates"]
