"""A run's stream in LangGraph's SSE framing (`event:`/`data:`/`id:` lines), read from the session's event log.

Stream modes: `values` (the full state in every part: the question and, as the AI message, a progress line at
each phase until the answer replaces it),
`updates` (one per node as it completes; `__interrupt__` when a clarifying question pauses the run),
`custom` (every progress event as is: phase, sources found, saturation...), `messages-tuple` (the answer as
one AI message with its sources, at the end: the research graph streams no model tokens) and `debug` (every
event, wrapped). Each part's id is `<event seq>-<part index>`, so Last-Event-ID resumes exactly.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from research_tool.api.langgraph.service import LangGraphProtocol
from research_tool.api.langgraph.shapes import interrupt_json, output_values
from research_tool.models.events import Event

HEARTBEAT = b": heartbeat\n\n"
Part = tuple[str, Any]


def frame(event: str, data: Any, part_id: str | None = None) -> bytes:
    text = f"event: {event}\ndata: {json.dumps(data, default=str, separators=(',', ':'))}\n"
    if part_id is not None:
        text += f"id: {part_id}\n"
    return (text + "\n").encode()


def parse_last_event_id(value: str | None) -> tuple[int, int] | None:
    """`<seq>-<index>` as this server sends it; None for anything else (the stream then starts over)."""
    if not value:
        return None
    seq, _, index = value.strip().partition("-")
    if seq.isdecimal() and index.isdecimal():
        return int(seq), int(index)
    return None


class RunStream:
    def __init__(self, protocol: LangGraphProtocol, thread_id: str, run_id: str, modes: list[str]) -> None:
        self.protocol = protocol
        self.thread_id = thread_id
        self.run_id = run_id
        self.modes = modes

    async def opening_parts(self) -> list[Part]:
        record = await self.protocol.record(self.thread_id)
        if "values" not in self.modes or record is None:
            return []
        return [("values", output_values(record, {}))]

    async def progress_values(self, phase: str | None) -> list[Part]:
        """The full state while the session runs: the question, and the progress line as the AI message. One
        part at every phase event whatever the session's state now, so a replay has the same part ids."""
        if "values" not in self.modes:
            return []
        record = await self.protocol.record(self.thread_id)
        if record is None:
            return []
        return [("values", output_values(record, {}, phase))]

    async def parts_of(self, event: Event) -> list[Part]:
        modes = self.modes
        parts: list[Part] = []
        if "custom" in modes:
            parts.append(("custom", event.model_dump(mode="json")))
        if "debug" in modes:
            parts.append(
                (
                    "debug",
                    {
                        "type": "event",
                        "timestamp": event.ts,
                        "step": event.seq,
                        "payload": event.model_dump(mode="json"),
                    },
                )
            )
        if event.type == "phase_started" and event.phase:
            parts.extend(await self.progress_values(event.phase))
        elif event.type == "phase_completed" and event.phase:
            if "updates" in modes:
                parts.append(("updates", {event.phase: {"phase": event.phase, "message": event.message, **event.data}}))
            parts.extend(await self.progress_values(event.phase))
        elif event.type == "clarification_requested":
            _, interrupts, _ = await self.protocol.state_values(
                self.thread_id, await self.protocol.record(self.thread_id)
            )
            if not interrupts:
                interrupts = [
                    interrupt_json({"questions": event.data.get("questions", [])}, f"{self.thread_id}-{event.seq}")
                ]
            if "updates" in modes:
                parts.append(("updates", {"__interrupt__": interrupts}))
            if "values" in modes:
                record = await self.protocol.record(self.thread_id)
                if record is not None:
                    parts.append(("values", {**output_values(record, {}), "__interrupt__": interrupts}))
        elif event.type == "session_completed":
            record = await self.protocol.record(self.thread_id)
            values, _, _ = await self.protocol.state_values(self.thread_id, record)
            if "values" in modes:
                parts.append(("values", values))
            if "messages-tuple" in modes and values.get("messages"):
                last = values["messages"][-1]
                parts.append(
                    (
                        "messages",
                        [last, {"langgraph_node": "export", "thread_id": self.thread_id, "run_id": self.run_id}],
                    )
                )
        elif event.type == "session_failed":
            parts.append(("error", {"error": "ResearchFailed", "message": event.data.get("error", event.message)}))
        return parts

    async def frames(self, last_event_id: str | None) -> AsyncIterator[bytes]:
        resume_from = parse_last_event_id(last_event_id)
        yield frame("metadata", {"run_id": self.run_id, "thread_id": self.thread_id, "attempt": 1})
        run, _ = await self.protocol.get_run(self.thread_id, self.run_id)
        after = run.start_seq
        if resume_from is None:
            for index, (mode, data) in enumerate(await self.opening_parts()):
                yield frame(mode, data, f"{run.start_seq}-{index}")
        else:
            after = max(after, resume_from[0] - 1)
        async for event in self.protocol.run_events(self.thread_id, self.run_id, after):
            if event is None:
                yield HEARTBEAT
                continue
            for index, (mode, data) in enumerate(await self.parts_of(event)):
                if resume_from is not None and (event.seq, index) <= resume_from:
                    continue
                yield frame(mode, data, f"{event.seq}-{index}")


__all__ = ["RunStream", "frame", "parse_last_event_id"]
