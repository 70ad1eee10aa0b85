"""DNS rebinding (issue 10 item 4): the server answers only to its own host names, and a browser page from
another origin cannot read the WebSocket or SSE progress streams."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from research_tool.api.app import create_app
from research_tool.api.host_guard import host_of
from research_tool.core.settings import Settings

from .conftest import LiveApi, offline_settings, serve


async def test_foreign_host_header_is_refused(api: LiveApi) -> None:
    port = api.base_url.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", "localhost.evil.example"):
        response = await api.client.get("/healthz", headers={"Host": host})
        assert response.status_code == 400, host
        assert response.json()["error"]["type"] == "host_not_allowed"
        refused = await api.client.post("/api/research/start", json={"query": "x"}, headers={"Host": host})
        assert refused.status_code == 400
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", "LOCALHOST", f"[::1]:{port}"):
        assert (await api.client.get("/healthz", headers={"Host": host})).status_code == 200, host


async def test_allowed_hosts_setting_adds_names_and_wildcards(tmp_path: Path) -> None:
    settings = offline_settings(tmp_path / "data", allowed_hosts="research.example.org, *.lan")
    async with serve(settings) as api:
        for host, status in [
            ("research.example.org", 200),
            ("box.lan:8000", 200),
            ("lan", 400),
            ("example.org", 400),
            ("localhost", 200),
        ]:
            assert (await api.client.get("/healthz", headers={"Host": host})).status_code == status, host


@asynccontextmanager
async def serve_on(address: str, settings: Settings) -> AsyncIterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((address, 0))
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done(), "the server did not start"
            await asyncio.sleep(0.01)
        yield f"http://{address}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=15)
        sock.close()


async def test_the_bound_address_is_an_allowed_host(tmp_path: Path) -> None:
    async with (
        serve_on("127.0.0.2", offline_settings(tmp_path / "data")) as base_url,
        httpx.AsyncClient(base_url=base_url, trust_env=False) as client,
    ):
        assert (await client.get("/healthz")).status_code == 200  # Host: 127.0.0.2:<port>
        assert (await client.get("/healthz", headers={"Host": "evil.example"})).status_code == 400


async def test_websocket_from_a_foreign_origin_is_refused(api: LiveApi) -> None:
    session_id = await api.start()
    await api.wait_status(session_id, "completed")
    url = f"{api.ws_url}/api/research/{session_id}/ws"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, origin="http://evil.example"):  # type: ignore[arg-type]
            pass
    assert refused.value.response.status_code == 403
    assert b"origin_not_allowed" in refused.value.response.body
    for origin in (api.base_url, None):  # the server's own page, or a client that is not a browser
        async with connect(url, origin=origin) as ws:  # type: ignore[arg-type]
            assert await ws.recv()


async def test_sse_from_a_foreign_origin_is_refused(tmp_path: Path, wiki: tuple[str, object]) -> None:
    settings = offline_settings(tmp_path / "data", str(wiki[0]), cors_origins="https://app.example")
    async with serve(settings) as api:
        session_id = await api.start()
        await api.wait_status(session_id, "completed")
        path = f"/api/research/{session_id}/events"
        refused = await api.client.get(path, headers={"Origin": "http://evil.example"})
        assert refused.status_code == 403
        assert refused.json()["error"]["type"] == "origin_not_allowed"
        for headers in ({"Origin": api.base_url}, {"Origin": "https://app.example"}, {}):
            assert (await api.client.get(path, headers=headers)).status_code == 200, headers
        # Other routes keep their CORS behaviour: the origin check guards the streams only.
        assert (await api.client.get("/healthz", headers={"Origin": "http://evil.example"})).status_code == 200


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("localhost:8000", "localhost"),
        ("[::1]:8000", "::1"),
        ("[::1]", "::1"),
        ("Example.ORG", "example.org"),
        ("", None),
        ("a b", None),
        ("host:port", None),
        ("[::1", None),
        ("evil.example@127.0.0.1", None),
    ],
)
def test_host_header_parsing(header: str, host: str | None) -> None:
    assert host_of(header) == host
