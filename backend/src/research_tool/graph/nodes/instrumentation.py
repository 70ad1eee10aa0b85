"""Phase boundaries: every node emits phase_started/phase_completed, logs, and records its time.

Before a node runs, the engine is told what the session has left (its deadline: the time limit minus the
reserve for writing the report (`SessionLimits.working_time_s`) minus the time spent so far; the token budget
minus the tokens spent), so a model call never outlives the session, and whom to tell when a step falls back
to the offline engine (a `model_fallback` event)."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langgraph.runtime import Runtime

from research_tool.core import telemetry
from research_tool.core.logging import get_logger
from research_tool.engines.base import CallLimits, FallbackNotice
from research_tool.graph.context import ResearchContext
from research_tool.graph.session_limits import resolve_limits
from research_tool.models.state import START_KEY, ResearchState

log = get_logger("research_tool.graph")


class NodeFn(Protocol):
    """A graph node: LangGraph passes the run's context as the `runtime` argument (by name)."""

    def __call__(self, state: ResearchState, runtime: Runtime[ResearchContext]) -> Awaitable[dict[str, Any]]: ...


PHASE_LABELS: dict[str, str] = {
    "clarify": "Clarifying the question",
    "plan": "Planning search queries",
    "collect": "Collecting sources",
    "process": "Extracting facts and entities",
    "analyze": "Cross-checking facts",
    "evaluate": "Evaluating saturation",
    "synthesize": "Writing the report",
    "export": "Exporting the report",
}


PRE_SEARCH_PHASES = frozenset({"clarify", "plan"})
PRE_SEARCH_SHARE = 1 / 3  # of the time limit: what the model steps before the first search may use (issue 35)
SEARCH_RESERVE_FRACTION = 0.25  # of the time limit, kept for the first search when the model runs late
SEARCH_RESERVE_MIN_S = 5.0  # ... but at least this (at most half the limit) ...
SEARCH_RESERVE_MAX_S = 30.0  # ... and at most this


def search_reserve_s(time_limit_s: float) -> float:
    """The time the model steps before the first search leave to it: a quarter of the limit, at least 5 s
    (never more than half the limit), at most 30 s."""
    wanted = max(SEARCH_RESERVE_FRACTION * time_limit_s, min(SEARCH_RESERVE_MIN_S, 0.5 * time_limit_s))
    return min(wanted, SEARCH_RESERVE_MAX_S)


def pre_search_allowance_s(time_limit_s: float) -> float:
    """The time the model steps before the first search (clarify, plan) may use together: a third of the limit,
    and never so much that the search gets less than its reserve."""
    return max(0.0, min(PRE_SEARCH_SHARE * time_limit_s, time_limit_s - search_reserve_s(time_limit_s)))


def phase(name: str) -> Callable[[NodeFn], NodeFn]:
    label = PHASE_LABELS[name]

    def decorate(fn: NodeFn) -> NodeFn:
        @functools.wraps(fn)
        async def node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
            ctx = runtime.context
            iteration = int(state.get("iteration", 0))
            cycle = f" (cycle {iteration})" if name in {"collect", "process", "analyze", "evaluate"} else ""
            # one span per node visit, a child of the session's root span (core/telemetry.py; a no-op when off)
            with telemetry.span(f"node {name}", {"research.node": name, "research.iteration": iteration}):
                log.debug("phase_started", session_id=ctx.session_id, iteration=iteration, phase=name)
                await ctx.events.emit("phase_started", name, f"{label}{cycle}.", {"iteration": iteration})
                started = time.monotonic()
                bind_engine(state, ctx, name, started)
                update = await fn(state, runtime)
                elapsed = round(time.monotonic() - started, 4)
                update["elapsed"] = {**update.get("elapsed", {}), f"{name}:{iteration}": elapsed}
                update.setdefault("current_phase", name)
                log.debug(
                    "phase_completed", session_id=ctx.session_id, iteration=iteration, phase=name, seconds=elapsed
                )
                await ctx.events.emit(
                    "phase_completed", name, f"{label}{cycle}: done in {elapsed:.1f} s.", {"iteration": iteration}
                )
                return update

        return node

    return decorate


def bind_engine(state: ResearchState, ctx: ResearchContext, phase_name: str, now: float) -> None:
    """Bound the node's model calls by the session's time and tokens left; report its fallbacks as events.
    Before the first search, the model steps together may use only their share of the time limit
    (`pre_search_allowance_s`): a model that is slow or hangs in clarify or plan never leaves a session without
    sources, and its fallback says which time ran out."""
    tier = state.get("tier") or (state.get("request") or {}).get("tier") or "standard"
    limits = resolve_limits(tier, state.get("request") or {}, ctx.settings)
    time_limit = limits.max_execution_time_s
    remaining = limits.working_time_s - elapsed_total(state)  # the finish reserve is not the model's
    label = "the session's time"
    if not state.get("provider_calls") and phase_name in PRE_SEARCH_PHASES:
        start = float((state.get("elapsed") or {}).get(START_KEY, 0.0))  # the CLI's start-up, when counted
        allowed = pre_search_allowance_s(time_limit - start)  # a share of the time the session itself has
        remaining = start + allowed - elapsed_total(state)
        label = f"the model's share of the time before the first search ({allowed:.0f} s of {time_limit:.0f})"
    deadline = now + max(0.0, remaining)
    tokens_left = limits.token_budget - tokens_total(state)

    async def on_fallback(notice: FallbackNotice) -> None:
        await ctx.events.emit(
            "model_fallback",
            phase_name,
            f"The model could not do {notice.step}; the offline engine did it instead ({notice.reason}).",
            {"step": notice.step, "reason": notice.reason, "message": notice.message},
        )

    ctx.engine.bound_calls(CallLimits(deadline=deadline, tokens_left=tokens_left, deadline_label=label), on_fallback)


def elapsed_total(state: ResearchState) -> float:
    return float(sum((state.get("elapsed") or {}).values()))


def tokens_total(state: ResearchState) -> int:
    return int(sum((state.get("tokens") or {}).values()))


def record_errors(step_key: str, errors: list[Any]) -> dict[str, Any]:
    """error_log entries for an engine step's recovered errors (keyed so a re-run does not duplicate)."""
    return {f"{step_key}:{i}": e.model_dump(mode="json") for i, e in enumerate(errors)}
