"""Per-key locks (issue 32 items 1 and 12): a task that takes a key it already holds gets an error at once
instead of waiting for itself for good, and a key's lock is kept only while someone holds or waits for it."""

from __future__ import annotations

import asyncio

import pytest

from research_tool.core.errors import ReentrantLockError
from research_tool.core.keyed_locks import KeyedLocks


async def test_a_reentry_raises_instead_of_hanging() -> None:
    locks = KeyedLocks()
    async with locks.hold("t"):
        with pytest.raises(ReentrantLockError):
            async with locks.hold("t"):
                pass
        async with locks.hold("other"):
            assert len(locks) == 2
    assert len(locks) == 0


async def test_waiters_are_served_in_turn_and_nothing_is_kept() -> None:
    locks = KeyedLocks()
    inside: list[int] = []
    order: list[int] = []

    async def use(n: int) -> None:
        async with locks.hold("t"):
            inside.append(n)
            assert len(inside) == 1
            await asyncio.sleep(0)
            order.append(n)
            inside.remove(n)

    await asyncio.gather(*(use(n) for n in range(50)))
    assert sorted(order) == list(range(50)) and len(locks) == 0
