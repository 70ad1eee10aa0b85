"""The JSON shapes LangGraph's SDKs parse (langgraph_sdk.schema: Assistant, Thread, ThreadState, Run), built
from a research session: its row, its checkpoint and the protocol's own thread and run records.

A thread's `values` carry the report (answer, short_answer, answered, citations, findings, stop_reason) and
a `messages` list (the question, then the answer with its sources as the last AI message) for chat UIs.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import unquote

from research_tool import __version__
from research_tool.api.langgraph.bodies import GRAPH_ID
from research_tool.models.sessions import SessionRecord
from research_tool.runtime.langgraph_threads import RunRow, ThreadRow

# langgraph-api names a graph's default assistant uuid5(this namespace, graph_id); so do we
ASSISTANT_NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
ASSISTANT_ID = str(uuid.uuid5(ASSISTANT_NAMESPACE, GRAPH_ID))
EPOCH = "2025-01-01T00:00:00+00:00"
REPORT_KEYS = ("answer", "short_answer", "answered", "citations", "findings", "stop_reason", "refined_query")


CLARIFY_ASSISTANT = f"{GRAPH_ID}-clarify"
CLARIFY_ASSISTANT_ID = str(uuid.uuid5(ASSISTANT_NAMESPACE, CLARIFY_ASSISTANT))
ASSISTANT_CONFIGS: dict[str, dict[str, Any]] = {
    ASSISTANT_ID: {},
    CLARIFY_ASSISTANT_ID: {"clarify": True},
}
ASSISTANT_NAMES = {ASSISTANT_ID: GRAPH_ID, CLARIFY_ASSISTANT_ID: CLARIFY_ASSISTANT}
DESCRIPTIONS = {
    ASSISTANT_ID: f"Deep research: a cited report from durable research sessions (Research Tool {__version__}).",
    CLARIFY_ASSISTANT_ID: "Deep research that first asks which meaning you want when a question is ambiguous.",
}


def assistant_id_of(assistant_id: str) -> str | None:
    """The uuid of the assistant named by its uuid or its name (`research`, `research-clarify`), or None."""
    if assistant_id in ASSISTANT_NAMES:
        return assistant_id
    return next((aid for aid, name in ASSISTANT_NAMES.items() if name == assistant_id), None)


def assistant(assistant_id: str = ASSISTANT_ID) -> dict[str, Any]:
    aid = assistant_id_of(assistant_id) or ASSISTANT_ID
    configurable = ASSISTANT_CONFIGS[aid]
    return {
        "assistant_id": aid,
        "graph_id": GRAPH_ID,
        "config": {"configurable": dict(configurable)} if configurable else {},
        "context": dict(configurable),
        "created_at": EPOCH,
        "updated_at": EPOCH,
        "metadata": {"created_by": "system"},
        "version": 1,
        "name": ASSISTANT_NAMES[aid],
        "description": DESCRIPTIONS[aid],
    }


def assistants() -> list[dict[str, Any]]:
    return [assistant(aid) for aid in ASSISTANT_NAMES]


def assistant_options(assistant_id: str) -> dict[str, Any]:
    """The research options an assistant's config sets (the run's own options win)."""
    return dict(ASSISTANT_CONFIGS.get(assistant_id_of(assistant_id) or ASSISTANT_ID, {}))


def is_assistant(assistant_id: str) -> bool:
    return assistant_id_of(assistant_id) is not None


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


def markdown_text(text: str) -> str:
    """Text shown inside a markdown link or list item: brackets and backticks escaped, one line."""
    flat = " ".join(str(text).split())
    return flat.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("`", "'")


def source_line(citation: dict[str, Any]) -> str:
    """One source as a markdown list item: a link when the source has a web address; a local file's path
    in a code span (chat UIs refuse `file://` links)."""
    number = str(citation.get("id", ""))
    title = markdown_text(citation.get("title") or citation.get("url") or "untitled")
    url = str(citation.get("url") or "")
    if url.startswith(("http://", "https://")):
        shown = f"[{title}](<{url.replace('>', '%3E')}>)"
    elif url.startswith("file://"):
        shown = f"{title}: `{unquote(url[len('file://') :]).replace('`', '%60')}`"
    else:
        shown = f"{title}: {markdown_text(url)}" if url else title
    return f"- {number} {shown}" if number else f"- {shown}"


def answer_with_sources(report: dict[str, Any]) -> str:
    """The answer, then its sources as a markdown list, each with the [n] the answer cites it by."""
    citations = report.get("citations") or []
    if not citations:
        return str(report.get("answer", ""))
    lines = [source_line(c) for c in citations]
    return f"{report.get('answer', '')}\n\n**Sources:**\n\n" + "\n".join(lines)


def round_tag(record: SessionRecord) -> str:
    """Tells one research round of a thread from the next (a follow-up or a regenerate starts a new one), so
    each round's messages have their own ids."""
    return "".join(ch for ch in record.created_at if ch.isdecimal())[:20]


def answer_id(record: SessionRecord) -> str:
    return f"{record.id}-{round_tag(record)}-answer"


def question_message(record: SessionRecord) -> dict[str, Any]:
    return message("human", record.request.query, f"{record.id}-{round_tag(record)}-question")


def answer_message(record: SessionRecord, report: dict[str, Any]) -> dict[str, Any]:
    return message("ai", answer_with_sources(report), answer_id(record))


PHASE_WORDS = {
    "clarify": "reading the question",
    "plan": "planning searches",
    "collect": "searching",
    "process": "extracting facts",
    "analyze": "cross-checking facts",
    "evaluate": "measuring what the last cycle added",
    "synthesize": "writing the answer",
    "export": "writing the report",
}


def asked_text(questions: list[str]) -> str:
    asked = "\n".join(f"{n}. {q}" for n, q in enumerate(questions, 1))
    return f"Before I search, which do you mean?\n\n{asked}\n\nReply in the chat to answer."


def exchange_messages(record: SessionRecord, state: dict[str, Any]) -> list[dict[str, Any]]:
    """Each answered clarification as the chat showed it: the questions (AI), then the reply (human). They stay
    in `messages` once research goes on (issue 43: the reply vanished from the chat)."""
    exchanges = (state.get("clarification") or {}).get("exchanges") or []
    tag = f"{record.id}-{round_tag(record)}"
    messages: list[dict[str, Any]] = []
    for n, exchange in enumerate(exchanges, 1):
        questions = [str(q) for q in exchange.get("questions") or []]
        answers = [str(a) for a in exchange.get("answers") or []]
        messages.append(message("ai", asked_text(questions), f"{tag}-asked-{n}"))
        messages.append(message("human", "\n".join(answers), f"{tag}-reply-{n}"))
    return messages


def progress_text(record: SessionRecord, phase: str | None = None) -> str:
    """The session's progress as one chat line, e.g. "Researching (cycle 2, searching): 6 searches, 14 sources,
    37 facts so far…" (the AI message a chat UI shows until the answer replaces it)."""
    if record.status == "awaiting_clarification" and record.pending_questions:
        return asked_text(list(record.pending_questions))
    if record.status == "failed":
        return f"Research failed: {record.error or 'unknown error'}"
    progress = record.progress or {}
    phase = phase or progress.get("current_phase")
    doing = PHASE_WORDS.get(str(phase), "starting")
    cycle = int(progress.get("iteration") or 0)
    where = f"cycle {cycle}, {doing}" if cycle else doing
    counts = [
        f"{progress.get('sources_queried', 0)} searches",
        f"{progress.get('sources_found', 0)} sources",
        f"{progress.get('facts_extracted', 0)} facts so far",
    ]
    if record.status == "stopping":
        where += ", stopping as asked"
    return f"Researching ({where}): " + ", ".join(counts) + "\u2026"


def progress_message(record: SessionRecord, phase: str | None = None) -> dict[str, Any]:
    """The answer's placeholder while the session runs: the same id, so the answer replaces it."""
    return message("ai", progress_text(record, phase), answer_id(record))


def output_values(record: SessionRecord, state: dict[str, Any], phase: str | None = None) -> dict[str, Any]:
    """A session's values as a LangGraph client reads them: the full state in every part, `messages` always
    the question and then the answer (or, until it is written, a progress line with the answer's id)."""
    report = state.get("final_report") or {}
    messages = [question_message(record), *exchange_messages(record, state)]
    values: dict[str, Any] = {"query": record.request.query, "status": record.status}
    if report:
        values.update({key: report.get(key) for key in REPORT_KEYS})
        messages.append(answer_message(record, report))
    else:
        values.update(stop_reason=record.stop_reason, progress=record.progress)
        if record.pending_questions:
            values["questions"] = list(record.pending_questions)
        messages.append(progress_message(record, phase))
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


CLARIFY_ACTION = "clarify"


def clarify_request(questions: list[str]) -> dict[str, Any]:
    """The clarifying questions in the human-in-the-loop shape LangChain's chat UIs draw as a form
    (Agent Chat UI's `action_requests` / `review_configs`): one field per question, answered by `edit`."""
    return {
        "action_requests": [
            {
                "name": CLARIFY_ACTION,
                "args": dict.fromkeys(questions, ""),
                "description": "The question is ambiguous: answer in the fields (or reply in the chat).",
            }
        ],
        "review_configs": [{"action_name": CLARIFY_ACTION, "allowed_decisions": ["edit"]}],
    }


def interrupt_json(value: Any, interrupt_id: str) -> dict[str, Any]:
    """An interrupt as the SDKs read it; a clarifying question keeps `questions` and adds the form's shape."""
    if isinstance(value, dict) and isinstance(value.get("questions"), list):
        value = {**value, **clarify_request([str(q) for q in value["questions"]])}
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
        "assistant_id": assistant_id_of(run.assistant_id) or ASSISTANT_ID,
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
