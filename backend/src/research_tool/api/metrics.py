"""Prometheus metrics for GET /metrics: research loop duration, iterations per session, search failures,
provider requests and latency, sessions by status, and the runner's concurrency.

Each app owns its registry (tests build several apps in one process). Live figures come from two
observation points on the process's shared services: every provider call through the search gateway
and every event appended to the event log; sessions by status are counted in SQLite at scrape time,
so they are right after a restart too.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from research_tool.models.events import Event
from research_tool.models.sessions import ACTIVE_STATUSES, FINISHED_STATUSES
from research_tool.providers.gateway import SearchOutcome
from research_tool.runtime.composition import ResearchServices

METRICS_CONTENT_TYPE = CONTENT_TYPE_LATEST
LOOP_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
ITERATION_BUCKETS = (1, 2, 3, 5, 8, 10, 15, 20, 30, 50)
LOOP_START_PHASE = "collect"  # a research cycle: collect -> process -> analyze -> evaluate
LOOP_END_PHASE = "evaluate"


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.loop_duration = Histogram(
            "research_loop_duration_seconds",
            "Duration of one research cycle (collect to evaluate).",
            buckets=LOOP_BUCKETS,
            registry=r,
        )
        self.iterations = Histogram(
            "research_session_iterations",
            "Research cycles a finished session ran.",
            buckets=ITERATION_BUCKETS,
            registry=r,
        )
        self.search_failures = Counter(
            "research_search_failures",
            "Provider searches that failed, by provider and error type.",
            ["provider", "error_type"],
            registry=r,
        )
        self.provider_requests = Counter(
            "research_provider_requests",
            "Provider searches, by provider and outcome (ok|failed).",
            ["provider", "outcome"],
            registry=r,
        )
        self.provider_latency = Histogram(
            "research_provider_latency_seconds",
            "Provider search latency, retries and waits included.",
            ["provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.sessions = Gauge("research_sessions", "Sessions by status.", ["status"], registry=r)
        # The same figure as research_sessions{status="running"}, from the same query: the two never disagree.
        self.running = Gauge("research_sessions_running", "Sessions whose status is running.", registry=r)
        self.slots_in_use = Gauge(
            "research_session_slots_in_use",
            "Concurrency slots this process holds now: sessions running, stopping or awaiting clarification "
            "(at most RESEARCH_MAX_CONCURRENT_SESSIONS).",
            registry=r,
        )
        self.max_running_seen = Gauge(
            "research_sessions_max_running_seen", "Most concurrency slots this process has held at once.", registry=r
        )
        self.event_loop_lag = Histogram(
            "research_event_loop_lag_seconds",
            "How late the server's event loop woke a task that sleeps 0.1 s (its own delay, whatever the clients see).",
            buckets=LOOP_LAG_BUCKETS,
            registry=r,
        )
        self.gc_pause = Histogram(
            "research_gc_pause_seconds",
            "Garbage-collector pauses of the server process (each one stops its event loop), by generation.",
            ["generation"],
            buckets=LOOP_LAG_BUCKETS,
            registry=r,
        )
        self._loop_started: dict[tuple[str, int], float] = {}

    # --- observations ---------------------------------------------------------------------------

    def observe_search(self, outcome: SearchOutcome) -> None:
        outcome_label = "ok" if outcome.ok else "failed"
        self.provider_requests.labels(outcome.provider, outcome_label).inc()
        self.provider_latency.labels(outcome.provider).observe(max(0.0, outcome.latency_s))
        if outcome.failure is not None:
            self.search_failures.labels(outcome.provider, outcome.failure.error_type).inc()

    def observe_event(self, event: Event, iterations: int | None = None) -> None:
        iteration = event.data.get("iteration")
        key = (event.session_id, iteration if isinstance(iteration, int) else -1)
        if event.type == "phase_started" and event.phase == LOOP_START_PHASE:
            self._loop_started[key] = time.monotonic()
        elif event.type == "phase_completed" and event.phase == LOOP_END_PHASE:
            started = self._loop_started.pop(key, None)
            if started is not None:
                self.loop_duration.observe(time.monotonic() - started)
        elif event.is_final:
            for stale in [k for k in self._loop_started if k[0] == event.session_id]:
                self._loop_started.pop(stale, None)
            if iterations is not None:
                self.iterations.observe(iterations)

    async def refresh(self, services: ResearchServices) -> None:
        """Scrape-time figures: sessions by status (the database, one query, so research_sessions_running is
        research_sessions{status="running"}) and the runner's concurrency slots."""
        counts = dict.fromkeys((*ACTIVE_STATUSES, *FINISHED_STATUSES), 0)
        counts.update(await services.store.status_counts())
        for status, count in counts.items():
            self.sessions.labels(status).set(count)
        self.running.set(counts["running"])
        self.slots_in_use.set(services.runner.running_count)
        self.max_running_seen.set(services.runner.max_running_seen)

    def observe_gc_pause(self, generation: int, seconds: float) -> None:
        self.gc_pause.labels(str(generation)).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # --- wiring ---------------------------------------------------------------------------------

    def observe(self, services: ResearchServices) -> None:
        """Observe the services' gateway calls and appended events (behaviour unchanged: results pass through)."""
        search = services.gateway.search
        append = services.events.append
        store = services.store

        async def observed_search(*args: Any, **kwargs: Any) -> SearchOutcome:
            outcome = await search(*args, **kwargs)
            self.observe_search(outcome)
            return outcome

        async def observed_append(*args: Any, **kwargs: Any) -> Event:
            event = await append(*args, **kwargs)
            iterations = None
            if event.is_final and await store.exists(event.session_id):
                record = await store.get(event.session_id)
                iterations = int(record.progress.get("iteration") or 0)
            self.observe_event(event, iterations)
            return event

        _set_method(services.gateway, "search", observed_search)
        _set_method(services.events, "append", observed_append)


def _set_method(target: object, name: str, fn: Callable[..., Awaitable[Any]]) -> None:
    """Shadow a bound method on one instance (every holder of that instance sees the observed one)."""
    setattr(target, name, fn)
