"""A real HTTP server on 127.0.0.1 (ephemeral port) that replays recorded responses.

    with ReplayServer() as server:
        server.route("/search", Reply(200, body=recorded_json), method="POST")
        server.route("/flaky", Reply(500), Reply(200, body={...}))   # in order; the last one repeats
        server.handle("/echo", lambda request: Reply(200, body=request.query))
        ... point RESEARCH_<NAME>_BASE_URL at server.base_url ...
        server.requests_for("/search")       # RecordedRequest(method, path, query, headers, body, at)

`at` is time.monotonic() when the request arrived (the rate-limit tests measure spacing with it).
Unrouted paths answer 404 `{"error": "no route"}`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Reply:
    status: int = 200
    body: Any = b""  # bytes, str, or a JSON-able object
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    delay_s: float = 0.0

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, bytes):
            return self.body, self.content_type or "application/octet-stream"
        if isinstance(self.body, str):
            return self.body.encode("utf-8"), self.content_type or "text/plain; charset=utf-8"
        return json.dumps(self.body).encode("utf-8"), self.content_type or "application/json"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[RecordedRequest], Reply]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-body (the crawler refusing an oversized page) is expected."""


class ReplayServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._routes: dict[tuple[str, str], list[Reply] | Handler] = {}
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting ------------------------------------------------------------------------------

    def route(self, path: str, *replies: Reply, method: str = "GET") -> None:
        with self._lock:
            self._routes[(method, path)] = list(replies)

    def handle(self, path: str, handler: Handler, method: str = "GET") -> None:
        with self._lock:
            self._routes[(method, path)] = handler

    def requests_for(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://{self.host}:{self._server.server_address[1]}"

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    # --- serving --------------------------------------------------------------------------------

    def _reply_for(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            target = self._routes.get((request.method, request.path))
            reply = (target.pop(0) if len(target) > 1 else target[0]) if isinstance(target, list) and target else None
        if callable(target):
            return target(request)
        return reply or Reply(404, body={"error": "no route"})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                arrived = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = RecordedRequest(
                    method=self.command,
                    path=parts.path,
                    query=dict(parse_qsl(parts.query, keep_blank_values=True)),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    at=arrived,
                )
                reply = server._reply_for(request)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload, content_type = reply.encoded()
                self.send_response(reply.status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler

    def start(self) -> ReplayServer:
        self._server = _QuietServer((self.host, 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
