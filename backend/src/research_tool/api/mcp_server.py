"""The MCP server (Model Context Protocol, official `mcp` SDK 2.x): research sessions as tools for an MCP client.

Tools: `research` (runs a session to the end, with progress notifications, and returns the report as markdown
and JSON), `start_research`, `research_status`, `stop_research` and `get_report`. It is an entry layer like the
HTTP routes: it validates, hands over to the process's SessionRunner and reads back. Two transports use it:
stdio (`research-tool mcp`, api/mcp_stdio.py) and streamable HTTP at `/mcp` in the API (`mount_mcp`), behind
the API's bearer token.

A client may name local folders (`corpus_dirs`) only inside RESEARCH_CORPUS_DIRS, on both transports: a model
driving the tools must not make the server read arbitrary files.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Final, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError
from starlette.requests import HTTPConnection
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from research_tool import __version__
from research_tool.api.auth import PRINCIPAL_SCOPE_KEY, authenticate
from research_tool.api.errors import ApiError, error_response, status_for
from research_tool.api.event_stream import session_events, stream_cut_short
from research_tool.api.routes.research import audit, check_corpus_dirs, owned_session
from research_tool.core import telemetry
from research_tool.core.errors import ResearchToolError, ServerBusyError, SessionStateError
from research_tool.core.logging import get_logger
from research_tool.models.api import SessionAccepted, StatusResponse
from research_tool.models.report import Report
from research_tool.models.request import ResearchRequest
from research_tool.reporting.export import render_report
from research_tool.runtime.composition import ResearchServices
from research_tool.runtime.users import LOCAL, Principal

log = get_logger(__name__)

MCP_PATH = "/mcp"
STDLIB_LOG_LEVEL: Final = "WARNING"  # what the SDK sets the root logger to (see build_mcp_server)
INSTRUCTIONS = (
    "Deep research with cited reports. `research` runs a session to the end (minutes; progress is notified) and "
    "returns the report: an answer whose every [n] cites a source it retrieved. For long runs use "
    "`start_research`, poll `research_status`, then `get_report`; `stop_research` ends collecting and still "
    "writes a report from what was found."
)

Tier = Literal["simple", "standard", "deep"]
Privacy = Literal["local_only", "hybrid", "cloud_allowed"]
ReportFormat = Literal["md", "json", "html", "bib"]


ToolFailure = (ResearchToolError, ValidationError)


# JSON-RPC's range for errors a server defines: the call ended because the server is stopping.
SERVER_SHUTTING_DOWN = -32000


def error_detail(exc: ResearchToolError | ValidationError) -> dict[str, Any]:
    """What the HTTP API answers for the same failure: its status, its error body's type, message and
    retryable, and the Retry-After seconds of a 503 for a busy server."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int)) or "input"
        message = f"invalid {where}: {str(first.get('msg', 'invalid value')).removeprefix('Value error, ')}"
        return {"status": 422, "type": "validation_error", "message": message, "retryable": False}
    detail: dict[str, Any] = {
        "status": status_for(exc),
        "type": exc.error_type,
        "message": exc.message,
        "retryable": exc.retryable,
    }
    if isinstance(exc, ServerBusyError):
        detail["retry_after_s"] = exc.retry_after_s
    return detail


def error_result(exc: ResearchToolError | ValidationError) -> CallToolResult:
    """A tool's answer for a failure it saw coming: `is_error`, one line a model can act on (the reason and
    when to retry), and the HTTP API's error fields as structured content. Never logged as a traceback."""
    detail = error_detail(exc)
    text = f"{detail['type']}: {detail['message']}"
    if "retry_after_s" in detail:
        text += f" (retry after {detail['retry_after_s']} s)"
    log.info("mcp_tool_refused", status=detail["status"], error_type=detail["type"])
    content = [TextContent(type="text", text=text)]
    return CallToolResult(content=content, structured_content={"error": detail}, is_error=True)


def model_result(value: BaseModel) -> CallToolResult:
    """A successful tool answer: the model as JSON text and as structured content (its output schema)."""
    data = value.model_dump(mode="json", by_alias=True)
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data))], structured_content=data)


def build_request(
    query: str,
    tier: Tier | None,
    domain: str | None,
    privacy_mode: Privacy | None,
    providers: list[str] | None,
    corpus_dirs: list[str] | None,
    fetch: bool,
    max_execution_time_s: float | None,
) -> ResearchRequest:
    fields: dict[str, Any] = {
        "query": query,
        "tier": tier,
        "domain": domain,
        "providers": providers,
        "corpus_dirs": corpus_dirs or [],
        "fetch": fetch,
        "max_execution_time_s": max_execution_time_s,
        "clarify": False,  # a tool call cannot stop to ask; the question is researched as asked
    }
    if privacy_mode is not None:
        fields["privacy_mode"] = privacy_mode
    return ResearchRequest.model_validate(fields)


def report_result(session_id: str, report: dict[str, Any]) -> CallToolResult:
    """The report's markdown as text (what a model reads) and the report JSON as structured content."""
    markdown = render_report(Report.model_validate(report), "md")
    return CallToolResult(
        content=[TextContent(type="text", text=markdown)],
        structured_content={"session_id": session_id, "markdown": markdown, "report": report},
    )


def caller_traceparent(ctx: Context) -> str | None:
    """The caller's trace context (tracing on): the HTTP request's `traceparent` header at /mcp, else the call's
    `_meta.traceparent` (as MCP clients that propagate trace context over stdio send it)."""
    if not telemetry.enabled():
        return None
    try:
        request_context = ctx.request_context
    except ValueError:  # outside a request
        return None
    headers = getattr(request_context.request, "headers", None)
    found = telemetry.incoming_traceparent(headers) if headers is not None else None
    meta: dict[str, Any] = dict(request_context.meta or {})
    sent = meta.get("traceparent")
    if found is None and isinstance(sent, str):
        found = telemetry.valid_traceparent(sent)
    return found


def caller_of(ctx: Context) -> Principal:
    """Who the tool call acts for: the principal the HTTP request carrying it was authenticated as (TokenGuard);
    over stdio (no request: the local user's own process) the local admin."""
    try:
        request = ctx.request_context.request
    except ValueError:  # outside a request
        return LOCAL
    scope = getattr(request, "scope", None)
    found = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, Principal) else LOCAL


def build_mcp_server(services_of: Callable[[], ResearchServices]) -> MCPServer:
    """The tools over the research services `services_of()` returns (raises while the process starts/stops)."""
    # The SDK's constructor calls logging.basicConfig on the root logger (a rich handler) at its log_level: at
    # its default, INFO, every request the providers' httpx clients made was rendered to stderr through rich
    # (CPU on the event loop, rich's caches growing with the URLs). Our own logs are structlog's; stdlib
    # loggers keep warnings and errors, as Python's last-resort handler would print them.
    server: MCPServer = MCPServer(
        name="research-tool", instructions=INSTRUCTIONS, version=__version__, log_level=STDLIB_LOG_LEVEL
    )

    def services() -> ResearchServices:
        return services_of()

    async def create(request_fields: dict[str, Any], ctx: Context) -> str:
        svc = services()
        request = build_request(**request_fields)
        check_corpus_dirs(request, svc.settings)
        request = svc.validate(request)
        caller = caller_of(ctx)
        # ServerBusyError when the server is full, UserLimitError over the caller's limits: nothing created
        record = await svc.runner.create(
            request, traceparent=caller_traceparent(ctx), owner=caller.name, limits=svc.limits_for(caller.name)
        )
        svc.runner.submit(record.id)
        return record.id

    # Every tool answers a failure it saw coming (busy, bad input, unknown session, wrong state) as the HTTP API
    # does (error_result), never as the SDK's bare "Error executing tool".

    @server.tool()
    async def research(
        query: str,
        ctx: Context,
        tier: Tier | None = None,
        domain: str | None = None,
        privacy_mode: Privacy | None = None,
        providers: list[str] | None = None,
        corpus_dirs: list[str] | None = None,
        fetch: bool = True,
        max_execution_time_s: float | None = None,
    ) -> CallToolResult:
        """Research a question to the end and return the cited report (markdown, and the report JSON).

        Sends a progress notification per event (phase, cycle, what was found). Takes from seconds (simple tier)
        to many minutes (deep); the session goes on if the call is cancelled (see stop_research)."""
        try:
            session_id = await create(
                {
                    "query": query,
                    "tier": tier,
                    "domain": domain,
                    "privacy_mode": privacy_mode,
                    "providers": providers,
                    "corpus_dirs": corpus_dirs,
                    "fetch": fetch,
                    "max_execution_time_s": max_execution_time_s,
                },
                ctx,
            )
            svc = services()
            async for event in session_events(svc, session_id, 0):
                if event is None:  # a heartbeat: nothing happened for a while
                    continue
                phase = f"{event.phase}: " if event.phase else ""
                await ctx.report_progress(float(event.seq), None, f"{phase}{event.message}")
            if stream_cut_short(svc):  # the closing part every stream gets on shutdown: here a JSON-RPC error
                raise MCPError(
                    code=SERVER_SHUTTING_DOWN,
                    message=f"ServerShuttingDown: the server is stopping; session {session_id} resumes when it is "
                    "back (research_status, get_report)",
                    data={"session_id": session_id, "retryable": True},
                )
            record = await svc.store.get(session_id)
            if record.status != "completed":
                raise SessionStateError(f"session {session_id} {record.status}: {record.error or 'no report'}")
            return report_result(session_id, await svc.runner.report(session_id))
        except ToolFailure as exc:
            return error_result(exc)

    @server.tool()
    async def start_research(
        query: str,
        ctx: Context,
        tier: Tier | None = None,
        domain: str | None = None,
        privacy_mode: Privacy | None = None,
        providers: list[str] | None = None,
        corpus_dirs: list[str] | None = None,
        fetch: bool = True,
        max_execution_time_s: float | None = None,
    ) -> Annotated[CallToolResult, SessionAccepted]:
        """Start a research session in the background and return its id at once (then research_status,
        get_report). A full server answers `server_busy` with the seconds to wait before retrying."""
        try:
            session_id = await create(
                {
                    "query": query,
                    "tier": tier,
                    "domain": domain,
                    "privacy_mode": privacy_mode,
                    "providers": providers,
                    "corpus_dirs": corpus_dirs,
                    "fetch": fetch,
                    "max_execution_time_s": max_execution_time_s,
                },
                ctx,
            )
            record = await services().store.get(session_id)
            return model_result(SessionAccepted(session_id=session_id, status=record.status))
        except ToolFailure as exc:
            return error_result(exc)

    @server.tool()
    async def research_status(session_id: str, ctx: Context) -> Annotated[CallToolResult, StatusResponse]:
        """Where a session is: status, phase, cycle, sources, facts, saturation, stop reason."""
        try:
            return model_result(StatusResponse.of(await owned_session(services(), session_id, caller_of(ctx))))
        except ToolFailure as exc:
            return error_result(exc)

    @server.tool()
    async def stop_research(session_id: str, ctx: Context) -> Annotated[CallToolResult, SessionAccepted]:
        """Stop collecting now; the session still writes a report from what it found (get_report)."""
        try:
            svc, caller = services(), caller_of(ctx)
            await owned_session(svc, session_id, caller)
            record = await svc.runner.request_stop(session_id)
            await audit(svc, caller, "stop", session_id)
            return model_result(SessionAccepted(session_id=session_id, status=record.status))
        except ToolFailure as exc:
            return error_result(exc)

    @server.tool()
    async def get_report(session_id: str, ctx: Context, format: ReportFormat = "md") -> CallToolResult:
        """A completed session's report: markdown (default) with the report JSON as structured content, or
        json, html or bib text."""
        try:
            svc = services()
            await owned_session(svc, session_id, caller_of(ctx))
            report = await svc.runner.report(session_id)
        except ToolFailure as exc:
            return error_result(exc)
        if format == "md":
            return report_result(session_id, report)
        text = (
            json.dumps(report, indent=2) if format == "json" else render_report(Report.model_validate(report), format)
        )
        return CallToolResult(content=[TextContent(type="text", text=text)])

    return server


class TokenGuard:
    """ASGI wrapper: the API's bearer token in front of the MCP endpoint (401 in the API's JSON error shape)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            try:
                await authenticate(HTTPConnection(scope))  # kept in the scope: the tools act for this caller
            except ApiError as refusal:
                headers = {"WWW-Authenticate": "Bearer"} if refusal.status_code == 401 else None
                response = error_response(
                    refusal.status_code, refusal.error_type, refusal.message, refusal.retryable, headers
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def mcp_http_route(server: MCPServer) -> Route:
    """The streamable-HTTP endpoint of `server` as one route for the API app (its session manager must run in the
    app's lifespan: `server.session_manager.run()`)."""
    sub_app = server.streamable_http_app(streamable_http_path=MCP_PATH)
    for route in sub_app.routes:
        if isinstance(route, Route) and route.path == MCP_PATH:
            return Route(MCP_PATH, endpoint=TokenGuard(route.app), methods=["GET", "POST", "DELETE"])
    raise RuntimeError("the MCP SDK's streamable HTTP app has no route at /mcp")  # pragma: no cover
