"""The JSON shapes LangGraph's SDKs parse (langgraph_sdk.schema: Assistant, Thread, ThreadState, Run), built
from a research session: its row, its checkpoint and the protocol's own thread and run records.

A thread's `values` carry the report (answer, short_answer, answered, citations, findings, stop_reason) and
a `messages` list (the question, then the answer with its sources as the last AI message) for chat UIs.
"""

from __future__ import annotations

import uuid
from typing import Any

from research_tool import __version__
from research_tool.api.langgraph.bodies import GRAPH_ID
from research_tool.models.sessions import SessionRecord
from research_tool.runtime.langgraph_threads import RunRow, ThreadRow

# langgraph-api names a graph's default assistant uuid5(this namespace, graph_id); so do we
ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
ASSISTANT_ID = str(uuid.uuid5(ASSISTANT_NAMESPACE, GRAPH_ID))
EPOCH = "2025-01-01T00:00:00+00:00"
REPORT_KEYS = ("answer", "short_answer", "answered", "citations", "findings", "stop_reason", "refined_query")


def assistant() -> dict[str, Any]:
    return {
        "assistant_id": ASSISTANT_ID,
        "graph_id": GRAPH_ID,
        "config": {},
        "context": {},
        "created_at": EPOCH,
        "updated_at": EPOCH,
        "metadata": {"created_by": "system"},
        "version": 1,
        "name": GRAPH_ID,
        "description": f"Deep research: a cited report from durable research sessions (Research Tool {__version__}).",
    }


def is_assistant(assistant_id: str) -> bool:
    return assistant_id in (ASSISTANT_ID, GRAPH_ID)


def message(kind: str, content: str, message_id: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": kind,
        "content": content,
        "id": message_id,
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
    }
    if kind == "ai":
        body.update(tool_calls=[], invalid_tool_calls=[], usage_metadata=None)
    return body


def answer_with_sources(report: dict[str, Any]) -> str:
    citations = report.get("citations") or []
    if not citations:
        return str(report.get("answer", ""))
    lines = [f"{c.get('id', '')} {c.get('title', '')}: {c.get('url', '')}" for c in citations]
    return f"{report.get('answer', '')}\n\nSources:\n" + "\n".join(lines)


def answer_message(session_id: str, report: dict[str, Any]) -> dict[str, Any]:
    return message("ai", answer_with_sources(report), f"{session_id}-answer")


def output_values(record: SessionRecord, state: dict[str, Any]) -> dict[str, Any]:
    """A session's values as a LangGraph client reads them."""
    report = state.get("final_report") or {}
    messages = [message("human", record.request.query, f"{record.id}-question")]
    values: dict[str, Any] = {"query": record.request.query, "status": record.status}
    if report:
        values.update({key: report.get(key) for key in REPORT_KEYS})
        messages.append(answer_message(record.id, report))
    else:
        values.update(stop_reason=record.stop_reason, progress=record.progress)
        if record.pending_questions:
            values["questions"] = list(record.pending_questions)
    values["messages"] = messages
    return values


def thread_status(record: SessionRecord | None, pending_runs: bool) -> str:
    if record is None:
        return "busy" if pending_runs else "idle"
    if record.status == "awaiting_clarification":
        return "interrupted"
    if record.status == "failed":
        return "busy" if pending_runs else "error"
    if record.status == "completed":
        return "busy" if pending_runs else "idle"
    return "busy"


def interrupt_json(value: Any, interrupt_id: str) -> dict[str, Any]:
    return {"value": value, "id": interrupt_id}


def thread_json(
    thread_id: str,
    row: ThreadRow | None,
    record: SessionRecord | None,
    *,
    values: dict[str, Any],
    interrupts: dict[str, list[dict[str, Any]]],
    pending_runs: bool,
) -> dict[str, Any]:
    metadata = {"graph_id": GRAPH_ID, "assistant_id": ASSISTANT_ID, **(row.metadata if row else {})}
    created = row.created_at if row else record.created_at if record else EPOCH
    updated = max(x for x in (row.updated_at if row else None, record.updated_at if record else None, created) if x)
    return {
        "thread_id": thread_id,
        "created_at": created,
        "updated_at": updated,
        "metadata": metadata,
        "status": thread_status(record, pending_runs),
        "values": values,
        "interrupts": interrupts,
        "config": {},
    }


def run_json(run: RunRow, status: str) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": ASSISTANT_ID,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "status": status,
        "metadata": run.metadata,
        "kwargs": run.kwargs,
        "multitask_strategy": run.multitask_strategy,
        "cancel_reason": run.cancel_reason,
    }


def checkpoint_ref(thread_id: str, checkpoint_id: str | None) -> dict[str, Any]:
    return {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id, "checkpoint_map": None}
