"""A server killed with SIGKILL mid-session and started again gives two traces for the session, the second linked
to the first (issue 36): the spans that ended before the kill were exported, the resumed run is a trace of its
own whose root span links to the first run's root (kept with the session's row)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from research_tool.bench.wiki_replay import Page, running_wiki
from tests.api.conftest import OK_BODY, free_socket
from tests.api.test_crash_resume import client_when_healthy, in_second_collect, server_env, uvicorn_process
from tests.support.otlp_receiver import Link, Span, running_receiver
from tests.support.polling import eventually

from .conftest import tracing_env


def roots(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s.name == "research.session"]


@pytest.mark.slow
async def test_kill_9_and_resume_give_two_linked_traces(tmp_path: Path, wiki_pages: list[Page]) -> None:
    data_dir = tmp_path / "data"
    with running_receiver() as otlp, running_wiki(delay_s=0.5, pages=wiki_pages) as (wiki_url, _):
        env = {**server_env(data_dir, wiki_url), **tracing_env(otlp)}
        port = free_socket().getsockname()[1]
        with uvicorn_process(env, tmp_path, port) as first:
            async with client_when_healthy(first, port) as client:
                started = await client.post("/api/research/start", json={**OK_BODY, "tier": "standard"})
                assert started.status_code == 202, started.text
                session_id = started.json()["session_id"]

                async def mid_collect() -> bool:
                    return in_second_collect(data_dir, session_id)

                await eventually(mid_collect, within_s=60)
                # the first cycle's node spans have ended: wait until they are exported, then kill
                before = await asyncio.to_thread(
                    otlp.wait_for, lambda got: {"node plan", "node collect", "node evaluate"} <= {s.name for s in got}
                )
            first.send_signal(signal.SIGKILL)
            assert first.wait(timeout=10) == -signal.SIGKILL
        first_trace = before[0].trace_id
        first_root = next(s.parent_span_id for s in before if s.name == "node plan")
        assert not roots(before), "the first run's root span was still open at the kill"

        port = free_socket().getsockname()[1]
        with uvicorn_process(env, tmp_path, port) as second:
            async with client_when_healthy(second, port) as client:
                spans = await asyncio.to_thread(otlp.wait_for, lambda got: bool(roots(got)), 90.0)
                report = (await client.get(f"/api/research/{session_id}/report")).json()

    resumed = roots(spans)
    assert len(resumed) == 1
    root = resumed[0]
    assert root.trace_id != first_trace, "the resumed run is a new trace"
    assert root.parent_span_id == ""
    assert root.links == [Link(first_trace, first_root)], "linked to the first run's root span"
    assert root.attributes["research.resumed"] is True
    assert root.attributes["research.outcome"] == "completed"
    assert report["metadata"]["trace_id"] == root.trace_id
    second_nodes = [s for s in otlp.trace(root.trace_id) if s.name.startswith("node ")]
    assert {"node synthesize", "node export"} <= {s.name for s in second_nodes}
    assert all(s.parent_span_id == root.span_id for s in second_nodes)
    # nothing of the first run was lost: what ended before the kill is in the first trace, and a span there
    # under the lost root links to the trace that goes on
    first_spans = otlp.trace(first_trace)
    assert {s.span_id for s in before} <= {s.span_id for s in first_spans}
    marker = next(s for s in first_spans if s.name == "research.session.resumed")
    assert marker.parent_span_id == first_root
    assert marker.links == [Link(root.trace_id, root.span_id)]
