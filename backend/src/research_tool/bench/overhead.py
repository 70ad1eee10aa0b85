"""Benchmark 1, orchestration overhead: standard-tier sessions against two replay providers with a fixed
latency, and the offline engine. From each session's own trace (provider calls per cycle, each node's
elapsed time) we compute a lower bound on its wall time and report wall / bound (target <= 1.10).

The lower bound of one session is
    sum over cycles of the cycle's critical collect path  +  the time spent inside the other nodes
(clarify, plan, process, analyze, evaluate, synthesize, export: the engine's and the analysis' own
work). A cycle's critical collect path is the slowest of
  - per provider, the rate-limit chain: its R requests cannot start closer than 1/rate apart, and the
    last one still takes the latency: (R - 1) / rate + latency;
  - per provider, the longest request chain of one search (Wikipedia: search, then the extracts of its
    hits: 2 x latency);
  - the collect node's search concurrency: all request time spread over RESEARCH_SEARCH_CONCURRENCY slots.
Everything else is overhead: graph scheduling, checkpoint writes (durability="sync"), the event log,
the session store, the rate limiter's own slack, merging results inside collect.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from research_tool.bench.questions import QUESTIONS as HOWTO_QUESTIONS
from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.results import BenchResult
from research_tool.bench.wiki_replay import build_pages, running_wiki
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services

QUESTIONS = HOWTO_QUESTIONS[:5]
LATENCY_S = 0.1
WIKIPEDIA_RPS = 20.0
SCHOLAR_RPS = 10.0
TARGET_RATIO = 1.10


def requests_per_call(call: dict[str, Any]) -> int:
    """HTTP requests one provider search made: Wikipedia asks for its hits' extracts in a second request."""
    if call["provider"] == "wikipedia" and call.get("ok") and call.get("results", 0) > 0:
        return 2
    return 1


@dataclass(frozen=True)
class CycleBound:
    iteration: int
    collect_s: float  # what collect really took
    bound_s: float  # its critical path
    limiting: str  # what sets the bound


def collect_bound(
    calls: list[dict[str, Any]], rates: dict[str, float], latency_s: float, concurrency: int
) -> tuple[float, str]:
    """The critical path of one cycle's searches, and what sets it."""
    if not calls:
        return 0.0, "no searches"
    candidates: list[tuple[float, str]] = []
    by_provider: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        by_provider[call["provider"]].append(call)
    for provider, provider_calls in by_provider.items():
        total = sum(requests_per_call(c) for c in provider_calls)
        chain = max(requests_per_call(c) for c in provider_calls)
        candidates.append(((total - 1) / rates[provider] + latency_s, f"{provider} rate ({total} requests)"))
        candidates.append((chain * latency_s, f"{provider} request chain"))
    work = sum(requests_per_call(c) for c in calls) * latency_s
    candidates.append((work / concurrency, f"search concurrency {concurrency}"))
    return max(candidates)


def session_bound(
    state: dict[str, Any], rates: dict[str, float], latency_s: float, concurrency: int
) -> tuple[float, float, list[CycleBound]]:
    """(lower bound, time inside non-collect nodes, per-cycle collect bounds) from a session's state."""
    elapsed: dict[str, float] = state.get("elapsed") or {}
    calls_by_cycle: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for call in (state.get("provider_calls") or {}).values():
        calls_by_cycle[int(call["iteration"])].append(call)
    node_s = 0.0
    cycles = []
    for key, seconds in elapsed.items():
        phase, _, iteration = key.partition(":")
        if phase != "collect":
            node_s += seconds
            continue
        bound, limiting = collect_bound(calls_by_cycle.get(int(iteration), []), rates, latency_s, concurrency)
        cycles.append(CycleBound(int(iteration), seconds, bound, limiting))
    cycles.sort(key=lambda c: c.iteration)
    return node_s + sum(c.bound_s for c in cycles), node_s, cycles


async def _run_sessions(
    env: BenchEnvironment, questions: tuple[str, ...], max_iterations: int | None
) -> list[dict[str, Any]]:
    settings = env.settings()
    rates = {p.name: p.rps for p in env.providers}
    rows = []
    async with open_research_services(settings) as services:
        for question in questions:
            request = ResearchRequest(
                query=question,
                tier="standard",
                providers=env.provider_names,
                fetch=False,
                clarify=False,
                max_iterations=max_iterations,
            )
            services.validate(request)
            record = await services.runner.create(request)
            started = time.perf_counter()
            services.runner.launch(record.id)
            record = await services.runner.wait(record.id)
            wall = time.perf_counter() - started
            snapshot = await services.runner.graph.aget_state({"configurable": {"thread_id": record.id}})
            state = dict(snapshot.values)
            bound, node_s, cycles = session_bound(state, rates, LATENCY_S, settings.search_concurrency)
            collect_s = sum(c.collect_s for c in cycles)
            rows.append(
                {
                    "session_id": record.id,
                    "status": record.status,
                    "stop_reason": record.stop_reason,
                    "cycles": len(cycles),
                    "provider_calls": len(state.get("provider_calls") or {}),
                    "wall_s": round(wall, 3),
                    "lower_bound_s": round(bound, 3),
                    "ratio": round(wall / bound, 3) if bound else None,
                    "node_s": round(node_s, 3),
                    "collect_s": round(collect_s, 3),
                    "collect_bound_s": round(sum(c.bound_s for c in cycles), 3),
                    "between_nodes_s": round(wall - node_s - collect_s, 3),
                    "cycle_bounds": [c.__dict__ for c in cycles],
                }
            )
    return rows


async def run_overhead(
    workdir: Path, *, sessions: int = 3, max_iterations: int | None = None, warmup: int = 1
) -> BenchResult:
    """`warmup` sessions run first and are reported apart: a process's first session also pays one-time
    costs (lazy imports, first regex compilations, the first SQLite pages) that are not per-session overhead."""
    result = BenchResult(
        name="overhead",
        title="Orchestration overhead: wall time / critical-path lower bound",
        parameters={
            "sessions": sessions,
            "tier": "standard",
            "max_iterations": max_iterations or "tier default (5)",
            "engine": "offline",
            "latency_s": LATENCY_S,
            "providers": {"wikipedia": f"{WIKIPEDIA_RPS}/s", "semantic_scholar": f"{SCHOLAR_RPS}/s"},
            "run": "one session at a time, in-process (open_research_services)",
            "warmup_sessions": f"{warmup} (run first, reported apart, not in the ratios)",
        },
    )
    started = time.perf_counter()
    pages = await asyncio.to_thread(build_pages)
    with running_wiki(LATENCY_S, pages) as (wiki_url, _), running_wiki(LATENCY_S, pages) as (scholar_url, _):
        env = BenchEnvironment(
            data_dir=workdir / "overhead",
            providers=(
                ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),
                ReplayProvider("semantic_scholar", scholar_url, SCHOLAR_RPS),
            ),
        )
        questions = tuple(QUESTIONS[i % len(QUESTIONS)] for i in range(warmup + sessions))
        every = await _run_sessions(env, questions, max_iterations)
    warm, rows = every[:warmup], every[warmup:]
    wall = sum(r["wall_s"] for r in rows)
    bound = sum(r["lower_bound_s"] for r in rows)
    worst = max((r["ratio"] for r in rows if r["ratio"]), default=None)
    result.add(
        "wall / lower bound (all sessions)",
        round(wall / bound, 3) if bound else None,
        "",
        target=TARGET_RATIO,
        comparison="<=",
    )
    result.add("wall / lower bound (worst session)", worst, "", target=TARGET_RATIO, comparison="<=")
    result.add("session wall time (mean)", round(wall / len(rows), 2), "s")
    result.add("lower bound (mean)", round(bound / len(rows), 2), "s")
    result.add(
        "collect time over its bound (mean)",
        round(sum(r["collect_s"] - r["collect_bound_s"] for r in rows) / len(rows), 3),
        "s",
    )
    result.add(
        "time between nodes (mean)",
        round(sum(r["between_nodes_s"] for r in rows) / len(rows), 3),
        "s",
        note="graph scheduling, checkpoint writes, session store and events outside the nodes",
    )
    result.add("cycles per session (mean)", round(sum(r["cycles"] for r in rows) / len(rows), 2))
    result.add(
        "sessions completed", sum(r["status"] == "completed" for r in rows), "", target=len(rows), comparison="=="
    )
    if warm:
        result.add("warm-up session: wall / lower bound (not counted)", warm[0]["ratio"], "")
    result.details["sessions"] = rows
    result.details["warmup_sessions"] = warm
    result.seconds = round(time.perf_counter() - started, 2)
    return result
