"""The FastAPI app: `create_app()` builds it, its lifespan opens the process's research services once
(one AsyncSqliteSaver, one sessions/events database, one HTTP client) and resumes every session that
was queued, running, stopping, awaiting answers or interrupted when the previous process stopped. The MCP
server's streamable HTTP endpoint is mounted at `/mcp` (api/mcp_server.py), behind the same token.

Run it with one worker (`research-tool serve`, or `uvicorn research_tool.api.app:create_app --factory`):
one process owns the SQLite files and the sessions it runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from research_tool import __version__
from research_tool.api.auth import Authenticator
from research_tool.api.body_size import BodySizeLimitMiddleware
from research_tool.api.custom_auth import load_custom_auth
from research_tool.api.errors import ApiError, install_error_handlers
from research_tool.api.host_guard import LOCAL_ORIGIN_PATTERN, HostGuardMiddleware, parse_allowed_hosts
from research_tool.api.langgraph.routes import langgraph
from research_tool.api.langgraph.service import open_langgraph_protocol
from research_tool.api.mcp_server import build_mcp_server, mcp_http_route
from research_tool.api.metrics import ApiMetrics
from research_tool.api.routes.pages import install_pages
from research_tool.api.routes.providers import providers
from research_tool.api.routes.research import protected, public, research
from research_tool.api.websocket.progress_ws import progress
from research_tool.core.logging import configure_logging, get_logger
from research_tool.core.settings import Settings
from research_tool.engines.cpu_pool import cpu_pool
from research_tool.runtime.composition import ResearchServices, open_research_services
from research_tool.runtime.loop_lag import GcPauseMonitor, LoopLagMonitor, release_heap, settle_heap

log = get_logger(__name__)


def cors_origins(settings: Settings) -> list[str]:
    return [o.strip() for o in settings.cors_origins.split(",") if o.strip()]


def running_services(app: FastAPI) -> ResearchServices:
    services: ResearchServices | None = app.state.services
    if services is None:
        raise ApiError(503, "the server is starting or stopping", retryable=True)
    return services


def create_loopback_app() -> FastAPI:
    """The app `research-tool serve` runs on a loopback --host: a browser page of this machine
    (`http://localhost:<port>`, `http://127.0.0.1:<port>`: a local chat UI) may call it cross-origin
    besides RESEARCH_CORS_ORIGINS. Nothing off the machine can reach such a server, so this grants no one
    else anything; a server on any other address allows only the configured origins."""
    return create_app(local_origins=True)


def create_app(settings: Settings | None = None, *, local_origins: bool = False) -> FastAPI:
    settings = settings or Settings()
    configure_logging(settings.log_format, settings.log_level)
    metrics = ApiMetrics()
    loop_lag = LoopLagMonitor(metrics.event_loop_lag.observe)
    gc_pauses = GcPauseMonitor(metrics.observe_gc_pause)
    mcp_server = build_mcp_server(lambda: running_services(app))
    custom_auth = load_custom_auth(settings)  # RESEARCH_AUTH: a bad path fails here, before the server listens

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The pool outlives the services: sessions are cancelled (services' exit) before it shuts down.
        async with (
            cpu_pool(
                settings.cpu_workers,
                settings.cpu_worker_niceness,
                log_format=settings.log_format,
                log_level=settings.log_level,
            ),
            open_research_services(settings, retention_sweeps=True, worker=settings.run_worker) as services,
            mcp_server.session_manager.run(),
            open_langgraph_protocol(services) as langgraph_protocol,
        ):
            metrics.observe(services)
            app.state.services = services
            app.state.auth = Authenticator(settings, services.users, custom_auth)
            app.state.langgraph = langgraph_protocol
            resumed = await services.runner.resume_incomplete()
            settle_heap()
            loop_lag.start()
            gc_pauses.start()
            log.info("server_started", data_dir=str(settings.data_dir), resumed_sessions=len(resumed))
            try:
                yield
            finally:
                services.draining.set()  # (ResearchServer set it already, as the shutdown began)
                app.state.services = None
                app.state.auth = None
                app.state.langgraph = None
                await loop_lag.stop()
                gc_pauses.stop()
                release_heap()
                log.info("server_stopping", running_sessions=services.runner.running_count)

    app = FastAPI(
        title="Research Tool",
        version=__version__,
        summary="Self-hosted deep research: cited reports from sessions that survive a restart.",
        lifespan=lifespan,
        openapi_url=None,  # served by a route behind the token instead (routes/research.py)
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.services = None
    app.state.auth = None
    app.state.custom_auth = custom_auth
    install_error_handlers(app)
    app.include_router(public)
    app.include_router(research)
    app.include_router(protected)
    app.include_router(providers)
    app.include_router(progress)
    app.include_router(langgraph)  # LangGraph's server protocol: docs/langgraph.md
    app.router.routes.append(mcp_http_route(mcp_server))
    install_pages(app)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_request_bytes)
    origins = cors_origins(settings)
    if origins or local_origins:
        # No credentials (cookies) either way: the token goes as a header the page sets itself.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_origin_regex=LOCAL_ORIGIN_PATTERN if local_origins else None,
            allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "X-Api-Key", "X-Auth-Scheme", "Content-Type", "Last-Event-ID"],
            expose_headers=["Location", "Content-Location", "X-Session-Id"],
        )
    # Outermost: a request for a host this server is not (DNS rebinding) is refused before anything runs.
    app.add_middleware(
        HostGuardMiddleware,
        allowed_hosts=parse_allowed_hosts(settings.allowed_hosts),
        cors_origins=origins,
        local_origins=local_origins,
    )
    return app
