"""With RESEARCH_API_TOKEN set, every route but /healthz and the static shells (/, /docs, /redoc and their
assets: tests/api/test_web_routes.py) needs `Authorization: Bearer <token>`: without it or with a wrong one
→ 401 in the JSON error shape; WebSocket handshakes are refused unless the header or the `bearer.`
subprotocol a browser can send carries the token."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from research_tool.bench.wiki_replay import WikiReplay

from .conftest import OK_BODY, LiveApi, offline_settings, serve

TOKEN = "s3cret-token-for-tests"
SID = "0123456789abcdef0123456789abcdef"

ROUTES: list[tuple[str, str, Any]] = [
    ("POST", "/api/research/start", OK_BODY),
    ("GET", "/api/research", None),
    ("GET", f"/api/research/{SID}/status", None),
    ("POST", f"/api/research/{SID}/stop", None),
    ("POST", f"/api/research/{SID}/clarify", {"answers": ["a"]}),
    ("GET", f"/api/research/{SID}/report", None),
    ("DELETE", f"/api/research/{SID}", None),
    ("GET", f"/api/research/{SID}/events", None),
    ("POST", "/run", OK_BODY),
    ("GET", "/metrics", None),
    ("GET", "/openapi.json", None),
    ("GET", "/api/providers", None),
]
BAD_HEADERS: list[tuple[str, dict[str, str]]] = [
    ("no header", {}),
    ("wrong token", {"Authorization": "Bearer not-the-token"}),
    ("wrong scheme", {"Authorization": f"Basic {TOKEN}"}),
    ("bearer without a token", {"Authorization": "Bearer"}),
]


@pytest.fixture
async def secured(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> AsyncIterator[LiveApi]:
    async with serve(offline_settings(tmp_path / "data", wiki[0], api_token=TOKEN)) as live:
        yield live


async def test_every_route_but_healthz_needs_the_token(secured: LiveApi) -> None:
    for method, path, body in ROUTES:
        for label, headers in BAD_HEADERS:
            response = await secured.client.request(method, path, json=body, headers=headers)
            assert response.status_code == 401, (method, path, label, response.text)
            assert response.json()["error"]["type"] == "unauthorized"
            assert response.headers["www-authenticate"] == "Bearer"
    # issue 43: the message names both headers (Agent Chat UI sends X-Api-Key), on the API and at /mcp alike
    for method, path in (("GET", "/api/research"), ("POST", "/mcp")):
        missing = await secured.client.request(method, path, json={})
        message = missing.json()["error"]["message"]
        assert "Authorization: Bearer" in message and "X-Api-Key" in message, message
    healthz = await secured.client.get("/healthz")
    assert healthz.status_code == 200 and healthz.json() == {"status": "ok"}


async def test_the_right_token_opens_every_route(secured: LiveApi) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for method, path, body in ROUTES:
        if path == "/run":
            continue  # runs a whole session; covered below through /start
        response = await secured.client.request(method, path, json=body, headers=auth)
        assert response.status_code != 401, (method, path, response.text)
    started = await secured.client.post("/api/research/start", json=OK_BODY, headers=auth)
    assert started.status_code == 202
    assert "/api/research/{session_id}/status" in (await secured.client.get("/openapi.json", headers=auth)).text


async def test_websocket_without_the_token_is_refused_at_the_handshake(secured: LiveApi) -> None:
    url = f"{secured.ws_url}/api/research/{SID}/ws"
    for _, headers in BAD_HEADERS:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url, additional_headers=headers):
                pass
        assert refused.value.response.status_code == 401
    async with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        await ws.wait_closed()
    assert ws.close_code == 4404  # past the handshake: the id is what is wrong now


async def test_cors_is_off_by_default_and_allows_configured_origins(
    tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    async with serve(offline_settings(tmp_path / "a", wiki[0])) as api:
        response = await api.client.options("/api/research/start", headers=preflight)
        assert "access-control-allow-origin" not in response.headers
    settings = offline_settings(tmp_path / "b", wiki[0], api_token=TOKEN, cors_origins="https://app.example")
    async with serve(settings) as api:
        response = await api.client.options("/api/research/start", headers=preflight)
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "https://app.example"
        assert "authorization" in response.headers["access-control-allow-headers"].lower()
        other = await api.client.options("/api/research/start", headers={**preflight, "Origin": "https://evil.example"})
        assert other.headers.get("access-control-allow-origin") != "https://evil.example"
        denied = await api.client.get("/api/research", headers={"Origin": "https://app.example"})
        assert denied.status_code == 401
        assert denied.headers["access-control-allow-origin"] == "https://app.example"


def token_subprotocol(token: str) -> str:
    return "bearer." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


async def test_websocket_takes_the_token_as_a_subprotocol(secured: LiveApi) -> None:
    """Browsers cannot set headers on a WebSocket: the page offers `research-tool` and `bearer.<base64url>`."""
    url = f"{secured.ws_url}/api/research/{SID}/ws"
    for wrong in ("not-the-token", "", TOKEN + "x"):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url, subprotocols=["research-tool", token_subprotocol(wrong)]):  # type: ignore[list-item]
                pass
        assert refused.value.response.status_code == 401
    with pytest.raises(InvalidStatus):  # the token alone, without the protocol name, is not taken
        async with connect(url, subprotocols=[token_subprotocol(TOKEN)]):  # type: ignore[list-item]
            pass
    async with connect(url, subprotocols=["research-tool", token_subprotocol(TOKEN)]) as ws:  # type: ignore[list-item]
        assert ws.subprotocol == "research-tool"
        await ws.wait_closed()
    assert ws.close_code == 4404  # authorized, then told the session is unknown
