"""One privacy rule everywhere (issue 43, item 3): a session that searches only local folders with the offline
engine and names no privacy mode is `local_only` whether it came from the CLI, the HTTP API, a LangGraph run or
an MCP tool call (the page sends no privacy mode unless one is chosen; tests/web checks it), and its report says
"privacy local only". Before, only the CLI applied the rule: the API and MCP stored `cloud_allowed`."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_sdk import get_client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from research_tool import cli
from research_tool.models.request import ResearchRequest, default_privacy

from .conftest import offline_settings, serve
from .test_indexed_folders import QUESTION, indexed

pytestmark = pytest.mark.slow
LOCAL_ONLY_LINE = "privacy local only"


def test_the_rule_is_the_requests_and_the_cli_uses_it() -> None:
    assert default_privacy(["local"], "offline") == "local_only"
    assert default_privacy(["local"], "ollama:smollm2") == "cloud_allowed"  # a model: the caller says
    assert default_privacy(None, "offline") == "cloud_allowed"
    local = ResearchRequest(query="q", providers=["local"])
    assert local.privacy_mode is None and local.privacy == "local_only"
    assert local.with_default_privacy("offline").privacy_mode == "local_only"
    assert local.with_default_privacy("anthropic:claude").privacy_mode == "cloud_allowed"
    named = ResearchRequest(query="q", providers=["local"], privacy_mode="hybrid")
    assert named.with_default_privacy("offline").privacy_mode == "hybrid"
    args = cli.build_parser().parse_args(["run", "q", "--providers", "local"])
    assert cli.request_from_args(args, "offline").privacy_mode == "local_only"


async def test_api_langgraph_and_mcp_say_local_only_for_a_local_offline_session(tmp_path: Path) -> None:
    data, _folder = await indexed(tmp_path)
    body = {"query": QUESTION, "providers": ["local"], "tier": "simple", "clarify": False}
    async with serve(offline_settings(data)) as api:
        started = await api.client.post("/api/research/start", json=body)
        assert started.status_code == 202, started.text
        session_id = started.json()["session_id"]
        await api.wait_status(session_id, "completed")
        report = (await api.client.get(f"/api/research/{session_id}/report")).json()
        assert report["privacy_mode"] == "local_only"
        markdown = (await api.client.get(f"/api/research/{session_id}/report", params={"format": "md"})).text
        assert LOCAL_ONLY_LINE in markdown

        chosen = await api.client.post("/api/research/start", json={**body, "privacy_mode": "cloud_allowed"})
        assert chosen.status_code == 202, chosen.text
        await api.wait_status(chosen.json()["session_id"], "completed")
        assert (await api.report(chosen.json()["session_id"]))["privacy_mode"] == "cloud_allowed", "a choice stands"

        sdk = get_client(url=api.base_url, api_key=None)
        thread = await sdk.threads.create()
        values = await sdk.runs.wait(thread["thread_id"], "research", input=body)
        assert isinstance(values, dict)
        assert (await api.report(thread["thread_id"]))["privacy_mode"] == "local_only"

        http = create_mcp_http_client()
        async with http, Client(streamable_http_client(f"{api.base_url}/mcp", http_client=http)) as client:
            result = await client.call_tool("research", {"query": QUESTION, "providers": ["local"], "tier": "simple"})
            assert not result.is_error
            assert result.structured_content is not None
            assert result.structured_content["report"]["privacy_mode"] == "local_only"
            assert LOCAL_ONLY_LINE in result.structured_content["markdown"]
