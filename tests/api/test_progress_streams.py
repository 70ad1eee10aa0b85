"""Live progress over WebSocket and Server-Sent Events: a client that drops at event k and comes back
with after=k gets every later event exactly once, then a normal close after the final event."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from research_tool.api.event_stream import session_events
from tests.support.polling import eventually

from .conftest import LiveApi, SlowWiki, offline_settings, serve, sse_events

K = 4


async def wait_until_logged(api: LiveApi, session_id: str, count: int) -> None:
    """Let the session log more events while the client is away (so some must come from the replay)."""

    async def logged() -> bool:
        return len(await api.services.events.replay(session_id)) >= count

    await eventually(logged)


def assert_exactly_once_in_order(received: list[dict[str, Any]], stored: list[int]) -> None:
    seqs = [e["seq"] for e in received]
    assert seqs == stored == list(range(1, len(stored) + 1))
    assert received[-1]["type"] == "session_completed"
    for event in received:
        assert set(event) == {"seq", "session_id", "ts", "type", "phase", "message", "data"}
        assert event["message"].strip()


@pytest.mark.slow
async def test_websocket_reconnect_with_after_gets_every_later_event_once(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(0.3) as (url, _):
        async with serve(offline_settings(tmp_path / "data", url)) as api:
            sid = await api.start()
            async with connect(f"{api.ws_url}/api/research/{sid}/ws?after=0") as ws:
                first = [json.loads(await ws.recv()) for _ in range(K)]
            await wait_until_logged(api, sid, K + 3)

            async with connect(f"{api.ws_url}/api/research/{sid}/ws?after={K}") as ws:
                rest = [json.loads(message) async for message in ws]
                assert ws.close_code == 1000

            stored = [e.seq for e in await api.services.events.replay(sid)]
            assert_exactly_once_in_order(first + rest, stored)
            assert rest[0]["seq"] == K + 1

            # after the end: a late client gets the tail and a normal close
            async with connect(f"{api.ws_url}/api/research/{sid}/ws?after={stored[-2]}") as ws:
                tail = [json.loads(message) async for message in ws]
                assert ws.close_code == 1000
            assert [e["seq"] for e in tail] == [stored[-1]]


@pytest.mark.slow
async def test_sse_reconnect_with_after_gets_every_later_event_once(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(0.3) as (url, _):
        async with serve(offline_settings(tmp_path / "data", url)) as api:
            sid = await api.start()
            first: list[dict[str, Any]] = []
            async with api.client.stream("GET", f"/api/research/{sid}/events", params={"after": 0}) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                buffer = ""
                async for chunk in response.aiter_text():
                    buffer += chunk
                    first = sse_events(buffer.rsplit("\n\n", 1)[0] + "\n\n") if "\n\n" in buffer else []
                    if len(first) >= K:
                        break
            first = first[:K]
            await wait_until_logged(api, sid, K + 3)

            rest_body = await api.client.get(f"/api/research/{sid}/events", params={"after": K})
            rest = sse_events(rest_body.text)
            stored = [e.seq for e in await api.services.events.replay(sid)]
            assert_exactly_once_in_order(first + rest, stored)
            # the last frame names the final event and its seq (SSE fields may come in any order)
            final_frame = rest_body.text.rstrip("\n").rsplit("\n\n", 1)[-1].splitlines()
            assert f"id: {stored[-1]}" in final_frame and "event: session_completed" in final_frame

            # the browser's EventSource reconnects with Last-Event-ID instead of a query parameter
            resumed = await api.client.get(f"/api/research/{sid}/events", headers={"Last-Event-ID": str(K)})
            assert [e["seq"] for e in sse_events(resumed.text)] == stored[K:]


async def test_websocket_follows_a_session_live_from_the_start(api: LiveApi) -> None:
    sid = await api.start()
    async with connect(f"{api.ws_url}/api/research/{sid}/ws") as ws:
        received = [json.loads(message) async for message in ws]
        assert ws.close_code == 1000
    stored = [e.seq for e in await api.services.events.replay(sid)]
    assert_exactly_once_in_order(received, stored)
    messages = " ".join(e["message"] for e in received)
    assert "Searching wikipedia for" in messages


async def test_sse_of_an_unknown_session_is_404_before_streaming(api: LiveApi) -> None:
    response = await api.client.get("/api/research/nope/events")
    assert response.status_code == 404 and response.json()["error"]["type"] == "not_found"


async def test_streams_end_when_the_session_is_deleted(tmp_path: Path, slow_wiki: SlowWiki) -> None:
    with slow_wiki(5.0) as (url, _):
        async with serve(offline_settings(tmp_path / "data", url)) as api:
            sid = await api.start()
            await api.wait_event(sid, "provider_search")
            stream = session_events(api.services, sid, after=0, idle_s=0.1)
            seen = [event async for event in _until_idle(stream)]
            assert seen and all(e is not None for e in seen)
            assert (await api.client.delete(f"/api/research/{sid}")).status_code == 204
            leftovers = await asyncio.wait_for(_drain(stream), timeout=5)
            assert all(e is None for e in leftovers)


async def _until_idle(stream: Any) -> Any:
    async for event in stream:
        if event is None:
            return
        yield event


async def _drain(stream: Any) -> list[Any]:
    return [event async for event in stream]
