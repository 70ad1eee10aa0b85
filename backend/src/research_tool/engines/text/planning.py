"""First-cycle sub-queries with intents, from the question's keyphrases, names, slots and domain.

The first query is the question itself as keywords (the best single BM25 query). A how-to question is
searched next as its action paired with each thing it acts on (`howto_queries`). The others look at
the question from different sides: each named thing on its own with the question's remaining terms
(comparison questions need both sides; bridge questions need the named side first), the definition
and mechanism of the main keyphrase, and the domain's evidence (examples for technical questions,
studies for academic ones, trials for medical ones, the market for competitive intelligence).
"""

from __future__ import annotations

from research_tool.engines.text.entities import find_mentions
from research_tool.engines.text.howto_queries import action_pairs
from research_tool.engines.text.keyphrases import build_query, keyphrases, query_signature, query_words
from research_tool.engines.text.slots import required_slots
from research_tool.engines.text.tokens import stem
from research_tool.models.domain import DomainConfiguration
from research_tool.models.schemas import PlanQuery

MIN_QUERIES = 3
DOMAIN_HINTS: dict[str, tuple[tuple[str, str], ...]] = {
    "technical": (("example usage", "example"), ("documentation parameters", "evidence")),
    "academic": (("study findings", "evidence"), ("review", "evidence")),
    "medical": (("clinical trial evidence", "evidence"), ("guidelines treatment", "evidence")),
    "competitive_intelligence": (("market competitors", "comparison"), ("pricing revenue", "evidence")),
    "general": (),
}


def plan_queries(question: str, domain: DomainConfiguration, max_queries: int) -> list[PlanQuery]:
    """Between 3 (or max_queries if smaller) and max_queries distinct sub-queries, best first."""
    limit = max(1, max_queries)
    planned: list[PlanQuery] = []
    seen: set[str] = set()

    def add(query: str, intent: str) -> None:
        signature = query_signature(query)
        if query.strip() and signature and signature not in seen and len(planned) < limit:
            seen.add(signature)
            planned.append(PlanQuery(query=query, intent=intent))

    slots = required_slots(question)
    answer_kind = slots[0].kind
    add(build_query(question, max_words=12), _direct_intent(answer_kind))
    for pair in action_pairs(question):  # a how-to question: its action with each thing it acts on
        add(pair, "facet")

    names = [m.text for m in find_mentions(question) if m.entity_type not in ("date", "number")]
    name_stems = {stem(w) for name in names for w in query_words(name)}
    residual = " ".join(w for w in query_words(question) if stem(w) not in name_stems)
    comparison = answer_kind == "yes_no" or _is_comparison(question)
    for name in names:
        add(build_query(name, residual, max_words=8), "comparison" if comparison and len(names) > 1 else "entity")
    phrases = [k.phrase for k in keyphrases(question, limit=6)]
    main = _main_topic(question, names, answer_kind)
    if answer_kind == "definition":
        add(f"{main} definition", "definition")
    if answer_kind in ("method", "reason", "definition"):
        add(f"how {main} works", "mechanism")
    for suffix, intent in DOMAIN_HINTS.get(domain.domain, ()):
        add(f"{main} {suffix}", intent)
    for phrase in phrases:
        add(build_query(phrase, main, max_words=6), "facet")
    add(f"{main} definition", "definition")
    add(f"{main} overview", "definition")
    return planned[: max(min(MIN_QUERIES, limit), len(planned))]


def _main_topic(question: str, names: list[str], answer_kind: str) -> str:
    """What the question is mainly about: its first name, or for how/why questions its first topic words."""
    if names and answer_kind not in ("method", "reason"):
        return names[-1] if answer_kind == "definition" else names[0]
    return build_query(question, max_words=4)


def _direct_intent(kind: str) -> str:
    return {
        "definition": "definition",
        "method": "mechanism",
        "reason": "mechanism",
        "yes_no": "comparison",
    }.get(kind, "evidence")


def _is_comparison(question: str) -> bool:
    lowered = f" {question.casefold()} "
    return any(cue in lowered for cue in (" vs ", " versus ", " compare", " difference between ", " both "))
