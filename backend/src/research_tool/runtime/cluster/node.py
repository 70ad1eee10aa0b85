"""A process's membership of the cluster (Postgres mode): the LISTEN connection, the lease renewals of the
sessions it runs, the periodic re-read that makes up for a lost notification and, in a worker, the claim loop.

Every process on a Postgres database opens one (`research-tool serve`, `serve --no-worker`, `worker`, and the
CLI's `run`/`resume`, which run their session here under a lease like a worker would):
- `research_events` notifications wake this process's followers of that session (SSE, WebSocket, CLI), which
  re-read the events table after their last seq; every `FOLLOWER_REREAD_S` they re-read anyway.
- `research_control` notifications reach the runner: a stop or an answer sets the running session's live
  events within a notification's delay; a deletion cancels it. Each renewal also reads the flags of the
  sessions held, so a lost notification costs at most a renewal period.
- `research_queue` notifications (and a session ending here) wake the claim loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from research_tool.core.logging import get_logger
from research_tool.runtime.cluster.leases import SessionLeases
from research_tool.runtime.cluster.notifications import (
    CONTROL_CHANNEL,
    EVENTS_CHANNEL,
    QUEUE_CHANNEL,
    NotificationListener,
)
from research_tool.runtime.cluster.worker import ClusterWorker
from research_tool.runtime.runner import SessionRunner, Signal

log = get_logger(__name__)

FOLLOWER_REREAD_S = 2.0
SIGNALS: frozenset[str] = frozenset({"stop", "answers", "deleted"})


def new_worker_id() -> str:
    """Unique per process and readable in the sessions table: host, pid and a random suffix."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def parse_control(payload: str) -> tuple[Signal, str] | None:
    kind, _, session_id = payload.partition(":")
    if kind not in SIGNALS or not session_id:
        return None
    return cast(Signal, kind), session_id


def event_session(payload: str) -> str:
    """'<session_id>:<seq>' -> session_id (a session id has no ':')."""
    return payload.rpartition(":")[0] or payload


@dataclass
class ClusterNode:
    leases: SessionLeases
    listener: NotificationListener
    worker: ClusterWorker | None
    renewals: int = 0
    lost: int = 0


class _FollowerWaker:
    """Wakes this process's followers of a session (EventLog.notify_local); `following` lists the sessions
    followed here, for the periodic re-read."""

    def __init__(self, events: Any) -> None:
        self._events = events

    def wake(self, session_id: str) -> None:
        self._events.notify_local(session_id)

    def wake_all(self) -> None:
        following: Callable[[], set[str]] | None = getattr(self._events, "following", None)
        for session_id in following() if following is not None else ():
            self._events.notify_local(session_id)


async def _renew_forever(node: ClusterNode, runner: SessionRunner) -> None:
    period = max(0.2, node.leases.ttl_s / 3)
    while True:
        await asyncio.sleep(period)
        try:
            kept, lost = await node.leases.renew()
        except Exception as exc:  # the database is away: the leases run out, and another worker takes over
            log.warning("lease_renewal_failed", error=str(exc))
            continue
        node.renewals += 1
        for session_id in lost:
            node.lost += 1
            log.warning("lease_lost", session_id=session_id, worker_id=node.leases.worker_id)
            runner.abandon(session_id)
        for held in kept:
            if held.stop_requested:
                runner.signal(held.session_id, "stop")
            elif held.has_answers:
                runner.signal(held.session_id, "answers")


async def _reread_forever(waker: _FollowerWaker) -> None:
    while True:
        await asyncio.sleep(FOLLOWER_REREAD_S)
        waker.wake_all()


@asynccontextmanager
async def cluster_node(
    *,
    conninfo: str,
    runner: SessionRunner,
    events: Any,
    leases: SessionLeases,
    run_worker: bool,
    max_concurrent: int,
    poll_s: float,
) -> AsyncIterator[ClusterNode]:
    """Join the cluster for the block's duration. On exit the worker stops claiming; the caller cancels the
    sessions (the runner releases each one's lease, so another worker resumes it at once)."""
    listener = NotificationListener(conninfo)
    worker = ClusterWorker(runner, leases, max_concurrent=max_concurrent, poll_s=poll_s) if run_worker else None
    node = ClusterNode(leases=leases, listener=listener, worker=worker)
    waker = _FollowerWaker(events)

    def on_control(payload: str) -> None:
        parsed = parse_control(payload)
        if parsed is not None:
            runner.signal(parsed[1], parsed[0])

    listener.subscribe(EVENTS_CHANNEL, lambda payload: waker.wake(event_session(payload)))
    listener.subscribe(CONTROL_CHANNEL, on_control)
    listener.on_reconnect(waker.wake_all)
    if worker is not None:
        listener.subscribe(QUEUE_CHANNEL, worker.wake)
        listener.on_reconnect(worker.wake)
    await listener.start()
    tasks = [
        asyncio.create_task(_renew_forever(node, runner), name="lease-renewal"),
        asyncio.create_task(_reread_forever(waker), name="follower-reread"),
    ]
    if worker is not None:
        tasks.append(asyncio.create_task(worker.run(), name="claim-loop"))
    log.info("cluster_node_started", worker_id=leases.worker_id, worker=run_worker)
    try:
        yield node
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await listener.aclose()
