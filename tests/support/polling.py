"""Wait for a condition with a deadline, for tests that observe a running session from outside."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

DEFAULT_WITHIN_S = 30.0


async def eventually(
    condition: Callable[[], Awaitable[bool]], *, within_s: float = DEFAULT_WITHIN_S, every_s: float = 0.02
) -> None:
    """Return once `condition()` is true; fail the test (not hang it) if it is still false after `within_s`."""
    deadline = time.monotonic() + within_s
    while not await condition():
        assert time.monotonic() < deadline, f"condition still false after {within_s:g} s"
        await asyncio.sleep(every_s)
