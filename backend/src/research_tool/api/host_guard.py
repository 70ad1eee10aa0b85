"""DNS-rebinding guard: the `Host` of every request must be one this server answers to, and a browser's
`Origin` on the WebSocket and the SSE stream must be this server itself (or a configured CORS origin).

Binding to 127.0.0.1 does not protect the no-token default by itself: a page on `evil.example`
whose DNS name is rebound to 127.0.0.1 talks to the server with `Host: evil.example`, and any page
may open a WebSocket to `ws://127.0.0.1:8000` (WebSockets are not subject to CORS). So:

- Allowed hosts: `localhost`, `127.0.0.1`, `::1`, the address the connection arrived on (the bound
  address: `--host 192.168.1.5` answers to `Host: 192.168.1.5`), and whatever `RESEARCH_ALLOWED_HOSTS`
  adds (comma-separated names, `*.example.org` wildcards, or `*` for any host behind a proxy that
  checks it). Anything else: 400 `host_not_allowed`.
- Origin: a request with an `Origin` header to the WebSocket or the SSE stream is refused (403
  `origin_not_allowed`) unless the origin is the server's own (`scheme://<Host>`) or listed in
  `RESEARCH_CORS_ORIGINS` (or, served on a loopback address by `research-tool serve`, a page of this machine:
  `http://localhost:<port>`, `http://127.0.0.1:<port>`). Clients that send no Origin (curl, the CLI, httpx)
  are not browsers and pass.

Starlette's TrustedHostMiddleware checks a fixed list and answers in plain text; this one also knows
the bound address and answers with the API's JSON error shape (and a denial response on a WebSocket).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from research_tool.api.errors import error_body
from research_tool.core.logging import get_logger

log = get_logger(__name__)

LOCAL_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
# A page served from this machine over plain http on any port (a local chat UI such as Agent Chat UI on :3000).
# `research-tool serve` on a loopback --host allows these origins by default (api/app.create_loopback_app).
LOCAL_ORIGIN_PATTERN = r"http://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?"
CLOSE_FORBIDDEN = 4403
SSE_PATH = re.compile(r"^/api/research/[^/]+/events/?$")


def parse_allowed_hosts(value: str) -> list[str]:
    """`RESEARCH_ALLOWED_HOSTS` (comma-separated) as lower-case patterns, the local names always included."""
    extra = [h.strip().lower().strip("[]") for h in value.split(",") if h.strip()]
    return list(dict.fromkeys([*LOCAL_HOSTS, *extra]))


def host_of(host_header: str) -> str | None:
    """The host part of a Host header (`name`, `1.2.3.4`, `[::1]`, each with an optional port), lower-case;
    None when the header is not a host at all."""
    value = host_header.strip().lower()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not re.fullmatch(r":\d{1,5}", value[end + 1 :])):
            return None
        return value[1:end]
    name, _, port = value.partition(":")
    if port and not port.isdecimal():
        return None
    if not name or not re.fullmatch(r"[a-z0-9._-]+", name):
        return None
    return name


def _same_address(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


class HostGuardMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        allowed_hosts: Iterable[str],
        cors_origins: Iterable[str] = (),
        *,
        local_origins: bool = False,
    ) -> None:
        self.app = app
        self.allowed = [h.lower() for h in allowed_hosts]
        self.allow_any = "*" in self.allowed
        self.cors_origins = {o.rstrip("/").lower() for o in cors_origins}
        self.local_origins = local_origins

    def host_allowed(self, host: str, scope: Scope) -> bool:
        if self.allow_any:
            return True
        for pattern in self.allowed:
            if host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:])):
                return True
            if _same_address(host, pattern):
                return True
        server = scope.get("server")
        return server is not None and _same_address(host, str(server[0]).lower())

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        normalized = origin.strip().rstrip("/").lower()
        if normalized in self.cors_origins:
            return True
        if self.local_origins and re.fullmatch(LOCAL_ORIGIN_PATTERN, normalized):
            return True
        parts = urlsplit(normalized)
        return parts.scheme in ("http", "https") and parts.netloc == host_header.strip().lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host_header = headers.get("host", "")
        host = host_of(host_header)
        if host is None or not self.host_allowed(host, scope):
            log.warning("request_refused_host", host=host_header[:100], path=scope.get("path", ""))
            message = (
                f"Host {host_header[:100]!r} is not one this server answers to; "
                "add it to RESEARCH_ALLOWED_HOSTS if it is really this server"
            )
            await self._refuse(scope, receive, send, 400, "host_not_allowed", message)
            return
        origin = headers.get("origin")
        guarded = scope["type"] == "websocket" or SSE_PATH.match(scope.get("path", "")) is not None
        if guarded and origin is not None and not self.origin_allowed(origin, host_header):
            log.warning("request_refused_origin", origin=origin[:100], path=scope.get("path", ""))
            message = f"Origin {origin[:100]!r} may not read this stream; add it to RESEARCH_CORS_ORIGINS to allow it"
            await self._refuse(scope, receive, send, 403, "origin_not_allowed", message)
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, error_type: str, message: str) -> None:
        response = JSONResponse(error_body(error_type, message), status_code=status)
        if scope["type"] == "http" or "websocket.http.response" in scope.get("extensions", {}):
            await response(scope, receive, send)  # on a websocket, Starlette sends it as a denial response
        else:
            await send({"type": "websocket.close", "code": CLOSE_FORBIDDEN, "reason": error_type})
