"""The caller's `traceparent` makes the session a child of the caller's trace on every way in (issue 36): the
LangGraph run routes and MCP tool calls over `/mcp` (the research API's start route: test_session_trace.py)."""

from __future__ import annotations

from pathlib import Path

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from research_tool.bench.wiki_replay import WikiReplay
from tests.api.conftest import QUESTION, offline_settings, serve
from tests.support.otlp_receiver import OtlpReceiver, Span

INPUT = {"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"}


def traceparent(n: int) -> tuple[str, str, str]:
    trace_id, span_id = f"{n:032x}", f"{n:016x}"
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def root_under(spans: list[Span], trace_id: str) -> Span | None:
    return next((s for s in spans if s.name == "research.session" and s.trace_id == trace_id), None)


async def test_langgraph_runs_and_mcp_calls_join_the_callers_trace(
    otlp: OtlpReceiver, tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    wait_trace, wait_span, wait_header = traceparent(0xA1)
    thread_trace, thread_span, thread_header = traceparent(0xB2)
    mcp_trace, mcp_span, mcp_header = traceparent(0xC3)
    async with serve(offline_settings(tmp_path / "data", wiki[0])) as api:
        stateless = await api.client.post(
            "/runs/wait", json={"assistant_id": "research", "input": INPUT}, headers={"traceparent": wait_header}
        )
        assert stateless.status_code == 200, stateless.text
        thread = (await api.client.post("/threads", json={})).json()["thread_id"]
        run = await api.client.post(
            f"/threads/{thread}/runs/wait",
            json={"assistant_id": "research", "input": INPUT},
            headers={"traceparent": thread_header},
        )
        assert run.status_code == 200, run.text
        http = create_mcp_http_client(headers={"traceparent": mcp_header})
        async with http, Client(streamable_http_client(f"{api.base_url}/mcp", http_client=http)) as client:
            result = await client.call_tool("research", INPUT)
            assert not result.is_error
    spans = otlp.wait_for(lambda got: len([s for s in got if s.name == "research.session"]) == 3)
    for trace_id, span_id in ((wait_trace, wait_span), (thread_trace, thread_span), (mcp_trace, mcp_span)):
        root = root_under(spans, trace_id)
        assert root is not None and root.parent_span_id == span_id
    thread_root = root_under(spans, thread_trace)
    assert thread_root is not None and thread_root.attributes["research.session.id"] == thread
