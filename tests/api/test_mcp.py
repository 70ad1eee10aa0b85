"""The MCP server over both transports, driven by the official SDK's own client (issue 11, item 6):
streamable HTTP at `/mcp` in a real uvicorn (behind the API token), and stdio through `research-tool mcp` as a
subprocess. A research through MCP returns a cited report and sends progress notifications."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent

from research_tool.bench.wiki_replay import WikiReplay
from tests.api.conftest import CLOSED_PORT_URL, QUESTION, offline_settings, serve

pytestmark = pytest.mark.slow
TOKEN = "mcp-test-token"
TOOLS = {"research", "start_research", "research_status", "stop_research", "get_report"}
MARKER = re.compile(r"\[(\d+)\]")


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def assert_cited_report(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    structured = result.structured_content
    assert isinstance(structured, dict)
    report = structured["report"]
    assert report["status"] == "completed" and report["citations"]
    markdown = text_of(result)
    assert markdown == structured["markdown"]
    cited = {int(n) for n in MARKER.findall(report["answer"])}
    assert cited and cited <= {int(c["id"].strip("[]")) for c in report["citations"]}
    return dict(structured)


async def test_streamable_http_behind_the_token_runs_a_cited_research(
    tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    settings = offline_settings(tmp_path / "data", wiki[0], api_token=TOKEN)
    async with serve(settings) as live:
        url = f"{live.base_url}/mcp"
        anonymous = await live.client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert anonymous.status_code == 401
        assert anonymous.json()["error"]["type"] == "unauthorized"

        progress: list[tuple[float, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert tools >= TOOLS
            arguments = {"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"}
            result = await client.call_tool("research", arguments, progress_callback=on_progress)
            structured = assert_cited_report(result)
            assert len(progress) >= 5
            assert [v for v, _ in progress] == sorted(v for v, _ in progress)
            assert any(m and m.startswith("collect: ") for _, m in progress)

            session_id = structured["session_id"]
            status = await client.call_tool("research_status", {"session_id": session_id})
            assert status.structured_content is not None
            assert status.structured_content["status"] == "completed"
            again = await client.call_tool("get_report", {"session_id": session_id, "format": "json"})
            assert '"citations"' in text_of(again)

            stopped = await client.call_tool("stop_research", {"session_id": session_id})
            assert stopped.is_error and "already completed" in text_of(stopped)
            unknown = await client.call_tool("research_status", {"session_id": "no-such-session"})
            assert unknown.is_error and "unknown session id" in text_of(unknown)
            bad = await client.call_tool("start_research", {"query": "   "})
            assert bad.is_error

        # the session is an ordinary one: the HTTP API serves it too
        report = await live.client.get(
            f"/api/research/{session_id}/report", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert report.status_code == 200


async def test_stdio_start_poll_and_get_report(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESEARCH_", "OPENAI", "ANTHROPIC", "OLLAMA"))}
    env.update(
        RESEARCH_DATA_DIR=str(tmp_path / "data"),
        RESEARCH_WIKIPEDIA_BASE_URL=wiki[0],
        RESEARCH_WIKIPEDIA_RPS="500",
        RESEARCH_SEMANTIC_SCHOLAR_BASE_URL=CLOSED_PORT_URL,
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "research_tool", "mcp"], env=env)
    async with Client(params) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools >= TOOLS
        arguments = {"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"}
        started = await client.call_tool("start_research", arguments)
        assert not started.is_error, text_of(started)
        assert started.structured_content is not None
        session_id = started.structured_content["session_id"]

        deadline_polls = 600
        status: dict[str, Any] = {}
        for _ in range(deadline_polls):
            polled = await client.call_tool("research_status", {"session_id": session_id})
            status = dict(polled.structured_content or {})
            if status["status"] in ("completed", "failed"):
                break
            await anyio.sleep(0.1)
        assert status["status"] == "completed", status

        report = await client.call_tool("get_report", {"session_id": session_id})
        assert_cited_report(report)

        research = await client.call_tool("research", arguments)
        assert_cited_report(research)
