"""Cluster mode in one test process, on a real Postgres database: several `open_research_services` on the same
database play the API nodes and workers of a cluster (each has its own pool, LISTEN connection and leases).

- Admission counts the queued rows of the shared table, whichever node wrote them.
- A worker that stops (SIGTERM, Ctrl-C: its services close) hands its sessions back: another worker claims
  them at once (no lease to wait out) and resumes each from its checkpoint.
- An answer to a clarification question sent to an API-only node reaches the worker waiting for it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from research_tool.bench.wiki_replay import Page, running_wiki
from research_tool.core.errors import ServerBusyError
from research_tool.models.request import ResearchRequest
from research_tool.runtime.composition import open_research_services
from tests.api.conftest import QUESTION, offline_settings
from tests.support.polling import eventually
from tests.support.timing import LOAD_SLACK_S

pytest.importorskip("psycopg", reason="the cluster tests need the 'postgres' extra (psycopg)")


def request(**fields: Any) -> ResearchRequest:
    values: dict[str, Any] = {"query": QUESTION, "providers": ["wikipedia"], "fetch": False, "tier": "simple"}
    values.update(fields)
    return ResearchRequest(**values)


async def test_admission_counts_the_queued_rows_of_every_node(tmp_path: Path, database_url: str) -> None:
    settings = offline_settings(tmp_path / "data", database_url=database_url, max_queued_sessions=2)
    async with open_research_services(settings) as node_a, open_research_services(settings) as node_b:
        await node_a.runner.create(request())
        await node_b.runner.create(request())
        with pytest.raises(ServerBusyError):
            await node_a.runner.create(request())
        queued = await node_b.store.ids(["queued"])
        assert len(queued) == 2, "nothing was written for the refused start"


@pytest.mark.slow
async def test_a_stopping_worker_hands_its_session_to_another_at_once(
    tmp_path: Path, database_url: str, wiki_pages: list[Page]
) -> None:
    with running_wiki(delay_s=0.3, pages=wiki_pages) as (wiki_url, _replay):
        # a long lease: the takeover below can only be quick if the stopping worker released it
        settings = offline_settings(tmp_path / "data", wiki_url, database_url=database_url, lease_ttl_s=600)
        async with open_research_services(settings) as api:
            record = await api.runner.create(request(tier="standard"))
            async with open_research_services(settings, worker=True) as first:

                async def collecting() -> bool:
                    events = await api.events.replay(record.id)
                    return any(e.phase == "collect" and e.type == "phase_completed" for e in events)

                await eventually(collecting, within_s=60)
                assert first.cluster is not None and record.id in first.cluster.leases.held
            stopped_at = time.monotonic()
            row = await api.store.get(record.id)
            assert row.status == "interrupted"
            async with open_research_services(settings, worker=True) as second:
                assert second.cluster is not None

                async def taken() -> bool:
                    return record.id in second.cluster.leases.held

                await eventually(taken, within_s=10)
                handover_s = time.monotonic() - stopped_at
                final = await asyncio.wait_for(second.runner.until_finished(record.id), timeout=90)
                assert final is None
            done = await api.store.get(record.id)
            assert done.status == "completed", done
            events = await api.events.replay(record.id)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            assert [e.data["resumed"] for e in events if e.type == "session_started"] == [False, True]
    # the second worker's start-up is inside this figure: a busy machine's slack on top of "within seconds"
    assert handover_s < 5 + LOAD_SLACK_S, f"the second worker took {handover_s:.1f} s to claim a released session"


@pytest.mark.slow
async def test_an_answer_sent_to_an_api_node_reaches_the_worker_waiting_for_it(
    tmp_path: Path, database_url: str, wiki_pages: list[Page]
) -> None:
    with running_wiki(delay_s=0.0, pages=wiki_pages) as (wiki_url, _replay):
        # leases renewed every 20 s: without the notification the answer would wait for a renewal that long
        settings = offline_settings(tmp_path / "data", wiki_url, database_url=database_url, lease_ttl_s=60.0)
        async with (
            open_research_services(settings) as api,
            open_research_services(settings, worker=True) as worker,
        ):
            # an ambiguous question: the offline engine asks what it means
            record = await api.runner.create(request(query="Python", clarify=True))

            async def asking() -> bool:
                return (await api.store.get(record.id)).status == "awaiting_clarification"

            await eventually(asking, within_s=60)
            answered_at = time.monotonic()
            await api.runner.provide_answers(record.id, ["the programming language"])

            async def resumed() -> bool:
                events = await api.events.replay(record.id)
                return any(e.type == "clarification_received" for e in events) and (
                    (await api.store.get(record.id)).status != "awaiting_clarification"
                )

            await eventually(resumed, within_s=20)
            reached_s = time.monotonic() - answered_at
            await asyncio.wait_for(api.runner.until_finished(record.id), timeout=90)
            assert (await api.store.get(record.id)).status == "completed"
            assert worker.runner.max_running_seen == 1
    assert reached_s < LOAD_SLACK_S, f"the answer reached the worker after {reached_s:.2f} s"
