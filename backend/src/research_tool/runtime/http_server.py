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
  file descriptors for its databases and outgoing requests. `limit_concurrency` is set to the same number.

A flood larger than `RESEARCH_MAX_CONNECTIONS` within one header timeout still delays other clients
for up to that timeout; on a network you do not trust, put a reverse proxy with per-client limits in
front (nginx `limit_conn` + `client_header_timeout`), as the README says.
"""

from __future__ import annotations

import asyncio
import ipaddress
import resource
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings, secret_value

log = get_logger(__name__)

APP_FACTORY = "research_tool.api.app:create_app"
KEEP_ALIVE_S = 5
DEFAULT_MAX_CONNECTIONS = 4096


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


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header-read deadline, a header size limit and a connection cap."""

    header_timeout_s: ClassVar[float] = 10.0
    max_connections: ClassVar[int] = 512

    _header_deadline: asyncio.TimerHandle | None = None
    _head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            log.warning("connection_refused_over_limit", open_connections=len(self.connections) - 1)
            transport.abort()
            return
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._header_deadline is not None:  # still reading a request's line and headers
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._cancel_header_deadline()
                log.info("connection_closed_headers_too_large", client=str(self.client), bytes=self._head_bytes)
                self.transport.write(_TOO_LARGE)
                self.transport.close()
                return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._cancel_header_deadline()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next request on this keep-alive connection gets a fresh deadline for its headers.
        if not self.transport.is_closing() and not self.pipeline:
            self._arm_header_deadline()

    def _arm_header_deadline(self) -> None:
        self._cancel_header_deadline()
        self._head_bytes = 0
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._header_deadline_passed)

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _header_deadline_passed(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            log.info("connection_closed_slow_headers", client=str(self.client), timeout_s=self.header_timeout_s)
            self.transport.close()


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


def bounded_protocol(settings: Settings) -> type[BoundedHttpToolsProtocol]:
    """The protocol class with this server's limits (uvicorn builds one instance per connection)."""
    return type(
        "ResearchHttpProtocol",
        (BoundedHttpToolsProtocol,),
        {"header_timeout_s": settings.header_timeout_s, "max_connections": connection_limit(settings)},
    )


def server_config(settings: Settings, host: str, port: int, **overrides: Any) -> uvicorn.Config:
    options: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        "workers": 1,
        "http": bounded_protocol(settings),
        "timeout_keep_alive": KEEP_ALIVE_S,
        "limit_concurrency": connection_limit(settings),
        **overrides,
    }
    return uvicorn.Config(APP_FACTORY, **options)


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


def open_serving_refusal(settings: Settings, host: str, *, allow_unauthenticated: bool) -> str | None:
    """Why `serve` must not start (one line), or None: a non-loopback host without RESEARCH_API_TOKEN lets
    anyone who can reach the port run research and read every session, unless the operator says so."""
    if secret_value(settings.api_token) is not None or allow_unauthenticated or is_loopback_host(host):
        return None
    return (
        f"serve --host {host} without RESEARCH_API_TOKEN would let anyone who can reach the port run research "
        "and read every session; set RESEARCH_API_TOKEN, or pass --allow-unauthenticated if that is what you mean"
    )


def run_server(settings: Settings, host: str, port: int) -> None:
    """Blocking: serve the API until interrupted (`research-tool serve`)."""
    uvicorn.Server(server_config(settings, host, port)).run()
