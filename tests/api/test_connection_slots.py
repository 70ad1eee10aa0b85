"""Connection slots go to whoever needs one (issue 22): slow-header sockets of one client over
RESEARCH_MAX_CONNECTIONS used to lock `/healthz` out for the whole header timeout; now the client's oldest
idle connections give way. With no token, a WebSocket that carries no message is closed after
RESEARCH_WS_IDLE_TIMEOUT_S (1001), so idle WebSockets cannot hold slots for good. A real `research-tool serve`
subprocess on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from research_tool.core.settings import PROVIDER_NAMES
from tests.conftest import FOREIGN_ENV
from tests.support.servers import serving_until_sigterm

from .conftest import CLOSED_PORT_URL, OK_BODY, SlowWiki, free_socket

MAX_CONNECTIONS = 20
SLOW_CLIENTS = 40
HEADER_TIMEOUT_S = 30.0  # far longer than the test: only room-making can let /healthz in
WS_IDLE_TIMEOUT_S = 1.0
Server = Callable[..., AbstractAsyncContextManager[str]]


@pytest.fixture
def server(tmp_path: Path) -> Server:
    @asynccontextmanager
    async def serving(**settings: str) -> AsyncIterator[str]:
        port = free_socket().getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV and not k.startswith("RESEARCH_")}
        env.update({f"RESEARCH_{n.upper()}_BASE_URL": CLOSED_PORT_URL for n in PROVIDER_NAMES if n != "local"})
        env.update(
            RESEARCH_DATA_DIR=str(tmp_path / "data"),
            RESEARCH_LLM="offline",
            RESEARCH_CPU_WORKERS="0",
            RESEARCH_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S),
            RESEARCH_MAX_CONNECTIONS=str(MAX_CONNECTIONS),
            RESEARCH_WS_IDLE_TIMEOUT_S=str(WS_IDLE_TIMEOUT_S),
            **{f"RESEARCH_{k.upper()}": v for k, v in settings.items()},
        )
        async with serving_until_sigterm(env, tmp_path, port) as url:
            yield url

    return serving


async def slow_header_socket(port: int) -> asyncio.StreamWriter:
    """A connection that sent part of a request's headers and will never send the rest."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    await writer.drain()
    return writer


@pytest.mark.slow
async def test_one_clients_slow_header_sockets_do_not_lock_out_healthz(server: Server) -> None:
    async with server() as url:
        port = int(url.rsplit(":", 1)[1])
        held = [await slow_header_socket(port) for _ in range(SLOW_CLIENTS)]
        try:
            started = time.monotonic()
            async with httpx.AsyncClient(trust_env=False) as client:
                response = await client.get(f"{url}/healthz", timeout=HEADER_TIMEOUT_S)
            assert response.status_code == 200
            assert time.monotonic() - started < 5.0, "answered only once the slow sockets timed out"
        finally:
            for writer in held:
                writer.close()


async def drain(ws: ClientConnection) -> None:
    """Read messages until the server closes the connection (raises ConnectionClosed)."""
    while True:
        await ws.recv()


@pytest.mark.slow
async def test_without_a_token_an_idle_websocket_is_closed(server: Server, slow_wiki: SlowWiki) -> None:
    with slow_wiki(30.0) as (wiki_url, _):  # every search hangs: the session sends nothing for a long while
        async with server(wikipedia_base_url=wiki_url) as url, httpx.AsyncClient(base_url=url, trust_env=False) as api:
            started = await api.post("/api/research/start", json=OK_BODY)
            assert started.status_code == 202, started.text
            sid = started.json()["session_id"]
            ws_url = url.replace("http://", "ws://", 1)
            async with connect(f"{ws_url}/api/research/{sid}/ws?after=0") as ws:
                opened = time.monotonic()
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(drain(ws), timeout=WS_IDLE_TIMEOUT_S + 10)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
                assert time.monotonic() - opened < WS_IDLE_TIMEOUT_S + 8
