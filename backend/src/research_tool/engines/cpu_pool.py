"""Where CPU-bound engine work runs: in a process pool when one is installed, in a worker thread otherwise.

The server runs many sessions in one process; their text processing (fact extraction, cross-verification,
the citation check, reflection, synthesis) in threads would hold the GIL and make the event loop wait for it.
The API app's lifespan installs a pool of `RESEARCH_CPU_WORKERS` processes (`cpu_pool(n)`); the CLI and
in-process embedders (`open_research_services` alone) install none and get `asyncio.to_thread`. The pool
uses the spawn start method, never fork: the server has threads (aiosqlite's, the executor's) that a fork
would copy mid-state.

Workers ignore SIGINT (the server shuts them down) and exit when the server process dies, however it dies.
They run at a lower scheduling priority (`niceness` steps, RESEARCH_CPU_WORKER_NICENESS, above the
server's): on a machine with as many cores as workers, the event loop that answers requests and feeds the
workers is scheduled first when it wakes, and the workers take every cycle it leaves.
`run_cpu(fn, *args)` ships `fn` and its arguments to a worker by pickle: `fn` must be a module-level
function and its arguments picklable (pydantic models are). A pool that broke (a worker killed) is
dropped and the call, and every later one, runs in a thread.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager
from typing import TypeVar

from research_tool.core.logging import configure_logging, get_logger

log = get_logger(__name__)

T = TypeVar("T")

_installed: ProcessPoolExecutor | None = None
# How much nicer than the server a worker runs by default (os.nice increment: 0..19, higher yields more). Not
# more: against other work on the machine, nice 10 leaves a worker about a tenth of a normal process's CPU share
# (Linux's weights), nice 5 about a third. Not yet compared on a quiet machine (README, Benchmarks).
WORKER_NICENESS = 5


def installed_pool() -> ProcessPoolExecutor | None:
    return _installed


async def run_cpu(fn: Callable[..., T], *args: object) -> T:
    """`fn(*args)` off the event loop: in the installed process pool, else in a worker thread."""
    global _installed
    pool = _installed
    if pool is not None:
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
        except BrokenProcessPool:
            if _installed is pool:
                _installed = None
                log.warning("cpu_pool_broken", fallback="threads")
    return await asyncio.to_thread(fn, *args)


def _worker_started(niceness: int = WORKER_NICENESS, log_format: str = "console", log_level: str = "INFO") -> None:
    # Ctrl-C reaches the whole process group: the server shuts its pool down; a worker must not die first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A spawned worker starts with structlog's defaults, which print debug records: it logs as the server does.
    configure_logging("json" if log_format == "json" else "console", log_level)
    _lower_priority(niceness)
    # A worker holds its own end of the task queue, so a server killed outright (SIGKILL, OOM) would leave
    # it waiting forever: it exits when the server process does.
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), name="cpu-pool-parent-watch", daemon=True).start()


def _lower_priority(niceness: int) -> None:
    """Yield the CPU to the server's event loop: a request waits on the loop, a worker's batch on nothing."""
    nice = getattr(os, "nice", None)  # POSIX only
    if niceness <= 0 or nice is None:
        return
    try:
        nice(niceness)
    except OSError:  # a platform or sandbox that refuses: the worker runs at the server's priority
        log.warning("cpu_pool_nice_refused", niceness=niceness)


def _exit_with(parent_sentinel: int) -> None:
    multiprocessing.connection.wait([parent_sentinel])
    os._exit(1)


@asynccontextmanager
async def cpu_pool(
    workers: int, niceness: int = WORKER_NICENESS, *, log_format: str = "console", log_level: str = "INFO"
) -> AsyncIterator[ProcessPoolExecutor | None]:
    """Install a pool of `workers` processes for `run_cpu` while the block runs (0: none, threads are used);
    on exit shut it down (queued work cancelled) and put back whatever was installed before. The workers log
    at `log_level` in `log_format`, as the process that started them."""
    global _installed
    if workers <= 0:
        yield None
        return
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_started,
        initargs=(niceness, log_format, log_level),
    )
    previous, _installed = _installed, pool
    log.info("cpu_pool_started", workers=workers)
    try:
        yield pool
    finally:
        if _installed is pool:
            _installed = previous
        await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
        log.info("cpu_pool_stopped", workers=workers)
