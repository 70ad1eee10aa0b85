"""The HTTP routes of DESIGN §5: start, status, stop, clarify, report, list, delete, SSE events, /run,
/healthz, /metrics and /openapi.json (the web page and the docs pages are in routes/pages.py). Sessions
live in SQLite and run in the process's SessionRunner; a route only validates, hands over and reads back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.requests import HTTPConnection

from research_tool.api.auth import Caller, require_token
from research_tool.api.errors import ApiError
from research_tool.api.event_stream import session_events, stream_cut_short
from research_tool.api.metrics import METRICS_CONTENT_TYPE, ApiMetrics
from research_tool.api.trace_context import CallerTrace
from research_tool.core.errors import BadInputError, SessionNotFoundError, SessionStateError
from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings
from research_tool.models.api import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    ClarifyRequest,
    ErrorResponse,
    HealthResponse,
    SessionAccepted,
    SessionList,
    SessionSummary,
    StatusResponse,
)
from research_tool.models.events import Event
from research_tool.models.report import Report
from research_tool.models.request import ReportFormat, ResearchRequest
from research_tool.models.sessions import SESSION_ID_MAX_CHARS, SESSION_ID_PATTERN, SessionRecord
from research_tool.providers.local_corpus.indexed_folders import local_folders
from research_tool.runtime.composition import ResearchServices
from research_tool.runtime.users import Principal

log = get_logger(__name__)

RUN_STOP_GRACE_S = 30.0  # /run: after its timeout the session is stopped and gets this long to write its report
REPORT_MEDIA_TYPES: dict[str, str] = {
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "bib": "application/x-bibtex; charset=utf-8",
}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorResponse} for code in (400, 401, 413, 422, *codes)}


SessionId = Annotated[
    str,
    PathParam(
        min_length=1,
        max_length=SESSION_ID_MAX_CHARS,
        pattern=SESSION_ID_PATTERN,
        description="session id: letters, digits, '-' and '_'",
    ),
]

research = APIRouter(prefix="/api/research", tags=["research"], dependencies=[Depends(require_token)])
protected = APIRouter(dependencies=[Depends(require_token)])
public = APIRouter()


def services_of(connection: HTTPConnection) -> ResearchServices:
    services: ResearchServices | None = getattr(connection.app.state, "services", None)
    if services is None:
        raise ApiError(503, "the server is starting or stopping", retryable=True)
    return services


def check_corpus_dirs(request: ResearchRequest, settings: Settings) -> None:
    """Over HTTP, a client may only name folders inside the server's RESEARCH_CORPUS_DIRS or the folders
    `research-tool index` indexed: it must not make the server index (and quote) arbitrary files it can read."""
    if not request.corpus_dirs:
        return
    allowed = local_folders(settings)
    for folder in request.corpus_dirs:
        try:
            path = Path(folder).expanduser().resolve()
        except (OSError, RuntimeError, ValueError):  # a NUL byte, a symlink loop, an unknown ~user
            raise BadInputError(f"corpus folder {folder!r} is not a usable path") from None
        if not any(path == root or path.is_relative_to(root) for root in allowed):
            raise BadInputError(
                f"corpus folder {folder} is not inside the server's RESEARCH_CORPUS_DIRS; "
                "the server only reads documents from the folders it was configured with"
            )


async def owned_session(services: ResearchServices, session_id: str, caller: Principal) -> SessionRecord:
    """The session, when `caller` may see it; anyone else's is "unknown" (404, as a missing one: ids do not leak)."""
    record = await services.store.get(session_id)
    if not caller.sees(record.owner):
        raise SessionNotFoundError(f"unknown session id: {session_id}")
    return record


async def audit(services: ResearchServices, caller: Principal, action: str, target: str | None = None) -> None:
    """An audit line for a change a named caller made (the local single user's are not audited: no one to name)."""
    if caller.name is not None:
        await services.users.audit(caller.name, action, target)


async def create_session(
    services: ResearchServices, request: ResearchRequest, traceparent: str | None = None, *, caller: Principal
) -> SessionRecord:
    """`traceparent`: the caller's trace context (api/trace_context.py); the session's trace is a child of it.
    The session is `caller`'s, and counts against their limits (UserLimitError, 429, when over)."""
    check_corpus_dirs(request, services.settings)
    request = services.validate(request)
    record = await services.runner.create(
        request, traceparent=traceparent, owner=caller.name, limits=services.limits_for(caller.name)
    )
    # The runner's task (or, in cluster mode, a worker's) runs it: it outlives this request and a lost client.
    services.runner.submit(record.id)
    return record


# --- sessions ---------------------------------------------------------------------------------------


@research.post("/start", status_code=202, response_model=SessionAccepted, responses=_errors(400, 429, 503))
async def start_research(body: ResearchRequest, request: Request, traceparent: CallerTrace, caller: Caller) -> Response:
    """Start a research session; it runs in the background (queued while the server is at its limit)."""
    record = await create_session(services_of(request), body, traceparent, caller=caller)
    # The answer is built here and sent as is (a Response skips FastAPI's second validation and dump of the
    # model): a thousand starts at once each cost the event loop as little as they can.
    accepted = SessionAccepted(session_id=record.id, status=record.status)
    return Response(
        accepted.model_dump_json(),
        status_code=202,
        media_type="application/json",
        headers={"Location": f"/api/research/{record.id}/status"},
    )


@research.get("", response_model=SessionList, responses=_errors())
async def list_sessions(
    request: Request,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> SessionList:
    """Sessions, newest first: the caller's own (an admin's: everyone's)."""
    records, total = await services_of(request).store.list_page(limit=limit, offset=offset, owner=caller.owner_filter)
    return SessionList(
        sessions=[SessionSummary.of(r) for r in records],
        total=total,
        limit=limit,
        offset=offset,
        user=caller.name,
        all_users=caller.admin,
    )


@research.get("/{session_id}/status", response_model=StatusResponse, responses=_errors(404))
async def session_status(session_id: SessionId, request: Request, caller: Caller) -> StatusResponse:
    return StatusResponse.of(await owned_session(services_of(request), session_id, caller))


@research.post("/{session_id}/stop", status_code=202, response_model=SessionAccepted, responses=_errors(404, 409))
async def stop_session(session_id: SessionId, request: Request, caller: Caller) -> SessionAccepted:
    """Stop collecting now; the session still writes a report from what it found. Idempotent; 409 once finished."""
    services = services_of(request)
    await owned_session(services, session_id, caller)
    record = await services.runner.request_stop(session_id)
    await audit(services, caller, "stop", session_id)
    return SessionAccepted(session_id=session_id, status=record.status)


@research.post("/{session_id}/clarify", status_code=202, response_model=SessionAccepted, responses=_errors(404, 409))
async def clarify_session(
    session_id: SessionId, body: ClarifyRequest, request: Request, caller: Caller
) -> SessionAccepted:
    """Answer the pending clarification questions; the session resumes with a refined question."""
    services = services_of(request)
    await owned_session(services, session_id, caller)
    record = await services.runner.provide_answers(session_id, list(body.answers))
    await audit(services, caller, "clarify", session_id)
    return SessionAccepted(session_id=session_id, status=record.status)


@research.get(
    "/{session_id}/report",
    responses={**_errors(404, 409), 200: {"model": Report, "content": {m: {} for m in REPORT_MEDIA_TYPES.values()}}},
)
async def session_report(
    session_id: SessionId, request: Request, caller: Caller, format: Annotated[ReportFormat, Query()] = "json"
) -> Response:
    """The finished session's report (json, md, html or bib); 409 while it is not completed."""
    services = services_of(request)
    await owned_session(services, session_id, caller)
    report = await services.runner.report(session_id)
    return render(report, format)


@research.delete("/{session_id}", status_code=204, response_class=Response, responses=_errors(404))
async def delete_session(session_id: SessionId, request: Request, caller: Caller) -> Response:
    """Stop the session if it runs, then delete it with its events and checkpoints."""
    services = services_of(request)
    await owned_session(services, session_id, caller)
    await services.runner.delete(session_id)
    await audit(services, caller, "delete", session_id)
    return Response(status_code=204)


async def existing_session(session_id: SessionId, request: Request, caller: Caller) -> str:
    """The session id of the path, or the 404 error before any response (a stream included) starts."""
    await owned_session(services_of(request), session_id, caller)
    return session_id


# the stream's own media type is text/event-stream; its errors are JSON like every other route's
_STREAM_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}
    for code in _errors(404)
}


@research.get("/{session_id}/events", response_class=EventSourceResponse, responses=_STREAM_ERRORS)
async def session_event_stream(
    session_id: Annotated[str, Depends(existing_session)],
    request: Request,
    after: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
) -> AsyncIterator[ServerSentEvent]:
    """Server-Sent Events: every event with seq > after (or > Last-Event-ID), then live ones; ends after the
    final event. Each event's `id` is its seq, its `event` its type, its `data` the Event JSON."""
    start = after if after is not None else _last_event_id(last_event_id)
    yield ServerSentEvent(comment="connected")
    services = services_of(request)
    async for event in session_events(services, session_id, start):
        yield ServerSentEvent(comment="keepalive") if event is None else sse_event(event)
    if stream_cut_short(services):  # the server is shutting down: say so, rather than end as if finished
        yield ServerSentEvent(
            event="server_stopping",
            data={"message": "the server is stopping; reconnect with Last-Event-ID once it is back", "retryable": True},
        )


def _last_event_id(value: str | None) -> int:
    return int(value) if value is not None and value.strip().isdecimal() else 0


def sse_event(event: Event) -> ServerSentEvent:
    return ServerSentEvent(id=str(event.seq), event=event.type, data=event)


# --- reports ---------------------------------------------------------------------------------------


def render(report: dict[str, Any], fmt: str) -> Response:
    if fmt == "json":
        return JSONResponse(report)
    from research_tool.reporting.export import render_report

    return Response(render_report(Report.model_validate(report), fmt), media_type=REPORT_MEDIA_TYPES[fmt])


# --- synchronous run, health, metrics ------------------------------------------------------------------


@protected.post("/run", responses={**_errors(400, 429, 500, 503, 504), 200: {"model": Report}})
async def run_research(
    body: ResearchRequest, request: Request, traceparent: CallerTrace, caller: Caller
) -> JSONResponse:
    """Seed-compatible synchronous call: run a session and return its report JSON. It never pauses for
    clarification; after RESEARCH_RUN_TIMEOUT_S it is stopped and reports what it found."""
    services = services_of(request)
    timeout = services.settings.run_timeout_s
    body = body.model_copy(update={"clarify": False, "max_execution_time_s": body.max_execution_time_s or timeout})
    session_id = (await create_session(services, body, traceparent, caller=caller)).id
    task = services.runner.until_finished(session_id)
    if not await _finished_within(services, session_id, task, timeout):
        with contextlib.suppress(SessionStateError):  # finished in the meantime
            await services.runner.request_stop(session_id)
        if not await _finished_within(services, session_id, task, RUN_STOP_GRACE_S):
            raise ApiError(
                504,
                f"session {session_id} did not finish in {timeout:g} s; it goes on: "
                f"GET /api/research/{session_id}/status",
                retryable=True,
            )
    record = await services.store.get(session_id)
    if record.status != "completed":
        raise ApiError(
            500, f"session {session_id} {record.status}: {record.error or 'no report'}", error_type="session_failed"
        )
    report = await services.runner.report(session_id)
    return JSONResponse(report, headers={"X-Session-Id": session_id})


async def _finished_within(
    services: ResearchServices, session_id: str, task: asyncio.Task[None], seconds: float
) -> bool:
    """Wait for the session task without cancelling it (a client that leaves does not stop the session);
    503 as soon as the server starts to shut down (the session resumes after the restart)."""
    draining = asyncio.create_task(services.draining.wait())
    try:
        done, _ = await asyncio.wait({task, draining}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        draining.cancel()
    if task in done:
        return True
    if services.draining.is_set():
        raise ApiError(
            503,
            f"the server is stopping; session {session_id} resumes once it is back: "
            f"GET /api/research/{session_id}/status",
            retryable=True,
        )
    return False


@public.get("/healthz", response_model=HealthResponse, tags=["ops"])
async def healthz() -> HealthResponse:
    """Liveness (no auth)."""
    return HealthResponse()


@protected.get(
    "/metrics", response_class=Response, tags=["ops"], responses={200: {"content": {METRICS_CONTENT_TYPE: {}}}}
)
async def metrics(request: Request) -> Response:
    """Prometheus metrics."""
    app_metrics: ApiMetrics = request.app.state.metrics
    await app_metrics.refresh(services_of(request))
    return Response(app_metrics.render(), media_type=METRICS_CONTENT_TYPE)


@protected.get("/openapi.json", include_in_schema=False)
async def openapi_schema(request: Request) -> JSONResponse:
    """The OpenAPI schema (behind the token like every route but /healthz)."""
    return JSONResponse(request.app.openapi())
