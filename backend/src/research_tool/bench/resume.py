"""Benchmark 4, resume: N sessions run on a uvicorn server subprocess; once every one of them is mid-run
(it has finished a collect and not yet completed), the server is killed with SIGKILL. A new server
process starts on the same data dir; we measure from the moment it is spawned to each interrupted
session's first new event (its `ts`, written by the new server), and check that every session then
completes with a gapless event log.

Sessions use the Wikipedia replay provider with a slow answer (so they are caught mid-run) and a rate
limit set high; RESEARCH_MAX_CONCURRENT_SESSIONS = N, so all N run (and resume) at once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from research_tool.bench.questions import QUESTIONS as HOWTO_QUESTIONS
from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.results import BenchResult
from research_tool.bench.server_process import uvicorn_server
from research_tool.bench.session_storage import events_after, last_seqs, phases_seen
from research_tool.bench.stats import percentile
from research_tool.bench.watchers import event_epoch
from research_tool.bench.wiki_replay import build_pages, running_wiki
from research_tool.core.errors import ResearchToolError

QUESTIONS = HOWTO_QUESTIONS[:5]
LATENCY_S = 0.3
WIKIPEDIA_RPS = 1000.0
FINAL_TYPES = {"session_completed", "session_failed"}


class ResumeBenchError(ResearchToolError):
    """The resume benchmark could not bring its sessions to the state it measures."""

    error_type = "bench_resume"


def mid_run(data_dir: Path, session_id: str) -> bool:
    seen = phases_seen(data_dir, session_id)
    collected = any(t == "phase_completed" and p == "collect" for t, p in seen)
    return collected and not any(t in FINAL_TYPES for t, _ in seen)


def finished(data_dir: Path, session_id: str) -> bool:
    return any(t in FINAL_TYPES for t, _ in phases_seen(data_dir, session_id))


async def _wait_all_mid_run(data_dir: Path, ids: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        states = await asyncio.to_thread(lambda: [(mid_run(data_dir, s), finished(data_dir, s)) for s in ids])
        if all(m for m, _ in states):
            return
        if any(f for _, f in states):
            raise ResumeBenchError("a session finished before every session was mid-run; use a slower provider")
        if time.monotonic() > deadline:
            raise ResumeBenchError(f"sessions not mid-run after {timeout_s:.0f} s")
        await asyncio.sleep(0.05)


async def _wait_first_new_events(
    data_dir: Path, before: dict[str, int], timeout_s: float
) -> dict[str, tuple[int, str]]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = await asyncio.to_thread(events_after, data_dir, before)
        if len(found) == len(before) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)


async def _wait_completed(client: httpx.AsyncClient, base_url: str, ids: list[str], timeout_s: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        statuses = {}
        for sid in ids:
            statuses[sid] = (await client.get(f"{base_url}/api/research/{sid}/status")).json()["status"]
        if all(s in ("completed", "failed") for s in statuses.values()) or time.monotonic() > deadline:
            return statuses
        await asyncio.sleep(0.25)


def _gapless(data_dir: Path, session_id: str) -> bool:
    return last_seqs(data_dir).get(session_id, 0) == len(phases_seen(data_dir, session_id))


async def run_resume(workdir: Path, *, sessions: int = 20, max_iterations: int = 3) -> BenchResult:
    result = BenchResult(
        name="resume",
        title="Resume: restarted server to every interrupted session's first new event",
        parameters={
            "sessions": sessions,
            "tier": "standard",
            "max_iterations": max_iterations,
            "provider": f"wikipedia replay, {LATENCY_S * 1000:.0f} ms per request",
            "max_concurrent_sessions": sessions,
            "kill": "SIGKILL of the uvicorn subprocess",
        },
    )
    started = time.perf_counter()
    pages = await asyncio.to_thread(build_pages)
    with running_wiki(LATENCY_S, pages) as (wiki_url, _):
        env = BenchEnvironment(
            data_dir=workdir / "resume" / "data",
            providers=(ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
            max_concurrent_sessions=sessions,
        )
        async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
            async with uvicorn_server(env.process_env(), workdir / "resume", client) as first:
                ids = []
                for i in range(sessions):
                    body = {
                        "query": QUESTIONS[i % len(QUESTIONS)],
                        "tier": "standard",
                        "providers": ["wikipedia"],
                        "fetch": False,
                        "clarify": False,
                        "max_iterations": max_iterations,
                        "formats": ["json"],
                    }
                    response = await client.post(f"{first.base_url}/api/research/start", json=body)
                    response.raise_for_status()
                    ids.append(response.json()["session_id"])
                await _wait_all_mid_run(env.data_dir, ids, timeout_s=120)
                first.kill()
            before = await asyncio.to_thread(last_seqs, env.data_dir)
            before = {sid: before.get(sid, 0) for sid in ids}
            async with uvicorn_server(env.process_env(), workdir / "resume", client) as second:
                found = await _wait_first_new_events(env.data_dir, before, timeout_s=120)
                delays = {sid: event_epoch(ts) - second.started_wall for sid, (_, ts) in found.items()}
                statuses = await _wait_completed(client, second.base_url, ids, timeout_s=300)
                gapless = await asyncio.to_thread(lambda: [_gapless(env.data_dir, s) for s in ids])
                healthy_s = (second.healthy_wall or second.started_wall) - second.started_wall
    values = list(delays.values())
    lost = sum(1 for sid in ids if statuses.get(sid) != "completed") + sum(1 for g in gapless if not g)
    result.add("sessions interrupted", len(ids))
    result.add("server start to /healthz", round(healthy_s, 3), "s")
    result.add("start to every session's first new event", round(max(values), 3) if values else None, "s")
    result.add("start to first new event p50", round(percentile(values, 0.5) or 0, 3) if values else None, "s")
    result.add("sessions that never resumed", len(ids) - len(found), "", target=0, comparison="==")
    result.add("sessions lost (not completed, or a gap in events)", lost, "", target=0, comparison="==")
    result.details.update(
        delays_s={k: round(v, 3) for k, v in delays.items()},
        statuses=statuses,
        healthy_s=healthy_s,
    )
    result.seconds = round(time.perf_counter() - started, 2)
    return result
