"""synthesize: answer and key findings from verified facts first; every [n] checked against the
retrieved source text; unresolvable or unsupported citations removed and counted."""

from __future__ import annotations

import re
from typing import Any

from langgraph.runtime import Runtime

from research_tool.core.settings import Settings, price_per_million
from research_tool.engines.base import NumberedSource, SynthesisDraft, SynthesisInput
from research_tool.engines.cpu_pool import run_cpu
from research_tool.engines.text.synthesis import NO_STATEMENT, NOT_ANSWERED
from research_tool.graph.context import ResearchContext
from research_tool.graph.decisions.citations import check_citations
from research_tool.graph.decisions.source_ranking import rank_sources
from research_tool.graph.fallback_record import fallback_metadata, search_was_limited
from research_tool.graph.nodes.instrumentation import elapsed_total, phase, record_errors, tokens_total
from research_tool.graph.nodes.model_context import compact_for_model, drop_unsupported_claims
from research_tool.graph.nodes.page_text import hydrated
from research_tool.graph.nodes.process import to_source
from research_tool.graph.report_assembly import assemble_report, build_citations, renumber
from research_tool.graph.search_failures import unreachable_providers
from research_tool.graph.session_limits import resolve_limits
from research_tool.models.entities import Fact
from research_tool.models.state import ResearchState, current_facts
from research_tool.providers.local_corpus.reader import answer_reader
from research_tool.providers.local_corpus.similarity import answer_similarity

_EDITORIAL = re.compile(r"^\s*_[^\n]*_[.!?]?\s*$")


def report_cost(settings: Settings, model: str, tokens: int) -> float | None:
    """The session's model tokens at RESEARCH_PRICE_TABLE's price for its model (None: the model is not priced)."""
    price = price_per_million(settings, model)
    return None if price is None else round(tokens * price / 1_000_000, 6)


def never_empty(draft: SynthesisDraft) -> SynthesisDraft:
    """When the citation check left the answer without one statement, say that the sources do not answer
    the question and list what survived in the findings (the answer is never just a note)."""
    lines = [line for line in draft.answer.split("\n") if line.strip()]
    if any(not _EDITORIAL.match(line) for line in lines):
        return draft
    found = " ".join(f.statement for f in draft.findings[:2])
    head = NOT_ANSWERED if found else NO_STATEMENT
    answer = "\n".join([head, found] if found else [head])
    openings = (NOT_ANSWERED.split(".")[0], NO_STATEMENT.split(":")[0])  # with or without a reason after them
    notes = "\n".join(line for line in lines if not line.strip().startswith(openings))
    answer = answer + ("\n\n" + notes if notes else "")
    return draft.model_copy(update={"answer": answer, "answered": False, "short_answer": None})


def fact_rank(fact: Fact) -> tuple[float, ...]:
    return (1.0 if fact.verified else 0.0, fact.relevance, fact.confidence, len(fact.evidence))


@phase("synthesize")
async def synthesize_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    ctx = runtime.context
    state = await hydrated(ctx, state)
    limits = resolve_limits(state["tier"], state["request"], ctx.settings)
    all_sources = state.get("sources") or {}
    facts = {fid: Fact.model_validate(f) for fid, f in current_facts(state.get("facts")).items()}
    chosen = rank_sources(
        state["refined_query"],
        (state.get("provider_calls") or {}).values(),
        facts.values(),
        limits.max_sources,
        all_sources,
    )
    shown = await compact_for_model(
        ctx,
        state,
        limits,
        [all_sources[url] for url in chosen],
        phase="synthesize",
        keep_recent=limits.max_sources,
        before_synthesis=True,
    )
    numbered = [NumberedSource(n=i, source=to_source(s)) for i, s in enumerate(shown, start=1)]
    full_text = [NumberedSource(n=i, source=to_source(all_sources[s["url"]])) for i, s in enumerate(shown, start=1)]
    usable = sorted((f for f in facts.values() if set(f.source_urls) & set(chosen)), key=fact_rank, reverse=True)
    step = await ctx.engine.synthesize(
        SynthesisInput(
            query=state["refined_query"],
            sources=numbered,
            facts=usable,
            degraded_mode=search_was_limited(bool(state.get("degraded_mode")), state.get("provider_calls") or {}),
            unreachable_providers=unreachable_providers(state.get("provider_calls") or {}),
            stop_reason=state.get("stop_reason"),
            similarity=answer_similarity(ctx.settings.semantic_search),
            reader=answer_reader(),
        )
    )
    checked = await run_cpu(check_citations, step.value, full_text)  # CPU-bound: off the loop and its GIL
    semantic_draft, semantic_removed, semantic_tokens = await drop_unsupported_claims(ctx, checked.draft, full_text)
    draft, order = renumber(never_empty(semantic_draft))
    citations = build_citations(order, full_text, all_sources)
    removed = checked.removed_unresolvable + checked.removed_unsupported + semantic_removed
    step_tokens = {"synthesize:0": step.tokens, "citation_support:0": semantic_tokens}
    tokens = {**(state.get("tokens") or {}), **step_tokens}
    calls = state.get("provider_calls") or {}
    metadata = {
        "engine": ctx.engine.name,
        "model": ctx.engine.model,
        "token_count": int(sum(tokens.values())),
        "cost_usd": report_cost(ctx.settings, ctx.engine.model, int(sum(tokens.values()))),
        "iterations": int(state.get("iteration", 0)),
        "duration_s": round(elapsed_total(state), 3),
        "provider_calls": len(calls),
        "access_failures": len(state.get("access_failures") or {}),
        **fallback_metadata(
            {**(state.get("error_log") or {}), **record_errors("synthesize:0", step.errors)},
            search_limited=bool(state.get("degraded_mode")),
            provider_calls=calls,
            phase_seconds=state.get("elapsed") or {},
            time_limit_s=limits.max_execution_time_s,
        ),
        "model_notes": ctx.engine.notes,
        "citations_removed": removed,
        "sources_retrieved": len(all_sources),
        "facts_extracted": len(facts),
        "facts_verified": sum(1 for f in facts.values() if f.verified),
        "quality": (state.get("quality_history") or {}).get(str(state.get("iteration", 0)), {}),
        "budget": {
            "time_s": {"used": round(elapsed_total(state), 3), "limit": limits.max_execution_time_s},
            "provider_calls": {"used": len(calls), "limit": limits.provider_call_budget},
            "tokens": {"used": tokens_total({"tokens": tokens}), "limit": limits.token_budget},
        },
    }
    report = assemble_report(state, draft, citations, facts, metadata)
    if removed:
        await ctx.events.emit(
            "citations_checked",
            "synthesize",
            f"Removed {removed} citation(s) that did not resolve or were not supported by the cited text.",
            {
                "removed_unresolvable": checked.removed_unresolvable,
                "removed_unsupported": checked.removed_unsupported,
                "removed_by_semantic_check": semantic_removed,
            },
        )
    if ctx.memory is not None:
        per_provider: dict[str, int] = {}
        for citation in report.citations:
            per_provider[citation.provider] = per_provider.get(citation.provider, 0) + 1
        for provider, count in per_provider.items():
            await ctx.memory.record_citations(report.domain, provider, count)
    return {
        "final_report": report.model_dump(mode="json"),
        "tokens": step_tokens,
        "error_log": record_errors("synthesize:0", step.errors),
    }
