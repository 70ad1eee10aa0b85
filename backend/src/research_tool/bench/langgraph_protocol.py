"""Benchmark: what LangGraph's protocol adds over our own API (issue 23), against a real uvicorn server and a
Wikipedia replay process with a fixed latency, with the official Python client (langgraph_sdk).

1. `runs.wait` vs `/api/research/start`: the same standard-tier question, run alternately through each
   (start + the session's SSE events to the final one; one `runs.wait` on a new thread); median wall time of
   each, and their ratio (target <= 1.10).
2. Event lag under N concurrent SDK streams (`runs.stream`, mode `custom`): for every progress event, the
   time it reached the client minus the time the server appended it (its `ts`); p95 (target <= 100 ms).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from research_tool.bench.questions import QUESTIONS
from research_tool.bench.replay_env import BenchEnvironment, ReplayProvider
from research_tool.bench.replay_process import replay_process
from research_tool.bench.results import BenchResult, Figure
from research_tool.bench.server_process import uvicorn_server
from research_tool.bench.stats import ms, percentile

DELAY_S = 0.1
WIKIPEDIA_RPS = 50.0
WAIT_RATIO_TARGET = 1.10
LAG_P95_TARGET_MS = 100.0


def body(question: str, max_iterations: int) -> dict[str, Any]:
    return {
        "query": question,
        "providers": ["wikipedia"],
        "fetch": False,
        "tier": "standard",
        "max_iterations": max_iterations,
    }


async def through_start(client: httpx.AsyncClient, base_url: str, payload: dict[str, Any]) -> float:
    began = time.perf_counter()
    started = await client.post(f"{base_url}/api/research/start", json=payload)
    started.raise_for_status()
    session_id = started.json()["session_id"]
    async with client.stream("GET", f"{base_url}/api/research/{session_id}/events") as events:
        async for line in events.aiter_lines():
            if line.startswith("event: session_"):
                kind = line.removeprefix("event: ")
                if kind in ("session_completed", "session_failed"):
                    break
    return time.perf_counter() - began


async def through_wait(sdk: LangGraphClient, payload: dict[str, Any]) -> float:
    began = time.perf_counter()
    values = await sdk.runs.wait(str(uuid.uuid4()), "research", input=payload, if_not_exists="create")
    if not isinstance(values, dict) or "answer" not in values:
        raise RuntimeError(f"runs.wait returned no report: {str(values)[:200]}")
    return time.perf_counter() - began


async def stream_lags(sdk: LangGraphClient, payload: dict[str, Any]) -> list[float]:
    lags: list[float] = []
    async for part in sdk.runs.stream(None, "research", input=payload, stream_mode="custom"):
        if part.event == "custom" and isinstance(part.data, dict) and part.data.get("ts"):
            sent = datetime.fromisoformat(str(part.data["ts"])).timestamp()
            lags.append(max(0.0, time.time() - sent))
    return lags


async def run_langgraph(
    workdir: Path, *, sessions: int = 5, streams: int = 100, max_iterations: int = 2
) -> BenchResult:
    async with replay_process(DELAY_S) as wiki_url:
        env = BenchEnvironment(
            data_dir=workdir / "langgraph" / "data",
            providers=(ReplayProvider("wikipedia", wiki_url, WIKIPEDIA_RPS),),
            max_concurrent_sessions=None,
        )
        async with (
            httpx.AsyncClient(timeout=600, trust_env=False) as client,
            uvicorn_server(env.process_env(), workdir / "langgraph", client) as server,
        ):
            sdk = get_client(url=server.base_url, api_key=None, timeout=600)
            warm = body(QUESTIONS[0], max_iterations)
            await through_start(client, server.base_url, warm)
            await through_wait(sdk, warm)
            start_s: list[float] = []
            wait_s: list[float] = []
            for i in range(sessions):
                payload = body(QUESTIONS[(i + 1) % len(QUESTIONS)], max_iterations)
                start_s.append(await through_start(client, server.base_url, payload))
                wait_s.append(await through_wait(sdk, payload))
            lags = [
                lag
                for found in await asyncio.gather(
                    *(stream_lags(sdk, body(QUESTIONS[i % len(QUESTIONS)], max_iterations)) for i in range(streams))
                )
                for lag in found
            ]
    ratio = statistics.median(wait_s) / statistics.median(start_s)
    return BenchResult(
        name="langgraph",
        title="LangGraph protocol: runs.wait vs /api/research/start; event lag of concurrent SDK streams",
        parameters={
            "sessions": sessions,
            "streams": streams,
            "replay_delay_s": DELAY_S,
            "tier": "standard",
            "max_iterations": max_iterations,
        },
        figures=[
            Figure(
                name="runs.wait / start median",
                value=round(ratio, 3),
                target=WAIT_RATIO_TARGET,
                comparison="<=",
                note=f"{statistics.median(wait_s):.2f} s vs {statistics.median(start_s):.2f} s",
            ),
            Figure(
                name=f"event lag p95 ({streams} streams)",
                value=ms(percentile(lags, 0.95)),
                unit="ms",
                target=LAG_P95_TARGET_MS,
                comparison="<=",
                note=f"{len(lags)} events",
            ),
        ],
        details={"start_s": start_s, "wait_s": wait_s, "lag_p50_ms": ms(percentile(lags, 0.5))},
    )
