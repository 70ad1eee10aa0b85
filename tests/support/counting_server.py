"""A real HTTP server on 127.0.0.1 that answers every request with one fixed status and body, and counts them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Counter:
    paths: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.paths)


@contextmanager
def counting_server(status: int = 500, body: bytes = b'{"error": "boom"}') -> Iterator[tuple[str, Counter]]:
    counter = Counter()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            with counter.lock:
                counter.paths.append(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", counter
    finally:
        server.shutdown()
        server.server_close()
