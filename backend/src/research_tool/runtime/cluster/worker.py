"""The claim loop of a worker: while it has a free run slot, claim the oldest session nobody holds and run it.

It claims when a session is queued (a notification), when one of its own sessions ends (a slot frees), and
every `poll_s` anyway (a lost notification, a lease that ran out: a dead worker's sessions are resumed by the
first worker that looks after the lease's end). A worker never runs more than `max_concurrent` sessions.
"""

from __future__ import annotations

import asyncio
import contextlib

from research_tool.core.logging import get_logger
from research_tool.runtime.cluster.leases import SessionLeases
from research_tool.runtime.runner import SessionRunner

log = get_logger(__name__)

CLAIM_ERROR_PAUSE_S = 1.0


class ClusterWorker:
    def __init__(self, runner: SessionRunner, leases: SessionLeases, *, max_concurrent: int, poll_s: float) -> None:
        self._runner = runner
        self._leases = leases
        self._max_concurrent = max(1, max_concurrent)
        self._poll_s = poll_s
        self._wake = asyncio.Event()
        self.claimed = 0

    def wake(self, _payload: str = "") -> None:
        self._wake.set()

    def free_slots(self) -> int:
        return self._max_concurrent - len(self._leases.held)

    async def run(self) -> None:
        runner = self._runner
        runner.on_finished(lambda _sid: self.wake())
        while True:
            self._wake.clear()
            try:
                while self.free_slots() > 0:
                    session_id = await self._leases.claim_next()
                    if session_id is None:
                        break
                    self.claimed += 1
                    runner.launch(session_id)
            except Exception as exc:  # the database is away: try again shortly, sessions keep running
                log.warning("claim_failed", error=str(exc))
                await asyncio.sleep(CLAIM_ERROR_PAUSE_S)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._poll_s)
