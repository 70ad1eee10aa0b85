"""clarify: refine the query, detect the domain, and pause for answers only when genuinely ambiguous."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from research_tool.graph.context import ResearchContext
from research_tool.graph.nodes.instrumentation import phase, record_errors
from research_tool.models.state import ResearchState

MAX_EXCHANGES = 2


def _answers_from(reply: Any) -> list[str] | None:
    """The resume value is {"answers": [...]} or {"timed_out": true}; None means go on with the query as is."""
    if not isinstance(reply, dict) or reply.get("timed_out"):
        return None
    answers = reply.get("answers")
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list):
        return None
    cleaned = [str(a).strip() for a in answers if str(a).strip()]
    return cleaned or None


@phase("clarify")
async def clarify_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    ctx = runtime.context
    request = state["request"]
    query = state["original_query"]
    step = await ctx.engine.clarify(query, request.get("domain"))
    result = step.value
    tokens = {"clarify:0": step.tokens}
    errors = record_errors("clarify:0", step.errors)
    refined = result.refined_query or query
    questions = result.questions
    exchanges: list[dict[str, Any]] = []
    timed_out = False
    if request.get("clarify") and questions:
        for exchange in range(1, MAX_EXCHANGES + 1):
            reply = interrupt({"questions": questions, "exchange": exchange})
            answers = _answers_from(reply)
            if answers is None:
                timed_out = bool(isinstance(reply, dict) and reply.get("timed_out"))
                break
            exchanges.append({"questions": questions, "answers": answers})
            applied = await ctx.engine.apply_answers(refined, questions, answers)
            refined = applied.value
            tokens[f"apply_answers:{exchange}"] = applied.tokens
            errors |= record_errors(f"apply_answers:{exchange}", applied.errors)
            again = await ctx.engine.clarify(refined, request.get("domain"))
            tokens[f"clarify:{exchange}"] = again.tokens
            questions = again.value.questions
            if not questions:
                break
    tier = request.get("tier") or result.tier or "standard"
    return {
        "refined_query": refined,
        "domain": request.get("domain") or result.domain,
        "tier": tier,
        "clarification": {
            "asked": bool(exchanges) or timed_out,
            "exchanges": exchanges,
            "timed_out": timed_out,
            "tier_reason": result.tier_reason if not request.get("tier") else "given by the request",
        },
        "tokens": tokens,
        "error_log": errors,
        "iteration": 0,
    }
