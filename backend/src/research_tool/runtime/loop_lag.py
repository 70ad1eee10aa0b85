"""The event loop's own delay, measured from inside the process: a task asks to wake every `interval_s`
and records how late it woke. A request answered slowly while this stays small waited somewhere else (the
client, the OS scheduler, the network); a large figure here is time the server's loop was busy or starved.
The garbage collector's pauses (each one stops the loop) are recorded beside it, by generation.

`settle_heap()` runs once the server has started: one full collection, then everything alive is moved out
of the collector's sight (`gc.freeze`): the modules, the compiled graph and the app are never garbage, and
a full collection no longer walks them while a thousand sessions wait on the loop; `release_heap()` undoes
it when the server stops. The collector's thresholds stay Python's: raising the youngest generation's to
50,000 allocations (so that short-lived objects die young) was measured at 300 sessions x 1.0 s and made
every young collection a 0.1-2.5 s pause (8 s in 10 collections), worse than the older generations' pauses
it was meant to spare.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

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


class GcPauseMonitor:
    """Calls `observe(generation, seconds)` after every collection the garbage collector runs (installed while
    started: `gc.callbacks`)."""

    def __init__(self, observe: Callable[[int, float], None]) -> None:
        self._observe = observe
        self._began: float | None = None

    def start(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        elif self._began is not None:
            self._observe(int(info.get("generation", 0)), time.perf_counter() - self._began)
            self._began = None


def settle_heap() -> None:
    """After startup: collect once, then keep what is alive now out of every later collection."""
    gc.collect()
    gc.freeze()


def release_heap() -> None:
    """At shutdown: give what `settle_heap` froze back to the collector, so that a process that builds the
    app again (the tests, an embedding program) does not keep the last one's garbage for good."""
    gc.unfreeze()
