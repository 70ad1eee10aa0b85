"""Phase boundaries: every node emits phase_started/phase_completed, logs, and records its time."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langgraph.runtime import Runtime

from research_tool.core.logging import get_logger
from research_tool.graph.context import ResearchContext
from research_tool.models.state import ResearchState

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


def phase(name: str) -> Callable[[NodeFn], NodeFn]:
    label = PHASE_LABELS[name]

    def decorate(fn: NodeFn) -> NodeFn:
        @functools.wraps(fn)
        async def node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
            ctx = runtime.context
            iteration = int(state.get("iteration", 0))
            cycle = f" (cycle {iteration})" if name in {"collect", "process", "analyze", "evaluate"} else ""
            log.info("phase_started", session_id=ctx.session_id, iteration=iteration, phase=name)
            await ctx.events.emit("phase_started", name, f"{label}{cycle}.", {"iteration": iteration})
            started = time.monotonic()
            update = await fn(state, runtime)
            elapsed = round(time.monotonic() - started, 4)
            update["elapsed"] = {**update.get("elapsed", {}), f"{name}:{iteration}": elapsed}
            update.setdefault("current_phase", name)
            log.info("phase_completed", session_id=ctx.session_id, iteration=iteration, phase=name, seconds=elapsed)
            await ctx.events.emit(
                "phase_completed", name, f"{label}{cycle}: done in {elapsed:.1f} s.", {"iteration": iteration}
            )
            return update

        return node

    return decorate


def elapsed_total(state: ResearchState) -> float:
    return float(sum((state.get("elapsed") or {}).values()))


def tokens_total(state: ResearchState) -> int:
    return int(sum((state.get("tokens") or {}).values()))


def record_errors(step_key: str, errors: list[Any]) -> dict[str, Any]:
    """error_log entries for an engine step's recovered errors (keyed so a re-run does not duplicate)."""
    return {f"{step_key}:{i}": e.model_dump(mode="json") for i, e in enumerate(errors)}
