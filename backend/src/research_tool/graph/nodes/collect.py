"""collect: run this cycle's queries on every chosen provider, concurrently and politely, then fetch
full text for the best new web results. A user stop or the session deadline ends collecting at once:
in-flight searches are cancelled and what already arrived is kept."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from langgraph.runtime import Runtime

from research_tool.core.errors import CircuitOpenError
from research_tool.graph.context import ResearchContext
from research_tool.graph.decisions.provider_choice import corpus_dirs_for
from research_tool.graph.nodes.instrumentation import elapsed_total, phase
from research_tool.graph.nodes.page_text import store_page_text
from research_tool.graph.nodes.process import to_source
from research_tool.graph.session_limits import SessionLimits, resolve_limits
from research_tool.models.entities import AccessFailure, normalize_key
from research_tool.models.request import ResearchRequest
from research_tool.models.state import ResearchState, merge_sources
from research_tool.providers.base import SearchProvider
from research_tool.providers.fetching.full_text import FullTextOutcome, fetch_full_text
from research_tool.providers.gateway import NOT_REMEMBERED, SearchOutcome
from research_tool.providers.registry import create_provider
from research_tool.providers.search.unpaywall import UnpaywallProvider
from research_tool.providers.source_identity import canonical_url, first_of_each_group

T = TypeVar("T")
MAX_RESULTS_PER_CALL = 10
# `source_found` events per cycle (the newest best-ranked sources; the progress counts every source): they were
# two thirds of a session's event bytes at 50 (issue 24)
SOURCE_EVENTS_PER_CYCLE = 20
SOURCE_EVENT_TITLE_CHARS = 100


async def gather_until(coros: list[Coroutine[Any, Any, T]], stop: asyncio.Event, deadline: float) -> list[T]:
    """Run coroutines concurrently; return the results that finished before a stop or the deadline.
    Unfinished ones are cancelled (and awaited, so nothing leaks)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    if not tasks:
        return []
    stopper = asyncio.ensure_future(stop.wait())
    pending: set[asyncio.Future[Any]] = set(tasks)
    try:
        while pending:
            timeout = deadline - time.monotonic()
            if timeout <= 0 or stop.is_set():
                break
            done, _ = await asyncio.wait(pending | {stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
            if stopper in done:
                break
    finally:
        stopper.cancel()
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, stopper, return_exceptions=True)
    return [t.result() for t in tasks if t.done() and not t.cancelled() and t.exception() is None]


def session_deadline(state: ResearchState, limits: SessionLimits) -> float:
    return time.monotonic() + max(0.0, limits.working_time_s - elapsed_total(state))


def merge_outcomes(
    outcomes: list[SearchOutcome], known: dict[str, dict[str, Any]], iteration: int
) -> dict[str, dict[str, Any]]:
    """New or re-found sources, keyed by the canonical URL of the first sighting of each source.

    Results that share a DOI, an arXiv id or a canonical URL with each other or with a known source
    are one source (`source_identity.first_of_each_group`): a re-found source is filed under its
    known URL, and copies found in this cycle merge as the state's `sources` reducer merges them.
    """
    known_urls = list(known)
    sightings = [
        (outcome, rank, result) for outcome in outcomes for rank, result in enumerate(outcome.results, start=1)
    ]
    identities = [(url, known[url].get("doi")) for url in known_urls]
    identities += [(result.url, result.doi) for _, _, result in sightings]
    first = first_of_each_group(identities)
    found: dict[str, dict[str, Any]] = {}
    for position, (outcome, rank, result) in enumerate(sightings, start=len(known_urls)):
        holder = first[position]
        url = known_urls[holder] if holder < len(known_urls) else canonical_url(identities[holder][0])
        entry = {
            **result.model_dump(mode="json"),
            "url": url,
            "rank": result.rank or rank,
            "query": outcome.query,
            "found_by": [outcome.provider],
            "first_iteration": iteration,
            "best_rank": result.rank or rank,
        }
        found[url] = merge_sources({url: found[url]}, {url: entry})[url] if url in found else entry
    return found


async def _fetch_full_text(
    ctx: ResearchContext,
    sources: dict[str, dict[str, Any]],
    limit: int,
    deadline: float,
    iteration: int,
) -> tuple[dict[str, dict[str, Any]], list[AccessFailure]]:
    """Fetch the best new web results that came without full text (local documents already have it).
    A page that refuses (paywall, CAPTCHA, 403) is recorded; a paper with a DOI then gets its open-access
    copy through Unpaywall when an email is configured; otherwise the snippet is kept."""
    if ctx.crawler is None:
        return {}, []
    crawler = ctx.crawler
    unpaywall = UnpaywallProvider(ctx.settings, ctx.client)
    open_access = unpaywall if unpaywall.is_available() else None
    wanted = sorted(
        (s for s in sources.values() if not s.get("full_content") and s["url"].startswith(("http://", "https://"))),
        key=lambda s: (s["best_rank"], -len(s["found_by"])),
    )[:limit]

    async def fetch(entry: dict[str, Any]) -> FullTextOutcome:
        return await fetch_full_text(
            to_source(entry), crawler=crawler, deadline=deadline, unpaywall=open_access, iteration=iteration
        )

    outcomes = await gather_until([fetch(s) for s in wanted], ctx.stop_event, deadline)
    fetched = {
        o.source.url: {**sources[o.source.url], "full_content": o.source.full_content}
        for o in outcomes
        if o.text_from != "snippet" and o.source.full_content
    }
    failures = [f for o in outcomes for f in o.failures]
    return fetched, failures


async def _announce(ctx: ResearchContext, providers: list[SearchProvider], n_queries: int) -> None:
    for provider in providers:
        plural = "query" if n_queries == 1 else "queries"
        await ctx.events.emit(
            "provider_search",
            "collect",
            f"Searching {provider.name} for {n_queries} {plural}.",
            {"provider": provider.name, "queries": n_queries},
        )


@phase("collect")
async def collect_node(state: ResearchState, runtime: Runtime[ResearchContext]) -> dict[str, Any]:
    ctx = runtime.context
    iteration = int(state["iteration"])
    request = ResearchRequest.model_validate(state["request"])
    limits = resolve_limits(state["tier"], state["request"], ctx.settings)
    deadline = session_deadline(state, limits)
    queries = list(state.get("pending_queries") or [])
    if ctx.stop_requested() or not queries:
        return {"pending_queries": []}
    dirs = corpus_dirs_for(request, ctx.settings)
    providers = [create_provider(n, ctx.settings, ctx.client, corpus_dirs=dirs) for n in state.get("providers", [])]
    calls_left = max(0, limits.provider_call_budget - len(state.get("provider_calls") or {}))
    pairs = [(q, p) for q in queries for p in providers][:calls_left]
    semaphore = asyncio.Semaphore(ctx.settings.search_concurrency)
    max_results = min(MAX_RESULTS_PER_CALL, limits.max_sources)

    async def search(query: dict[str, Any], provider: SearchProvider) -> SearchOutcome:
        async with semaphore:
            return await ctx.gateway.search(
                provider, query["query"], max_results, deadline=deadline, iteration=iteration
            )

    await _announce(ctx, providers, len(queries))
    outcomes = await gather_until([search(q, p) for q, p in pairs], ctx.stop_event, deadline)

    known = state.get("sources") or {}
    found = merge_outcomes(outcomes, known, iteration)
    new_sources = {u: s for u, s in found.items() if u not in known}
    fetched, fetch_failures = await _fetch_full_text(ctx, new_sources, limits.max_sources, deadline, iteration)
    found.update(fetched)
    failures = [o.failure for o in outcomes if o.failure is not None] + fetch_failures

    await _report(ctx, state, outcomes, new_sources, failures)
    intents = {normalize_key(q["query"]): q.get("intent", "") for q in queries}
    queries_run = {
        key: {
            "query": q["query"],
            "intent": intents.get(key, ""),
            "iteration": iteration,
            "results": sum(len(o.results) for o in outcomes if normalize_key(o.query) == key),
        }
        for q in queries
        if (key := normalize_key(q["query"]))
    }
    calls = {
        f"{iteration}|{o.provider}|{normalize_key(o.query)}": {
            "provider": o.provider,
            "query": o.query,
            "iteration": iteration,
            "ok": o.ok,
            "results": len(o.results),
            "latency_s": round(o.latency_s, 4),
            "attempts": o.attempts,
            "urls": [canonical_url(r.url) for r in o.results],
            "error_type": o.failure.error_type if o.failure else None,
        }
        for o in outcomes
    }
    cycle_ok = any(o.ok for o in outcomes)
    return {
        "sources": await store_page_text(ctx, found),  # page text goes to the content store, not the state
        "queries_run": queries_run,
        "provider_calls": calls,
        "access_failures": {f.key(): f.model_dump(mode="json") for f in failures},
        "pending_queries": [],
        "degraded_mode": bool(state.get("degraded_mode")) or (bool(outcomes) and not cycle_ok),
    }


async def _report(
    ctx: ResearchContext,
    state: ResearchState,
    outcomes: list[SearchOutcome],
    new_sources: dict[str, dict[str, Any]],
    failures: list[AccessFailure],
) -> None:
    """Events for the person watching, and the memory store's per-provider counts."""
    domain = state.get("domain", "general")
    for i, source in enumerate(new_sources.values()):
        if i >= SOURCE_EVENTS_PER_CYCLE:
            break
        await ctx.events.emit(
            "source_found",
            "collect",
            f"Found \u201c{source['title'][:SOURCE_EVENT_TITLE_CHARS]}\u201d via {source['found_by'][0]}.",
            {
                "url": source["url"],
                "title": source["title"][:SOURCE_EVENT_TITLE_CHARS],
                "provider": source["found_by"][0],
            },
        )
    refused: dict[str, list[AccessFailure]] = {}
    for failure in failures:
        if failure.error_type == CircuitOpenError.error_type:
            refused.setdefault(failure.provider, []).append(failure)
            continue
        await ctx.events.emit(
            "provider_error",
            "collect",
            f"{failure.provider} failed ({failure.error_type}): {failure.message[:200]}",
            failure.model_dump(mode="json"),
        )
    for provider, group in refused.items():  # one event per provider: no request was made for these
        await ctx.events.emit(
            "provider_error",
            "collect",
            f"{provider}: {len(group)} search{'es' if len(group) != 1 else ''} refused, circuit open after failures",
            {**group[0].model_dump(mode="json"), "refused": len(group)},
        )
    if ctx.memory is None:
        return
    per_provider: dict[str, int] = {}
    for outcome in outcomes:
        per_provider[outcome.provider] = per_provider.get(outcome.provider, 0) + len(outcome.results)
    for provider, count in per_provider.items():
        await ctx.memory.record_results(domain, provider, count)
    for failure in failures:
        # a refusal by an open breaker (or an unconfigured provider) made no request: it says nothing new about
        # the provider, and recording dozens of them cost a run with no network seconds of SQLite writes
        if failure.error_type not in NOT_REMEMBERED:
            await ctx.memory.record_failure(domain, failure)
