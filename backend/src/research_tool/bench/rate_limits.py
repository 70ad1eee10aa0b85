"""Benchmark 3, rate limits: 3 sessions in one process share a 1/s provider (Semantic Scholar replay)
and a 10/s provider (Wikipedia replay), each on its own server on 127.0.0.1 that records when every
request arrived.

- Minimum spacing and violations are measured at the servers: a violation is two consecutive arrivals
  closer than the allowed interval minus a jitter allowance (JITTER_S: the limiter stamps a request
  when it lets it go; loopback and thread scheduling add a little noise before the server sees it).
- Utilisation = achieved rate / allowed rate, over the time when requests were pending. Sessions do
  not always have work queued (between cycles the engine works and nothing waits), so idle time says
  nothing about the limiter. We watch the process-wide limiter itself: a busy period starts at the
  last grant before some request had to wait, and ends at the grant that empties the queue. A perfect
  limiter grants one request per interval in such a period: utilisation 1.0. Sleep overshoot, lock
  hand-over and event-loop delays show up as utilisation below 1.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.results import BenchResult
from research_tool.bench.wiki_replay import WikiReplay, build_pages, running_wiki
from research_tool.models.request import ResearchRequest
from research_tool.providers.resilience.rate_limiter import RateLimiter, endpoint_key, get_rate_limiter
from research_tool.runtime.composition import open_research_services

QUESTIONS = (
    "How do I run a subprocess with a timeout and capture its output?",
    "How do I read and write JSON files with the json module?",
    "How do I copy a directory tree and remove files with shutil?",
)
LATENCY_S = 0.1
JITTER_S = 0.005
WAIT_THRESHOLD_S = 0.001  # a request that waited less than this found the limiter ready
UTILISATION_TARGET = 0.95


@dataclass
class LimiterTrace:
    """(requested, granted) time.monotonic() pairs of every acquire on one limiter."""

    limiter: RateLimiter
    acquires: list[tuple[float, float]] = field(default_factory=list)

    def install(self) -> None:
        """Record every acquire of this process-wide limiter (the bench owns the process)."""
        original = self.limiter.acquire

        async def acquire() -> None:
            requested = time.monotonic()
            await original()
            self.acquires.append((requested, time.monotonic()))

        self.limiter.acquire = acquire  # type: ignore[method-assign]


def busy_periods(acquires: list[tuple[float, float]], interval: float) -> list[tuple[float, float, int]]:
    """(start, end, grants) for each stretch in which requests waited for the limiter; start is the grant
    that made the first of them wait, end the grant that emptied the queue; grants counts those after start."""
    grants = sorted(g for _, g in acquires)
    waits = sorted((r, g) for r, g in acquires if g - r > WAIT_THRESHOLD_S)
    merged: list[list[float]] = []
    for requested, granted in waits:
        if merged and requested <= merged[-1][1] + WAIT_THRESHOLD_S:
            merged[-1][1] = max(merged[-1][1], granted)
        else:
            merged.append([requested, granted])
    periods = []
    for requested, end in merged:
        before = [g for g in grants if g <= requested]
        start = before[-1] if before else requested - interval
        count = sum(1 for g in grants if start < g <= end)
        periods.append((start, end, count))
    return periods


def utilisation(acquires: list[tuple[float, float]], rate: float) -> tuple[float | None, float]:
    """(granted / allowed over the busy periods, their total length in seconds)."""
    periods = busy_periods(acquires, 1.0 / rate)
    busy_s = sum(end - start for start, end, _ in periods)
    granted = sum(count for _, _, count in periods)
    return (granted / (busy_s * rate) if busy_s > 0 else None), busy_s


def spacing(arrivals: list[float], rate: float) -> dict[str, Any]:
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    interval = 1.0 / rate
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
    return {
        "requests": len(arrivals),
        "min_spacing_ms": round(1000 * min(gaps), 2) if gaps else None,
        "allowed_interval_ms": round(1000 * interval, 2),
        "violations": sum(1 for g in gaps if g < interval - JITTER_S),
        "strict_violations": sum(1 for g in gaps if g < interval),
        "overall_rate_per_s": round((len(arrivals) - 1) / span, 3) if span else None,
    }


async def run_rate_limits(
    workdir: Path, *, sessions: int = 3, max_iterations: int = 2, rates: tuple[float, float] = (1.0, 10.0)
) -> BenchResult:
    """`rates`: (Semantic Scholar, Wikipedia) requests per second."""
    allowed = {"semantic_scholar": rates[0], "wikipedia": rates[1]}
    result = BenchResult(
        name="rate_limits",
        title="Rate limits: sessions sharing a 1/s and a 10/s provider",
        parameters={
            "sessions": sessions,
            "tier": "simple",
            "max_iterations": max_iterations,
            "latency_s": LATENCY_S,
            "rates_per_s": allowed,
            "jitter_allowance_ms": JITTER_S * 1000,
            "run": "all sessions at once, in-process (one process-wide limiter per provider endpoint)",
        },
    )
    started = time.perf_counter()
    pages = await asyncio.to_thread(build_pages)
    with running_wiki(LATENCY_S, pages) as (wiki_url, wiki), running_wiki(LATENCY_S, pages) as (scholar_url, scholar):
        providers = (
            ReplayProvider("semantic_scholar", scholar_url, allowed["semantic_scholar"]),
            ReplayProvider("wikipedia", wiki_url, allowed["wikipedia"]),
        )
        env = BenchEnvironment(data_dir=workdir / "rate-limits", providers=providers, max_concurrent_sessions=sessions)
        traces = {p.name: LimiterTrace(get_rate_limiter(endpoint_key(p.name, p.base_url), p.rps)) for p in providers}
        for trace in traces.values():
            trace.install()
        statuses = await _run(env, sessions, max_iterations)
        servers: dict[str, WikiReplay] = {"semantic_scholar": scholar, "wikipedia": wiki}
        for name, rate in allowed.items():
            seen = spacing(servers[name].arrival_times(), rate)
            use, busy_s = utilisation(traces[name].acquires, rate)
            seen.update(utilisation=round(use, 4) if use is not None else None, busy_s=round(busy_s, 2))
            result.details[name] = seen
            label = f"{name} ({rate:g}/s)"
            result.add(f"{label}: requests", seen["requests"])
            result.add(
                f"{label}: minimum spacing",
                seen["min_spacing_ms"],
                "ms",
                note=f"allowed interval {seen['allowed_interval_ms']} ms",
            )
            result.add(
                f"{label}: violations",
                seen["violations"],
                "",
                target=0,
                comparison="==",
                note=f"{seen['strict_violations']} without the {JITTER_S * 1000:g} ms jitter allowance",
            )
            result.add(
                f"{label}: utilisation while requests pending",
                seen["utilisation"],
                "",
                target=UTILISATION_TARGET,
                comparison=">=",
                note=f"over {seen['busy_s']} s of backlog",
            )
    result.details["session_statuses"] = statuses
    result.add("sessions completed", sum(s == "completed" for s in statuses), "", target=sessions, comparison="==")
    result.seconds = round(time.perf_counter() - started, 2)
    return result


async def _run(env: BenchEnvironment, sessions: int, max_iterations: int) -> list[str]:
    async with open_research_services(env.settings()) as services:
        ids = []
        for i in range(sessions):
            request = ResearchRequest(
                query=QUESTIONS[i % len(QUESTIONS)],
                tier="simple",
                providers=env.provider_names,
                fetch=False,
                clarify=False,
                max_iterations=max_iterations,
            )
            services.validate(request)
            record = await services.runner.create(request)
            ids.append(record.id)
        for sid in ids:
            services.runner.launch(sid)
        records = [await services.runner.wait(sid) for sid in ids]
    return [r.status for r in records]
