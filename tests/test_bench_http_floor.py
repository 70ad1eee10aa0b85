"""The do-nothing app the scale benchmark measures the HTTP stack's floor with answers a start the way the
server does (202 with a session id, body read to its end) and /healthz with 200."""

from __future__ import annotations

import httpx

from research_tool.bench.http_floor import app


async def test_a_start_is_read_and_answered_202_with_a_session_id() -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://floor") as client:
        started = await client.post("/api/research/start", json={"query": "q" * 5000})
        health = await client.get("/healthz")
    assert started.status_code == 202 and started.json()["session_id"]
    assert health.status_code == 200
