"""A session's events for one live client (WebSocket or SSE): every event with seq > after exactly once,
stored ones first, then live ones, ending after the final event.

While nothing happens it yields `None` every `idle_s` seconds (a heartbeat the transport may send or
skip) and ends on its own when the session has finished or been deleted and nothing is left to send,
so a client never waits forever on a session that will say nothing more. It also ends as soon as the
server starts to shut down (`services.draining`): the transport then sends its closing part (see
`stream_cut_short`), and the client resumes after the restart from its last event id.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from research_tool.models.events import Event
from research_tool.runtime.composition import ResearchServices

DEFAULT_IDLE_S = 15.0
_END = object()


async def _nothing_more(services: ResearchServices, session_id: str, last_seq: int) -> bool:
    if not await services.store.exists(session_id):
        return True
    record = await services.store.get(session_id)
    return record.finished and not await services.events.replay(session_id, last_seq, limit=1)


async def session_events(
    services: ResearchServices, session_id: str, after: int, idle_s: float = DEFAULT_IDLE_S
) -> AsyncIterator[Event | None]:
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in services.events.follow(session_id, after):
                queue.put_nowait(event)
        finally:
            queue.put_nowait(_END)

    async def drain() -> None:
        await services.draining.wait()
        queue.put_nowait(_END)

    task = asyncio.create_task(pump(), name=f"events-{session_id}")
    drain_task = asyncio.create_task(drain(), name=f"events-drain-{session_id}")
    last_seq = after
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=idle_s)
            except TimeoutError:
                if await _nothing_more(services, session_id, last_seq):
                    return
                yield None
                continue
            if not isinstance(item, Event):
                return
            last_seq = item.seq
            yield item
            if item.is_final:
                return
    finally:
        task.cancel()
        drain_task.cancel()
        await asyncio.gather(task, drain_task, return_exceptions=True)


def stream_cut_short(services: ResearchServices) -> bool:
    """Whether a stream of session events ended because the server is shutting down."""
    return services.draining.is_set()
