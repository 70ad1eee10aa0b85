"""A session id in an API path is a plain name (issue 10 item 7): anything else is a 422, not a lookup."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .conftest import LiveApi


async def test_unsafe_session_ids_in_paths_are_refused(api: LiveApi) -> None:
    for bad in ("a.b", "-x", "x" * 65, "a%00b", "a%20b"):
        for method, path in (("GET", "/status"), ("GET", "/report"), ("POST", "/stop"), ("DELETE", "")):
            response = await api.client.request(method, f"/api/research/{bad}{path}")
            assert response.status_code == 422, (bad, path, response.text)
            assert response.json()["error"]["type"] == "validation_error"
    assert (await api.client.get("/api/research/" + "a" * 64 + "/status")).status_code == 404


async def test_unsafe_session_id_on_the_websocket_is_a_bad_request(api: LiveApi) -> None:
    async with connect(f"{api.ws_url}/api/research/a.b/ws") as ws:
        with pytest.raises(ConnectionClosed):
            await ws.recv()
    assert ws.close_code == 4400
