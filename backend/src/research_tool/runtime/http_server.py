"""Serving the app with uvicorn, bounded against slow and numerous clients.

What uvicorn offers and what it does not:
- `timeout_keep_alive` closes a connection idle *between* requests; `limit_concurrency` answers 503 to
  requests that arrive while too many connections or tasks are open. Neither bounds a client that
  opens a connection and never finishes its request headers: uvicorn arms no timer before the first
  request, and every byte received cancels the keep-alive timer, so 1,100 such clients held every
  file descriptor of a `ulimit -n 1024` server for as long as they liked.
- So the HTTP protocol here is uvicorn's httptools protocol plus three bounds: the request line and
  headers must be complete within `RESEARCH_HEADER_TIMEOUT_S` of the connection opening (or of the
  previous response on a keep-alive connection), or the connection is closed; they may not exceed
  MAX_HEAD_BYTES (httptools buffers any amount: 431); and a connection over `RESEARCH_MAX_CONNECTIONS`
  (by default half the open-file limit) is closed as soon as it is accepted, so the process always keeps
  file descriptors for its databases and outgoing requests. `limit_concurrency` (twice that number) is only a backstop.

Slots go to whoever needs one, not to whoever holds the most (issue 22: 400 slow-header sockets of one
client with a limit of 200 locked `/healthz` out for the whole header timeout; 200 idle WebSockets held
every slot for good). A connection is *idle* while it waits for a request's headers (a new or keep-alive
connection) and, for a WebSocket, once it has carried no message either way for WS_IDLE_GRACE_S. Each
client address may keep at most a quarter of the slots idle (`idle_per_client`): past that its own oldest
connection idle for IDLE_GRACE_S is closed (issue 32: a just-accepted socket is idle until its first read, and a
burst of 16 requests from one address lost 11 below the limit). A connection waiting for the body its headers
announced is idle too, and closed when no byte of it came for `RESEARCH_HEADER_TIMEOUT_S` (issue 32: headers
and then nothing held a slot for good); once its body is arriving it is busy, idle again after IDLE_GRACE_S
without a byte (issue 45: uploads were closed mid-body to make room). The header budget and deadline hold for
every request on a connection, also one pipelined behind a request still in flight (issue 45: behind an open
SSE stream a header grew without limit). And a connection over the limit is not refused while an idle one exists: the
oldest idle connection of the client holding the most idle ones is closed in its place. With no
RESEARCH_API_TOKEN, a WebSocket that carried no message for RESEARCH_WS_IDLE_TIMEOUT_S is closed (1001,
"idle"; the page reconnects with `?after=`): with a token, the handshake already needs it.

Busy connections (a request in progress, an SSE stream, a WebSocket carrying events) are never closed to
make room; on a network you do not trust, still put a reverse proxy with per-client limits in front (nginx
`limit_conn` + `client_header_timeout`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import resource
import socket
import time
from typing import Any, ClassVar, Protocol

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings, secret_value

log = get_logger(__name__)

APP_FACTORY = "research_tool.api.app:create_app"
# On a loopback --host: the same app, and a page of this machine (a local chat UI) may call it cross-origin.
LOOPBACK_APP_FACTORY = "research_tool.api.app:create_loopback_app"
KEEP_ALIVE_S = 5
GRACEFUL_SHUTDOWN_S = 3.0  # SIGTERM: what is still open this long after it is cancelled (exit well within 5 s)
DEFAULT_MAX_CONNECTIONS = 4096
CLOSE_GOING_AWAY = 1001


# A request's line and headers (plus whatever body bytes share their reads) may not exceed this. httptools
# sets no limit: 16 MB of headers were buffered and answered. asyncio reads at most 256 KiB at a time, so a
# request whose headers fit in one read is never refused for the body bytes that came with them.
MAX_HEAD_BYTES = 256 * 1024
_TOO_LARGE_BODY = (
    b'{"error": {"type": "headers_too_large", "message": "request headers too large", "retryable": false}}'
)
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_TOO_LARGE_BODY), _TOO_LARGE_BODY)
)


class IdleConnection(Protocol):
    def close_idle(self) -> None:
        """Close this idle connection to make room for another."""
        ...


def client_host(client: tuple[str, int] | None) -> str:
    return client[0] if client else "?"


# A connection must have been idle this long before its client's share of idle slots can close it: a burst of
# requests from one address (every client of a reverse proxy shares its address) opens many connections at
# once, each idle until the server first reads it, and none of them may be lost below the limit (issue 32).
IDLE_GRACE_S = 1.0


class ConnectionSlots:
    """One server's idle connections, by client address (oldest first), and the choice of which to close."""

    def __init__(self, max_connections: int, idle_grace_s: float = IDLE_GRACE_S) -> None:
        self.max_connections = max_connections
        self.idle_per_client = max(1, max_connections // 4)
        self.idle_grace_s = idle_grace_s
        self._idle: dict[str, dict[IdleConnection, float]] = {}  # insertion-ordered: connection -> idle since
        self._closing: set[IdleConnection] = set()  # closed to make room, still counted until they are gone

    def idle(self, host: str, connection: IdleConnection) -> None:
        held = self._idle.setdefault(host, {})
        if connection not in held:
            held[connection] = time.monotonic()

    def busy(self, host: str, connection: IdleConnection) -> None:
        held = self._idle.get(host)
        if held is not None:
            held.pop(connection, None)
            if not held:
                del self._idle[host]

    def gone(self, host: str, connection: IdleConnection) -> None:
        self.busy(host, connection)
        self._closing.discard(connection)

    def held_idle(self, host: str) -> int:
        return len(self._idle.get(host, ()))

    def make_room(self, host: str, newcomer: IdleConnection, open_connections: int) -> bool:
        """Called as `newcomer` (already counted in `open_connections`) arrives from `host`: close the client's
        oldest idle connection past its share, and one idle connection when the server is over its limit.
        False when the server is over its limit and nothing could be closed (the newcomer must go)."""
        if self.held_idle(host) > self.idle_per_client:
            self._close_oldest(host, newcomer, idle_before=time.monotonic() - self.idle_grace_s)
        if open_connections - len(self._closing) <= self.max_connections:
            return True
        holders = sorted(self._idle, key=lambda h: len(self._idle[h]) - (newcomer in self._idle[h]), reverse=True)
        return any(self._close_oldest(h, newcomer) for h in holders)

    def _close_oldest(self, host: str, spare: IdleConnection, idle_before: float | None = None) -> bool:
        for connection, since in self._idle.get(host, {}).items():
            if idle_before is not None and since > idle_before:
                return False  # the oldest left is within its grace, and so is every later one
            if connection is not spare:
                self.busy(host, connection)
                self._closing.add(connection)
                log.info("idle_connection_closed_for_room", client=host, idle_held=self.held_idle(host) + 1)
                connection.close_idle()
                return True
        return False


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header-read deadline, a header size limit and a connection cap."""

    header_timeout_s: ClassVar[float] = 10.0
    max_connections: ClassVar[int] = 512
    slots: ClassVar[ConnectionSlots] = ConnectionSlots(512)

    _header_deadline: asyncio.TimerHandle | None = None
    _body_deadline: asyncio.TimerHandle | None = None
    _body_quiet: asyncio.TimerHandle | None = None
    _last_body_byte = 0.0
    _head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()  # idle until its headers are in
        if not self.slots.make_room(client_host(self.client), self, len(self.connections)):
            log.warning("connection_refused_over_limit", open_connections=len(self.connections) - 1)
            self._cancel_header_deadline()
            transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        self._cancel_body_deadline()
        self.slots.gone(client_host(self.client), self)
        super().connection_lost(exc)

    def close_idle(self) -> None:
        self._cancel_header_deadline()
        self._cancel_body_deadline()
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._header_deadline is not None:  # reading a request's line and headers, in flight or not
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._cancel_header_deadline()
                log.info("connection_closed_headers_too_large", client=str(self.client), bytes=self._head_bytes)
                if not self._responding():  # never a 431 in the middle of another response (an SSE stream)
                    self.transport.write(_TOO_LARGE)
                self.transport.close()
                return
        super().data_received(data)

    def _responding(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # A request pipelined behind one still in flight (an open SSE stream): its headers get the same budget
        # and deadline as any (issue 45: 96 MB of one header were buffered), but the connection is not idle.
        if self._header_deadline is None:
            self._arm_header_deadline(idle=False)

    def on_headers_complete(self) -> None:
        self._cancel_header_deadline()
        super().on_headers_complete()
        if self._expects_body():
            self._arm_body_deadline()  # idle again until its body is in (issue 32: headers, then nothing)

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        if self._body_deadline is not None:  # progress: the deadline counts from the latest bytes
            self._last_body_byte = time.monotonic()
            self._arm_body_deadline(idle=False)  # a body arriving is activity (issue 45: uploads were closed)
            if self._body_quiet is None:
                self._body_quiet = self.loop.call_later(self.slots.idle_grace_s, self._check_body_quiet)

    def on_message_complete(self) -> None:
        self._cancel_body_deadline()
        super().on_message_complete()

    def _expects_body(self) -> bool:
        if self.parser.should_upgrade():
            return False
        for name, value in self.headers:
            if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
                return True
        return False

    def _arm_body_deadline(self, *, idle: bool = True) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
        self._body_deadline = self.loop.call_later(self.header_timeout_s, self._body_deadline_passed)
        if idle:
            self.slots.idle(client_host(self.client), self)
        else:
            self.slots.busy(client_host(self.client), self)

    def _check_body_quiet(self) -> None:
        """A body that stopped arriving for IDLE_GRACE_S makes the connection idle again (closable for room)."""
        self._body_quiet = None
        if self._body_deadline is None:
            return
        quiet_s = time.monotonic() - self._last_body_byte
        if quiet_s >= self.slots.idle_grace_s:
            self.slots.idle(client_host(self.client), self)
        else:
            self._body_quiet = self.loop.call_later(self.slots.idle_grace_s - quiet_s, self._check_body_quiet)

    def _cancel_body_deadline(self) -> None:
        if self._body_quiet is not None:
            self._body_quiet.cancel()
            self._body_quiet = None
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None
            self.slots.busy(client_host(self.client), self)

    def _body_deadline_passed(self) -> None:
        self._body_deadline = None
        self.slots.busy(client_host(self.client), self)
        if not self.transport.is_closing():
            log.info("connection_closed_slow_body", client=str(self.client), timeout_s=self.header_timeout_s)
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next request on this keep-alive connection gets a deadline for its headers: a fresh one, or the one
        # its head already runs against when it began behind the response that just ended (then idle again).
        if not self.transport.is_closing() and not self.pipeline:
            self._arm_header_deadline()

    def _arm_header_deadline(self, *, idle: bool = True) -> None:
        if self._header_deadline is None:
            self._head_bytes = 0
            self._header_deadline = self.loop.call_later(self.header_timeout_s, self._header_deadline_passed)
        if idle:
            self.slots.idle(client_host(self.client), self)

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None
            self.slots.busy(client_host(self.client), self)

    def _header_deadline_passed(self) -> None:
        self._header_deadline = None
        self.slots.busy(client_host(self.client), self)
        if not self.transport.is_closing():
            log.info("connection_closed_slow_headers", client=str(self.client), timeout_s=self.header_timeout_s)
            self.transport.close()


# A WebSocket that carried no message either way for this long counts as idle (closable to make room).
WS_IDLE_GRACE_S = 10.0


class BoundedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol whose idle connections give up their slot (ConnectionSlots) and, when
    `idle_timeout_s` is set (no RESEARCH_API_TOKEN), are closed after that long without a message."""

    slots: ClassVar[ConnectionSlots] = ConnectionSlots(512)
    idle_timeout_s: ClassVar[float | None] = None
    idle_grace_s: ClassVar[float] = WS_IDLE_GRACE_S

    _idle_check: asyncio.TimerHandle | None = None
    _last_message = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._active()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_idle_check()
        self.slots.gone(client_host(self.client), self)
        super().connection_lost(exc)

    def send_receive_event_to_app(self) -> None:
        self._active()  # a message from the client (pings and pongs do not count)
        super().send_receive_event_to_app()

    async def send(self, message: Any) -> None:
        if message.get("type") == "websocket.send":
            self._active()
        await super().send(message)

    def close_idle(self, reason: str = "idle") -> None:
        self._stop_idle_check()
        self.slots.busy(client_host(self.client), self)
        if self.transport.is_closing():
            return
        if self.handshake_complete and not self.close_sent:
            self.queue.put_nowait({"type": "websocket.disconnect", "code": CLOSE_GOING_AWAY})
            self.conn.send_close(CLOSE_GOING_AWAY, reason)
            self.transport.write(b"".join(self.conn.data_to_send()))
            self.close_sent = True
        self.transport.close()

    def _active(self) -> None:
        self._last_message = time.monotonic()
        self.slots.busy(client_host(self.client), self)
        if self._idle_check is None:
            self._schedule_idle_check(min(self.idle_grace_s, self.idle_timeout_s or self.idle_grace_s))

    def _schedule_idle_check(self, delay_s: float) -> None:
        self._idle_check = asyncio.get_running_loop().call_later(max(delay_s, 0.01), self._check_idle)

    def _stop_idle_check(self) -> None:
        if self._idle_check is not None:
            self._idle_check.cancel()
            self._idle_check = None

    def _check_idle(self) -> None:
        self._idle_check = None
        if self.transport.is_closing():
            return
        quiet_s = time.monotonic() - self._last_message
        if self.idle_timeout_s is not None and quiet_s >= self.idle_timeout_s:
            log.info("websocket_closed_idle", client=client_host(self.client), idle_s=round(quiet_s, 1))
            self.close_idle()
            return
        later = [] if self.idle_timeout_s is None else [self.idle_timeout_s - quiet_s]
        if quiet_s >= self.idle_grace_s:
            self.slots.idle(client_host(self.client), self)
        else:
            later.append(self.idle_grace_s - quiet_s)
        if later:
            self._schedule_idle_check(min(later))


def connection_limit(settings: Settings, open_files_limit: int | None = None) -> int:
    """`RESEARCH_MAX_CONNECTIONS`, or by default half the process's open-file limit (at most
    DEFAULT_MAX_CONNECTIONS): the other half stays free for the databases and outgoing provider requests.
    A laptop's usual limit of 1,024 gives 512; a server raised to 65,536 gives 4,096."""
    if settings.max_connections is not None:
        return settings.max_connections
    if open_files_limit is None:
        open_files_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if open_files_limit == resource.RLIM_INFINITY:
        return DEFAULT_MAX_CONNECTIONS
    return max(1, min(DEFAULT_MAX_CONNECTIONS, open_files_limit // 2))


def bounded_protocol(settings: Settings, slots: ConnectionSlots | None = None) -> type[BoundedHttpToolsProtocol]:
    """The protocol class with this server's limits (uvicorn builds one instance per connection)."""
    limit = connection_limit(settings)
    return type(
        "ResearchHttpProtocol",
        (BoundedHttpToolsProtocol,),
        {
            "header_timeout_s": settings.header_timeout_s,
            "max_connections": limit,
            "slots": slots or ConnectionSlots(limit),
        },
    )


def bounded_ws_protocol(settings: Settings, slots: ConnectionSlots) -> type[BoundedWebSocketProtocol]:
    """The WebSocket protocol class sharing the HTTP protocol's slots; idle ones time out without a token."""
    no_token = secret_value(settings.api_token) is None
    return type(
        "ResearchWebSocketProtocol",
        (BoundedWebSocketProtocol,),
        {"slots": slots, "idle_timeout_s": settings.ws_idle_timeout_s if no_token else None},
    )


def server_config(settings: Settings, host: str, port: int, **overrides: Any) -> uvicorn.Config:
    slots = ConnectionSlots(connection_limit(settings))
    options: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        "workers": 1,
        "http": bounded_protocol(settings, slots),
        "ws": bounded_ws_protocol(settings, slots),
        "timeout_keep_alive": KEEP_ALIVE_S,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
        # Only a backstop: uvicorn answers 503 once `len(connections) >= limit_concurrency`, counting the new
        # request's own connection and the idle ones closed to make room whose loss the loop (uvloop) has not
        # reported yet. ConnectionSlots already keeps the open connections within the limit.
        "limit_concurrency": 2 * connection_limit(settings),
        **overrides,
    }
    return uvicorn.Config(app_factory(host), **options)


def app_factory(host: str) -> str:
    """The app to serve on `host`: local browser pages may call a loopback-only server (docs/langgraph.md)."""
    return LOOPBACK_APP_FACTORY if is_loopback_host(host) else APP_FACTORY


LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback_host(host: str) -> bool:
    """Whether `--host` binds only this machine's loopback interface (a name other than localhost counts as
    reachable from the network: it could resolve to anything)."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def authenticated(settings: Settings, has_users: bool) -> bool:
    """Whether the server asks every caller who they are: RESEARCH_API_TOKEN, users of its own, or RESEARCH_AUTH."""
    return secret_value(settings.api_token) is not None or has_users or bool(settings.auth)


def open_serving_refusal(
    settings: Settings, host: str, *, allow_unauthenticated: bool, has_users: bool = False
) -> str | None:
    """Why `serve` must not start (one line), or None: a non-loopback host without RESEARCH_API_TOKEN (or users, or
    RESEARCH_AUTH) lets anyone who can reach the port run research and read every session, unless the operator
    says so."""
    if authenticated(settings, has_users) or allow_unauthenticated or is_loopback_host(host):
        return None
    return (
        f"serve --host {host} without RESEARCH_API_TOKEN would let anyone who can reach the port run research "
        "and read every session; set RESEARCH_API_TOKEN or add users (`research-tool users add NAME`), "
        "or pass --allow-unauthenticated if that is what you mean"
    )


def open_serving_warning(
    settings: Settings, host: str, *, allow_unauthenticated: bool, has_users: bool = False
) -> str | None:
    """What `serve --allow-unauthenticated` on a reachable address must say before it starts (one line)."""
    if not allow_unauthenticated or authenticated(settings, has_users) or is_loopback_host(host):
        return None
    return (
        f"serving {host} without RESEARCH_API_TOKEN (--allow-unauthenticated): anyone who can reach the port "
        "can run research and read every session"
    )


def app_draining(app: Any) -> asyncio.Event | None:
    """The `draining` event of the research services of the app uvicorn serves (wrapped in its middlewares)."""
    for _ in range(8):
        services = getattr(getattr(app, "state", None), "services", None)
        if services is not None:
            draining = getattr(services, "draining", None)
            return draining if isinstance(draining, asyncio.Event) else None
        app = getattr(app, "app", None)
        if app is None:
            return None
    return None


class ResearchServer(uvicorn.Server):
    """uvicorn's server that, as soon as it starts to shut down, tells the app to end its open streams (an
    SSE or LangGraph stream follows a session for as long as it runs, up to RESEARCH_CLARIFY_TIMEOUT_S of
    waiting for answers): each ends with a closing part, and uvicorn then waits for no one. What is still
    open after GRACEFUL_SHUTDOWN_S is cancelled (`timeout_graceful_shutdown`)."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        draining = app_draining(self.config.loaded_app)
        if draining is not None:
            draining.set()
        await super().shutdown(sockets)


def run_server(settings: Settings, host: str, port: int) -> None:
    """Blocking: serve the API until interrupted (`research-tool serve`)."""
    ResearchServer(server_config(settings, host, port)).run()
