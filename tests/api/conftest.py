"""Fixtures for the HTTP API tests: Settings pointed at a Wikipedia replay server on 127.0.0.1 (every
other provider at a closed port, so nothing ever leaves the machine), and the app served by a real
uvicorn inside the test's event loop (HTTP, SSE and WebSocket over loopback)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from research_tool.api.app import create_app
from research_tool.bench.wiki_replay import Page, WikiReplay, build_pages, running_wiki
from research_tool.core.settings import PROVIDER_NAMES, Settings
from research_tool.runtime.composition import ResearchServices
from research_tool.runtime.http_server import ResearchServer

CLOSED_PORT_URL = "http://127.0.0.1:9"  # the discard port: nothing listens, connections are refused at once
QUESTION = "How do I run a subprocess with a timeout and capture its output?"
OK_BODY = {"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"}
WAIT_S = 30.0
PAGE_CHARS = 3000
SlowWiki = Callable[[float], AbstractContextManager[tuple[str, WikiReplay]]]


def offline_settings(data_dir: Path, wiki_url: str = CLOSED_PORT_URL, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        f"{name}_base_url": CLOSED_PORT_URL for name in PROVIDER_NAMES if name not in ("wikipedia", "local")
    }
    values.update(
        data_dir=data_dir,
        llm="offline",
        log_level="WARNING",
        wikipedia_base_url=wiki_url,
        wikipedia_rps=500.0,
        max_concurrent_sessions=3,
        clarify_timeout_s=30.0,
        run_timeout_s=30.0,
    )
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class LiveApi:
    """The app served on 127.0.0.1, with an HTTP client and small helpers the tests share."""

    app: FastAPI
    base_url: str
    client: httpx.AsyncClient
    polls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ws_url(self) -> str:
        return self.base_url.replace("http://", "ws://", 1)

    @property
    def services(self) -> ResearchServices:
        services: ResearchServices = self.app.state.services
        return services

    async def start(self, **body: Any) -> str:
        payload = {**OK_BODY, **body}
        response = await self.client.post("/api/research/start", json=payload)
        assert response.status_code == 202, response.text
        return str(response.json()["session_id"])

    async def status(self, session_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/api/research/{session_id}/status")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def wait_for(
        self, session_id: str, predicate: Callable[[dict[str, Any]], bool], within_s: float = WAIT_S
    ) -> dict[str, Any]:
        deadline = time.monotonic() + within_s
        while True:
            status = await self.status(session_id)
            if predicate(status):
                return status
            assert time.monotonic() < deadline, f"gave up waiting; last status: {status}"
            await asyncio.sleep(0.05)

    async def wait_status(self, session_id: str, *statuses: str, within_s: float = WAIT_S) -> dict[str, Any]:
        def reached(status: dict[str, Any]) -> bool:
            if status["status"] in statuses:
                return True
            assert status["status"] not in ("completed", "failed"), f"session ended otherwise: {status}"
            return False

        return await self.wait_for(session_id, reached, within_s)

    async def wait_event(self, session_id: str, event_type: str, within_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + within_s
        while not any(e.type == event_type for e in await self.services.events.replay(session_id)):
            assert time.monotonic() < deadline, f"no {event_type} event for {session_id}"
            await asyncio.sleep(0.02)

    async def report(self, session_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/api/research/{session_id}/report", params={"format": "json"})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


@asynccontextmanager
async def serve(settings: Settings, headers: dict[str, str] | None = None) -> AsyncIterator[LiveApi]:
    app = create_app(settings)
    sock = free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3)
    server = ResearchServer(config)  # as `serve` runs it: open streams end when it shuts down
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done(), "the server did not start"
            await asyncio.sleep(0.01)
        base_url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30.0, trust_env=False) as client:
            yield LiveApi(app=app, base_url=base_url, client=client)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=15)
        sock.close()


@pytest.fixture(scope="session")
def wiki_pages() -> list[Page]:
    """The replay server's corpus (pydoc text of a few stdlib modules), rendered once and cut short:
    the API tests need real text, not much of it (the offline engine's work grows with it)."""
    return [Page(p.pageid, p.title, p.text[:PAGE_CHARS], p.words) for p in build_pages()]


@pytest.fixture
def slow_wiki(wiki_pages: list[Page]) -> SlowWiki:
    """`with slow_wiki(delay_s) as (url, replay):` a replay server that answers after a delay."""
    return lambda delay_s: running_wiki(delay_s=delay_s, pages=wiki_pages)


@pytest.fixture
def wiki(wiki_pages: list[Page]) -> Iterator[tuple[str, WikiReplay]]:
    with running_wiki(delay_s=0.0, pages=wiki_pages) as served:
        yield served


@pytest.fixture
async def api(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> AsyncIterator[LiveApi]:
    async with serve(offline_settings(tmp_path / "data", wiki[0])) as live:
        yield live


def sse_events(text: str) -> list[dict[str, Any]]:
    """The events of a Server-Sent Events body (comments and keep-alives skipped)."""
    events = []
    for frame in text.split("\n\n"):
        data = [line[len("data: ") :] for line in frame.splitlines() if line.startswith("data: ")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


# A LangGraph-protocol client and a server whose Wikipedia answers slowly (a run stays busy long enough to stop it)
@pytest.fixture
async def slow_api(tmp_path: Path, slow_wiki: SlowWiki) -> AsyncIterator[LiveApi]:
    with slow_wiki(0.25) as (url, _):
        async with serve(offline_settings(tmp_path / "data", url)) as live:
            yield live


def client_of(api: LiveApi) -> LangGraphClient:
    return get_client(url=api.base_url, api_key=None)


async def collecting(api: LiveApi, thread_id: str) -> bool:
    return any(e.type == "phase_started" and e.phase == "collect" for e in await api.services.events.replay(thread_id))


async def sse_on_a_session_asking(url: str) -> tuple[str, asyncio.StreamReader, asyncio.StreamWriter]:
    """A session waiting for clarification and its SSE stream, open on a raw connection (headers read)."""
    async with httpx.AsyncClient(trust_env=False) as client:
        started = await client.post(f"{url}/api/research/start", json={**OK_BODY, "query": "Python", "clarify": True})
        assert started.status_code == 202, started.text
        sid = started.json()["session_id"]
    port = int(url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /api/research/{sid}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 20)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sid, reader, writer
