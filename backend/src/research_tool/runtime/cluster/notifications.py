"""One LISTEN connection per process: the wake-ups the database sends on commit (migration 0002's triggers).

Every notification is only a hint to re-read a table (the truth); so a lost one costs a delay, never a wrong
answer. The listener reconnects when its connection drops, and then calls every `on_reconnect` handler,
since notifications sent while it was away are gone. Handlers run on the event loop and must not block:
they set events or schedule work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import psycopg

from research_tool.core.logging import get_logger

log = get_logger(__name__)

EVENTS_CHANNEL = "research_events"  # '<session_id>:<seq>' after an event insert
QUEUE_CHANNEL = "research_queue"  # '<session_id>' when a session becomes claimable
CONTROL_CHANNEL = "research_control"  # 'stop:<id>', 'answers:<id>', 'deleted:<id>'
CHANNELS = (EVENTS_CHANNEL, QUEUE_CHANNEL, CONTROL_CHANNEL)

RECONNECT_MIN_S = 0.2
RECONNECT_MAX_S = 5.0

Handler = Callable[[str], None]


class NotificationListener:
    def __init__(self, conninfo: str, *, connect_timeout_s: float = 5.0) -> None:
        self._conninfo = conninfo
        self._connect_timeout_s = connect_timeout_s
        self._handlers: dict[str, list[Handler]] = {channel: [] for channel in CHANNELS}
        self._on_reconnect: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self.reconnects = 0

    def subscribe(self, channel: str, handler: Handler) -> None:
        self._handlers[channel].append(handler)

    def on_reconnect(self, handler: Callable[[], None]) -> None:
        self._on_reconnect.append(handler)

    async def start(self) -> None:
        """Begin listening; returns once the first LISTEN is in place (or its first attempt failed)."""
        self._task = asyncio.create_task(self._run(), name="pg-listener")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.connected.wait(), timeout=self._connect_timeout_s)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        delay = RECONNECT_MIN_S
        connects = 0
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, connect_timeout=max(1, int(self._connect_timeout_s))
                )
            except psycopg.OperationalError as exc:
                log.warning("listener_connect_failed", error=str(exc), retry_in_s=delay)
                await asyncio.sleep(delay)
                delay = min(RECONNECT_MAX_S, delay * 2)
                continue
            try:
                async with conn:
                    for channel in CHANNELS:
                        await conn.execute(f"LISTEN {channel}")
                    self.connected.set()
                    delay = RECONNECT_MIN_S
                    if connects:
                        self.reconnects += 1
                        log.info("listener_reconnected", reconnects=self.reconnects)
                    connects += 1
                    self._call_all(self._on_reconnect)  # what was sent while nobody listened is gone
                    async for note in conn.notifies():
                        self._dispatch(note.channel, note.payload)
            except psycopg.OperationalError as exc:
                log.warning("listener_connection_lost", error=str(exc))
            finally:
                self.connected.clear()
            await asyncio.sleep(delay)

    def _dispatch(self, channel: str, payload: str) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(payload)
            except Exception:  # one bad handler must not stop the process's wake-ups
                log.exception("listener_handler_failed", channel=channel, payload=payload)

    @staticmethod
    def _call_all(handlers: list[Callable[[], Any]]) -> None:
        for handler in handlers:
            try:
                handler()
            except Exception:
                log.exception("listener_reconnect_handler_failed")
