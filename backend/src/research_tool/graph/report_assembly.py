"""From a checked synthesis draft and the session state to the Report of DESIGN §7.

Sources are renumbered [1]..[n] in order of first use (answer first, then findings); only cited
sources become citations, so every [n] in the report resolves.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from research_tool.core import telemetry
from research_tool.core.errors import BadInputError
from research_tool.engines.base import NumberedSource, SynthesisDraft
from research_tool.engines.text.entities import (
    is_listed_name,
    is_sentence_case_word,
    sentence_case_words,
    types_from_longer_names,
)
from research_tool.engines.text.question_intent import classify_question, coverage
from research_tool.engines.text.ranker import matched
from research_tool.engines.text.tokens import stem_set
from research_tool.models.entities import Citation, Fact, utc_now_iso
from research_tool.models.report import Finding, Report, ReportEntity, ReportMetadata
from research_tool.models.state import ResearchState
from research_tool.providers.registry import provider_class

MARKER = re.compile(r"\[(\d+)\]")


def markers(text: str) -> list[int]:
    return [int(m) for m in MARKER.findall(text)]


def renumber(draft: SynthesisDraft) -> tuple[SynthesisDraft, dict[int, int]]:
    """Map old source numbers to 1..n by first use and rewrite every marker."""
    order: dict[int, int] = {}
    for text in [draft.answer, *(f.statement for f in draft.findings)]:
        for n in markers(text):
            order.setdefault(n, len(order) + 1)
    for finding in draft.findings:
        for n in finding.citations:
            order.setdefault(n, len(order) + 1)

    def rewrite(text: str) -> str:
        return MARKER.sub(lambda m: f"[{order[int(m.group(1))]}]", text)

    findings = [
        f.model_copy(update={"statement": rewrite(f.statement), "citations": sorted({order[n] for n in f.citations})})
        for f in draft.findings
    ]
    return draft.model_copy(update={"answer": rewrite(draft.answer), "findings": findings}), order


def _year(published: str | None) -> int | None:
    match = re.search(r"\b(1[5-9]\d\d|20\d\d)\b", published or "")
    return int(match.group(1)) if match else None


def _citation_type(source: dict[str, Any]) -> str:
    name = (source.get("found_by") or [source.get("source_name", "")])[0]
    try:
        return provider_class(name).kind
    except BadInputError:  # an unknown provider name in old state only loses the type
        return "web"


def build_citations(order: dict[int, int], numbered: list[NumberedSource], sources: dict[str, Any]) -> list[Citation]:
    by_old = {ns.n: ns.source for ns in numbered}
    citations: list[Citation] = []
    for old, new in sorted(order.items(), key=lambda kv: kv[1]):
        source = by_old[old]
        entry = sources.get(source.url, {})
        citations.append(
            Citation(
                id=f"[{new}]",
                title=source.title or source.url,
                url=source.url,
                type=_citation_type(entry or {"source_name": source.source_name}),
                location=source.location or source.url,
                provider=(entry.get("found_by") or [source.source_name])[0],
                authors=source.authors,
                year=_year(source.published_date),
                doi=source.doi,
                retrieved_at=source.retrieved_at,
            )
        )
    return citations


def _fact_for(statement: str, facts: dict[str, Fact]) -> Fact | None:
    return facts.get(Fact.make_id(MARKER.sub("", statement)))


def build_findings(draft: SynthesisDraft, facts: dict[str, Fact]) -> list[Finding]:
    findings: list[Finding] = []
    for f in draft.findings:
        fact = _fact_for(f.statement, facts)
        conflicts = [facts[c].statement for c in (fact.contradictions if fact else []) if c in facts]
        statement = f.statement
        if not markers(statement) and f.citations:
            statement = statement.rstrip() + " " + "".join(f"[{n}]" for n in f.citations)
        findings.append(
            Finding(
                statement=statement,
                citations=[f"[{n}]" for n in f.citations],
                confidence=fact.confidence if fact else min(1.0, 0.4 + 0.2 * len(f.citations)),
                verified=fact.verified if fact else len(f.citations) >= 2,
                contradictions=conflicts,
            )
        )
    return findings


# A finding that states less than this weighted share of the question's terms (its source's title counting half)
# does not bear on the question: it goes after those that do, and carries no "verified" mark (issue 34).
FINDING_MIN_COVERAGE = 0.25


def bears_on_question(finding: Finding, intent_weights: dict[str, float], titles: dict[str, str]) -> bool:
    """The finding states one of the question's terms itself (its source's title alone does not make it bear on
    the question), and enough of them with its title's help."""
    own = frozenset(stem_set(MARKER.sub("", finding.statement)))
    if not matched(intent_weights, own):
        return False
    context = frozenset().union(*(stem_set(titles.get(c, "")) for c in finding.citations))
    return coverage(own, context, intent_weights) >= FINDING_MIN_COVERAGE


def question_first(findings: list[Finding], question: str, citations: list[Citation]) -> list[Finding]:
    """The findings that bear on the question first (in their order), then the others: unverified and marked as not
    bearing on it (shown under "Also in the sources")."""
    weights = classify_question(question).weights
    if not weights:
        return findings
    titles = {c.id: c.title for c in citations}
    on, off = [], []
    for finding in findings:
        if bears_on_question(finding, weights, titles):
            on.append(finding)
        else:
            off.append(finding.model_copy(update={"verified": False, "bears_on_question": False}))
    return on + off


def single_source_gap(findings: list[Finding]) -> str | None:
    """How many of the findings listed on the question rest on a single source, counted from the list itself."""
    on = [f for f in findings if f.bears_on_question]
    single = sum(1 for f in on if not f.verified)
    if not single:
        return None
    return f"{single} of the {len(on)} findings on the question rest on a single independent source."


def build_entities(state: ResearchState, limit: int = 30) -> list[ReportEntity]:
    """The entities most sources name, without common words a sentence opened with ("Called", "Execute") or
    anything that is no name (a question, a CONSTANT, a fragment); a one-word name untyped in its own sources
    takes the type of a longer name it is part of ("Ffion" of "Ffion Marchbank"). `mentions` counts the times
    the sources name it, never fewer than its sources."""
    common = sentence_case_words(f["statement"] for f in (state.get("facts") or {}).values())
    named = [
        e
        for e in (state.get("entities") or {}).values()
        if is_listed_name(e["name"]) and not is_sentence_case_word(e["name"], common)
    ]
    typed = types_from_longer_names({e["name"]: e.get("entity_type", "other") for e in named})
    entities = sorted(named, key=lambda e: (-len(e.get("sources", [])), e["name"]))[:limit]
    return [
        ReportEntity(
            name=e["name"],
            type=typed.get(e["name"], e.get("entity_type", "other")),
            mentions=max(e.get("mention_count", 1), len(e.get("sources", []))),
            sources=len(e.get("sources", [])),
        )
        for e in entities
    ]


def duration_s(state: ResearchState) -> float:
    started = state.get("started_at")
    if not started:
        return 0.0
    return round((datetime.now(UTC) - datetime.fromisoformat(started)).total_seconds(), 3)


def assemble_report(
    state: ResearchState,
    draft: SynthesisDraft,
    citations: list[Citation],
    facts: dict[str, Fact],
    metadata: dict[str, Any],
) -> Report:
    saturation = [state["saturation_history"][k] for k in sorted(state.get("saturation_history") or {}, key=int)]
    question = state.get("refined_query") or state["original_query"]
    findings = question_first(build_findings(draft, facts), question, citations)
    single = single_source_gap(findings)
    return Report(
        session_id=state["session_id"],
        query=state["original_query"],
        refined_query=state.get("refined_query") or state["original_query"],
        domain=state.get("domain", "general"),
        tier=state.get("tier", "standard"),
        privacy_mode=state.get("privacy_mode", "cloud_allowed"),
        status="completed",
        stop_reason=state.get("stop_reason"),
        short_answer=draft.short_answer,
        answered=draft.answered,
        answer=draft.answer,
        findings=findings,
        citations=citations,
        entities=build_entities(state),
        gaps=[*draft.gaps, single] if single else draft.gaps,
        saturation=saturation,
        metadata=ReportMetadata(timestamp=utc_now_iso(), trace_id=telemetry.current_trace_id(), **metadata),
    )
