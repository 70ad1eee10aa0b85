"""The threads the corpus index works in: a small pool of its own, shared fairly between folders, and calls that
stop when the caller stops waiting.

Indexing and searching are blocking SQLite work. In the default executor they competed with everything else
that runs in a thread, and a folder whose searches were slow (FTS5's `snippet()` over a document dense with the
query's terms takes minutes) held every thread: other folders' sessions made no progress, and a cancelled
search went on burning CPU to its end, holding up shutdown. Here:

- the work runs in `POOL_THREADS` threads of its own;
- one folder (or set of folders) holds at most `FOLDER_SHARE` of them at once; its other calls wait their
  turn on the event loop, so another folder's call always finds a thread;
- a call whose caller is cancelled (the session's deadline, a stop, SIGTERM's shutdown) sets its `Cancel`,
  which the work polls: the SQLite connection's progress handler aborts the statement in progress
  (`sqlite3.OperationalError: interrupted`) and indexing stops before its next file. The thread is free within
  milliseconds; the caller's cancellation goes on as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import sqlite3
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from research_tool.core.errors import ResearchToolError

T = TypeVar("T")

POOL_THREADS = 4
FOLDER_SHARE = 2  # threads one folder's calls may hold at once
PROGRESS_EVERY = 10_000  # SQLite virtual-machine steps between two looks at the cancel flag
CANCEL_GRACE_S = 2.0  # how long a cancelled caller waits for its thread to notice

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


class IndexWorkCancelled(ResearchToolError):
    """Index or search work stopped because its caller stopped waiting for it."""

    error_type = "cancelled"


class Cancel:
    """Set by the awaiting side when its caller is cancelled; polled by the work in the thread."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise IndexWorkCancelled("index work cancelled")

    def watch(self, conn: sqlite3.Connection) -> None:
        """Abort the connection's statement in progress once this is set (a progress handler)."""
        conn.set_progress_handler(self._event.is_set, PROGRESS_EVERY)


def _pool() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="corpus-index")
        return _executor


class _Gates:
    """Per event loop, one semaphore per folder key, dropped when no call holds or waits for it."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, tuple[asyncio.Semaphore, int]]]
        self._by_loop = weakref.WeakKeyDictionary()

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        gates = self._by_loop.setdefault(asyncio.get_running_loop(), {})
        semaphore, users = gates.get(key, (asyncio.Semaphore(FOLDER_SHARE), 0))
        gates[key] = (semaphore, users + 1)
        try:
            async with semaphore:
                yield
        finally:
            semaphore, users = gates[key]
            if users <= 1:
                del gates[key]
            else:
                gates[key] = (semaphore, users - 1)


_GATES = _Gates()


async def run_in_index_pool(folder_key: str, work: Callable[[Cancel], T]) -> T:
    """`work(cancel)` in the index pool, at most FOLDER_SHARE at once per `folder_key`; cancelled with its caller."""
    cancel = Cancel()
    async with _GATES.hold(folder_key):
        loop = asyncio.get_running_loop()
        # in the caller's context (contextvars): its log lines name the session's trace and span (issue 43)
        context = contextvars.copy_context()
        future = loop.run_in_executor(_pool(), functools.partial(context.run, work, cancel))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            cancel.set()
            future.add_done_callback(_retrieve)  # its interruption is expected, never an "unretrieved" error
            # The thread stops at its next progress check (a single FTS insert or snippet() call is not
            # interruptible): wait for it, briefly, so the folder's share stays real.
            await asyncio.wait({future}, timeout=CANCEL_GRACE_S)
            raise


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
