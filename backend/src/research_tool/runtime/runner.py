"""The session runner: runs each session's graph thread, at most N at once, and carries stop requests,
clarification answers and progress between the graph and the outside world (CLI or API).

A session's truth lives in the database (row, events, checkpoints; SQLite or Postgres), never only in memory: a
process that dies loses at most the node in flight. Embedded (SQLite), `resume_incomplete()` picks every
unfinished session up at start. In cluster mode (Postgres, `leasing` set) a session runs only in the process
that holds its lease: workers claim queued sessions and the sessions of dead workers (runtime/cluster/), a
start only writes the queued row, and stops and answers reach the running process as notifications (`signal`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from research_tool.core import telemetry
from research_tool.core.errors import BadInputError, ResearchToolError, ServerBusyError, SessionStateError
from research_tool.core.logging import get_logger
from research_tool.core.wording import plural
from research_tool.engines.base import ReasoningEngine
from research_tool.graph.context import ResearchContext
from research_tool.graph.graph import RECURSION_LIMIT, compile_graph
from research_tool.models.api import clarification_answers
from research_tool.models.entities import utc_now_iso
from research_tool.models.request import ResearchRequest
from research_tool.models.sessions import INTERRUPTED, SessionRecord
from research_tool.models.state import START_KEY, ResearchState, current_facts
from research_tool.models.stop_reasons import stop_label
from research_tool.runtime.admission import Admission
from research_tool.runtime.heap_trim import HeapTrimmer
from research_tool.runtime.janitor import StorageJanitor
from research_tool.runtime.session_trace import initial_trace_context, root_span
from research_tool.runtime.stores import EventLogProtocol, SessionStoreProtocol
from research_tool.runtime.users import UserLimits

log = get_logger(__name__)

EngineFactory = Callable[[ResearchRequest], ReasoningEngine]
ContextFactory = Callable[[SessionRecord, ReasoningEngine, asyncio.Event], ResearchContext]
CLAIM_RETRY_S = 5.0  # cluster mode: how often a process waiting on another's session tries to take it over
Signal = Literal["stop", "answers", "deleted"]


class UsageLog(Protocol):
    async def audit(self, actor: str, action: str, target: str | None = None, detail: str | None = None) -> None: ...


class SessionLeasing(Protocol):
    """Cluster mode: who may run a session (runtime/cluster/leases.py), and how many wait in the shared queue."""

    async def claim(self, session_id: str) -> bool: ...

    async def release(self, session_id: str) -> None: ...

    async def queued_count(self) -> int: ...


def initial_state(record: SessionRecord, clock_started: float | None = None) -> ResearchState:
    """A fresh session's state. `clock_started`: the `time.monotonic()` instant its time limit counts from,
    when that is before now (`run` in the CLI: the process's start, issue 35). The time since then is counted
    as spent (the `start:0` entry of `elapsed`) and `started_at` is that instant."""
    request = record.request
    lead = max(0.0, time.monotonic() - clock_started) if clock_started is not None else 0.0
    state = ResearchState(
        session_id=record.id,
        original_query=request.query,
        request=request.model_dump(mode="json"),
        privacy_mode=request.privacy,
        started_at=(datetime.now(UTC) - timedelta(seconds=lead)).isoformat() if lead else utc_now_iso(),
        iteration=0,
        should_stop=False,
        stop_reason=None,
        degraded_mode=False,
    )
    if lead:
        state["elapsed"] = {START_KEY: round(lead, 4)}
    return state


def progress_of(values: dict[str, Any]) -> dict[str, Any]:
    """The status fields the API serves without touching the checkpoint."""
    history = values.get("saturation_history") or {}
    latest = history[max(history, key=int)] if history else None
    return {
        "current_phase": values.get("current_phase"),
        "iteration": int(values.get("iteration") or 0),
        "sources_queried": len(values.get("provider_calls") or {}),
        "sources_found": len(values.get("sources") or {}),
        "entities_found": len(values.get("entities") or {}),
        "facts_extracted": len(current_facts(values.get("facts"))),
        "saturation_metrics": latest,
        "domain": values.get("domain"),
        "tier": values.get("tier"),
    }


@dataclass
class _Live:
    """In-memory handles of a session this process is running."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    answers: asyncio.Event = field(default_factory=asyncio.Event)
    declined: bool = False  # the asker will not answer (a CLI without a terminal): go on at once
    task: asyncio.Task[None] | None = None
    clock_started: float | None = None  # a fresh session's time limit counts from here (`initial_state`)


class SessionRunner:
    def __init__(
        self,
        *,
        store: SessionStoreProtocol,
        events: EventLogProtocol,
        checkpointer: Any,
        janitor: StorageJanitor,
        context_factory: ContextFactory,
        engine_factory: EngineFactory,
        max_concurrent: int,
        clarify_timeout_s: float,
        max_queued: int = 2000,
        leasing: SessionLeasing | None = None,
        llm: str = "offline",
        usage: UsageLog | None = None,
    ) -> None:
        self.store = store
        self.events = events
        self.checkpointer = checkpointer
        self.janitor = janitor
        self.graph = compile_graph(checkpointer)
        self._context_factory = context_factory
        self._engine_factory = engine_factory
        self._slots = asyncio.Semaphore(max_concurrent)
        self.admission = Admission(max_running=max_concurrent, max_queued=max_queued)
        self._clarify_timeout_s = clarify_timeout_s
        self._leasing = leasing
        self._llm = llm  # the engine `default_privacy` counts with, for a request that names no privacy mode
        self._usage = usage  # where a named owner's spent tokens are written (runtime/users.py: their daily budget)
        self._max_queued = max_queued
        self._live: dict[str, _Live] = {}
        self._finish_listeners: list[Callable[[str], None]] = []
        self.running_count = 0
        self.max_running_seen = 0
        self.heap = HeapTrimmer()

    # --- starting and resuming ------------------------------------------------------------------

    async def create(
        self,
        request: ResearchRequest,
        session_id: str | None = None,
        *,
        traceparent: str | None = None,
        owner: str | None = None,
        limits: UserLimits | None = None,
    ) -> SessionRecord:
        """Write a new queued session; ServerBusyError (nothing written) when the queue is full.
        Launch it before the next await so that its queue place stays taken (cluster mode: the queued rows
        of the shared table are the queue, and `submit` hands the session to the workers).
        `traceparent`: the caller's trace context (tracing on), which the session's first trace is a child of.
        `owner`, `limits`: the user who starts it and their limits (runtime/users.py; UserLimitError when over)."""
        trace_context = initial_trace_context(traceparent)
        request = request.with_default_privacy(self._llm)  # stored as said (a no-op after `validate`)
        if self._leasing is not None:
            return await self._create_queued(request, session_id, trace_context, owner, limits)
        with self.admission.reserve(running=self.running_count):
            if limits is not None:
                limits = replace(limits, retry_after_s=self.admission.retry_after_s())
            record = await self.store.create(request, session_id, trace_context, owner=owner, limits=limits)
            if session_id is None:  # a fresh id: no event can exist for it
                self.events.begin(record.id)
            await self.events.append(
                record.id, "session_queued", None, f"Research queued: \u201c{request.query[:200]}\u201d."
            )
        return record

    async def _create_queued(
        self,
        request: ResearchRequest,
        session_id: str | None,
        trace_context: dict[str, str] | None,
        owner: str | None = None,
        limits: UserLimits | None = None,
    ) -> SessionRecord:
        queued = await self._leasing.queued_count() if self._leasing is not None else 0
        if queued >= self._max_queued:
            raise ServerBusyError(
                f"the cluster's queue is full ({queued} sessions wait for a worker); "
                f"try again in {self.admission.retry_after_s()} s",
                retry_after_s=self.admission.retry_after_s(),
            )
        if limits is not None:
            limits = replace(limits, retry_after_s=self.admission.retry_after_s())
        record = await self.store.create(request, session_id, trace_context, owner=owner, limits=limits)
        if session_id is None:
            self.events.begin(record.id)
        await self.events.append(
            record.id, "session_queued", None, f"Research queued: \u201c{request.query[:200]}\u201d."
        )
        return record

    @property
    def clustered(self) -> bool:
        """Sessions run wherever their lease is held (Postgres), not necessarily in this process."""
        return self._leasing is not None

    def submit(self, session_id: str) -> None:
        """Have a created session run: in this process (embedded), or by whichever worker claims it (cluster
        mode: its queued row is the job, and writing it woke the workers)."""
        if self._leasing is None:
            self.launch(session_id)

    def until_finished(self, session_id: str) -> asyncio.Task[None]:
        """A task that ends when the session has finished, wherever it runs (it never cancels the session)."""
        live = self._live.get(session_id)
        if self._leasing is None or (live is not None and live.task is not None and not live.task.done()):
            return self.launch(session_id)
        return asyncio.create_task(self._await_elsewhere(session_id), name=f"await-{session_id}")

    def on_finished(self, listener: Callable[[str], None]) -> None:
        """Call `listener(session_id)` whenever a session's task here ends (a worker frees a slot)."""
        self._finish_listeners.append(listener)

    def launch(self, session_id: str, *, clock_started: float | None = None) -> asyncio.Task[None]:
        """Run (or resume) a session in the background; returns its task. In cluster mode it runs here only
        if this process gets its lease; otherwise the task waits for the process that has it.
        `clock_started`: the `time.monotonic()` instant a fresh session's time limit counts from (the CLI's
        start), instead of its first node; a resumed session goes on counting the time its nodes spent."""
        live = self._live.setdefault(session_id, _Live())
        if clock_started is not None:
            live.clock_started = clock_started
        if live.task is None or live.task.done():
            live.task = asyncio.create_task(self._drive(session_id), name=f"session-{session_id}")
            self.admission.enqueue(session_id)
            live.task.add_done_callback(lambda _: self._task_ended(session_id))
        return live.task

    def _task_ended(self, session_id: str) -> None:
        self.admission.dequeue(session_id)
        for listener in self._finish_listeners:
            listener(session_id)

    def signal(self, session_id: str, kind: Signal) -> None:
        """A stop, an answer or a deletion was written for this session by another process (cluster mode)."""
        if kind == "deleted":
            self.abandon(session_id)
            return
        live = self._live.get(session_id)
        if live is None:
            return
        if kind == "stop":
            live.stop.set()
        live.answers.set()  # the clarification wait re-reads the row either way

    def abandon(self, session_id: str) -> None:
        """Stop running a session without touching its row: it was deleted, or its lease went to another
        worker (this one missed its renewals), which now runs it from the last checkpoint."""
        live = self._live.pop(session_id, None)  # gone from _live: the cancellation does not mark it interrupted
        if live is not None and live.task is not None and not live.task.done():
            log.warning("session_abandoned", session_id=session_id)
            live.task.cancel()

    async def resume_incomplete(self) -> list[str]:
        """Relaunch every session that was queued, running, stopping or awaiting answers when the process died.
        Cluster mode: nothing to do here, the workers claim those sessions (a dead worker's once its lease ends)."""
        if self._leasing is not None:
            return []
        ids = [r.id for r in await self.store.active()]
        for sid in ids:
            self.launch(sid)
        return ids

    async def wait(self, session_id: str) -> SessionRecord:
        live = self._live.get(session_id)
        if live and live.task:
            await asyncio.shield(live.task)
        return await self.store.get(session_id)

    # --- requests from outside ------------------------------------------------------------------

    async def request_stop(self, session_id: str) -> SessionRecord:
        record = await self.store.get(session_id)
        if record.finished:
            raise SessionStateError(f"session {session_id} is already {record.status}")
        if not record.stop_requested:
            await self.store.update(session_id, stop_requested=1, status="stopping")
            await self.events.append(
                session_id,
                "stop_requested",
                record.progress.get("current_phase"),
                "Stop requested: collecting ends now and the report is written from what was found.",
            )
        live = self._live.get(session_id)  # none when no task runs it here: the row's flag is enough
        if live is not None:
            live.stop.set()
            live.answers.set()
        return await self.store.get(session_id)

    async def provide_answers(self, session_id: str, answers: list[str]) -> SessionRecord:
        """Answer the session's clarifying questions; BadInputError (nothing written) when the answers break
        the rules every answer keeps, however it arrives (models.api.clarification_answers)."""
        try:
            answers = clarification_answers(answers)
        except ValueError as exc:
            raise BadInputError(f"invalid answers: {exc}") from None
        record = await self.store.get(session_id)
        if record.status != "awaiting_clarification":
            raise SessionStateError(f"session {session_id} is not waiting for clarification (status {record.status})")
        await self.store.update(session_id, clarify_answers=answers)
        await self.events.append(session_id, "clarification_received", "clarify", "Answers received; research goes on.")
        live = self._live.get(session_id)
        if live is not None:
            live.answers.set()
        return await self.store.get(session_id)

    async def decline_clarification(self, session_id: str) -> None:
        """Go on with the original question without waiting for the timeout."""
        live = self._live.get(session_id)
        if live is not None:
            live.declined = True
            live.answers.set()

    async def delete(self, session_id: str) -> None:
        await self.store.get(session_id)
        live = self._live.pop(session_id, None)
        if live and live.task and not live.task.done():
            live.task.cancel()
            await asyncio.gather(live.task, return_exceptions=True)
        await self.store.delete(session_id)
        await self.janitor.forget(session_id)  # events, checkpoints, page texts, exports

    async def forget_leftovers(self, session_id: str) -> None:
        """What a session whose row is already gone left behind (events, checkpoints, page texts, exports): a
        process killed between a delete's steps. A new session with the same id then starts clean."""
        await self.janitor.forget(session_id)

    async def cancel_all(self) -> None:
        """Shutdown: cancel running tasks; their sessions become `interrupted` and stay resumable."""
        tasks = [lv.task for lv in self._live.values() if lv.task and not lv.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- the run itself -------------------------------------------------------------------------

    async def _drive(self, session_id: str) -> None:
        if self._leasing is not None:
            while not await self._leasing.claim(session_id):
                # Another process holds it: follow it, and take it over if that process dies before the end.
                self.admission.dequeue(session_id)
                try:
                    async with asyncio.timeout(CLAIM_RETRY_S):
                        await self._await_elsewhere(session_id)
                    return
                except TimeoutError:
                    continue
        try:
            await self._drive_here(session_id)
        finally:
            if self._leasing is not None:
                await self._leasing.release(session_id)

    async def _await_elsewhere(self, session_id: str) -> None:
        """Wait for the final event of a session another process runs."""
        record = await self.store.get(session_id)
        if record.finished:
            return
        async for event in self.events.follow(session_id):
            if event.is_final:
                return

    async def _drive_here(self, session_id: str) -> None:
        async with self._slots:
            self.admission.dequeue(session_id)  # the time guard's clock starts with the first node, after this
            self.running_count += 1
            self.max_running_seen = max(self.max_running_seen, self.running_count)
            started = time.monotonic()
            try:
                await self._run(session_id)
            finally:
                self.running_count -= 1
                self.admission.record_run(time.monotonic() - started)
                self._forget(session_id)
        # Out of its slot and its frames: what the session allocated is free now; give it back to the OS.
        await self.heap.after_session()

    def _forget(self, session_id: str) -> None:
        """Drop a session's in-memory handles once its task ends (finished, failed or cancelled): its truth
        is in SQLite, and a server that runs for months must not keep one entry per session it ever ran."""
        live = self._live.get(session_id)
        if live is not None and (live.task is None or live.task is asyncio.current_task()):
            del self._live[session_id]

    async def _run(self, session_id: str) -> None:
        record = await self.store.get(session_id)
        if record.finished:
            return
        live = self._live.setdefault(session_id, _Live())
        if record.stop_requested:
            live.stop.set()
        config: RunnableConfig = {"configurable": {"thread_id": session_id}, "recursion_limit": RECURSION_LIMIT}
        snapshot = await self.graph.aget_state(config)
        resuming = bool(snapshot.values)
        engine = self._engine_factory(record.request)
        root, row_fields = root_span(record, engine=engine.name, model=engine.model)
        with root:
            if record.status != "stopping":
                row_fields["status"] = "stopping" if record.stop_requested else "running"
            if row_fields:
                await self.store.update(session_id, **row_fields)
            verb = "resumed" if resuming else "started"
            await self.events.append(
                session_id,
                "session_started",
                None,
                f"Research {verb}: \u201c{record.query[:200]}\u201d.",
                {"resumed": resuming},
            )
            try:
                await engine.check()
                ctx = self._context_factory(record, engine, live.stop)
                # made last, so the time limit counts the engine's set-up and preflight when it counts from
                # before the session (`clock_started`)
                graph_input: Any = None if resuming else initial_state(record, live.clock_started)
                await self._stream(session_id, graph_input, config, ctx, live)
            except asyncio.CancelledError:
                log.info("session_cancelled", session_id=session_id)
                if session_id in self._live:  # not deleted: Ctrl-C or shutdown, resumable from its checkpoint
                    root.set("research.outcome", INTERRUPTED)
                    await self._mark_interrupted(session_id)
                raise
            except ResearchToolError as exc:
                await self._fail(session_id, exc.message)
            except Exception as exc:
                log.exception("session_crashed", session_id=session_id)
                await self._fail(session_id, f"{type(exc).__name__}: {exc}")
            finally:
                await engine.aclose()

    async def _stream(
        self, session_id: str, graph_input: Any, config: RunnableConfig, ctx: ResearchContext, live: _Live
    ) -> None:
        while True:
            interrupt_value: Any = None
            values: dict[str, Any] = {}
            chunk: Any  # stream_mode is a list: (mode, chunk) pairs, which the v1 overload does not spell out
            async for mode, chunk in self.graph.astream(
                graph_input, config, context=ctx, durability="sync", stream_mode=["updates", "values"]
            ):
                if mode == "updates" and "__interrupt__" in chunk:
                    interrupt_value = chunk["__interrupt__"][0].value
                elif mode == "values":
                    values = chunk
                    await self.store.update(session_id, progress=progress_of(values))
                    if values.get("tier"):  # the tier the session runs (the request's may be None: auto)
                        telemetry.current().set("research.tier", values["tier"])
            if interrupt_value is None:
                break
            graph_input = Command(resume=await self._await_answers(session_id, interrupt_value, live))
        await self._complete(session_id, values)

    async def _await_answers(self, session_id: str, payload: dict[str, Any], live: _Live) -> dict[str, Any]:
        record = await self.store.get(session_id)
        questions = [str(q) for q in payload.get("questions", [])]
        since = record.awaiting_since if record.status == "awaiting_clarification" else None
        if since is None:
            since = utc_now_iso()
            await self.store.update(
                session_id,
                status="awaiting_clarification",
                pending_questions=questions,
                awaiting_since=since,
                clarify_answers=None,
            )
            await self.events.append(
                session_id,
                "clarification_requested",
                "clarify",
                "The question is ambiguous; waiting for answers: " + " ".join(questions),
                {"questions": questions, "timeout_s": self._clarify_timeout_s},
            )
        waited = (datetime.now(UTC) - datetime.fromisoformat(since)).total_seconds()
        remaining = max(0.0, self._clarify_timeout_s - waited)
        started = time.monotonic()
        record = await self.store.get(session_id)
        while record.clarify_answers is None and not live.stop.is_set() and not live.declined:
            left = remaining - (time.monotonic() - started)
            if left <= 0:
                break
            live.answers.clear()
            try:
                await asyncio.wait_for(live.answers.wait(), timeout=left)
            except TimeoutError:
                break
            record = await self.store.get(session_id)
        answers = record.clarify_answers
        status = "stopping" if live.stop.is_set() else "running"
        await self.store.update(
            session_id, status=status, pending_questions=[], awaiting_since=None, clarify_answers=None
        )
        if answers is None:
            if not live.stop.is_set():
                unanswered = "Not answered" if live.declined else "No answer in time"
                await self.events.append(
                    session_id,
                    "clarification_timeout",
                    "clarify",
                    f"{unanswered}; research goes on with the original question.",
                )
            return {"timed_out": True}
        return {"answers": answers}

    async def _record_tokens(self, session_id: str, values: dict[str, Any] | None) -> None:
        """A named owner's session is ending: write what it spent (a `tokens` audit line) before its row says it
        finished, so that the user's daily token budget never counts it as neither reserved nor spent."""
        if self._usage is None:
            return
        record = await self.store.get(session_id)
        if record.owner is None:
            return
        if values is None:
            snapshot = await self.graph.aget_state({"configurable": {"thread_id": session_id}})
            values = dict(snapshot.values or {})
        spent = int(sum((values.get("tokens") or {}).values()))
        if spent > 0:
            await self._usage.audit(record.owner, "tokens", session_id, str(spent))

    async def _complete(self, session_id: str, values: dict[str, Any]) -> None:
        await self._record_tokens(session_id, values)
        report = values.get("final_report") or {}
        stop_reason = values.get("stop_reason")
        await self.store.update(session_id, status="completed", stop_reason=stop_reason, progress=progress_of(values))
        citations = len(report.get("citations", []))
        findings = len(report.get("findings", []))
        await self.events.append(
            session_id,
            "session_completed",
            "export",
            f"Research complete: {plural(findings, 'finding')} citing {plural(citations, 'source')} "
            f"({stop_label(stop_reason) or 'done'}).",
            {
                "stop_reason": stop_reason,
                "findings": findings,
                "citations": citations,
                "export_paths": values.get("export_paths", {}),
            },
        )
        telemetry.current().set_many(
            {"research.outcome": "completed", "research.stop_reason": stop_reason, "research.findings": findings}
        )
        log.info("session_completed", session_id=session_id, stop_reason=stop_reason, findings=findings)
        await self.janitor.session_finished(session_id)

    async def _mark_interrupted(self, session_id: str) -> None:
        """The session's task was cancelled (Ctrl-C, shutdown): say so in its row; it resumes from its checkpoint."""
        try:
            record = await self.store.get(session_id)
            if not record.finished:
                await self.store.update(session_id, status=INTERRUPTED)
        except Exception:  # a closing database: the owner lock tells readers the same thing
            log.warning("session_interrupt_not_recorded", session_id=session_id)

    async def _fail(self, session_id: str, message: str) -> None:
        try:
            await self._record_tokens(session_id, None)
        except Exception:  # the failure itself may be the store's: the row must still say failed
            log.warning("session_tokens_not_recorded", session_id=session_id)
        await self.store.update(session_id, status="failed", error=message)
        await self.events.append(session_id, "session_failed", None, f"Research failed: {message}", {"error": message})
        root = telemetry.current()
        root.set("research.outcome", "failed")
        root.fail(message[:300])
        log.error("session_failed", session_id=session_id, error=message)
        await self.janitor.session_finished(session_id)

    async def report(self, session_id: str) -> dict[str, Any]:
        record = await self.store.get(session_id)
        if record.status != "completed":
            raise SessionStateError(f"session {session_id} has no report yet (status {record.status})")
        config: RunnableConfig = {"configurable": {"thread_id": session_id}}
        snapshot = await self.graph.aget_state(config)
        report = snapshot.values.get("final_report")
        if not report:
            raise SessionStateError(f"session {session_id} finished without a report")
        return dict(report)
