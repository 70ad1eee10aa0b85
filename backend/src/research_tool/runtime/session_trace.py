"""The root span of a session's trace (issue 36), and the trace context its row keeps across restarts.

A session's row holds `trace_context` (JSON, only while tracing is on): `parent`, the caller's traceparent from
the start request (the first run is a child of the caller's trace), and `first`, the root span of the session's
first run. A run after that (a resume after a restart, a cluster worker taking over a dead worker's lease)
starts a new trace whose root links to `first`, so a kill -9 and its resume show as two linked traces (and a
`research.session.resumed` span under the first root links back to the new trace).
"""

from __future__ import annotations

from typing import Any

from research_tool.core import telemetry
from research_tool.models.sessions import SessionRecord

ROOT_SPAN = "research.session"
RESUMED_SPAN = "research.session.resumed"


def root_span(record: SessionRecord, *, engine: str, model: str) -> tuple[telemetry.SpanHandle, dict[str, Any]]:
    """The session's root span for this run (not yet entered), and the row fields to write with the run's
    status (a `trace_context` naming the first run's root when this is the first). Off: the no-op, nothing."""
    if not telemetry.enabled():
        return telemetry.NOOP_SPAN, {}
    kept = dict(record.trace_context or {})
    first = kept.get("first")
    request = record.request
    attributes: dict[str, Any] = {
        "research.session.id": record.id,
        **telemetry.question_attributes(record.query),
        "research.tier": request.tier or "auto",
        "research.domain": request.domain,
        "research.engine": engine,
        "research.model": model,
        "research.resumed": first is not None,
    }
    if first is not None:  # a later run: a trace of its own, linked to the first one
        span = telemetry.span(ROOT_SPAN, attributes, root=True, links=[first])
        _mark_resumed(record.id, first, span.traceparent())
        return span, {}
    span = telemetry.span(ROOT_SPAN, attributes, parent=kept.get("parent"), root=kept.get("parent") is None)
    traceparent = span.traceparent()
    if traceparent is None:
        return span, {}
    return span, {"trace_context": {**kept, "first": traceparent}}


def _mark_resumed(session_id: str, first: str, resumed: str | None) -> None:
    """A span in the first trace, under its root, linking to the trace that goes on: after a kill -9 the first
    trace has no root span (it never ended), and this tells where the session went."""
    with telemetry.span(
        RESUMED_SPAN, {"research.session.id": session_id}, parent=first, links=[resumed] if resumed else []
    ):
        pass


def initial_trace_context(caller: str | None) -> dict[str, str] | None:
    """What a new session's row keeps of the caller's trace context (None: nothing to keep)."""
    return {"parent": caller} if caller else None
