"""Admission control: how many sessions wait for a run slot, and whether one more may join them.

The runner runs at most RESEARCH_MAX_CONCURRENT_SESSIONS sessions at once; the others wait in its queue,
holding nothing but their row and a parked task. Past RESEARCH_MAX_QUEUED_SESSIONS waiting, a start is
refused before anything is written (`ServerBusyError`, API 503 with `Retry-After`): a client is told to come
back, never left hanging on a connection the server cannot serve.

Queued time is not research time: a session's `max_execution_time` counts the time its graph nodes run,
which begins when it leaves the queue.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from research_tool.core.errors import ServerBusyError

# Before any session has finished, a run is assumed to take this long (a standard offline session on a
# loaded server); the estimate then follows the observed runs.
INITIAL_RUN_ESTIMATE_S = 20.0
RUN_ESTIMATE_WEIGHT = 0.2  # weight of the newest run in the moving average
MIN_RETRY_AFTER_S = 1
MAX_RETRY_AFTER_S = 120


class Admission:
    def __init__(self, *, max_running: int, max_queued: int) -> None:
        self.max_running = max(1, max_running)
        self.max_queued = max(0, max_queued)
        self._waiting: set[str] = set()
        self._reserved = 0  # starts admitted whose session is being written and not yet launched
        self._run_estimate_s = INITIAL_RUN_ESTIMATE_S

    @property
    def queued(self) -> int:
        """Sessions admitted that wait for a run slot."""
        return len(self._waiting) + self._reserved

    @property
    def run_estimate_s(self) -> float:
        return self._run_estimate_s

    @contextmanager
    def reserve(self, *, running: int) -> Iterator[None]:
        """Hold a place while a new session is created; raises ServerBusyError when every run slot (`running`
        are taken) and every queue place is. The caller launches the session (`enqueue`) before giving control
        back to the event loop."""
        self.check(running=running)
        self._reserved += 1
        try:
            yield
        finally:
            self._reserved -= 1

    def check(self, *, running: int) -> None:
        """ServerBusyError when one more session would not be admitted now (nothing is held)."""
        free_slots = max(0, self.max_running - running)
        if self.queued >= self.max_queued + free_slots:
            raise ServerBusyError(
                f"the server is at capacity (running: {self.max_running}, queued: {self.queued}); "
                f"try again in {self.retry_after_s()} s",
                retry_after_s=self.retry_after_s(),
            )

    def enqueue(self, session_id: str) -> None:
        self._waiting.add(session_id)

    def dequeue(self, session_id: str) -> None:
        self._waiting.discard(session_id)

    def record_run(self, seconds: float) -> None:
        """A session left its run slot after `seconds`."""
        if seconds > 0:
            self._run_estimate_s += RUN_ESTIMATE_WEIGHT * (seconds - self._run_estimate_s)

    def retry_after_s(self) -> int:
        """Whole seconds until a queue place is likely to be free: one run slot frees every
        run_estimate / max_running seconds on average."""
        seconds = math.ceil(self._run_estimate_s / self.max_running)
        return min(MAX_RETRY_AFTER_S, max(MIN_RETRY_AFTER_S, seconds))
