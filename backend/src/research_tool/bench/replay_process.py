"""The replay server in a process of its own: under the load of a hundred sessions its threads (one per
request, JSON encoding of long extracts) would otherwise compete for the GIL with the client that is
measuring the server's latencies."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from research_tool.bench.server_process import ServerStartError
from research_tool.bench.wiki_replay import PAGE_CHARS

START_TIMEOUT_S = 30.0


@asynccontextmanager
async def replay_process(delay_s: float, page_chars: int = PAGE_CHARS) -> AsyncIterator[str]:
    """Spawn `python -m research_tool.bench.wiki_replay` (pages cut to `page_chars`); yields its base URL;
    kills it on exit."""
    command = [sys.executable, "-m", "research_tool.bench.wiki_replay", "--delay", str(delay_s)]
    process = await asyncio.to_thread(
        subprocess.Popen,
        [*command, "--page-chars", str(page_chars)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), START_TIMEOUT_S)
        except TimeoutError:
            raise ServerStartError("the replay server did not start") from None
        if not line.startswith("http://127.0.0.1:"):
            raise ServerStartError(f"the replay server did not start (exit {process.poll()})")
        yield line.strip()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 10)
        if process.stdout:
            process.stdout.close()
