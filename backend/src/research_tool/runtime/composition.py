"""Everything a process needs to run research, opened and closed in one place (CLI run, server lifespan).

A process has one storage (SQLite files of the one data dir it owns, or a Postgres pool shared with other
processes: runtime/backends.py): one sessions/events store, one checkpoint saver, one page-text store; and
one HTTP client, one search gateway (so rate limits and circuit breakers are shared by all its sessions).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiosqlite
import httpx

from research_tool.core.extras import require_llm_extra
from research_tool.core.settings import Settings
from research_tool.core.telemetry import open_tracing
from research_tool.engines.base import ReasoningEngine
from research_tool.engines.factory import check_engine_settings, create_engine
from research_tool.graph.context import ResearchContext
from research_tool.graph.decisions.provider_choice import corpus_dirs_for, validate_request
from research_tool.models.request import ResearchRequest
from research_tool.models.sessions import SessionRecord
from research_tool.providers.fetching.crawler import Crawler
from research_tool.providers.gateway import SearchGateway
from research_tool.providers.http_client import create_http_client
from research_tool.providers.memory import MemoryStore
from research_tool.providers.resilience.rate_limiter import RATE_LIMITERS
from research_tool.runtime.backends import Checkpointer, Storage, open_storage
from research_tool.runtime.checkpoints import assert_prunable
from research_tool.runtime.cluster.membership import cluster_leases, cluster_membership
from research_tool.runtime.janitor import StorageJanitor
from research_tool.runtime.runner import SessionRunner
from research_tool.runtime.shared_limits import open_shared_limits
from research_tool.runtime.stores import ContentStoreProtocol, EventLogProtocol, SessionStoreProtocol
from research_tool.runtime.users import UserLimits, UserStoreProtocol


@dataclass
class ResearchServices:
    settings: Settings
    client: httpx.AsyncClient
    conn: aiosqlite.Connection | None  # sessions.db; None on Postgres (storage.pool)
    checkpointer: Checkpointer
    content: ContentStoreProtocol
    janitor: StorageJanitor
    gateway: SearchGateway
    crawler: Crawler
    memory: MemoryStore
    store: SessionStoreProtocol
    events: EventLogProtocol
    runner: SessionRunner
    storage: Storage
    users: UserStoreProtocol
    cluster: Any = None  # Postgres: this process's ClusterNode (leases, LISTEN connection, claim loop)
    # Set when the server starts to shut down: every live stream of session events ends at once with a closing
    # part, and long polls answer 503, so that no open connection holds the shutdown (issue 32).
    draining: asyncio.Event = field(default_factory=asyncio.Event)

    def limits_for(self, owner: str | None) -> UserLimits | None:
        """The per-user limits a start by `owner` is held to (None: the local single user, or no limit set)."""
        limits = UserLimits(
            max_active=self.settings.user_max_concurrent_sessions,
            max_per_day=self.settings.user_max_sessions_per_day,
            max_tokens_per_day=self.settings.user_max_tokens_per_day,
            session_tokens=self.settings.token_budget,
        )
        return limits if owner is not None and limits.any else None

    def validate(self, request: ResearchRequest) -> ResearchRequest:
        """Raise BadInputError for a request that cannot run (folders, providers, privacy, engine); return it with
        its privacy mode said (`default_privacy` with this server's engine when the caller named none)."""
        request = request.with_default_privacy(self.settings.llm)
        validate_request(request, self.settings, self.client)
        spec = check_engine_settings(self.settings, privacy_mode=request.privacy)
        if spec is not None:
            require_llm_extra(spec.provider, str(spec))
        return request


@asynccontextmanager
async def open_research_services(
    settings: Settings,
    *,
    engine_factory: Callable[[ResearchRequest], ReasoningEngine] | None = None,
    retention_sweeps: bool = False,
    worker: bool = False,
    own_data_dir: bool = True,
) -> AsyncIterator[ResearchServices]:
    """`engine_factory` replaces the engine RESEARCH_LLM names (embedding applications, tests).
    `own_data_dir=False` (SQLite): take no owner lock, to read a finished session beside a live owner (`show`).
    `retention_sweeps`: apply RESEARCH_RETENTION_DAYS now and every hour while open (the server).
    `worker` (Postgres only): also claim and run sessions from the shared queue (`research-tool worker`,
    `serve` without --no-worker). On Postgres every process joins the cluster (runtime/cluster/): sessions run
    under leases, and stops, answers and events of other processes reach it by LISTEN/NOTIFY.
    With RESEARCH_REDIS_URL, the providers' limits and breakers are shared with every process while open."""
    async with (
        open_tracing(content=settings.trace_content),
        open_shared_limits(settings),
        _open_process_services(
            settings,
            engine_factory=engine_factory,
            retention_sweeps=retention_sweeps,
            worker=worker,
            own_data_dir=own_data_dir,
        ) as services,
    ):
        yield services


@asynccontextmanager
async def _open_process_services(
    settings: Settings,
    *,
    engine_factory: Callable[[ResearchRequest], ReasoningEngine] | None,
    retention_sweeps: bool,
    worker: bool,
    own_data_dir: bool = True,
) -> AsyncIterator[ResearchServices]:
    RATE_LIMITERS.max_in_flight = settings.provider_max_in_flight
    client = create_http_client(settings.provider_max_in_flight)
    try:
        async with open_storage(settings, own_data_dir=own_data_dir) as storage:
            checkpointer = storage.checkpointer
            content = storage.content
            gateway = SearchGateway()
            crawler = Crawler(settings, client)
            memory = storage.memory
            store = storage.store
            events = storage.events
            janitor = StorageJanitor(
                store=store,
                events=events,
                checkpointer=checkpointer,
                content=content,
                exports_dir=settings.data_dir / "exports",
            )

            def make_context(record: SessionRecord, engine: ReasoningEngine, stop: asyncio.Event) -> ResearchContext:
                return ResearchContext(
                    session_id=record.id,
                    settings=settings,
                    engine=engine,
                    gateway=gateway,
                    client=client,
                    crawler=crawler if record.request.fetch else None,
                    events=events.sink(record.id),
                    stop_event=stop,
                    memory=memory,
                    corpus_dirs=corpus_dirs_for(record.request, settings),
                    page_texts=content,
                )

            def make_engine(request: ResearchRequest) -> ReasoningEngine:
                return create_engine(settings, privacy_mode=request.privacy, http_client=client)

            leases = cluster_leases(settings, storage.pool)
            runner = SessionRunner(
                store=store,
                events=events,
                checkpointer=checkpointer,
                janitor=janitor,
                context_factory=make_context,
                engine_factory=engine_factory or make_engine,
                max_concurrent=settings.max_concurrent_sessions,
                max_queued=settings.max_queued_sessions,
                clarify_timeout_s=settings.clarify_timeout_s,
                leasing=leases,
                llm=settings.llm,
                usage=storage.users,
            )
            assert_prunable(runner.graph.channels)
            services = ResearchServices(
                settings=settings,
                client=client,
                conn=storage.conn,
                checkpointer=checkpointer,
                content=content,
                janitor=janitor,
                gateway=gateway,
                crawler=crawler,
                memory=memory,
                store=store,
                events=events,
                runner=runner,
                storage=storage,
                users=storage.users,
            )
            sweeper = (
                asyncio.create_task(janitor.sweep_forever(settings.retention_days), name="retention")
                if retention_sweeps and settings.retention_days is not None
                else None
            )
            try:
                # Leaving the cluster first stops claiming; the cancelled sessions then release their leases.
                async with cluster_membership(settings, runner, events, leases, worker=worker) as node:
                    services.cluster = node
                    yield services
            finally:
                if sweeper is not None:
                    sweeper.cancel()
                    await asyncio.gather(sweeper, return_exceptions=True)
                await runner.cancel_all()
                await crawler.aclose()
    finally:
        await client.aclose()
