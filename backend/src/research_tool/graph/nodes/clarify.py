"""clarify and ask: refine the query and detect the domain (thinking), and pause for answers only when
the question is genuinely ambiguous (asking).

They are two nodes on purpose. LangGraph resumes an interrupted node by running it again from the
top, so a model call made before an `interrupt()` in the same node is made twice (its tokens counted
once, and the questions stored with the answers possibly not the ones the user saw). `clarify` thinks
and stores the questions in the state; `ask` holds nothing but the interrupt; the answers go back to
`clarify`, which folds them into the query and decides whether to ask again.

    clarify --(questions, clarify requested, < MAX_EXCHANGES asked)--> ask --(answers)--> clarify
    clarify --(otherwise)--> plan                                           ask --(none / timeout)--> plan
"""

from __future__ import annotations

from typing import Any, Literal

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
    previous = dict(state.get("clarification") or {})
    exchanges: list[dict[str, Any]] = list(previous.get("exchanges") or [])
    if previous.get("unapplied") and exchanges:
        # Answers came back from `ask`: fold them into the query, then see whether it is clear now.
        number = len(exchanges)
        last = exchanges[-1]
        applied = await ctx.engine.apply_answers(state["refined_query"], last["questions"], last["answers"])
        refined = applied.value
        tokens = {f"apply_answers:{number}": applied.tokens}
        errors = record_errors(f"apply_answers:{number}", applied.errors)
        again = await ctx.engine.clarify(refined, request.get("domain"))
        tokens[f"clarify:{number}"] = again.tokens
        questions = again.value.questions
        decided = {k: previous[k] for k in ("domain", "tier", "tier_reason")}
    else:
        query = state["original_query"]
        step = await ctx.engine.clarify(query, request.get("domain"))
        result = step.value
        tokens = {"clarify:0": step.tokens}
        errors = record_errors("clarify:0", step.errors)
        refined = result.refined_query or query
        questions = result.questions
        decided = {
            "domain": request.get("domain") or result.domain,
            "tier": request.get("tier") or result.tier or "standard",
            "tier_reason": result.tier_reason if not request.get("tier") else "given by the request",
        }
    ask = bool(request.get("clarify") and questions and len(exchanges) < MAX_EXCHANGES)
    return {
        "refined_query": refined,
        "domain": decided["domain"],
        "tier": decided["tier"],
        "clarification": {
            **decided,
            "asked": bool(exchanges),
            "exchanges": exchanges,
            "timed_out": False,
            "pending_questions": list(questions) if ask else [],
            "unapplied": False,
        },
        "tokens": tokens,
        "error_log": errors,
        "iteration": 0,
    }


async def ask_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    """Only the interrupt: re-running this node on resume repeats no model call."""
    clarification = dict(state.get("clarification") or {})
    questions = list(clarification.get("pending_questions") or [])
    exchanges = list(clarification.get("exchanges") or [])
    reply = interrupt({"questions": questions, "exchange": len(exchanges) + 1})
    answers = _answers_from(reply)
    clarification["pending_questions"] = []
    if answers is None:
        timed_out = bool(isinstance(reply, dict) and reply.get("timed_out"))
        clarification.update(timed_out=timed_out, asked=bool(exchanges) or timed_out, unapplied=False)
    else:
        exchanges.append({"questions": questions, "answers": answers})
        clarification.update(exchanges=exchanges, asked=True, unapplied=True)
    return {"clarification": clarification}


def route_after_clarify(state: ResearchState) -> Literal["ask", "plan"]:
    return "ask" if (state.get("clarification") or {}).get("pending_questions") else "plan"


def route_after_ask(state: ResearchState) -> Literal["clarify", "plan"]:
    return "clarify" if (state.get("clarification") or {}).get("unapplied") else "plan"
