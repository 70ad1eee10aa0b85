"""The event loop's own delay, measured from inside the process: a task asks to wake every `interval_s`
and records how late it woke. A request answered slowly while this stays small waited somewhere else (the
client, the OS scheduler, the network); a large figure here is time the server's loop was busy or starved.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from research_tool.core.logging import get_logger

log = get_logger(__name__)

DEFAULT_INTERVAL_S = 0.1


class LoopLagMonitor:
    """Calls `observe(lag_s)` about every `interval_s` with how late the loop woke this task."""

    def __init__(self, observe: Callable[[float], None], interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self._observe = observe
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="loop-lag-monitor")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            self._observe(max(0.0, time.perf_counter() - asked - self.interval_s))
