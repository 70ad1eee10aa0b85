"""Item 13 (flat RSS): memory a finished session freed goes back to the operating system. glibc keeps freed
memory in its arenas; the runner trims them (malloc_trim) once a session has left its slot."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from pathlib import Path

import pytest

from research_tool.runtime import heap_trim
from research_tool.runtime.heap_trim import HeapTrimmer, trim_available, trim_heap
from tests.support.polling import eventually

needs_trim = pytest.mark.skipif(not trim_available(), reason="the C library has no malloc_trim (not glibc)")

BLOCK_BYTES = 4096  # above pymalloc's 512 bytes: each block is a malloc of its own
BLOCKS = 10_000  # 40 MB


def rss_kb() -> int:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@needs_trim
def test_a_trim_gives_freed_but_held_heap_pages_back() -> None:
    blocks = [os.urandom(BLOCK_BYTES) for _ in range(BLOCKS)]
    pin = os.urandom(BLOCK_BYTES)  # allocated last: the heap's top stays in use, so free() alone cannot shrink it
    del blocks
    gc.collect()
    held = rss_kb()
    assert trim_heap()
    assert held - rss_kb() > BLOCKS * BLOCK_BYTES // 1024 // 2, "at least half of the 40 MB went back"
    del pin


@needs_trim
async def test_sessions_finishing_together_share_trims_and_the_last_one_is_always_trimmed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    release = threading.Event()

    def slow_trim(pad: int) -> int:
        calls.append(pad)
        release.wait(10)  # the first trim lasts until the other sessions have finished
        return 1

    monkeypatch.setattr(heap_trim, "_MALLOC_TRIM", slow_trim)
    trimmer = HeapTrimmer()
    first = asyncio.create_task(trimmer.after_session())

    async def first_trim_running() -> bool:
        return len(calls) == 1

    await eventually(first_trim_running)  # the first trim runs in its thread
    await asyncio.gather(*(trimmer.after_session() for _ in range(5)))  # these finish during it
    release.set()
    await first
    assert trimmer.trims == len(calls) == 2, "the five share one more trim, after the first"
    await trimmer.after_session()  # a later session: a trim of its own
    assert trimmer.trims == len(calls) == 3 and calls == [0, 0, 0]
