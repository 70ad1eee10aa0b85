"""Issue 32 item 3: SIGTERM ends `serve` within 5 s whatever is open. A follower on a session's SSE events, a
LangGraph join stream and a follower of a session that awaits answers (which would wait up to 600 s) held
the shutdown until their sessions ended; now each stream ends at once with a closing part that says the
server is stopping. Issue 45 item 10: an MCP `research` call over `/mcp` ended with "incomplete chunked read";
now it ends with a JSON-RPC error. And `serve` exits 143 (128 + SIGTERM) after cleaning up. A real
`research-tool serve` subprocess on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from research_tool.bench.wiki_replay import Page, running_wiki
from research_tool.core.settings import PROVIDER_NAMES
from tests.conftest import FOREIGN_ENV
from tests.support.polling import eventually
from tests.support.servers import cli, until_healthy

from .conftest import CLOSED_PORT_URL, OK_BODY, free_socket

EXIT_WITHIN_S = 5.0
pytestmark = pytest.mark.slow


async def read_stream(client: httpx.AsyncClient, method: str, url: str, opened: asyncio.Event, **kw: object) -> str:
    """The whole body of a streamed response (set `opened` once its first bytes are in)."""
    text = ""
    async with client.stream(method, url, **kw) as response:  # type: ignore[arg-type]
        assert response.status_code == 200, await response.aread()
        async for chunk in response.aiter_text():
            text += chunk
            opened.set()
    return text


async def mcp_research(url: str, opened: asyncio.Event) -> object:
    """A `research` call through the official MCP client over `/mcp`; what it ended with (a result or an error).
    `opened` is set at the first progress notification."""

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        opened.set()

    try:
        http = create_mcp_http_client()
        async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            return await client.call_tool("research", OK_BODY, progress_callback=on_progress)
    except Exception as exc:  # what the call ended with is the finding (the client raises it in task groups)
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return exc


async def awaiting_answers(client: httpx.AsyncClient, session_id: str) -> bool:
    status = (await client.get(f"/api/research/{session_id}/status")).json()["status"]
    return bool(status == "awaiting_clarification")


async def test_sigterm_ends_serve_within_5_s_and_every_stream_with_a_closing_part(
    tmp_path: os.PathLike[str], wiki_pages: list[Page]
) -> None:
    port = free_socket().getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV and not k.startswith("RESEARCH_")}
    env.update({f"RESEARCH_{n.upper()}_BASE_URL": CLOSED_PORT_URL for n in PROVIDER_NAMES if n != "local"})
    with running_wiki(delay_s=60.0, pages=wiki_pages) as (wiki_url, _):  # every search hangs
        env.update(
            RESEARCH_DATA_DIR=str(tmp_path / "data"),
            RESEARCH_LLM="offline",
            RESEARCH_CPU_WORKERS="0",
            RESEARCH_WIKIPEDIA_BASE_URL=wiki_url,
            RESEARCH_CLARIFY_TIMEOUT_S="600",
        )
        process = await asyncio.create_subprocess_exec(
            *cli("serve", "--host", "127.0.0.1", "--port", str(port)),
            env=env,
            cwd=tmp_path,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=30) as client:
                await until_healthy(client, url, lambda: None if process.returncode is None else "exited", 60)
                searching = (await client.post("/api/research/start", json=OK_BODY)).json()["session_id"]
                ambiguous = {**OK_BODY, "query": "Python", "clarify": True}
                asking_id = (await client.post("/api/research/start", json=ambiguous)).json()["session_id"]
                await eventually(lambda: awaiting_answers(client, asking_id))
                tid = (await client.post("/threads", json={})).json()["thread_id"]
                run = await client.post(f"/threads/{tid}/runs", json={"assistant_id": "research", "input": OK_BODY})
                rid = run.json()["run_id"]

                opened = [asyncio.Event() for _ in range(4)]
                streams = [
                    asyncio.create_task(read_stream(client, "GET", f"/api/research/{searching}/events", opened[0])),
                    asyncio.create_task(read_stream(client, "GET", f"/api/research/{asking_id}/events", opened[1])),
                    asyncio.create_task(read_stream(client, "GET", f"/threads/{tid}/runs/{rid}/stream", opened[2])),
                    asyncio.create_task(mcp_research(url, opened[3])),
                ]
                await asyncio.wait_for(asyncio.gather(*(o.wait() for o in opened)), 30)

                process.send_signal(signal.SIGTERM)
                started = time.monotonic()
                await asyncio.wait_for(process.wait(), 30)
                took = time.monotonic() - started
                bodies = await asyncio.wait_for(asyncio.gather(*streams), 5)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert took < EXIT_WITHIN_S, f"serve took {took:.1f} s to exit after SIGTERM"
    assert process.returncode == 128 + signal.SIGTERM  # cleaned up (server.url, the lock's PID), then 143
    for body in bodies[:2]:
        assert "event: server_stopping" in body.rstrip().rsplit("\n\n", 1)[-1], body[-300:]
    last = bodies[2].rstrip().rsplit("\n\n", 1)[-1]
    assert "event: error" in last and "ServerShuttingDown" in last, bodies[2][-300:]
    ended = bodies[3]
    assert isinstance(ended, MCPError) and "ServerShuttingDown" in ended.error.message, repr(ended)
