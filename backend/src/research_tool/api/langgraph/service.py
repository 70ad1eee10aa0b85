"""LangGraph threads and runs mapped onto research sessions (one store): a thread's id is its session's id, a
run starts the session (or answers its clarifying question with `command.resume`), and what a run streams
is read from the session's event log, so a dropped stream resumes exactly from its Last-Event-ID and a run
survives `kill -9` with its session (the server resumes the session at start; the run's status follows it).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from fastapi.encoders import jsonable_encoder
from langchain_core.runnables import RunnableConfig

from research_tool.api.custom_auth import filter_matches
from research_tool.api.errors import ApiError
from research_tool.api.event_stream import session_events
from research_tool.api.langgraph.bodies import (
    GRAPH_ID,
    RunCreate,
    chat_reply,
    ends_the_wait,
    is_regenerate,
    research_request,
    resume_answers,
)
from research_tool.api.langgraph.shapes import (
    ASSISTANT_ID,
    assistant_id_of,
    assistant_options,
    checkpoint_ref,
    interrupt_json,
    is_assistant,
    output_values,
    thread_json,
)
from research_tool.api.routes.research import check_corpus_dirs
from research_tool.core.errors import SessionNotFoundError, SessionStateError, UserLimitError
from research_tool.core.keyed_locks import KeyedLocks
from research_tool.core.logging import get_logger
from research_tool.models.entities import utc_now_iso
from research_tool.models.events import Event
from research_tool.models.request import MAX_QUERY_CHARS, ResearchRequest
from research_tool.models.sessions import SessionRecord, check_session_id
from research_tool.runtime.composition import ResearchServices
from research_tool.runtime.langgraph_threads import RunRow, ThreadRow, ThreadRuns, open_thread_runs
from research_tool.runtime.runner import progress_of
from research_tool.runtime.users import LOCAL, Principal

log = get_logger(__name__)

SESSION_PAGE = 500
PENDING_POLL_S = 0.5
END_OF_RUN_TYPES = frozenset({"clarification_requested", "session_completed", "session_failed"})


# Who the current request acts for (issue 44): set by the routes' protocol dependency for the whole request, its
# streams included; tasks of the server's own (an enqueued run's start) see the local admin.
CALLER: ContextVar[Principal] = ContextVar("langgraph_caller", default=LOCAL)
# The filters a RESEARCH_AUTH handler returned for this request (api/custom_auth.py): a thread whose metadata does
# not satisfy every one is unknown to it, as someone else's is.
FILTERS: ContextVar[tuple[dict[str, Any], ...]] = ContextVar("langgraph_filters", default=())


def not_found(what: str) -> ApiError:
    return ApiError(404, what)


def thread_owner(row: ThreadRow | None, record: SessionRecord | None) -> str | None:
    """A thread's owner: its row's (a thread made before its first run), else its session's."""
    if row is not None and row.owner is not None:
        return row.owner
    return record.owner if record is not None else None


def visible(row: ThreadRow | None, record: SessionRecord | None) -> bool:
    """Whether the current caller may see the thread: their own (an admin: anyone's), and its metadata satisfies
    every filter the request's auth handlers returned."""
    if not CALLER.get().sees(thread_owner(row, record)):
        return False
    filters = FILTERS.get()
    if not filters:
        return True
    metadata = {"graph_id": GRAPH_ID, "assistant_id": ASSISTANT_ID, **(row.metadata if row else {})}
    return all(filter_matches(f, metadata) for f in filters)


def thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def metadata_matches(shown: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether a thread's metadata has every wanted key and value. `graph_id` may also name the assistant that
    ran the thread (`research-clarify`): Agent Chat UI searches by `graph_id` when its Assistant ID is a name."""
    for key, value in wanted.items():
        if shown.get(key) == value:
            continue
        named = assistant_id_of(value) if key == "graph_id" and isinstance(value, str) else None
        if named is None or named == ASSISTANT_ID or shown.get("assistant_id") != named:
            return False
    return True


def record_at(record: SessionRecord, values: dict[str, Any]) -> SessionRecord:
    """The session as it stood at an earlier checkpoint (no report yet): running, with that checkpoint's
    progress, so a thread's history shows the progress line each state had."""
    return record.model_copy(
        update={"status": "running", "progress": progress_of(values), "pending_questions": [], "stop_reason": None}
    )


def check_request(request: Any, services: Any) -> Any:
    """The run's research request, refused (4xx) before anything is written when it names a folder the server
    does not allow or breaks a rule of the request."""
    check_corpus_dirs(request, services.settings)
    return services.validate(request)


# Agent Chat UI's Cancel (useStream 1.8's stop with `streamResumable: true`) only drops the stream of a run created
# with on_disconnect "continue" and stream_resumable true; nothing else reaches the server. Such a run whose last
# stream drops is stopped unless a client streams it again within this grace (the SDK rejoins a dropped resumable
# stream on its own at once), and a new run on its thread stops it at once (issue 43 item 7).
RESUMABLE_GRACE_S = 5.0


class LangGraphProtocol:
    def __init__(self, services: ResearchServices, runs: ThreadRuns) -> None:
        self.services = services
        self.runs = runs
        self._locks = KeyedLocks()  # per thread; a method called with the lock held never takes it again
        self._tasks: set[asyncio.Task[None]] = set()
        self._watchers: dict[str, int] = {}  # run id -> streams of it open in this process
        self._unwatched: dict[str, asyncio.Event] = {}  # resumable runs whose last stream dropped -> set on rejoin

    @property
    def locks_held(self) -> int:
        """Thread locks in memory: only those some request holds or waits for."""
        return len(self._locks)

    # --- threads --------------------------------------------------------------------------------

    async def record(self, thread_id: str) -> SessionRecord | None:
        try:
            return await self.services.store.get(thread_id)
        except SessionNotFoundError:
            return None

    async def thread(self, thread_id: str) -> tuple[ThreadRow | None, SessionRecord | None]:
        """The thread's row and session; 404 when neither exists (or its session was deleted)."""
        row = await self.runs.get_thread(thread_id)
        record = await self.record(thread_id)
        if record is None and row is not None and row.started:
            async with self._locks.hold(thread_id):  # a new round may be replacing the session: wait for it
                return await self.thread_locked(thread_id)
        if (record is None and row is None) or not visible(row, record):
            raise not_found(f"unknown thread id: {thread_id}")  # someone else's is as unknown as a missing one
        return row, record

    async def thread_locked(
        self, thread_id: str, *, anyones: bool = False
    ) -> tuple[ThreadRow | None, SessionRecord | None]:
        """`thread`, for a caller that holds the thread's lock. `anyones`: whoever owns it (to refuse a create)."""
        row, record = await self._thread_locked(thread_id)
        if not anyones and not visible(row, record):
            raise not_found(f"unknown thread id: {thread_id}")
        return row, record

    async def _thread_locked(self, thread_id: str) -> tuple[ThreadRow | None, SessionRecord | None]:
        row = await self.runs.get_thread(thread_id)
        record = await self.record(thread_id)
        if record is None and (row is None or row.started):
            if row is not None and any(r.starting for r in await self.runs.runs_of(thread_id)):
                return row, None  # a new round is replacing the session (see replace_round): the thread stands
            if row is not None:  # its session was deleted through /api/research: the thread goes with it
                await self.runs.delete_thread(thread_id)
            raise not_found(f"unknown thread id: {thread_id}")
        return row, record

    async def create_thread(self, thread_id: str | None, metadata: dict[str, Any], if_exists: str) -> dict[str, Any]:
        tid = check_session_id(thread_id) if thread_id else str(uuid.uuid4())
        async with self._locks.hold(tid):
            try:
                row, record = await self.thread_locked(tid, anyones=True)
            except ApiError as exc:  # none yet, or its session was deleted (the stale row went with it)
                if exc.status_code != 404:
                    raise
                row, record = await self.runs.put_thread(tid, metadata, owner=CALLER.get().name), None
            else:
                if if_exists != "do_nothing" or not visible(row, record):
                    raise ApiError(409, f"thread {tid} already exists")
            return await self.thread_json(tid, row, record, read=False)

    async def patch_thread(self, thread_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
        async with self._locks.hold(thread_id):  # not between a DELETE's read and its delete
            row, record = await self.thread_locked(thread_id)
            merged = {**(row.metadata if row else {}), **metadata}
            owner = thread_owner(row, record)
            row = await self.runs.put_thread(thread_id, merged, started=record is not None, owner=owner)
            return await self.thread_json(thread_id, row, record, read=False)

    async def delete_thread(self, thread_id: str) -> None:
        async with self._locks.hold(thread_id):
            _, record = await self.thread_locked(thread_id)
            if record is not None:
                with contextlib.suppress(SessionNotFoundError):
                    await self.services.runner.delete(thread_id)
            await self.runs.delete_thread(thread_id)
            await self.audit("delete", thread_id)

    async def state_values(
        self, thread_id: str, record: SessionRecord | None
    ) -> tuple[dict[str, Any], list[dict[str, Any]], Any]:
        """The thread's values, its pending interrupts and the checkpoint snapshot (None before any run)."""
        if record is None:
            return {}, [], None
        snapshot = await self.services.runner.graph.aget_state(thread_config(thread_id))
        values = output_values(record, dict(snapshot.values or {}))
        interrupts = [interrupt_json(i.value, i.id) for i in snapshot.interrupts]
        if record.status != "awaiting_clarification":
            interrupts = []
        return values, interrupts, snapshot

    async def thread_json(
        self, thread_id: str, row: ThreadRow | None = None, record: SessionRecord | None = None, *, read: bool = True
    ) -> dict[str, Any]:
        if read:
            row, record = await self.thread(thread_id)
        values, interrupts, snapshot = await self.state_values(thread_id, record)
        by_task: dict[str, list[dict[str, Any]]] = {}
        if interrupts and snapshot is not None:
            for task in snapshot.tasks:
                if task.interrupts:
                    by_task[task.id] = [interrupt_json(i.value, i.id) for i in task.interrupts]
        pending = any(r.status == "pending" for r in await self.runs.runs_of(thread_id))
        return thread_json(thread_id, row, record, values=values, interrupts=by_task, pending_runs=pending)

    async def search_threads(
        self, *, metadata: dict[str, Any] | None, status: str | None, ids: list[str] | None, limit: int, offset: int
    ) -> list[dict[str, Any]]:
        caller = CALLER.get()
        rows = {r.thread_id: r for r in await self.runs.all_threads()}
        records: dict[str, SessionRecord] = {}
        page = 0
        while True:
            chunk, total = await self.services.store.list_page(
                limit=SESSION_PAGE, offset=page * SESSION_PAGE, owner=caller.owner_filter
            )
            records.update((r.id, r) for r in chunk)
            page += 1
            if page * SESSION_PAGE >= total or not chunk:
                break
        candidates: list[tuple[str, ThreadRow | None, SessionRecord | None]] = []
        for tid in {*rows, *records}:
            row, record = rows.get(tid), records.get(tid)
            if record is None and row is not None and row.started:
                continue  # its session was deleted
            if not visible(row, record):
                continue  # someone else's, or not what the auth handler's filters allow: searches show one's own
            candidates.append((tid, row, record))
        candidates.sort(key=lambda c: c[1].created_at if c[1] else c[2].created_at if c[2] else "", reverse=True)
        found: list[dict[str, Any]] = []
        skipped = 0
        for tid, row, record in candidates:
            if ids is not None and tid not in ids:
                continue
            shown = thread_json(tid, row, record, values={}, interrupts={}, pending_runs=False)
            if metadata and not metadata_matches(shown["metadata"], metadata):
                continue
            if status is not None and shown["status"] != status:
                continue
            if skipped < offset:
                skipped += 1
                continue
            found.append(await self.thread_json(tid, row, record, read=False))
            if len(found) >= limit:
                break
        return found

    async def thread_state(self, thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
        _, record = await self.thread(thread_id)
        if checkpoint_id is None or record is None:
            values, interrupts, snapshot = await self.state_values(thread_id, record)
            return self.state_json(thread_id, values, interrupts, snapshot)
        config = thread_config(thread_id)
        config["configurable"]["checkpoint_id"] = checkpoint_id
        snapshot = await self.services.runner.graph.aget_state(config)
        if not snapshot.values:
            raise not_found(f"unknown checkpoint {checkpoint_id} of thread {thread_id}")
        return self.state_json(thread_id, output_values(record, dict(snapshot.values)), [], snapshot)

    def state_json(
        self, thread_id: str, values: dict[str, Any], interrupts: list[dict[str, Any]], snapshot: Any
    ) -> dict[str, Any]:
        if snapshot is None:
            return {
                "values": values,
                "next": [],
                "checkpoint": checkpoint_ref(thread_id, None),
                "metadata": {},
                "created_at": None,
                "parent_checkpoint": None,
                "tasks": [],
                "interrupts": [],
            }
        checkpoint_id = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
        parent = (snapshot.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        tasks = [
            {
                "id": task.id,
                "name": task.name,
                "error": None,
                "interrupts": [interrupt_json(i.value, i.id) for i in task.interrupts] if interrupts else [],
                "checkpoint": None,
                "state": None,
                "result": None,
            }
            for task in snapshot.tasks
        ]
        return {
            "values": values,
            "next": list(snapshot.next),
            "checkpoint": checkpoint_ref(thread_id, checkpoint_id),
            "metadata": jsonable_encoder(snapshot.metadata or {}),
            "created_at": snapshot.created_at,
            "parent_checkpoint": checkpoint_ref(thread_id, parent) if parent else None,
            "tasks": tasks,
            "interrupts": interrupts,
        }

    async def history(self, thread_id: str, limit: int) -> list[dict[str, Any]]:
        _, record = await self.thread(thread_id)
        if record is None:
            return []
        states: list[dict[str, Any]] = []
        head_values, head_interrupts, _ = await self.state_values(thread_id, record)
        async for snapshot in self.services.runner.graph.aget_state_history(thread_config(thread_id), limit=limit):
            if not states:  # the head: what /state shows, its pending interrupt included
                states.append(self.state_json(thread_id, head_values, head_interrupts, snapshot))
                continue
            values = dict(snapshot.values or {})
            at = record if values.get("final_report") else record_at(record, values)
            states.append(self.state_json(thread_id, output_values(at, values), [], snapshot))
        return states

    # --- runs -----------------------------------------------------------------------------------

    async def run_status(self, run: RunRow, record: SessionRecord | None, current: bool) -> str:
        """The run's status: as written once final; else derived from its session's while it is the
        thread's current run (and then written once final)."""
        if run.final or run.status == "pending":
            return run.status
        if not current:
            status = "interrupted" if run.cancel_reason else "success"
        elif record is None:
            status = "error"
        elif record.status == "awaiting_clarification":
            status = "interrupted"
        elif record.status == "completed":
            status = "interrupted" if run.cancel_reason else "success"
        elif record.status == "failed":
            status = "error"
        else:
            return "running"
        await self.runs.update_run(run.run_id, status=status)
        run.status = status
        return status

    async def settled_runs(self, thread_id: str) -> tuple[list[RunRow], SessionRecord | None]:
        """The thread's runs with their statuses brought up to date, oldest first."""
        runs = await self.runs.runs_of(thread_id)
        record = await self.record(thread_id)
        started = [r for r in runs if r.status != "pending"]
        current = started[-1].run_id if started else None
        for run in runs:
            await self.run_status(run, record, run.run_id == current)
        return runs, record

    async def get_run(self, thread_id: str, run_id: str) -> tuple[RunRow, SessionRecord | None]:
        await self.thread(thread_id)
        runs, record = await self.settled_runs(thread_id)
        for run in runs:
            if run.run_id == run_id:
                return run, record
        raise not_found(f"unknown run id {run_id} on thread {thread_id}")

    async def create_run(
        self,
        thread_id: str | None,
        body: RunCreate,
        traceparent: str | None = None,
        *,
        thread_metadata: dict[str, Any] | None = None,
    ) -> RunRow:
        """Validate everything, then write: a refused run leaves no thread and no run behind (a thread this
        request made is deleted again). `traceparent`: the caller's trace context; the run's session is a child
        of it (an enqueued run that starts later, after the thread's current one, is not)."""
        if not is_assistant(body.assistant_id):
            raise not_found(f"unknown assistant: {body.assistant_id}; this server serves the graph '{GRAPH_ID}'")
        if body.multitask_strategy not in ("reject", "enqueue"):
            raise ApiError(422, f"multitask_strategy {body.multitask_strategy!r} is not served: use reject or enqueue")
        stateless = thread_id is None
        thread_id = str(uuid.uuid4()) if thread_id is None else check_session_id(thread_id)
        resume = body.command.resume if body.command is not None else None
        answers = resume_answers(resume) if resume is not None else None
        if answers is None and not is_regenerate(body) and chat_reply(body) is None and not ends_the_wait(body):
            check_request(research_request(body, None, assistant_options(body.assistant_id)), self.services)
        async with self._locks.hold(thread_id):
            create = stateless
            if not stateless:
                try:
                    row, record = await self.thread_locked(thread_id, anyones=True)
                except ApiError:
                    if body.if_not_exists != "create":
                        raise
                    create = True
                else:
                    if not visible(row, record):
                        raise not_found(f"unknown thread id: {thread_id}")
            if create:  # with the metadata an auth handler added to the run, so that its filters find the thread
                metadata = {**(thread_metadata or {}), **({"stateless": True} if stateless else {})}
                await self.runs.put_thread(thread_id, metadata, owner=CALLER.get().name)
            try:
                return await self.add_run_locked(thread_id, body, answers, traceparent)
            except BaseException:
                if create:  # the thread this request made goes with its refused run
                    await asyncio.shield(self.runs.delete_thread(thread_id))
                raise

    async def add_run_locked(
        self, thread_id: str, body: RunCreate, answers: list[str] | None, traceparent: str | None
    ) -> RunRow:
        runs, record = await self.settled_runs(thread_id)
        if answers is None and record is not None and record.status == "awaiting_clarification":
            reply = chat_reply(body)  # a chat message on a thread awaiting answers is the answer
            answers = resume_answers(reply) if reply is not None else None
        run = RunRow(
            run_id=str(uuid.uuid4()),
            thread_id=thread_id,
            assistant_id=body.assistant_id,
            status="running",
            created_at=utc_now_iso(),
            updated_at=utc_now_iso(),
            metadata=body.metadata or {},
            multitask_strategy=body.multitask_strategy,
            kwargs=body.model_dump(mode="json", exclude_none=True),
            start_seq=0,
        )
        waiting = record is not None and record.status == "awaiting_clarification"
        if answers is not None or ends_the_wait(body):
            if not waiting:
                raise ApiError(409, f"thread {thread_id} has no interrupt to resume")
            run.start_seq = await self.last_seq(thread_id)
            if answers is None:  # "Mark as Resolved" (goto __end__): research goes on with what it was asked
                await self.services.runner.decline_clarification(thread_id)
            else:
                await self.services.runner.provide_answers(thread_id, answers)
            await self.runs.add_run(run)
            await self.audit("resume", thread_id)
            return run
        earlier = await self.earlier_request(thread_id, record) if is_regenerate(body) else None
        request = check_request(research_request(body, earlier, assistant_options(body.assistant_id)), self.services)
        run.request = request.model_dump(mode="json")  # all it needs to start later (enqueued, or after a kill)
        busy = any(r.status in ("pending", "running") for r in runs) or (record is not None and not record.finished)
        if waiting and is_regenerate(body):
            busy = False  # nothing runs: the waiting round makes way for its question asked again, without asking
        if busy:
            started = [r for r in runs if r.status != "pending"]
            if started and not started[-1].final and self.unwatched(started[-1].run_id):
                # its client cancelled (dropped its resumable stream) and asks again: that run stops now
                log.info("langgraph_run_unwatched", thread_id=thread_id, run_id=started[-1].run_id, next_run=True)
                started[-1] = await self.cancel(thread_id, started[-1].run_id, "interrupt")
            # a run cancelled a moment ago is still writing its report: the next question waits for it, not a 409
            cancelled = bool(started) and started[-1].cancel_reason is not None
            if body.multitask_strategy == "reject" and not cancelled:
                raise ApiError(409, f"thread {thread_id} is busy with a run; enqueue it or wait")
            await self.check_day_limits(thread_id, record)  # and it is held to all of them again when it starts
            run.status = "pending"
            await self.runs.add_run(run)
            return run
        if record is None:
            await self.start_session(thread_id, request, False, traceparent, limited=True)
            await self.runs.add_run(run)
        else:
            await self.replace_round(run, request, traceparent)
        await self.note_assistant(thread_id, body.assistant_id)
        return run

    async def replace_round(self, run: RunRow, request: ResearchRequest, traceparent: str | None) -> None:
        """Start `run` as a new round in place of the thread's finished session. The run is written first
        (`pending`, `starting`): a process killed at any instant after that leaves the old session or the new
        one, and the next start finishes the replacement (`dispatch`); killed before it, the old round stands."""
        run.status, run.starting = "pending", True
        await self.runs.add_run(run)
        try:
            await self.start_session(run.thread_id, request, True, traceparent, limited=True)
        except BaseException:
            still = await asyncio.shield(self.record(run.thread_id))
            if still is not None and still.finished:  # refused before the old round was touched (a full server)
                await asyncio.shield(self.runs.delete_run(run.run_id))
            elif still is None:  # the old round is gone: the run stays `starting`, and starts when dispatched
                self.session_finished(run.thread_id)
            raise
        await self.runs.update_run(run.run_id, status="running", starting=False)
        run.status, run.starting = "running", False

    async def earlier_request(self, thread_id: str, record: SessionRecord | None) -> ResearchRequest | None:
        """What a run with no input (a chat UI's regenerate) asks again: the thread's last question, as its
        clarification refined it when it was asked one, without asking again."""
        if record is None:
            return None
        query = record.request.query
        if record.request.clarify:
            snapshot = await self.services.runner.graph.aget_state(thread_config(thread_id))
            query = str((snapshot.values or {}).get("refined_query") or query)
        if len(query) > MAX_QUERY_CHARS:  # answers folded into the question: the question must still be one
            query = query[:MAX_QUERY_CHARS].rsplit(" ", 1)[0].rstrip(" (;")
        return record.request.model_copy(update={"query": query, "clarify": False})

    async def note_assistant(self, thread_id: str, assistant_id: str) -> None:
        """Remember on the thread which assistant ran it (chat UIs list threads by `assistant_id`)."""
        aid = assistant_id_of(assistant_id)
        row = await self.runs.get_thread(thread_id)
        if aid is None or row is None or row.metadata.get("assistant_id") == aid:
            return
        if aid == ASSISTANT_ID and "assistant_id" not in row.metadata:
            return  # the default assistant is what a thread without the key shows anyway
        await self.runs.put_thread(thread_id, {**row.metadata, "assistant_id": aid}, started=row.started)

    async def start_session(
        self, thread_id: str, request: Any, replace: bool, traceparent: str | None = None, *, limited: bool = False
    ) -> None:
        """A new research round on the thread: a finished session of an earlier run makes way for it. The session
        is the thread's owner's; `limited` (a run a request starts now): held to their limits (429 when over)."""
        row, record = await self.runs.get_thread(thread_id), await self.record(thread_id)
        # the thread's owner keeps it (an admin's new round on a user's thread is still the user's)
        owner = thread_owner(row, record) if row is not None or record is not None else CALLER.get().name
        limits = self.services.limits_for(owner) if limited else None
        if replace:
            runner = self.services.runner
            if not runner.clustered:  # a full server refuses before the earlier round is deleted, not after
                runner.admission.check(running=runner.running_count)
            if owner is not None and limits is not None:  # and so does a user at their limits
                refusal = await self.services.store.limit_refusal(owner, limits)
                if refusal is not None:
                    raise UserLimitError(refusal[0], retry_after_s=refusal[1])
            await self.keep_output(thread_id)
            await runner.delete(thread_id)
        await self.services.runner.create(request, thread_id, traceparent=traceparent, owner=owner, limits=limits)
        self.services.runner.submit(thread_id)
        await self.runs.mark_started(thread_id)

    async def check_day_limits(self, thread_id: str, record: SessionRecord | None) -> None:
        """An enqueued run will start a session once the thread's current one ends: refuse it now (429) when its
        owner has no start (or token budget) left today. Their concurrent limit is checked when it starts."""
        row = await self.runs.get_thread(thread_id)
        owner = thread_owner(row, record)
        limits = self.services.limits_for(owner)
        if owner is None or limits is None:
            return
        refusal = await self.services.store.limit_refusal(owner, replace(limits, max_active=None))
        if refusal is not None:
            raise UserLimitError(refusal[0], retry_after_s=refusal[1])

    async def keep_output(self, thread_id: str) -> None:
        """Before a new round replaces the session: keep the current run's final values in its row, so that
        joining it later shows its own round, not the new one."""
        runs, _ = await self.settled_runs(thread_id)
        started = [r for r in runs if r.status != "pending"]
        if started and started[-1].output is None:
            current = started[-1]
            await self.runs.update_run(current.run_id, output=await self.final_values(thread_id, current))

    async def audit(self, action: str, thread_id: str) -> None:
        caller = CALLER.get()
        if caller.name is not None:
            await self.services.users.audit(caller.name, action, thread_id)

    async def last_seq(self, thread_id: str) -> int:
        events = await self.services.events.replay(thread_id)
        return events[-1].seq if events else 0

    def session_finished(self, session_id: str) -> None:
        """Runner callback: a session's task ended here; start the thread's next enqueued run, if any."""
        task = asyncio.create_task(self.dispatch(session_id), name=f"langgraph-dispatch-{session_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def dispatch(self, thread_id: str) -> None:
        """Start the thread's first pending run once its session has finished; and at start, finish a
        replacement a killed process left half done (see `replace_round`)."""
        async with self._locks.hold(thread_id):
            runs, record = await self.settled_runs(thread_id)
            pending = [r for r in runs if r.status == "pending"]
            if not pending:
                return
            run = pending[0]
            if record is not None and not record.finished:
                if run.starting:  # killed after its session was created: the unfinished session is this run's
                    await self.runs.update_run(run.run_id, status="running", starting=False, start_seq=0)
                return
            try:
                request = await self.stored_request(thread_id, run, record)
                await self.runs.update_run(run.run_id, starting=True)
                if record is None and (row := await self.runs.get_thread(thread_id)) is not None and row.started:
                    await self.services.runner.forget_leftovers(thread_id)  # killed between delete and create
                await self.start_session(thread_id, request, record is not None, limited=True)
            except Exception as exc:
                log.warning("langgraph_enqueued_run_failed", thread_id=thread_id, run_id=run.run_id, error=str(exc))
                if await self.record(thread_id) is None and run.request is not None:
                    return  # the earlier round is gone already: the run stays to start later (never neither)
                await self.runs.update_run(run.run_id, status="error", starting=False)
                return
            await self.runs.update_run(run.run_id, status="running", starting=False, start_seq=0)

    async def stored_request(self, thread_id: str, run: RunRow, record: SessionRecord | None) -> ResearchRequest:
        """The research request a pending run starts: as written with it; a regenerate asks the thread's
        question as it stands when the run starts (refined by a clarification meanwhile). Rows from before
        the `request` column are rebuilt from their body and assistant."""
        body = RunCreate.model_validate(run.kwargs)
        regenerate = is_regenerate(body)
        if run.request is not None and not (regenerate and record is not None):
            request = ResearchRequest.model_validate(run.request)
        else:
            earlier = await self.earlier_request(thread_id, record) if regenerate else None
            request = research_request(body, earlier, assistant_options(run.assistant_id))
        check_request(request, self.services)
        return request

    async def cancel(self, thread_id: str, run_id: str, action: str) -> RunRow:
        if action != "interrupt":
            raise ApiError(422, f"cancel action {action!r} is not served: use action=interrupt (stop with a report)")
        run, _ = await self.get_run(thread_id, run_id)
        if run.final:
            return run
        await self.runs.update_run(run_id, cancel_reason="interrupt")
        run.cancel_reason = "interrupt"
        await self.audit("stop", thread_id)
        if run.status == "pending":
            await self.runs.update_run(run_id, status="interrupted")
            run.status = "interrupted"
            return run
        with contextlib.suppress(SessionStateError, SessionNotFoundError):
            await self.services.runner.request_stop(thread_id)
        return run

    async def run_events(self, thread_id: str, run_id: str, after: int) -> AsyncIterator[Event | None]:
        """The events of the run (seq > after), live until the run ends; None while nothing happens."""
        while True:
            run, _ = await self.get_run(thread_id, run_id)
            if run.status != "pending":
                break
            if self.services.draining.is_set():
                return  # an enqueued run's follower: the server is stopping (the caller says so)
            yield None
            await asyncio.sleep(PENDING_POLL_S)
        if run.output is not None or (run.final and run.status == "error" and await self.record(thread_id) is None):
            return  # a later round replaced its session (its values are kept in the row), or nothing is left
        async for event in session_events(self.services, thread_id, max(after, run.start_seq)):
            yield event
            if event is not None and event.type in END_OF_RUN_TYPES:
                return

    async def until_final(self, thread_id: str, run_id: str) -> RunRow:
        async for _ in self.run_events(thread_id, run_id, 0):
            pass
        for _ in range(50):  # the session's row is written just before its final event; this is at most a tick
            run, _record = await self.get_run(thread_id, run_id)
            if run.final:
                return run
            if self.services.draining.is_set():
                raise ApiError(503, "the server is stopping; join the run again once it is back", retryable=True)
            await asyncio.sleep(0.02)
        return run

    async def final_values(self, thread_id: str, run: RunRow) -> dict[str, Any]:
        if run.output is not None:
            return dict(run.output)
        record = await self.record(thread_id)
        values, interrupts, _ = await self.state_values(thread_id, record)
        if interrupts and run.status == "interrupted" and not run.cancel_reason:
            values["__interrupt__"] = interrupts
        if run.status == "error":
            values["__error__"] = {"error": "ResearchFailed", "message": (record.error if record else None) or ""}
        return values

    def stream_opened(self, run_id: str) -> None:
        """A stream of the run opened (created with the run, or joined): a run left unwatched is watched again."""
        self._watchers[run_id] = self._watchers.get(run_id, 0) + 1
        rejoined = self._unwatched.pop(run_id, None)
        if rejoined is not None:
            rejoined.set()

    def stream_closed(self, run_id: str) -> None:
        left = self._watchers.get(run_id, 0) - 1
        if left > 0:
            self._watchers[run_id] = left
        else:
            self._watchers.pop(run_id, None)

    def unwatched(self, run_id: str) -> bool:
        """The run's resumable stream dropped and no client has streamed it since (`stop_unless_rejoined`)."""
        return run_id in self._unwatched and not self._watchers.get(run_id)

    def stop_unless_rejoined(self, thread_id: str, run_id: str) -> None:
        """The client of a run created with on_disconnect=continue and stream_resumable left before it ended
        (Agent Chat UI's Cancel): when no other stream of it is open, the run is stopped (with a report, as a
        cancel does) unless a client streams it again within RESUMABLE_GRACE_S. Synchronous, like
        `cancel_when_left`."""
        if self._watchers.get(run_id) or run_id in self._unwatched:
            return
        rejoined = self._unwatched[run_id] = asyncio.Event()
        task = asyncio.create_task(
            self._stop_after_grace(thread_id, run_id, rejoined), name=f"langgraph-unwatched-{thread_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _stop_after_grace(self, thread_id: str, run_id: str, rejoined: asyncio.Event) -> None:
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(rejoined.wait(), RESUMABLE_GRACE_S)
            if self.unwatched(run_id):
                log.info("langgraph_run_unwatched", thread_id=thread_id, run_id=run_id, grace_s=RESUMABLE_GRACE_S)
                await self._cancel_quietly(thread_id, run_id)
        finally:
            if self._unwatched.get(run_id) is rejoined:
                del self._unwatched[run_id]

    def cancel_when_left(self, thread_id: str, run_id: str) -> None:
        """The client of a run created with on_disconnect=cancel left before it ended: stop it (with a report,
        as a cancel does), in the background. Synchronous: it runs even inside a cancelled task."""
        task = asyncio.create_task(self._cancel_quietly(thread_id, run_id), name=f"langgraph-left-{thread_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cancel_quietly(self, thread_id: str, run_id: str) -> None:
        try:
            await self.cancel(thread_id, run_id, "interrupt")
        except ApiError:  # gone already, or the server is stopping
            return

    def forget_when_final(self, thread_id: str, run_id: str, *, cancel: bool) -> None:
        """Delete a stateless run's thread in the background: at once (`cancel`: its session is stopped with
        it) or once the run is final. Stopped by shutdown, it is picked up again at the next start."""
        task = asyncio.create_task(self._forget(thread_id, run_id, cancel), name=f"langgraph-forget-{thread_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forget(self, thread_id: str, run_id: str, cancel: bool) -> None:
        try:
            if not cancel:
                await self.until_final(thread_id, run_id)
            await self.delete_thread(thread_id)
        except ApiError:  # gone already, or the server is stopping
            return

    async def forget_stateless_leftovers(self) -> None:
        """At start: the threads of stateless runs whose clients left before a restart go too."""
        for row in await self.runs.all_threads():
            if row.metadata.get("stateless") is not True:
                continue
            runs = await self.runs.runs_of(row.thread_id)
            if any(r.kwargs.get("on_completion") == "keep" for r in runs):
                continue
            if runs:
                self.forget_when_final(row.thread_id, runs[-1].run_id, cancel=False)
            else:  # written, never run
                await self.runs.delete_thread(row.thread_id)

    async def resume_pending(self) -> None:
        for thread_id in await self.runs.threads_with_pending_runs():
            await self.dispatch(thread_id)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@asynccontextmanager
async def open_langgraph_protocol(services: ResearchServices) -> AsyncIterator[LangGraphProtocol]:
    async with open_thread_runs(services.conn, services.settings.data_dir) as runs:
        protocol = LangGraphProtocol(services, runs)
        services.runner.on_finished(protocol.session_finished)
        await protocol.resume_pending()
        await protocol.forget_stateless_leftovers()
        try:
            yield protocol
        finally:
            await protocol.aclose()
