"""The offline reasoning engine: no model, no network, deterministic, zero tokens.

Thin by design: each step delegates to one module of `engines/text/` (domains, planning, facts,
entities, trail, synthesis). Work is CPU-bound text processing, run by `cpu_pool.run_cpu` (a worker
process in the server, a worker thread elsewhere) so a long document never blocks the event loop.
"""

from __future__ import annotations

import re

from research_tool.engines.base import (
    ClarifyResult,
    EngineStep,
    ExtractResult,
    ReasoningEngine,
    ReflectionContext,
    ReflectionOutcome,
    SynthesisDraft,
    SynthesisInput,
)
from research_tool.engines.cpu_pool import run_cpu
from research_tool.engines.text.domains import ambiguity_questions, detect_domain
from research_tool.engines.text.entities import (
    clean_title,
    count_mentions,
    extract_entities,
    is_title_name,
    title_type,
)
from research_tool.engines.text.facts import extract_facts
from research_tool.engines.text.planning import plan_queries
from research_tool.engines.text.sentences import split_sentences
from research_tool.engines.text.slots import required_slots
from research_tool.engines.text.synthesis import synthesize_draft
from research_tool.engines.text.trail import reflect
from research_tool.models.domain import DomainConfiguration, DomainName
from research_tool.models.entities import Entity, SourceResult, normalize_key
from research_tool.models.schemas import PlanResponse
from research_tool.models.tiers import TierName

# Extraction of documents above this size runs off the event loop (run_cpu); small ones run inline. (At 20,000 a
# typical page was extracted inline, tens of ms each, back to back: the server's event loop stalled.)
THREAD_THRESHOLD_CHARS = 2_000


class OfflineEngine(ReasoningEngine):
    name = "offline"

    def __init__(self, *, max_facts_per_source: int = 8) -> None:
        self.max_facts_per_source = max_facts_per_source

    async def clarify(self, query: str, domain_hint: DomainName | None) -> EngineStep[ClarifyResult]:
        refined = re.sub(r"\s+", " ", query).strip()
        tier, reason = _suggest_tier(refined)
        return EngineStep(
            value=ClarifyResult(
                refined_query=refined,
                domain=detect_domain(refined, domain_hint),
                questions=ambiguity_questions(refined),
                tier=tier,
                tier_reason=reason,
            )
        )

    async def apply_answers(self, query: str, questions: list[str], answers: list[str]) -> EngineStep[str]:
        given = [re.sub(r"\s+", " ", a).strip().rstrip(".") for a in answers if a and a.strip()]
        refined = re.sub(r"\s+", " ", query).strip()
        if given:
            refined = f"{refined} ({'; '.join(given)})"
        return EngineStep(value=refined)

    async def plan(self, query: str, domain: DomainConfiguration, max_queries: int) -> EngineStep[PlanResponse]:
        return EngineStep(value=PlanResponse(queries=plan_queries(query, domain, max_queries)))

    async def extract(self, query: str, source: SourceResult, iteration: int) -> EngineStep[ExtractResult]:
        args = (query, source, iteration, self.max_facts_per_source)
        if len(source.text()) > THREAD_THRESHOLD_CHARS:
            result = await run_cpu(extract_source, *args)
        else:
            result = extract_source(*args)
        return EngineStep(value=result)

    async def reflect(self, context: ReflectionContext) -> EngineStep[ReflectionOutcome]:
        outcome = await run_cpu(reflect, context, self.model)
        return EngineStep(value=outcome)

    async def synthesize(self, request: SynthesisInput) -> EngineStep[SynthesisDraft]:
        return EngineStep(value=await run_cpu(synthesize_draft, request))


def extract_source(query: str, source: SourceResult, iteration: int, max_facts: int) -> ExtractResult:
    """Facts from one source and the entities they name (module-level: run_cpu pickles it to a worker)."""
    facts = extract_facts(query, source, iteration, max_facts=max_facts)
    entities: dict[str, Entity] = {}
    subject = _document_entity(source, iteration)
    if subject is not None:
        entities[subject.key] = subject
    for fact in facts:
        # the quote keeps the source's line breaks, so a name never runs from one line into the next
        passage = fact.evidence[0].quote if fact.evidence else fact.statement
        for entity in extract_entities(passage, source.url, iteration, document=source.text()):
            entities.setdefault(entity.key, entity)
    return ExtractResult(facts=facts, entities=list(entities.values()))


def _document_entity(source: SourceResult, iteration: int) -> Entity | None:
    """The document's own subject (its title, without a reference page's summary after a dash: "asyncio" of
    "asyncio \u2014 The asyncio package", or a site's name after a bar), typed by its defining first sentence. A
    local file's title is listed only when it is a name (`is_title_name`): most are headings ("Our rooms")."""
    title = re.split(r" \u2014 | \| ", clean_title(source.title or ""))[0].strip()
    key = normalize_key(title)
    if not key or source.source_name not in ("local", "wikipedia") or len(title) > 80:
        return None
    text = source.text()
    if source.source_name == "local" and not is_title_name(title, text):
        return None
    first = next(iter(split_sentences(text[:2000])), None)
    entity_type = title_type(title, first.text if first else "")
    return Entity(
        key=key,
        name=title,
        entity_type=entity_type,
        sources=[source.url],
        iteration=iteration,
        mention_count=count_mentions(title, text),
    )


def _suggest_tier(query: str) -> tuple[TierName, str]:
    slots = required_slots(query)
    words = len(query.split())
    if any(s.name.startswith("bridge:") for s in slots) or len(slots) > 2:
        return "standard", "the question links several facts (multi-hop or comparison)"
    if re.search(r"\b(?:comprehensive|overview|survey|review|state of the art|landscape|compare)\b", query, re.I):
        return "deep", "the question asks for a broad overview"
    if words <= 12 and slots[0].kind in ("person", "date", "place", "number", "definition"):
        return "simple", "a single factual question"
    return "standard", "an open question that needs several sources"
