"""Provider requests wait at their endpoint's gate, not in the shared client's connection pool: at most
`max_in_flight` of one endpoint reach the client (and the server) at once, the rest are parked at the gate,
and every one is answered in the end."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from research_tool.core.errors import ProviderServerError
from research_tool.core.settings import Settings
from research_tool.providers.http_client import create_http_client, pool_limits
from research_tool.providers.provider_http import send
from research_tool.providers.resilience.rate_limiter import DEFAULT_MAX_IN_FLIGHT, RATE_LIMITERS, provider_limiter
from research_tool.providers.search.wikipedia import WikipediaProvider

GATE = 3
REQUESTS = 20


@dataclass
class HeldRequests:
    """Requests the server holds open until `release` is set, with how many it held at once."""

    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    open_now: int = 0
    most_open: int = 0
    answered: int = 0


@contextmanager
def holding_server() -> Iterator[tuple[str, HeldRequests]]:
    held = HeldRequests()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            with held.arrived:
                held.open_now += 1
                held.most_open = max(held.most_open, held.open_now)
                held.arrived.notify_all()
            held.release.wait(30)
            body = b'{"query": {"search": []}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            with held.arrived:
                held.open_now -= 1
                held.answered += 1

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", held
    finally:
        held.release.set()
        server.shutdown()
        server.server_close()


def wait_until_open(held: HeldRequests, count: int) -> None:
    with held.arrived:
        assert held.arrived.wait_for(lambda: held.open_now >= count, timeout=10), held.open_now


async def test_requests_past_the_endpoint_gate_wait_at_the_gate_not_in_the_client_pool() -> None:
    RATE_LIMITERS.max_in_flight = GATE
    try:
        with holding_server() as (url, held):
            settings = Settings(_env_file=None, wikipedia_base_url=url, wikipedia_rps=1000.0)  # type: ignore[call-arg]
            async with create_http_client(GATE) as client:
                provider = WikipediaProvider(settings, client)
                limiter = provider_limiter(provider)
                calls = [
                    asyncio.create_task(send(provider, "GET", f"{url}/w/api.php", params={"n": i}))
                    for i in range(REQUESTS)
                ]
                await asyncio.to_thread(wait_until_open, held, GATE)

                assert limiter.in_flight == GATE, "only the requests past the gate are in the client"
                assert held.open_now == GATE

                held.release.set()
                responses = await asyncio.gather(*calls)
        assert [r.status_code for r in responses] == [200] * REQUESTS
        assert held.most_open == GATE and held.answered == REQUESTS
        assert limiter.in_flight == 0
    finally:
        RATE_LIMITERS.max_in_flight = DEFAULT_MAX_IN_FLIGHT


def test_the_pool_holds_every_request_the_gates_let_through_and_keeps_them_alive() -> None:
    limits = pool_limits(10)
    assert limits.max_connections is not None and limits.max_connections >= 10 * 9
    assert limits.max_keepalive_connections == limits.max_connections


def test_the_settings_default_is_the_gates_default() -> None:
    # one figure in two layers (core cannot import providers): the server and a bare limiter gate alike
    assert Settings(_env_file=None).provider_max_in_flight == DEFAULT_MAX_IN_FLIGHT


async def test_a_refused_connection_is_a_connection_failure_not_a_timeout() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = Settings(_env_file=None, wikipedia_base_url=url, wikipedia_rps=1000.0)  # type: ignore[call-arg]
    async with create_http_client() as client:
        provider = WikipediaProvider(settings, client)
        with pytest.raises(ProviderServerError) as failed:
            await send(provider, "GET", f"{url}/w/api.php")
    assert failed.value.status == 0 and "ConnectError" in failed.value.message
