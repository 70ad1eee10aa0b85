"""The storage benchmark's server process: the app `uvicorn research_tool.api.app:create_app --factory` serves
(one worker, 127.0.0.1, uvicorn's own event loop), plus a memory probe the benchmark triggers with SIGUSR1.

A probe runs on the event loop between two callbacks: a full garbage collection, then it writes
`<probe_dir>/probe-<n>.json` with the resident set (VmRSS, after the collection), the Python heap (tracemalloc:
bytes allocated since the first probe and still held), the number of objects the garbage collector tracks and
the interpreter's allocated blocks, and the bytes SQLite has allocated (sqlite3_memory_used: page caches and
statements). The first probe starts tracemalloc with one frame per trace (its cheapest form), so what it
counts is what the sessions run after it allocated and kept.

    python -m research_tool.bench.storage_memory_server PORT PROBE_DIR [SNAPSHOT_FRAMES]

With SNAPSHOT_FRAMES > 0 tracing keeps that many frames per trace and every probe also dumps a tracemalloc
snapshot (`snapshot-<n>.tracemalloc`) to diff: where the heap grew between two rounds.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
import os
import signal
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from research_tool.api.app import create_app
from research_tool.bench.server_process import proc_status_kb

PROBE_SIGNAL = signal.SIGUSR1
KEEP_ALIVE_S = 300


def probe_path(probe_dir: Path, number: int) -> Path:
    return probe_dir / f"probe-{number}.json"


def snapshot_path(probe_dir: Path, number: int) -> Path:
    return probe_dir / f"snapshot-{number}.tracemalloc"


def _sqlite_memory_used() -> Callable[[], int] | None:
    """sqlite3_memory_used() of the libsqlite3 the sqlite3 module uses (when it is a shared library)."""
    name = ctypes.util.find_library("sqlite3")
    if name is None:
        return None
    try:
        used = ctypes.CDLL(name).sqlite3_memory_used
    except (OSError, AttributeError):
        return None
    used.restype = ctypes.c_int64
    return lambda: int(used())


SQLITE_MEMORY_USED = _sqlite_memory_used()


def memory_figures() -> dict[str, Any]:
    """After a full collection: this process's RSS, the traced Python heap, the gc's objects, SQLite's heap
    (page caches and statements of every connection)."""
    gc.collect()
    return {
        "rss_kb": proc_status_kb(os.getpid(), "VmRSS"),
        "sqlite_bytes": SQLITE_MEMORY_USED() if SQLITE_MEMORY_USED is not None else None,
        "python_heap_bytes": tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else None,
        "gc_objects": len(gc.get_objects()),
        "allocated_blocks": sys.getallocatedblocks(),
    }


class MemoryProbe:
    """Answers PROBE_SIGNAL on the running event loop (never inside whatever the signal interrupted)."""

    def __init__(self, probe_dir: Path, frames: int = 1, snapshots: bool = False) -> None:
        self.probe_dir = probe_dir
        self.frames = frames
        self.snapshots = snapshots
        self.count = 0

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        asyncio.get_running_loop().call_soon_threadsafe(self.write)

    def write(self) -> None:
        self.count += 1
        if not tracemalloc.is_tracing():
            tracemalloc.start(self.frames)
        figures = memory_figures()
        if self.snapshots:  # for attributing growth: diff two of them (tracemalloc.Snapshot.load, compare_to)
            tracemalloc.take_snapshot().dump(str(snapshot_path(self.probe_dir, self.count)))
        path = probe_path(self.probe_dir, self.count)
        partial = path.with_suffix(".part")
        partial.write_text(json.dumps(figures))
        partial.rename(path)  # the benchmark sees a whole file or none


def main(argv: list[str]) -> int:
    port, probe_dir = int(argv[0]), Path(argv[1])
    frames = int(argv[2]) if len(argv) > 2 else 0
    probe_dir.mkdir(parents=True, exist_ok=True)
    probe = MemoryProbe(probe_dir, frames=max(1, frames), snapshots=frames > 0)
    signal.signal(PROBE_SIGNAL, probe.on_signal)
    config = uvicorn.Config(
        create_app,
        factory=True,
        host="127.0.0.1",
        port=port,
        workers=1,
        log_level="warning",
        # The benchmark's client waits between rounds (the slowest session, then a probe); uvicorn's 5 s would
        # close its idle keep-alive connections under it, a race that surfaces as a ReadError on the next POST.
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
