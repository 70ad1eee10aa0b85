"""plan: choose the providers and the first cycle's sub-queries."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from research_tool.core.wording import plural
from research_tool.graph.context import ResearchContext
from research_tool.graph.decisions.provider_choice import choose_providers
from research_tool.graph.nodes.instrumentation import phase, record_errors
from research_tool.graph.session_limits import resolve_limits
from research_tool.models.domain import DOMAINS
from research_tool.models.entities import normalize_key
from research_tool.models.request import ResearchRequest
from research_tool.models.state import ResearchState


def fresh_queries(queries: list[dict[str, Any]], already_run: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Drop queries already run (or repeated), keep at most `limit`."""
    seen = set(already_run)
    kept: list[dict[str, Any]] = []
    for q in queries:
        key = normalize_key(q["query"])
        if key and key not in seen:
            seen.add(key)
            kept.append(q)
    return kept[:limit]


@phase("plan")
async def plan_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    ctx = runtime.context
    request = ResearchRequest.model_validate(state["request"])
    domain = state["domain"]
    limits = resolve_limits(state["tier"], state["request"], ctx.settings)
    ranking: list[tuple[str, float]] = []
    if ctx.memory is not None:
        ranking = await ctx.memory.rank_providers(domain, DOMAINS[domain].provider_order())
    providers = choose_providers(request, domain, ctx.settings, ctx.client, ranking)
    step = await ctx.engine.plan(state["refined_query"], DOMAINS[domain], limits.max_queries)
    queries = fresh_queries(
        [q.model_dump() for q in step.value.queries], state.get("queries_run") or {}, limits.max_queries
    )
    if not queries:
        queries = [{"query": state["refined_query"], "intent": "the question as asked"}]
    names = ", ".join(providers) if providers else "no provider"
    await ctx.events.emit(
        "queries_planned",
        "plan",
        f"Planned {plural(len(queries), 'query', 'queries')} for {names}.",
        {"queries": queries, "providers": providers, "limits": limits.model_dump()},
    )
    return {
        "providers": providers,
        "pending_queries": queries,
        "iteration": 1,
        "tokens": {"plan:0": step.tokens},
        "error_log": record_errors("plan:0", step.errors),
        "trail": state.get("trail") or {},
    }
