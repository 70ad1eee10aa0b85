"""Live events inside one process: the subscribers of each session, and the follow loop both event logs share.

The events table is the truth; the in-process queue is only a fast path. A follower takes a pushed event when
it is the next one it expects (seq = last + 1); anything else (a wake-up from `wake`, or a gap: an event
appended by another process, or pushed out of order) makes it re-read the table after its last seq, so every
event is yielded exactly once and in order.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager

from research_tool.models.events import Event

# What a follower's inbox receives: an event appended by this process, or None ("re-read the table").
Inbox = asyncio.Queue[Event | None]
Replay = Callable[[str, int], Awaitable[list[Event]]]
EndedBy = Callable[[str, int], Awaitable[bool]]


class EventFanout:
    def __init__(self) -> None:
        self._subscribers: dict[str, set[Inbox]] = defaultdict(set)

    @contextmanager
    def subscribe(self, session_id: str) -> Iterator[Inbox]:
        inbox: Inbox = asyncio.Queue()
        self._subscribers[session_id].add(inbox)
        try:
            yield inbox
        finally:
            self._subscribers[session_id].discard(inbox)
            if not self._subscribers[session_id]:
                self._subscribers.pop(session_id, None)

    def publish(self, event: Event) -> None:
        for inbox in list(self._subscribers.get(event.session_id, ())):
            inbox.put_nowait(event)

    def wake(self, session_id: str) -> None:
        """Make the session's local followers re-read the table after their last seq (events appended elsewhere)."""
        for inbox in list(self._subscribers.get(session_id, ())):
            inbox.put_nowait(None)

    def following(self) -> set[str]:
        """Sessions that have a follower in this process."""
        return set(self._subscribers)


async def follow_table(
    fanout: EventFanout, replay: Replay, ended_by: EndedBy, session_id: str, after: int
) -> AsyncIterator[Event]:
    """Every event with seq > after, exactly once and in order: the stored ones, then live ones, until a final
    event."""
    with fanout.subscribe(session_id) as inbox:
        last = after
        for event in await replay(session_id, after):
            last = event.seq
            yield event
            if event.is_final:
                return
        if await ended_by(session_id, last):
            return  # the final event is at or before `after`: nothing more will come
        while True:
            item = await inbox.get()
            if item is not None and item.seq <= last:
                continue
            batch = [item] if item is not None and item.seq == last + 1 else await replay(session_id, last)
            for event in batch:
                last = event.seq
                yield event
                if event.is_final:
                    return
