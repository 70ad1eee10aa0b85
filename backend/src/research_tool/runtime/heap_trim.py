"""Giving the memory a finished session freed back to the operating system (glibc's `malloc_trim`).

A session allocates several MB while it runs (graph state and its checkpoint blobs, provider answers, SQLite
statements) and frees it when it ends. glibc keeps freed memory in its arenas for reuse and returns only the
top of the main heap by itself, so a server's resident set creeps up with the sessions it has finished
although it holds no more objects (the storage benchmark: about 10 MB of a 176 MB server after 50 sessions
came back with one trim). `malloc_trim(0)` returns every whole free page of every arena.

`HeapTrimmer.after_session()` trims in a worker thread (the call locks each arena in turn, never the event
loop; a few ms for the server's heap). Where the C library has no `malloc_trim` (musl, macOS) nothing
happens.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from collections.abc import Callable

from research_tool.core.logging import get_logger

log = get_logger(__name__)


def _load_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_MALLOC_TRIM = _load_malloc_trim()


def trim_available() -> bool:
    return _MALLOC_TRIM is not None


def trim_heap() -> bool:
    """Return free heap pages to the kernel now (blocking); True when some memory was released."""
    return bool(_MALLOC_TRIM(0)) if _MALLOC_TRIM is not None else False


class HeapTrimmer:
    """Trims after finished sessions, one trim at a time: a session that finishes while a trim runs gets one
    more trim after it (several such sessions share it), so the last session's memory is always given back."""

    def __init__(self) -> None:
        self._running = False
        self._again = False
        self.trims = 0

    async def after_session(self) -> None:
        if _MALLOC_TRIM is None:
            return
        if self._running:
            self._again = True
            return
        self._running = True
        try:
            while True:
                self._again = False
                await asyncio.to_thread(trim_heap)
                self.trims += 1
                if not self._again:
                    break
        except Exception:
            log.warning("heap_trim_failed", exc_info=True)
        finally:
            self._running = False
