"""Issue 22 item 6: MCP tools answer a failure as the HTTP API does. A full server answers `start_research` with
the 503's reason and its Retry-After (not the SDK's bare "Error executing tool start_research"), bad input and
an unknown session with the API's error type and message, and nothing is logged as a traceback."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent

from .conftest import OK_BODY, QUESTION, SlowWiki, offline_settings, serve

pytestmark = pytest.mark.slow


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def test_tools_give_the_http_apis_reason_and_retry_time(
    tmp_path: Path, slow_wiki: SlowWiki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with slow_wiki(2.0) as (url, _):
        settings = offline_settings(tmp_path / "data", url, max_concurrent_sessions=1, max_queued_sessions=0)
        async with serve(settings) as api:
            running = await api.start()
            await api.wait_status(running, "running")
            refused = await api.client.post("/api/research/start", json={**OK_BODY, "query": f"{QUESTION} (http)"})
            assert refused.status_code == 503
            http_error = refused.json()["error"]

            http = create_mcp_http_client()
            async with http, Client(streamable_http_client(f"{api.base_url}/mcp", http_client=http)) as client:
                busy = await client.call_tool("start_research", {"query": f"{QUESTION} (mcp)", "fetch": False})
                assert busy.is_error
                assert "Error executing tool" not in text_of(busy)
                assert busy.structured_content is not None
                error = busy.structured_content["error"]
                assert error["status"] == 503
                assert (error["type"], error["message"], error["retryable"]) == (
                    http_error["type"],
                    http_error["message"],
                    http_error["retryable"],
                )
                assert error["retry_after_s"] == int(refused.headers["Retry-After"])
                assert text_of(busy) == f"server_busy: {http_error['message']} (retry after {error['retry_after_s']} s)"

                bad = await client.call_tool("start_research", {"query": "   "})
                assert bad.is_error and bad.structured_content is not None
                assert bad.structured_content["error"]["type"] == "validation_error"
                assert text_of(bad).startswith("validation_error: invalid query")

                unknown = await client.call_tool("research_status", {"session_id": "no-such-session"})
                assert unknown.is_error and unknown.structured_content is not None
                assert unknown.structured_content["error"]["status"] == 404
                assert text_of(unknown).startswith("not_found: unknown session id")

                status = await client.call_tool("research_status", {"session_id": running})
                assert not status.is_error and status.structured_content is not None
                assert status.structured_content["session_id"] == running

    tracebacks = [r for r in caplog.records if r.exc_info or "ServerBusyError" in r.getMessage()]
    assert not tracebacks, [r.getMessage() for r in tracebacks]
