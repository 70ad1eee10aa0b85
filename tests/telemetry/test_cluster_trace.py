"""Cluster mode (Postgres): the worker that takes a session over starts a new trace linked to the first, and the
caller's `traceparent`, kept in the session's row, reaches the worker that runs the first trace (issue 36)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from research_tool.bench.wiki_replay import Page, running_wiki
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services
from tests.api.conftest import QUESTION, offline_settings
from tests.support.otlp_receiver import Link, OtlpReceiver
from tests.support.polling import eventually

pytest.importorskip("psycopg", reason="the cluster tests need the 'postgres' extra (psycopg)")

CALLER_TRACE, CALLER_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


@pytest.fixture
def database_url() -> Iterator[str]:
    from tests.support.cluster import fresh_database

    with fresh_database() as url:
        yield url


@pytest.mark.slow
async def test_a_worker_taking_a_session_over_starts_a_linked_trace(
    otlp: OtlpReceiver, tmp_path: Path, database_url: str, wiki_pages: list[Page]
) -> None:
    request = ResearchRequest(query=QUESTION, providers=["wikipedia"], fetch=False, tier="standard")
    with running_wiki(delay_s=0.3, pages=wiki_pages) as (wiki_url, _):
        settings = offline_settings(tmp_path / "data", wiki_url, database_url=database_url, lease_ttl_s=600)
        async with open_research_services(settings) as api:  # an API node: it only queues the session
            record = await api.runner.create(request, traceparent=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")
            async with open_research_services(settings, worker=True) as first:

                async def collecting() -> bool:
                    events = await api.events.replay(record.id)
                    return any(e.phase == "collect" and e.type == "phase_completed" for e in events)

                await eventually(collecting, within_s=60)
                assert first.cluster is not None and record.id in first.cluster.leases.held
            # the first worker stopped: its session is interrupted, and the second takes it over
            async with open_research_services(settings, worker=True) as second:

                async def taken() -> bool:
                    return second.cluster is not None and record.id in second.cluster.leases.held

                await eventually(taken, within_s=10)
                await asyncio.wait_for(second.runner.until_finished(record.id), timeout=90)
            report = await api.runner.report(record.id)
    spans = otlp.wait_for(lambda got: len([s for s in got if s.name == "research.session"]) == 2)
    marker = next(s for s in spans if s.name == "research.session.resumed")
    first_root, second_root = sorted((s for s in spans if s.name == "research.session"), key=lambda s: len(s.links))
    assert (first_root.trace_id, first_root.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert first_root.attributes["research.outcome"] == "interrupted"
    assert first_root.attributes["research.ended_by"] == "CancelledError"
    assert first_root.status_code != 2, "a handover is not a failure"
    assert second_root.trace_id not in (CALLER_TRACE, "") and second_root.parent_span_id == ""
    assert second_root.links == [Link(CALLER_TRACE, first_root.span_id)]
    assert second_root.attributes["research.outcome"] == "completed"
    assert report["metadata"]["trace_id"] == second_root.trace_id
    assert (marker.trace_id, marker.parent_span_id) == (CALLER_TRACE, first_root.span_id)
    assert marker.links == [Link(second_root.trace_id, second_root.span_id)]
