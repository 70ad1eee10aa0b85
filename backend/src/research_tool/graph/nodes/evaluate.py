"""evaluate: score the cycle, reflect (gaps -> next queries), measure saturation, and decide to go on or stop."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from research_tool.core.wording import plural
from research_tool.engines.base import ReflectionContext
from research_tool.graph.context import ResearchContext
from research_tool.graph.decisions.quality import score_quality
from research_tool.graph.decisions.saturation import (
    STOP_MESSAGES,
    GuardReadings,
    SaturationMetrics,
    calculate_saturation,
    decide_stop,
)
from research_tool.graph.nodes.instrumentation import elapsed_total, phase, record_errors, tokens_total
from research_tool.graph.nodes.model_context import compact_for_model
from research_tool.graph.nodes.page_text import hydrated
from research_tool.graph.nodes.plan import fresh_queries
from research_tool.graph.nodes.process import to_source
from research_tool.graph.session_limits import SessionLimits, resolve_limits
from research_tool.models.entities import Entity, Fact
from research_tool.models.state import ResearchState, current_facts

MAX_TRAIL_DEPTH = 2
FEW_RESULTS = 3


def _cycle_metrics(state: ResearchState, iteration: int, queries_remaining: int) -> SaturationMetrics:
    entities = state.get("entities") or {}
    facts = current_facts(state.get("facts"))
    calls = [c for c in (state.get("provider_calls") or {}).values() if c["iteration"] == iteration]
    sources = state.get("sources") or {}
    returned = {url for c in calls for url in c.get("urls", [])}
    known_before = {u for u in returned if u in sources and sources[u].get("first_iteration", iteration) < iteration}
    return calculate_saturation(
        iteration=iteration,
        entities_before=sum(1 for e in entities.values() if e.get("iteration", 0) < iteration),
        entities_after=len(entities),
        facts_before=sum(1 for f in facts.values() if f.get("iteration", 0) < iteration),
        facts_after=len(facts),
        results_this_cycle=len(returned),
        already_known_results=len(known_before),
        queries_run=len(state.get("queries_run") or {}),
        queries_remaining=queries_remaining,
    )


def _guards(state: ResearchState, ctx: ResearchContext, limits: SessionLimits, iteration: int) -> GuardReadings:
    calls = state.get("provider_calls") or {}
    cycle = [c for c in calls.values() if c["iteration"] == iteration]
    return GuardReadings(
        stop_requested=ctx.stop_requested(),
        elapsed_s=elapsed_total(state),
        max_execution_time_s=limits.working_time_s,  # the rest of the limit writes the report
        provider_calls=len(calls),
        provider_call_budget=limits.provider_call_budget,
        tokens_used=tokens_total(state),
        token_budget=limits.token_budget,
        iteration=iteration,
        max_iterations=limits.max_iterations,
        cycle_calls=len(cycle),
        cycle_failures=sum(1 for c in cycle if not c["ok"]),
    )


def _failed_queries(state: ResearchState) -> list[str]:
    return [q["query"] for q in (state.get("queries_run") or {}).values() if q.get("results", 0) < FEW_RESULTS]


@phase("evaluate")
async def evaluate_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    ctx = runtime.context
    state = await hydrated(ctx, state)
    iteration = int(state["iteration"])
    limits = resolve_limits(state["tier"], state["request"], ctx.settings)
    facts = [Fact.model_validate(f) for f in current_facts(state.get("facts")).values()]
    shown = await compact_for_model(
        ctx,
        state,
        limits,
        list((state.get("sources") or {}).values()),
        phase="evaluate",
        keep_recent=max(1, limits.max_sources // 2),
        before_synthesis=False,
    )
    reflection = await ctx.engine.reflect(
        ReflectionContext(
            query=state["refined_query"],
            domain=state["domain"],
            iteration=iteration,
            max_queries=limits.max_queries,
            facts=facts,
            entities=[Entity.model_validate(e) for e in (state.get("entities") or {}).values()],
            sources=[to_source(s) for s in shown],
            queries_run=[q["query"] for q in (state.get("queries_run") or {}).values()],
            failed_queries=_failed_queries(state),
            trail=state.get("trail") or {},
            max_trail_depth=MAX_TRAIL_DEPTH,
        )
    )
    outcome = reflection.value
    next_queries = fresh_queries(
        [q.model_dump() for q in outcome.response.new_queries], state.get("queries_run") or {}, limits.max_queries
    )
    metrics = _cycle_metrics(state, iteration, len(next_queries))
    quality = score_quality(
        iteration=iteration,
        sources=state.get("sources") or {},
        facts=current_facts(state.get("facts")),
        slots=outcome.slots,
        gaps=outcome.response.gaps,
    )
    tokens = {f"reflect:{iteration}": reflection.tokens}
    readings = _guards({**state, "tokens": {**(state.get("tokens") or {}), **tokens}}, ctx, limits, iteration)
    reason = decide_stop(
        readings, metrics, ctx.thresholds, sufficient=outcome.response.sufficient, has_next_queries=bool(next_queries)
    )
    decision = "stop" if reason else "continue"
    record = {**metrics.model_dump(), "decision": decision, "stop_reason": reason.value if reason else None}
    message = (
        STOP_MESSAGES[reason]
        if reason
        else f"Cycle {iteration}: {plural(metrics.new_facts, 'new fact')}, "
        f"{plural(metrics.new_entities, 'new entity', 'new entities')}; "
        f"{plural(len(next_queries), 'follow-up query', 'follow-up queries')}."
    )
    await ctx.events.emit("saturation", "evaluate", message, {**record, "quality": quality.model_dump()})
    update: dict[str, Any] = {
        "saturation_history": {str(iteration): record},
        "quality_history": {str(iteration): quality.model_dump()},
        "reflections": {str(iteration): outcome.response.model_dump(mode="json")},
        "gaps": outcome.response.gaps,
        "trail": outcome.trail or state.get("trail") or {},
        "tokens": tokens,
        "error_log": record_errors(f"reflect:{iteration}", reflection.errors),
        "should_stop": reason is not None,
        "stop_reason": reason.value if reason else None,
        "degraded_mode": bool(state.get("degraded_mode"))
        or (reason is not None and reason.value == "all_providers_failed"),
    }
    if reason is None:
        update["pending_queries"] = next_queries
        update["iteration"] = iteration + 1
    return update


def route_after_evaluate(state: ResearchState) -> str:
    return "synthesize" if state.get("should_stop") else "collect"
