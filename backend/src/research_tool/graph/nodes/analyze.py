"""analyze: merge duplicate facts, cross-verify them across independent sources, score confidence,
and detect contradictions."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from research_tool.core.wording import plural
from research_tool.engines.cpu_pool import run_cpu
from research_tool.graph.context import ResearchContext
from research_tool.graph.decisions.verification import cross_verify
from research_tool.graph.nodes.instrumentation import phase
from research_tool.graph.nodes.page_text import hydrated
from research_tool.graph.nodes.process import to_source
from research_tool.models.domain import DOMAINS
from research_tool.models.entities import Fact
from research_tool.models.state import ResearchState


@phase("analyze")
async def analyze_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    ctx = runtime.context
    state = await hydrated(ctx, state)
    facts = [Fact.model_validate(f) for f in (state.get("facts") or {}).values()]
    sources = {url: to_source(s) for url, s in (state.get("sources") or {}).items()}
    threshold = DOMAINS[state["domain"]].verification_threshold
    # CPU-bound over every source's full text: off the event loop and its GIL (a server runs many sessions on it)
    checked = await run_cpu(cross_verify, [f for f in facts if not f.duplicate], sources, threshold)
    kept = {f.id for f in checked}
    merged_away = [f.model_copy(update={"duplicate": True}) for f in facts if f.id not in kept]
    verified = sum(1 for f in checked if f.verified)
    contradictions = sum(1 for f in checked if f.contradictions)
    await ctx.events.emit(
        "facts_verified",
        "analyze",
        f"{verified} of {plural(len(checked), 'fact')} {'is' if len(checked) == 1 else 'are'} supported by "
        f"independent sources; {contradictions} involved in contradictions.",
        {"verified": verified, "facts": len(checked), "contradictions": contradictions},
    )
    return {"facts": {f.id: f.model_dump(mode="json") for f in [*checked, *merged_away]}}
