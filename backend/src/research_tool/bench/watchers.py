"""Clients that watch sessions on a live server the way a UI would: one WebSocket per session
(recording when each event arrived against its `ts`), an open-loop `GET /status` poller, and a
sampler of the server's resident memory."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from research_tool.bench.server_process import ServerProcess
from research_tool.core.logging import get_logger

log = get_logger(__name__)

FINAL_TYPES = frozenset({"session_completed", "session_failed"})


def event_epoch(ts: str) -> float:
    return datetime.fromisoformat(ts).timestamp()


@dataclass
class SessionWatch:
    """What one WebSocket client saw of one session."""

    session_id: str
    connected_at: float | None = None  # time.time() when the handshake finished
    seqs: list[int] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)  # each event's `ts` (epoch seconds), in seq order
    lags_s: list[float] = field(default_factory=list)  # live events only (ts after the connection)
    started_at: float | None = None  # ts of the first session_started
    finished_at: float | None = None  # ts of the final event
    final_type: str | None = None
    error: str | None = None

    @property
    def gapless(self) -> bool:
        return self.seqs == list(range(1, len(self.seqs) + 1))

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.final_type is None


async def watch_session(ws_base: str, watch: SessionWatch, timeout_s: float) -> None:
    """Replay from seq 1, then follow live until the final event (or the timeout)."""
    try:
        async with asyncio.timeout(timeout_s):
            async with connect(
                f"{ws_base}/api/research/{watch.session_id}/ws?after=0", max_size=2**22, open_timeout=30
            ) as ws:
                watch.connected_at = time.time()
                async for raw in ws:
                    received = time.time()
                    event: dict[str, Any] = json.loads(raw)
                    ts = event_epoch(event["ts"])
                    watch.seqs.append(int(event["seq"]))
                    watch.stamps.append(ts)
                    if ts >= watch.connected_at:
                        watch.lags_s.append(received - ts)
                    if event["type"] == "session_started" and watch.started_at is None:
                        watch.started_at = ts
                    if event["type"] in FINAL_TYPES:
                        watch.final_type = event["type"]
                        watch.finished_at = ts
    except (TimeoutError, OSError, WebSocketException) as exc:
        watch.error = f"{type(exc).__name__}: {exc}"
        log.warning("bench_watch_failed", session_id=watch.session_id, error=watch.error)


@dataclass
class StatusPoller:
    """Open loop: one GET /status every 1/rate seconds (round robin over sessions), each in its own
    task, so a slow answer does not slow the offered load down."""

    client: httpx.AsyncClient
    base_url: str
    rate_per_s: float
    fixed_path: str | None = None  # poll this path instead (/healthz: the event loop's delay alone)
    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0

    async def _one(self, session_id: str) -> None:
        path = self.fixed_path or f"/api/research/{session_id}/status"
        started = time.perf_counter()
        try:
            response = await self.client.get(f"{self.base_url}{path}")
        except httpx.HTTPError:
            self.errors += 1
            return
        if response.status_code == 200:
            self.latencies_s.append(time.perf_counter() - started)
        else:
            self.errors += 1

    async def run(self, session_ids: list[str], stop: asyncio.Event) -> None:
        interval = 1.0 / self.rate_per_s
        tasks: set[asyncio.Task[None]] = set()
        next_at = time.monotonic()
        for session_id in itertools.cycle(session_ids):
            if stop.is_set():
                break
            task = asyncio.create_task(self._one(session_id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=delay)
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class MemorySampler:
    """RSS of the server every `interval_s`, with how many sessions were running at that moment."""

    server: ServerProcess
    watches: list[SessionWatch]
    interval_s: float = 0.2
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (time, rss kB, running)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            rss = self.server.sample_rss()
            if rss is not None:
                self.samples.append((time.time(), rss, sum(w.running for w in self.watches)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval_s)
